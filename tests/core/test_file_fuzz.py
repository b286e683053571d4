"""Fuzzing the files of every built-in index: structure-aware mutations of a saved
file (lying shapes and values with valid checksums, bit flips with and without their
checksums made again, truncations, zip tricks: compressed and duplicated members, a
decompression bomb, huge declared sizes), each loaded and looked up in a child process
(tests/support/file_fuzz.py says how, and what each outcome means). No case may crash, hang, raise
anything but IndexFileError, or answer from a file that lied unless its answers are the
original's (or, for a change that makes another well-formed file, consistent ones).

The default run is short and seeded (a dozen cases per index, a few hundred in all); the
exhaustive tier (``pytest -m exhaustive``) runs 300 per layout over more layouts (10,200;
``FILE_FUZZ_CASES=800`` for 27,200, about 17 minutes on two cores), with numba's bounds
checks on in the child so that a read past an array raises instead of returning whatever
lies there.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support import file_fuzz

#: A hang guard, not a timing check: a case that runs this long (its first lookups may compile
#: kernels) is reported as hung.
CASE_LIMIT_S = 900
#: The harness's own hang test: how long a case of warm kernels may run before it counts as hung.
HANG_LIMIT_S = 10


def fuzz(tmp_path: Path, configs: dict[str, tuple[str, dict[str, object]]], per_config: int,
         seed: int, **env: str) -> file_fuzz.Report:
    corpus = file_fuzz.build_corpus(configs)
    started = time.perf_counter()
    report = file_fuzz.run_cases(tmp_path, corpus, per_config, seed,
                                 {**os.environ, **env}, CASE_LIMIT_S)
    wall = time.perf_counter() - started
    print(f"\nfuzzed files ({per_config} cases per index, seed {seed}; the cases took "
          f"{wall:.0f} s):\n{report.table()}")  # for the record, never asserted
    return report


@pytest.mark.parametrize("how,why", [
    (file_fuzz.CRASH_AT, "the child died"),
    pytest.param(file_fuzz.HANG_AT, "the child hung", marks=pytest.mark.slow)])
def test_a_case_that_kills_or_hangs_the_child_is_a_failure_and_the_rest_still_run(
        tmp_path: Path, how: str, why: str) -> None:
    """The harness itself: a segfault (here an abort) or a hang in one case is that case's
    failure, seen by the parent; a new child runs the cases after it. (The hang's 10 s are
    how long the parent waits for it: a case here takes milliseconds once its kernels are
    compiled, so the cases run once first, without the fault and without the short limit,
    leaving those kernels in the run's kernel cache; the slowest case after that, the first
    of a child, which imports numba and loads the kernels, took 0.3-0.4 s on the 2-core
    machine while a test run kept both cores busy, so a busy machine gives the same verdict
    as an idle one.)"""
    corpus = file_fuzz.build_corpus({"sorted-array": file_fuzz.CONFIGS["sorted-array"]})
    if how == file_fuzz.HANG_AT:
        warm = file_fuzz.run_cases(tmp_path, corpus, 6, 52, dict(os.environ), CASE_LIMIT_S)
        assert not warm.failures, warm.failures
    report = file_fuzz.run_cases(tmp_path, corpus, 6, 52, {**os.environ, how: "sorted-array:2"},
                                 case_limit=HANG_LIMIT_S if how == file_fuzz.HANG_AT
                                 else CASE_LIMIT_S)
    assert report.counts["sorted-array"]["cases"] == 6
    assert len(report.failures) == 1 and "case 2" in report.failures[0]
    assert why in report.failures[0]


def test_mutated_files_of_every_builtin_index_are_refused_or_answer_soundly(
        tmp_path: Path) -> None:
    report = fuzz(tmp_path, file_fuzz.CONFIGS, 12, seed=52)
    assert sum(r["cases"] for r in report.counts.values()) == 12 * len(file_fuzz.CONFIGS)
    assert report.failures == []


@pytest.mark.gpu
def test_mutated_files_loaded_onto_the_gpu_are_refused_or_answer_soundly(
        tmp_path: Path) -> None:
    """The same cases with every file loaded onto the GPU: the checks run on device arrays,
    and the GPU kernels answer from whatever passed them. (The sharded index is left out: its
    workers need Dask on the GPU machine.)"""
    configs = {k: v for k, v in file_fuzz.CONFIGS.items() if k != "sharded"}
    report = fuzz(tmp_path, configs, 12, seed=53, **{file_fuzz.DEVICE: "cuda"})
    assert sum(r["cases"] for r in report.counts.values()) == 12 * len(configs)
    assert report.failures == []


@pytest.mark.exhaustive
def test_many_mutated_files_of_every_builtin_layout_are_refused_or_answer_soundly(
        tmp_path: Path) -> None:
    configs = {**file_fuzz.CONFIGS, **file_fuzz.EXTRA_CONFIGS}
    per_config = int(os.environ.get(file_fuzz.CASES, "300"))
    report = fuzz(tmp_path, configs, per_config, seed=20_520, NUMBA_BOUNDSCHECK="1")
    assert report.failures == [], "\n".join(report.failures[:50])
