"""``indexzoo bench --compare OLD.json``: per index and workload a verdict (faster, slower,
within noise) that accounts for the spread of both runs; ``--fail-above PCT`` fails a run that
got slower beyond noise. Saved runs are built here from records with chosen repetitions (no
timing), except in the end-to-end tests at the bottom."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from indexzoo.errors import ConfigError
from indexzoo.tools import bench, benchrun
from indexzoo.tools.bench import Record, write_json
from indexzoo.tools.cli import main
from indexzoo.tools.compare import (
    FASTER,
    FORMAT_VERSION,
    NOISE,
    SLOWER,
    compare,
    format_report,
    load_saved,
    regressions,
)
from indexzoo.tools.timing import Timing

ENV = {"device": "cpu", "device_name": "Some CPU (2 threads)", "commit": "abc"}


def rec(name: str, seconds: list[float], workload: str = "w", n: int = 1000,
        **kw: Any) -> Record:
    t = Timing(tuple(seconds))
    return Record(index=name, workload=workload, device="cpu", n_keys=100, n_lookups=n,
                  out="rowid", lookup_s=t.median, lookup_spread=t.spread,
                  throughput=n / t.median, build_s=0.001, resident_bytes=1000,
                  peak_build_bytes=1000, lookup_seconds=list(seconds), **kw)


def saved(tmp_path: Path, records: list[Record], env: dict[str, Any] | None = None,
          name: str = "old.json") -> Path:
    """A result file as ``indexzoo bench`` writes it."""
    path = tmp_path / name
    with path.open("wb") as f:
        write_json(records, env or ENV, f)
    return path


def verdicts(tmp_path: Path, old: list[Record], new: list[Record],
             env: dict[str, Any] | None = None) -> dict[str, tuple[str, float]]:
    report = compare(load_saved(saved(tmp_path, old)), new, env or ENV)
    return {c.index: (c.verdict, c.change) for c in report.rows}


SECONDS = [1.0, 1.02, 0.98, 1.01, 0.99]


# ---------------------------------------------------------------------- verdicts
def test_a_planted_30_percent_slowdown_is_slower_and_fails_above_20_percent(
        tmp_path: Path) -> None:
    old = [rec("sorted-array", SECONDS), rec("searchsorted", SECONDS)]
    new = [rec("sorted-array", [s / 0.7 for s in SECONDS]), rec("searchsorted", SECONDS)]
    report = compare(load_saved(saved(tmp_path, old)), new, ENV)
    got = {c.index: c for c in report.rows}
    assert got["sorted-array"].verdict == SLOWER
    assert got["sorted-array"].change == pytest.approx(-0.30)
    assert got["searchsorted"].verdict == NOISE
    assert [c.index for c in regressions(report, 20)] == ["sorted-array"]
    assert regressions(report, 50) == []


def test_an_identical_rerun_is_within_noise_and_fails_nothing(tmp_path: Path) -> None:
    old = [rec("sorted-array", SECONDS), rec("btree", [0.5, 0.6, 0.55])]
    report = compare(load_saved(saved(tmp_path, old)), old, ENV)
    assert {c.verdict for c in report.rows} == {NOISE} and len(report.rows) == 2
    assert regressions(report, 0) == []


def test_a_speedup_beyond_the_spreads_is_faster(tmp_path: Path) -> None:
    got = verdicts(tmp_path, [rec("a", SECONDS)], [rec("a", [s / 1.5 for s in SECONDS])])
    assert got["a"][0] == FASTER and got["a"][1] == pytest.approx(0.5)


def test_overlapping_ranges_are_within_noise_however_far_apart_the_medians(
        tmp_path: Path) -> None:
    # medians 1.0 s and 1.25 s, but the old run's slowest repetition reaches the new range
    got = verdicts(tmp_path, [rec("a", [0.8, 1.0, 1.3])], [rec("a", [1.2, 1.25, 1.3])])
    assert got["a"][0] == NOISE and got["a"][1] == pytest.approx(1 / 1.25 - 1)


def test_a_change_within_the_two_half_spreads_is_noise_even_where_the_ranges_just_miss(
        tmp_path: Path) -> None:
    # ranges [0.8, 1.02] s and [1.05, 1.15] s do not meet; the change (-9%) is within the
    # half spreads together (11% + 4.5%)
    got = verdicts(tmp_path, [rec("a", [0.8, 1.0, 1.02])], [rec("a", [1.05, 1.1, 1.15])])
    assert got["a"][0] == NOISE
    # the same change with tight spreads is a verdict
    got = verdicts(tmp_path, [rec("a", [0.99, 1.0, 1.01])], [rec("a", [1.09, 1.1, 1.11])])
    assert got["a"][0] == SLOWER


def test_figures_of_one_repetition_count_every_difference_and_say_so(tmp_path: Path) -> None:
    report = compare(load_saved(saved(tmp_path, [rec("a", [1.0])])), [rec("a", [1.05])], ENV)
    assert report.rows[0].verdict == SLOWER
    assert any("one repetition states no spread" in n for n in report.notes)


def test_records_match_by_workload_and_index_and_the_others_are_listed(tmp_path: Path) -> None:
    old = [rec("a", SECONDS), rec("a", SECONDS, workload="v"), rec("gone", SECONDS)]
    new = [rec("a", SECONDS), rec("a", [s * 2 for s in SECONDS], workload="v"),
           rec("added", SECONDS)]
    report = compare(load_saved(saved(tmp_path, old)), new, ENV)
    assert [(c.workload, c.index, c.verdict) for c in report.rows] == [
        ("w", "a", NOISE), ("v", "a", SLOWER)]
    lines = format_report(report, load_saved(tmp_path / "old.json"))
    assert "not in the saved run: added on w" in lines
    assert "only in the saved run: gone on w" in lines


def test_the_comparison_table_states_both_figures_the_change_and_the_verdict(
        tmp_path: Path) -> None:
    path = saved(tmp_path, [rec("sorted-array", SECONDS, n=10_000_000)])
    old = load_saved(path)
    new = [rec("sorted-array", [s / 0.7 for s in SECONDS], n=10_000_000)]
    lines = format_report(compare(old, new, ENV), old)
    assert lines[0].startswith(f"compared with {str(path)!r} (commit abc, cpu (Some CPU")
    assert lines[1].split() == ["workload", "index", "old", "M", "lookups/s", "new", "M",
                                "lookups/s", "change", "verdict"]
    assert lines[3].split() == ["w", "sorted-array", "10.0", "±2%", "7.0", "±2%", "-30%",
                                "slower"]


# ---------------------------------------------------------------------- where it was measured
def test_a_run_from_another_device_is_compared_with_a_warning(tmp_path: Path) -> None:
    gpu = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "commit": "abc"}
    report = compare(load_saved(saved(tmp_path, [rec("a", SECONDS)], gpu)),
                     [rec("a", SECONDS)], ENV)
    assert len(report.rows) == 1
    assert report.notes[0] == ("warning: the saved run was measured on cuda (NVIDIA H100 80GB "
                               "HBM3), this one on cpu (Some CPU (2 threads)): differences may "
                               "come from the machines")


def test_a_gpu_set_up_differently_is_named_in_a_warning(tmp_path: Path) -> None:
    def gpu(power: float, ecc: str, sm_max: int) -> dict[str, Any]:
        return {"device": "cuda", "device_name": "NVIDIA H100", "power_limit_w": power,
                "ecc": ecc, "gpu_clocks": {"sm_mhz": 345, "sm_max_mhz": sm_max,
                                           "mem_mhz": 2619, "mem_max_mhz": 2619}}

    old = load_saved(saved(tmp_path, [rec("a", SECONDS)], gpu(700.0, "enabled", 1980)))
    assert compare(old, [rec("a", SECONDS)], gpu(700.0, "enabled", 1980)).notes == []
    notes = compare(old, [rec("a", SECONDS)], gpu(500.0, "disabled", 1755)).notes
    assert notes == ["warning: the GPU is set up differently from the saved run's (power limit "
                     "(W) 700.0 -> 500.0, ECC enabled -> disabled, max SM clock (MHz) 1980 -> "
                     "1755): differences may come from that"]
    # what a run could not read is no difference
    assert compare(old, [rec("a", SECONDS)], gpu(700.0, "unknown", 1980)).notes == []


def test_a_changed_workload_or_other_parameters_are_pointed_out(tmp_path: Path) -> None:
    old = [rec("a", SECONDS, workload_spec={"name": "w", "n_keys": 4096},
               params={"threads_per_block": 256})]
    new = [rec("a", SECONDS, workload_spec={"name": "w", "n_keys": 8192},
               params={"threads_per_block": 64})]
    notes = compare(load_saved(saved(tmp_path, old)), new, ENV).notes
    assert notes == [
        "warning: workload w is not the saved run's (n_keys 4096 -> 8192): its rows compare "
        "different work",
        "note: a on w has other parameters than in the saved run (threads_per_block 256 -> 64)"]


# ---------------------------------------------------------------------- reading saved runs
def test_bench_writes_the_format_version_this_code_reads(tmp_path: Path) -> None:
    data = json.loads(saved(tmp_path, [rec("a", SECONDS)]).read_text())
    assert data["format_version"] == FORMAT_VERSION == 3 and data["complete"] is True


def test_a_file_written_before_format_versions_is_read(tmp_path: Path) -> None:
    """Format 1 (no format_version); the oldest records have no repetitions, only a spread."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"environment": ENV, "records": [
        {"index": "a", "workload": "w", "throughput": 1000.0, "lookup_spread": 0.1,
         "n_lookups": 1000},
        {"index": "b", "workload": "w", "throughput": 2000.0, "n_lookups": 1000,
         "lookup_seconds": [0.5, 0.49, 0.51]},
        {"index": "broken", "workload": "w"}]}))
    old = load_saved(path)
    assert old.format_version == 1 and set(old.figures) == {("w", "a"), ("w", "b")}
    a, b = old.figures["w", "a"], old.figures["w", "b"]
    assert a.half_spread == pytest.approx(0.05) and a.slowest < 1000 < a.fastest
    assert (b.slowest, b.fastest) == pytest.approx((1000 / 0.51, 1000 / 0.49))
    report = compare(old, [rec("a", [1.0, 1.01, 0.99]), rec("b", [0.3, 0.3, 0.3])], ENV)
    assert [c.verdict for c in report.rows] == [NOISE, FASTER]


def test_format_3_has_one_name_per_field(tmp_path: Path) -> None:
    swept = rec("wh lf=0.5", SECONDS, index_name="wh", param="lf", param_value=0.5)
    data = json.loads(saved(tmp_path, [rec("a", SECONDS), swept]).read_text())
    plain, sweep = data["records"]
    for r in (plain, sweep):
        assert not {"index_name", "lookup_s", "build_s"} & set(r)
        assert len(r["lookup_seconds"]) == len(SECONDS) and r["build_seconds"]
    assert (plain["index"], plain["label"]) == ("a", "a")
    assert (sweep["index"], sweep["label"]) == ("wh", "wh lf=0.5")


def _as_format_2(record: dict[str, Any]) -> dict[str, Any]:
    """A format-3 record as format 2 wrote it: ``index`` the label, ``index_name`` the
    registered name, and the medians beside the repetitions."""
    old = {k: v for k, v in record.items() if k not in ("index", "label")}
    seconds = sorted(record["lookup_seconds"])
    return {"index": record["label"], **old, "index_name": record["index"],
            "lookup_s": seconds[len(seconds) // 2], "build_s": record["build_seconds"][0]}


def test_saved_runs_of_formats_2_and_3_are_read_alike(tmp_path: Path) -> None:
    records = [rec("a", SECONDS), rec("wh lf=0.5", SECONDS, index_name="wh", param="lf",
                                      param_value=0.5)]
    v3 = saved(tmp_path, records)
    data = json.loads(v3.read_text())
    data["format_version"] = 2
    data["records"] = [_as_format_2(r) for r in data["records"]]
    v2 = tmp_path / "v2.json"
    v2.write_text(json.dumps(data))
    old2, old3 = load_saved(v2), load_saved(v3)
    assert (old2.format_version, old3.format_version) == (2, 3)
    assert set(old2.figures) == set(old3.figures) == {("w", "a"), ("w", "wh lf=0.5")}
    assert old2.figures == old3.figures
    for old in (old2, old3):
        report = compare(old, records, ENV)
        assert [(c.index, c.verdict) for c in report.rows] == [("a", NOISE), ("wh lf=0.5", NOISE)]
        assert report.only_new == [] and report.only_old == []


@pytest.mark.parametrize("content, why", [
    ('{"format_version": 4, "records": []}',
     "format_version 4 is newer than this indexzoo reads (up to 3); compare with the indexzoo "
     "that wrote it"),
    ('{"format_version": "2", "records": []}', "format_version must be a whole number >= 1"),
    ("[1, 2]", "not a result of indexzoo bench (no list of records)"),
    ("{not json", "not a JSON file"),
    ('{"records": [{"index": "a"}]}', "no record with a workload, an index and a throughput"),
])
def test_an_unusable_saved_run_is_refused_in_one_line(tmp_path: Path, content: str,
                                                      why: str) -> None:
    path = tmp_path / "old.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_saved(path)
    assert str(err.value).startswith(f"--compare {str(path)!r}: {why}")
    assert "\n" not in str(err.value)


def _forbid_running(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_bench(*a: Any, **k: Any) -> Any:
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(bench, "run_bench", run_bench)


@pytest.mark.parametrize("args, why", [
    (["--compare", "{missing}"], "cannot be read (No such file or directory)"),
    (["--compare", "{newer}"], "format_version 4 is newer than this indexzoo reads"),
    (["--fail-above", "20"], "--fail-above needs --compare OLD.json"),
    (["--compare", "{old}", "--fail-above", "-5"], "--fail-above must be a percentage >= 0"),
])
def test_compare_options_are_checked_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: list[str], why: str) -> None:
    _forbid_running(monkeypatch)
    (tmp_path / "newer.json").write_text('{"format_version": 4, "records": []}')
    files = {"missing": tmp_path / "missing.json", "newer": tmp_path / "newer.json",
             "old": saved(tmp_path, [rec("a", SECONDS)])}
    code = main(["bench", "--preset", "tiny", "--device", "cpu", "--no-plot", "--output",
                 str(tmp_path / "out"), *(a.format(**files) for a in args)], out=io.StringIO())
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("indexzoo: error: ") and why in err and "\n" not in err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- the command, end to end
def bench_run(folder: Path, *extra: str) -> tuple[int, str, Path]:
    """``indexzoo bench`` on the tiny preset, two indexes, three repetitions: the code, the
    output and the JSON written into ``folder``."""
    out = io.StringIO()
    code = main(["bench", "--preset", "tiny", "--device", "cpu", "--indexes",
                 "sorted-array,searchsorted", "--repeats", "3", "--no-plot",
                 "--output", str(folder), *extra], out=out)
    (path,) = folder.glob("tiny-cpu-*.json")
    return code, out.getvalue(), path


def fixed_clock(fn: Any, device: str) -> float:
    """``benchrun.time_once`` with every timed call taking 1 ms, so that two runs measure the
    same and this machine's own drift between them (another process on a shared 2-core
    machine made a rerun 63% slower) cannot decide a test's outcome."""
    fn()
    return 1e-3


def test_a_rerun_of_the_same_tree_passes_compare_with_fail_above_50(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchrun, "time_once", fixed_clock)
    _, _, first = bench_run(tmp_path / "first")
    code, text, _ = bench_run(tmp_path / "second", "--compare", str(first), "--fail-above", "50")
    assert code == 0, text
    assert f"compared with {str(first)!r}" in text
    rows = {line.split()[1]: line for line in text.splitlines()
            if line.startswith("tiny ") and line.rstrip().endswith(("noise", "faster", "slower"))}
    assert set(rows) == {"sorted-array", "searchsorted"}


def _doctored(path: Path, factor: float, target: Path) -> Path:
    """A copy of a result file with every throughput multiplied by ``factor`` (and the
    repetitions' seconds divided by it, so the file stays consistent)."""
    data = json.loads(path.read_text())
    for r in data["records"]:
        for k in ("throughput", "throughput_slowest", "throughput_fastest"):
            r[k] *= factor
        r["lookup_seconds"] = [s / factor for s in r["lookup_seconds"]]
    target.write_text(json.dumps(data))
    return target


def test_a_planted_30_percent_slowdown_makes_fail_above_20_exit_1(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Against a copy of the first run made to look 1/0.7 times as fast, the second run is 30%
    slower. The clock is fixed (:func:`fixed_clock`)."""
    monkeypatch.setattr(benchrun, "time_once", fixed_clock)
    _, _, first = bench_run(tmp_path / "first")
    old = _doctored(first, 1 / 0.7, tmp_path / "faster-before.json")
    code, text, _ = bench_run(tmp_path / "second", "--compare", str(old), "--fail-above", "50")
    assert code == 0, text  # 30% slower is not more than 50%
    assert text.count("-30%  slower") == 2
    capsys.readouterr()
    code, text, _ = bench_run(tmp_path / "third", "--compare", str(old), "--fail-above", "20")
    assert code == 1, text
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"indexzoo bench: slower than {old} by more than 20%: ")
    assert "sorted-array on tiny (-30%)" in err and "searchsorted on tiny (-30%)" in err
    code, text, _ = bench_run(tmp_path / "fourth", "--compare", str(first), "--fail-above", "0")
    assert code == 0 and text.count("+0.0%  within noise") == 2, text
