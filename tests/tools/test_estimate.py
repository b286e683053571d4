"""``indexzoo bench`` estimates its duration before it starts, on samples of the workload
timed on this device; it refuses, in one line with the estimate (exit 2), a run estimated to
exceed ``--time-budget`` (10 minutes on the CPU by default) unless ``--yes`` is given, and
states the estimate of any run it starts."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from indexzoo.errors import ConfigError
from indexzoo.tools import bench, estimate
from indexzoo.tools.cli import main
from indexzoo.tools.estimate import SAMPLE, estimate_bench, parse_duration, sample_workload
from indexzoo.tools.records import Entry
from indexzoo.tools.workloads import Workload

QUICK = bench.PRESETS["quick"]


def _fixed_sample_times(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.01) -> None:
    """Every timed call on a sample takes ``seconds`` (and nothing is built)."""
    monkeypatch.setattr(estimate, "_timed", lambda fn, device: seconds)


def _no_run(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []

    def run_bench(*a: Any, **k: Any) -> list[Any]:
        calls.append(a)
        return []

    monkeypatch.setattr(bench, "run_bench", run_bench)
    return calls


def _entries(*names: str) -> list[Entry]:
    return bench.bench_entries(list(names))


def _run(*argv: str) -> int:
    return main(list(argv), out=io.StringIO())


# ---------------------------------------------------------------------- the model
def test_a_sample_keeps_copies_range_width_and_lookups_per_batch() -> None:
    w = Workload(n_keys=1 << 24, multiplicity=4, n_lookups=1 << 22, batches=64, range_hits=128)
    s = sample_workload(w)
    assert s.n_keys == SAMPLE and s.n_keys % 4 == 0 and s.multiplicity == 4
    assert s.n_lookups == SAMPLE and s.range_hits == 128
    assert s.n_lookups // s.batches == w.n_lookups // w.batches
    wide = sample_workload(Workload(n_keys=1 << 26, n_lookups=1 << 16, range_hits=1 << 17))
    assert wide.distinct_keys >= 1 << 17, "enough distinct keys for one range"


def test_workloads_within_the_sample_get_no_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_sample_times(monkeypatch)
    tiny = bench.PRESETS["tiny"]
    assert estimate_bench([tiny], _entries("sorted-array"), "cpu", repeats=5) is None
    assert estimate_bench([tiny, QUICK], _entries("sorted-array"), "cpu", repeats=5) is not None


def test_the_estimate_grows_with_the_keys_the_lookups_and_the_repeats(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_sample_times(monkeypatch)
    entries = _entries("sorted-array")

    def seconds(w: Workload, repeats: int = 5) -> float:
        est = estimate_bench([w], entries, "cpu", repeats)
        assert est is not None
        return est.seconds

    base = seconds(QUICK)
    assert seconds(QUICK.model_copy(update={"n_lookups": 1 << 22})) > 3 * base
    assert seconds(QUICK.model_copy(update={"n_keys": 1 << 22})) > 1.5 * base
    assert seconds(QUICK, repeats=10) > 1.5 * base
    est = estimate_bench([QUICK], entries, "cpu", 5)
    assert est is not None and set(est.by_index) == {"searchsorted", "sorted-array", "references"}
    assert est.describe().startswith("about ") and "data generation" in est.describe()


def test_two_workloads_take_the_sum_of_their_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_sample_times(monkeypatch)
    entries = _entries("sorted-array")
    one = estimate_bench([QUICK], entries, "cpu", 5)
    two = estimate_bench([QUICK, QUICK], entries, "cpu", 5)
    assert one is not None and two is not None
    assert two.seconds == pytest.approx(2 * one.seconds)


def test_indexes_bench_would_skip_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_sample_times(monkeypatch)
    ranges = QUICK.model_copy(update={"range_hits": 16, "n_lookups": 1 << 17})
    est = estimate_bench([ranges], _entries("warpcore-hash", "sorted-array"), "cpu", 5)
    assert est is not None and "warpcore-hash" not in est.by_index  # no range lookups
    assert "sorted-array" in est.by_index


@pytest.mark.parametrize(("text", "seconds"), [("600", 600.0), ("90s", 90.0), ("10m", 600.0),
                                               ("10min", 600.0), ("1.5h", 5400.0),
                                               ("none", None)])
def test_time_budgets_read_as_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_a_time_budget_that_is_no_duration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"--time-budget 'soon' is not a duration; give e\.g\. 600"):
        parse_duration("soon")


# ---------------------------------------------------------------------- the command
def test_bench_over_its_time_budget_is_refused_with_the_estimate_before_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A real estimate: the sample runs on this machine, and any of it takes more than 1 ms."""
    calls = _no_run(monkeypatch)
    code = _run("bench", "--preset", "quick", "--device", "cpu", "--indexes", "sorted-array",
                "--time-budget", "0.001s", "--output", str(tmp_path / "out"))
    assert code == 2 and not calls
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("indexzoo bench on cpu"), err
    assert err[1].startswith("indexzoo: error: this benchmark would take at least ")
    assert err[1].endswith("on cpu, more than --time-budget 0.00 s; pass --yes to run it "
                           "anyway, or pick a smaller workload, fewer indexes (--indexes) or "
                           "fewer --repeats")
    assert "searchsorted" in err[1] and "data generation" in err[1]
    assert not (tmp_path / "out").exists(), "the refused run leaves no folder behind"


def test_paper_on_the_cpu_states_its_duration_and_is_refused_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo import resources

    monkeypatch.setattr(resources, "available_memory", lambda device: (1 << 50, "a test's"))
    _fixed_sample_times(monkeypatch, 0.005)
    calls = _no_run(monkeypatch)
    args = ("bench", "--preset", "paper", "--device", "cpu", "--indexes", "sorted-array",
            "--no-plot", "--output", str(tmp_path / "out"))
    assert _run(*args) == 2 and not calls
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("indexzoo: error: this benchmark would take at least ")
    assert "more than --time-budget 10 min 00 s; pass --yes to run it anyway" in err[-1]
    assert _run(*args, "--yes") == 0 and len(calls) == 1
    stated = capsys.readouterr().err.splitlines()[1]
    assert stated.startswith("estimated duration: about ")
    assert stated.endswith("calibrated on samples of 2^16 keys")
    assert _run(*args, "--time-budget", "none") == 0 and len(calls) == 2


def test_an_estimate_past_the_budget_stops_early_as_a_lower_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The first index already takes longer than the budget: the others are not sampled."""
    sampled: list[str] = []
    real = estimate._sample_seconds

    def index_seconds(name: str, *a: Any) -> Any:
        sampled.append(name)
        return real(name, *a)

    monkeypatch.setattr(estimate, "_sample_seconds", index_seconds)
    _fixed_sample_times(monkeypatch, 0.01)
    _no_run(monkeypatch)
    args = ("bench", "--preset", "quick", "--device", "cpu", "--indexes", "sorted-array,btree",
            "--no-plot", "--output", str(tmp_path / "out"))
    assert _run(*args, "--time-budget", "1s") == 2
    assert sampled == ["searchsorted"]
    err = capsys.readouterr().err.splitlines()
    assert "would take at least " in err[-1] and "the estimate stopped there" in err[-1]
    sampled.clear()
    assert _run(*args, "--time-budget", "1s", "--yes") == 0
    assert sampled == ["searchsorted", "sorted-array", "btree"]
    assert capsys.readouterr().err.splitlines()[1].startswith("estimated duration: about ")


def test_a_run_within_its_budget_starts_after_stating_the_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fixed_sample_times(monkeypatch, 1e-6)
    calls = _no_run(monkeypatch)
    assert _run("bench", "--preset", "quick", "--device", "cpu", "--indexes", "sorted-array",
                "--no-plot", "--output", str(tmp_path / "out")) == 0
    assert len(calls) == 1
    assert "estimated duration: about " in capsys.readouterr().err


def test_the_estimate_counts_the_whole_rank_budget_of_every_workload(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed_sample_times(monkeypatch)
    entries = _entries("sorted-array")
    none = estimate_bench([QUICK, QUICK], entries, "cpu", 5)
    ranked = estimate_bench([QUICK, QUICK], entries, "cpu", 5, rank_budget=60)
    assert none is not None and ranked is not None
    assert ranked.seconds == pytest.approx(none.seconds + 120)
    assert "at most 2 min" in ranked.describe()


def test_a_rank_budget_can_push_a_run_over_its_time_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fixed_sample_times(monkeypatch, 1e-6)
    calls = _no_run(monkeypatch)
    assert _run("bench", "--preset", "quick", "--device", "cpu", "--indexes", "sorted-array",
                "--rank-budget", "700", "--no-plot", "--output", str(tmp_path / "out")) == 2
    assert calls == []
    assert "rounds to establish the ranking" in capsys.readouterr().err


def test_a_malformed_time_budget_stops_bench_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls = _no_run(monkeypatch)
    monkeypatch.setattr(estimate, "_timed", lambda fn, device: pytest.fail("sample ran"))
    assert _run("bench", "--preset", "quick", "--device", "cpu", "--time-budget", "soon",
                "--output", str(tmp_path / "out")) == 2 and not calls
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "indexzoo: error: --time-budget 'soon' is not a duration")
