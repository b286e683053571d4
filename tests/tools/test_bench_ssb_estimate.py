"""``indexzoo bench --preset ssb`` estimates its duration before it starts, as ``bench`` does:
calibrated on SSB flat at a small scale factor on this machine, scaled to each scale factor;
a run estimated past ``--time-budget`` (10 minutes on the CPU by default) is refused in one
line with the estimate (exit 2) unless ``--yes`` is given, and any other run states its
estimate first. Scale factors within the sample's get no estimate."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from indexzoo.tools import ssb_bench
from indexzoo.tools.cli import main
from indexzoo.tools.ssb_bench import estimate_ssb

TINY = 0.002  # the larger sample's scale factor in these tests: a table of some 12,000 rows
ROWS_PER_SF = 6_000_000  # about: 1.5 M orders a scale factor, 4 lines an order
ADVICE = ("pick smaller scale factors (--sf), fewer engines (--engines) or queries (--queries), "
          "or fewer --repeats")


@pytest.fixture(autouse=True)
def _tiny_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    monkeypatch.setattr(ssb_bench, "SAMPLE_SF", TINY)


def _sample_times(monkeypatch: pytest.MonkeyPatch, fixed: float = 0.01,
                  per_sf: float = 0.0) -> None:
    """Every call on a sample takes ``fixed`` seconds plus ``per_sf`` per unit of scale factor
    (read off the sample's rows), nothing is prepared or run, and one copy of the bandwidth
    check takes ``fixed`` seconds (a nanosecond for none)."""
    copy = max(fixed, 1e-9)

    def seconds(table: Any) -> float:
        return fixed + per_sf * table.n_rows / ROWS_PER_SF

    monkeypatch.setattr(ssb_bench, "_duckdb_calls", lambda con, table, spec: (seconds(table),) * 2)
    monkeypatch.setattr(ssb_bench, "_engine_calls", lambda eng, table, *a: (seconds(table),) * 3)
    monkeypatch.setattr(ssb_bench, "copy_bandwidth",
                        lambda device, repeats=10: 2 * ssb_bench.COPY_BYTES[device] / copy)


def _no_run(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []

    def run_ssb(*a: Any, **k: Any) -> list[Any]:
        calls.append(a)
        return []

    monkeypatch.setattr(ssb_bench, "run_ssb", run_ssb)
    return calls


def _ssb(tmp_path: Path, *options: str, sf: str = "0.004") -> int:
    return main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", sf, "--engines",
                 "crystal", "--queries", "q1.1", "--no-plot", "--output",
                 str(tmp_path / "out"), *options], io.StringIO())


def test_a_run_over_its_time_budget_is_refused_with_the_estimate_before_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A real estimate: the sample runs on this machine, and any of it takes more than 1 ms."""
    calls = _no_run(monkeypatch)
    assert _ssb(tmp_path, "--time-budget", "0.001s") == 2 and not calls
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("indexzoo bench --preset ssb on cpu"), err
    assert err[1].startswith("indexzoo: error: this benchmark would take at least ")
    assert err[1].endswith(f"on cpu, more than --time-budget 0.00 s; pass --yes to run it "
                           f"anyway, or {ADVICE}")
    assert "crystal" in err[1] and "data generation" in err[1]
    assert not (tmp_path / "out").exists(), "the refused run leaves no folder behind"


def test_a_run_within_its_budget_states_the_estimate_then_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _sample_times(monkeypatch, 1e-4)
    calls = _no_run(monkeypatch)
    assert _ssb(tmp_path) == 0 and len(calls) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[1].startswith("estimated duration: about ")
    assert err[1].endswith(f"calibrated on SSB flat at SF {TINY:g}")


def test_the_cpu_budget_of_10_minutes_refuses_a_long_run_unless_yes_or_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _sample_times(monkeypatch, 0.01, per_sf=5.0)  # at SF 20: 100 s a call, hours in all
    calls = _no_run(monkeypatch)
    assert _ssb(tmp_path, sf="20") == 2 and not calls
    assert "more than --time-budget 10 min 00 s; pass --yes to run it anyway" in \
        capsys.readouterr().err.splitlines()[-1]
    assert _ssb(tmp_path, "--yes", sf="20") == 0 and len(calls) == 1
    assert capsys.readouterr().err.splitlines()[1].startswith("estimated duration: about ")
    assert _ssb(tmp_path, "--time-budget", "none", sf="20") == 0 and len(calls) == 2


def test_scale_factors_within_the_sample_get_no_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ssb_bench, "_seconds", lambda *a: pytest.fail("sampled"))
    assert estimate_ssb([TINY, TINY / 2], ["crystal"], "cpu", 5, ["q1.1"]) is None
    calls = _no_run(monkeypatch)
    assert _ssb(tmp_path, "--time-budget", "0.001s", sf=str(TINY)) == 0 and len(calls) == 1
    assert "estimated duration" not in capsys.readouterr().err


def _engine_seconds(sfs: list[float], repeats: int = 5) -> float:
    est = estimate_ssb(sfs, ["crystal"], "cpu", repeats, ["q1.1", "q2.1"])
    assert est is not None and est.complete
    return est.by_index["crystal"]


def test_the_estimate_grows_with_the_rows_of_each_scale_factor_and_with_the_repeats(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _sample_times(monkeypatch, fixed=0.0, per_sf=1.0)
    monkeypatch.setattr(ssb_bench, "WARM_UP_SECONDS", 0.0)
    one = _engine_seconds([1.0])
    # per query: prepare, check, one warm-up and 5 repeats, each about 1 s at SF 1
    assert one == pytest.approx(2 * (2 + 1 + 5), rel=0.02)
    assert _engine_seconds([2.0]) == pytest.approx(2 * one, rel=0.02), "linear in the rows"
    assert _engine_seconds([1.0, 2.0]) == pytest.approx(3 * one, rel=0.02)
    assert _engine_seconds([1.0], repeats=10) > one


def test_a_fixed_cost_per_call_is_not_multiplied_with_the_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch or DuckDB's planning takes as long at SF 20 as on the sample."""
    _sample_times(monkeypatch, fixed=0.001, per_sf=0.0)
    monkeypatch.setattr(ssb_bench, "WARM_UP_SECONDS", 0.0)
    assert _engine_seconds([20.0]) == pytest.approx(2 * (2 + 1 + 5) * 0.001)


def test_a_calls_line_grows_no_faster_than_through_the_origin_and_never_shrinks() -> None:
    line = ssb_bench._Line
    small, large = ssb_bench.SAMPLE_SF / 2, ssb_bench.SAMPLE_SF
    assert line.through(0.01, 0.03).at(1.0) == pytest.approx(0.03 / large), "noise capped"
    assert line.through(0.02, 0.03).at(1.0) == pytest.approx(
        0.03 - large * 0.01 / (large - small) + 0.01 / (large - small))
    assert line.through(0.03, 0.02).at(100.0) == pytest.approx(0.02), "faster on more rows"


def test_an_estimate_past_its_limit_stops_early_as_a_lower_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _sample_times(monkeypatch, 0.01, per_sf=1.0)
    made: list[str] = []
    real = ssb_bench.query_engine

    def engine(name: str, **k: Any) -> Any:
        made.append(name)
        return real(name, **k)

    monkeypatch.setattr(ssb_bench, "query_engine", engine)
    est = estimate_ssb([1.0], ["crystal", "rtcudb"], "cpu", 5, ["q1.1", "q2.1"], limit=1.0)
    assert est is not None and not est.complete and made == ["crystal"]
    assert "the estimate stopped there" in est.describe()


def test_a_malformed_time_budget_stops_ssb_in_one_line_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ssb_bench, "_seconds", lambda *a: pytest.fail("sampled"))
    calls = _no_run(monkeypatch)
    assert _ssb(tmp_path, "--time-budget", "soon") == 2 and not calls
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "indexzoo: error: --time-budget 'soon' is not a duration")
    assert not (tmp_path / "out").exists()
