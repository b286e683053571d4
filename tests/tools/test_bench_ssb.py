"""``indexzoo bench --preset ssb``: every engine and DuckDB per query, answers checked,
times, bytes against the floor and ratios printed, JSON and plot written."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from indexzoo.tools import ssb_bench
from indexzoo.tools.cli import main
from indexzoo.tools.compare import FORMAT_VERSION


def _one(folder: Path, pattern: str) -> Path:
    (path,) = folder.glob(pattern)
    return path


def test_bench_ssb_prints_times_bytes_and_ratios_per_query(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    monkeypatch.setattr(ssb_bench, "WARM_UP_SECONDS", 0.0)  # one warm-up run: CI's time
    pytest.importorskip("matplotlib")
    out = io.StringIO()
    rc = main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", "--engines",
               "rtcudb-sorted,crystal", "--repeats", "1", "--output", str(tmp_path)], out)
    text = out.getvalue()
    assert rc == 0, text
    assert "q1.1 (SF 0.002" in text and "q4.3 (SF 0.002" in text
    assert "x crystal" in text and "x duckdb" in text and "/floor" in text
    assert "x floor" in text and "read floor" in text and "copy bandwidth of cpu" in text
    assert "WRONG" not in text
    saved = json.loads(_one(tmp_path, "ssb-cpu-sf0.002-????????-??????.json").read_text())
    records = saved["records"]
    assert {r["engine"] for r in records} == {"duckdb", "crystal", "rtcudb-sorted"}
    assert len(records) == 3 * 13 and saved["environment"]["commit"]
    crystal = [r for r in records if r["engine"] == "crystal"]
    assert all(r["bytes_read"] == r["floor_bytes"] and r["vs_crystal"] == 1 for r in crystal)
    # time against the read floor: the floor's bytes over the copy bandwidth of the same run
    for r in crystal:
        assert r["floor_seconds"] == pytest.approx(r["floor_bytes"] / r["bandwidth"])
        assert r["x_floor"] == pytest.approx(r["seconds"] / r["floor_seconds"])
    assert all(r["x_floor"] is None for r in records if r["engine"] == "duckdb")
    assert saved["format_version"] == FORMAT_VERSION and saved["complete"] is True
    assert _one(tmp_path, "ssb-cpu-sf0.002-????????-??????.png").stat().st_size > 0


def test_bench_ssb_names_unknown_engines(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", "--engines",
               "crystl", "--output", str(tmp_path)], io.StringIO())
    assert rc != 0
    assert "unknown query engines crystl; registered: crystal" in capsys.readouterr().err


def test_bench_ssb_runs_the_queries_named(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    out = io.StringIO()
    rc = main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", "--engines",
               "crystal", "--queries", "q2.1,q4.3", "--repeats", "1", "--no-plot", "--output",
               str(tmp_path)], out)
    assert rc == 0, out.getvalue()
    saved = json.loads(_one(tmp_path, "ssb-cpu-sf0.002-q2.1-q4.3-*.json").read_text())
    assert sorted({r["query"] for r in saved["records"]}) == ["q2.1", "q4.3"]


def test_bench_ssb_names_unknown_queries(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", "--queries",
               "q1.1,q5.1", "--output", str(tmp_path)], io.StringIO())
    assert rc != 0
    assert "unknown SSB queries q5.1" in capsys.readouterr().err


def test_timed_runs_warm_up_for_its_seconds_then_the_repeats(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After the GPU sat idle (while DuckDB ran), warm-up runs for a while, not once. The clock
    is the test's own (each run takes 1/64 s of it, exact in binary), so the count of runs is
    the same however busy the machine is."""
    step, now = 1 / 64, [0.0]
    calls: list[float] = []

    def run() -> int:
        calls.append(now[0])
        now[0] += step
        return len(calls)

    monkeypatch.setattr(ssb_bench, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    med, spread, last = ssb_bench._timed(run, "cpu", 3, warm_up=8 * step)
    assert last == len(calls) and len(calls) == 8 + 3  # 8 runs fill the warm-up, 3 timed
    assert calls[-3] - calls[0] == 8 * step  # the first timed run starts after the warm-up
    assert med == step and spread == 0
    calls.clear()
    ssb_bench._timed(run, "cpu", 3, warm_up=0.0)
    assert len(calls) == 4  # one warm-up run at least
