"""`indexzoo recommend` end to end on the CPU, and its parts: the pick is among the two
fastest of the run's own table, the spec it writes loads and builds, a memory budget, range
workloads, failing and duplicate-refusing indexes, sampling, bad input, and the lightweight
decision tree (paper's and measured). No timing is asserted."""

from __future__ import annotations

import io
import json
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import indexzoo
from indexzoo import Capabilities, ConfigError, InvalidInput, devices, registry
from indexzoo.plugins.lightweight import recommend as tree
from indexzoo.plugins.sorted_array import SortedArrayIndex
from indexzoo.tools.cli import main
from indexzoo.tools.recommend import (
    Candidate,
    Outcome,
    candidates,
    choose,
    make_sample,
    parse_bytes,
    suggested,
)
from indexzoo.tools.timing import Timing
from indexzoo.tools.workloads import Workload

FEW = "sorted-array,warpcore-hash,btree,searchsorted"


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "keys.npy"
    np.save(path, np.random.default_rng(7).integers(0, 1 << 40, 20_000, dtype=np.uint64))
    return path


def recommend(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["recommend", *argv, "--device", "cpu", "--repeats", "3",
                 "--max-lookups", "8192"], out=out)
    return code, out.getvalue()


def table(text: str) -> list[list[str]]:
    """The ranked rows (rank, index, M lookups/s, spread, ...) of the printed table."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("rank")) + 2
    rows = []
    for ln in lines[start:]:
        if not ln[:4].strip().isdigit():
            break
        rows.append(ln.split())
    return rows


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("indexzoo: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---------------------------------------------------------------------- end to end
def test_pick_is_among_the_two_fastest_and_its_spec_builds(keys_file: Path,
                                                           tmp_path: Path) -> None:
    spec = tmp_path / "index.yaml"
    code, text = recommend(str(keys_file), "--indexes", FEW, "--out", str(spec))
    assert code == 0, text
    rows = table(text)
    assert {r[1] for r in rows} == set(FEW.split(","))
    speeds = [float(r[2]) for r in rows]
    assert speeds == sorted(speeds, reverse=True)  # ranked by the run's own figures
    picked = [r for r in rows if "<-" in r]
    assert len(picked) == 1 and int(picked[0][0]) <= 2
    assert all(r[3].startswith("±") for r in rows)
    assert f"pick: {picked[0][1]} on cpu: " in text and f"wrote {spec}" in text
    loaded = indexzoo.load_spec(spec)
    assert loaded.index == picked[0][1] and loaded.device == "cpu"
    keys = np.load(keys_file)
    index = indexzoo.create(loaded).build(keys)
    np.testing.assert_array_equal(index.point(keys[:50]).to_host().rowid, np.arange(50))


def test_default_candidates_stand_the_lightweight_family_in_by_the_tree(keys_file: Path) -> None:
    sample = make_sample(np.load(keys_file), Workload(), "cpu", 1 << 20, 1 << 10)
    suggestions = suggested(sample, "cpu")
    assert [s.note for s in suggestions] == ["lightweight decision tree"]
    assert [t for t, _ in suggestions[0].picks] == ["paper", "measured", "in-cache"]
    names = [c.name for c in candidates(list(indexzoo.available()), suggestions)]
    family = {"ao-bs", "eo-bs", "ao-pb-bs", "eo-ks", "ao-pb-ks", "lightweight"}
    assert [n for n in names if n in family] == ["eo-bs"]  # 20k keys fit any cache: both agree
    assert {"sorted-array", "warpcore-hash", "btree", "rx"} <= set(names)


def test_memory_budget_excludes_indexes_and_says_so(keys_file: Path, tmp_path: Path) -> None:
    code, text = recommend(str(keys_file), "--indexes", "sorted-array,btree",
                           "--memory-budget", "250kB", "--out", str(tmp_path / "i.yaml"))
    assert code == 0, text
    assert [r[1] for r in table(text)] == ["sorted-array"]
    assert "btree: excluded, needs about 267 kB for 20,000 keys, over the memory budget of " \
           "250 kB" in text


def test_range_workload_never_recommends_warpcore_hash(keys_file: Path, tmp_path: Path) -> None:
    wl = tmp_path / "ranges.json"
    wl.write_text(json.dumps({"n_lookups": 2048, "range_hits": 8}))
    code, text = recommend(str(keys_file), "--workload", str(wl), "--indexes",
                           "warpcore-hash,sorted-array", "--out", str(tmp_path / "i.json"))
    assert code == 0, text
    assert "warpcore-hash: skipped, no range lookups" in text
    assert [r[1] for r in table(text)] == ["sorted-array"]
    assert json.loads((tmp_path / "i.json").read_text())["index"] == "sorted-array"
    code, text = recommend(str(keys_file), "--workload", str(wl), "--indexes", "warpcore-hash",
                           "--out", str(tmp_path / "none.yaml"))
    assert code == 1 and "no recommendation" in text and not (tmp_path / "none.yaml").exists()


def test_workload_alone_generates_the_keys(tmp_path: Path) -> None:
    wl = tmp_path / "w.yaml"
    wl.write_text("n_keys: 40000\nmultiplicity: 4\nn_lookups: 4096\nhit_rate: 0.5\n")
    code, text = recommend("--workload", str(wl), "--indexes", "sorted-array",
                           "--max-keys", "8000", "--out", str(tmp_path / "i.yaml"))
    assert code == 0, text
    assert "measured on cpu: 8,000 of 40,000 keys" in text and "duplicate keys" in text
    assert "footprints scaled x5 to 40,000 keys" in text


# ---------------------------------------------------------------------- failures, duplicates
class FailsOnBigKeys(SortedArrayIndex):
    """Refuses keys of 2^23 and above, as rx's naive key mode does."""

    name: ClassVar[str] = "test-fails-on-big-keys"

    def _build(self, st: Any, keys: Any) -> None:
        if int(keys.max()) >= 1 << 23:
            raise InvalidInput("naive key mode holds keys below 2^23 only")
        super()._build(st, keys)


class NoDuplicates(SortedArrayIndex):
    """Claims no support for duplicate keys."""

    name: ClassVar[str] = "test-no-duplicates"
    capabilities: ClassVar[Capabilities] = Capabilities(range=True, duplicates=False)


@pytest.fixture
def odd_indexes() -> Iterator[None]:
    mod = types.ModuleType("odd_indexes")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        register(FailsOnBigKeys)
        register(NoDuplicates)

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    indexzoo.register_plugin(mod, name="odd-indexes")
    yield
    registry.unregister_plugin("odd-indexes")


def test_indexes_that_fail_or_refuse_duplicates_are_left_out_with_the_reason(
        odd_indexes: None, tmp_path: Path) -> None:
    keys = tmp_path / "dups.npy"
    np.save(keys, np.repeat(np.arange(3000, dtype=np.uint64) << np.uint64(20), 2))
    code, text = recommend(str(keys), "--indexes",
                           "test-fails-on-big-keys,test-no-duplicates,sorted-array",
                           "--out", str(tmp_path / "i.yaml"))
    assert code == 0, text
    assert "test-fails-on-big-keys: failed, fails on these keys: InvalidInput: naive key mode " \
           "holds keys below 2^23 only" in text
    assert "test-no-duplicates: skipped, does not support duplicate keys (the keys repeat)" in text
    assert [r[1] for r in table(text)] == ["sorted-array"]


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("case", ["missing", "budget", "exists", "nothing", "suffix"])
def test_bad_input_is_exit_2_and_one_line(case: str, keys_file: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "index.yaml"
    argv = [str(keys_file), "--out", str(out)]
    why = {"missing": "does not exist", "budget": "is not a number of bytes",
           "exists": "exists; use --force", "nothing": "give a KEYS_FILE, a --workload",
           "suffix": "must end in .yaml, .yml or .json"}[case]
    if case == "missing":
        argv[0] = str(tmp_path / "no-such-keys.npy")
    elif case == "budget":
        argv += ["--memory-budget", "lots"]
    elif case == "exists":
        out.write_text("index: btree\n")
    elif case == "nothing":
        argv = argv[1:]
    else:
        argv[2] = str(tmp_path / "index.txt")
    code = main(["recommend", *argv, "--device", "cpu"], out=io.StringIO())
    assert code == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("indexzoo: error: ") and why in line
    if case == "exists":
        assert out.read_text() == "index: btree\n"  # untouched


# ---------------------------------------------------------------------- parts
@pytest.mark.parametrize("text, value", [("1000", 1000), ("2GB", 2 * 10**9), ("512MiB", 1 << 29),
                                         ("1.5e9", 1_500_000_000), ("800M", 800 * 10**6),
                                         ("64 kB", 64_000)])
def test_budgets_in_bytes_with_units(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["lots", "", "-5", "0", "12 parsecs", "nan", "1e999"])
def test_budgets_that_are_not_bytes(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_bytes(text)


def test_sampling_keeps_groups_of_equal_keys() -> None:
    keys = np.repeat(np.random.default_rng(3).permutation(10_000).astype(np.uint64) * 977, 4)
    s = make_sample(keys, Workload(n_lookups=1000), "cpu", 8000, 512)
    _, counts = np.unique(s.ukeys, return_counts=True)
    assert 6000 < s.n < 10_000 and set(counts) == {4} and s.duplicates
    assert s.n_total == 40_000 and s.scale == pytest.approx(40_000 / s.n)
    assert s.n_lookups == 512 and int((s.reference > 0).sum()) == 512


def test_a_workload_fired_in_batches_generates_its_keys() -> None:
    s = make_sample(None, Workload(n_keys=4000, n_lookups=1000, batches=10), "cpu", 8000, 512)
    assert s.n == 4000 and s.n_lookups == 512


def outcome(name: str, seconds: tuple[float, ...], resident: int) -> Outcome:
    t = Timing(seconds)
    return Outcome(Candidate(name), "measured", timing=t, throughput=1000 / t.median,
                   resident_bytes=resident)


def test_choose_prefers_the_smaller_of_a_tie() -> None:
    fast_big = outcome("fast-big", (1.0, 1.1, 0.95), 2000)
    close_small = outcome("close-small", (1.05, 1.2, 1.0), 1000)
    far = outcome("far", (3.0, 3.1, 3.2), 10)
    pick, why = choose([far, fast_big, close_small])
    assert pick is close_small and "tied with fast-big within the spread" in why
    pick, why = choose([fast_big, outcome("slow-small", (2.0, 2.1, 2.2), 10)])
    assert pick is fast_big and "spreads apart" in why
    assert choose([]) == (None, "no index could be measured on this workload")


# ---------------------------------------------------------------------- the decision tree
L2 = 50 << 20


@pytest.mark.parametrize("n, kind, ordered, paper, measured", [
    (1 << 20, "point", False, "eo-bs", "eo-bs"),
    (1 << 26, "point", False, "eo-ks", "ao-pb-bs"),
    (1 << 26, "point", True, "ao-pb-ks", "ao-pb-bs"),
    (1 << 26, "range", False, "ao-pb-ks", "ao-bs"),
    (1 << 26, "mixed", False, "eo-ks", "ao-pb-bs"),
    (1 << 20, "range", False, "ao-bs", "ao-bs"),
])
def test_measured_tree_corrects_the_paper_beyond_l2(n: int, kind: Any, ordered: bool,
                                                    paper: str, measured: str) -> None:
    p = tree(n, 8, kind, "cpu", ordered=ordered, l2_bytes=L2, tree="paper")
    m = tree(n, 8, kind, "cpu", ordered=ordered, l2_bytes=L2, tree="measured")
    assert (p.index, m.index) == (paper, measured)
    if p.index == "eo-ks":
        assert p.params["k"] == 9
    assert ("memory_layout" in m.params) == (kind != "point")
    indexzoo.create(m)  # a spec that builds


def test_auto_tree_is_measured_on_cuda_and_the_papers_on_the_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert tree(1 << 26, 8, "point", "cpu", l2_bytes=L2).index == "eo-ks"
    monkeypatch.setattr(devices, "cuda_status", lambda: (True, "1 fake GPU"))
    spec = tree(1 << 26, 8, "point", "cuda", l2_bytes=L2)
    assert (spec.index, spec.device) == ("ao-pb-bs", "cuda")
    with pytest.raises(ConfigError, match="tree must be one of"):
        tree(10, 4, "point", "cpu", tree="newest")  # type: ignore[arg-type]


def test_beyond_the_cache_the_trees_picks_and_the_in_cache_pick_are_measured() -> None:
    sample = make_sample(None, Workload(n_keys=1 << 26, n_lookups=64), "cpu", 4096, 64)
    assert sample.n == 4096 and sample.n_total == 1 << 26
    cands = [c for c in candidates(["sorted-array", "eo-bs", "ao-bs"],
                                   suggested(sample, "cpu")) if "tree" in c.note]
    assert [(c.label, c.note) for c in cands] == [
        ("eo-ks k=9", "lightweight decision tree (paper)"),
        ("ao-pb-bs", "lightweight decision tree (measured)"),
        ("eo-bs", "lightweight decision tree (in-cache)")]
