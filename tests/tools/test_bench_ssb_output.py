"""``indexzoo bench --preset ssb`` writes its results as ``bench`` does: a JSON with
``format_version`` and ``complete`` under a name of its own (an earlier run is never
replaced), the PNG named after it, the commit header and the progress on standard error, one
``wrote`` line per file with its folder. Mostly on fabricated records, in isolation."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from indexzoo.errors import ConfigError
from indexzoo.tools import ssb_bench
from indexzoo.tools.cli import main
from indexzoo.tools.compare import FORMAT_VERSION

ENV = {"device": "cpu", "device_name": "test CPU", "commit": "abc1234"}


def _records(sfs: tuple[float, ...] = (1.0,)) -> list[dict[str, Any]]:
    """Records shaped as :func:`ssb_bench.run_ssb` makes them, for two queries."""
    out = []
    for sf in sfs:
        for q in ("q1.1", "q2.1"):
            for e, s in (("duckdb", 0.02), ("crystal", 0.004), ("rtcudb-sorted", 0.009)):
                out.append({"engine": e, "seconds": s, "spread": 0.0, "bytes_read": None,
                            "build_seconds": 0.0, "correct": True, "sf": sf, "query": q,
                            "floor_bytes": 10**6, "bandwidth": 1e10, "floor_seconds": 1e-4,
                            "x_floor": None, "selectivity": 0.01, "vs_crystal": None,
                            "vs_duckdb": 1.0})
    return out


def test_a_second_run_in_the_same_second_gets_a_name_of_its_own(tmp_path: Path) -> None:
    paths = []
    for seconds in (0.5, 0.25):
        results = ssb_bench.results_file(tmp_path, "cpu", [1.0], ["q1.1", "q2.1"], ENV, True,
                                         stamp="20260101-120000")
        records = _records()
        records[0]["seconds"] = seconds
        results.update(records)
        assert results.path is not None
        paths.append(results.path)
    assert [p.name for p in paths] == ["ssb-cpu-sf1-q1.1-q2.1-20260101-120000.json",
                                       "ssb-cpu-sf1-q1.1-q2.1-20260101-120000-2.json"]
    first, second = (json.loads(p.read_text()) for p in paths)
    assert first["records"][0]["seconds"] == 0.5 and second["records"][0]["seconds"] == 0.25
    for saved in (first, second):
        assert saved["format_version"] == FORMAT_VERSION and saved["complete"] is True
        assert saved["environment"] == ENV


def test_a_name_whose_png_is_taken_is_passed_over(tmp_path: Path) -> None:
    stem = "ssb-cpu-sf1-20260101-120000"
    (tmp_path / f"{stem}.png").write_bytes(b"someone else's")
    results = ssb_bench.results_file(tmp_path, "cpu", [1.0], list(ssb_bench.ssb.QUERIES), ENV,
                                     True, stamp="20260101-120000")
    results.update(_records())
    assert results.path == tmp_path / f"{stem}-2.json"
    assert (tmp_path / f"{stem}.png").read_bytes() == b"someone else's"


def test_the_json_is_incomplete_until_the_last_scale_factor(tmp_path: Path) -> None:
    results = ssb_bench.results_file(tmp_path, "cpu", [1.0, 2.0], ["q1.1", "q2.1"], ENV, False,
                                     log=io.StringIO(), stamp="20260101-120000")
    results.update(_records((1.0,)))
    assert results.path is not None
    assert json.loads(results.path.read_text())["complete"] is False
    results.update(_records((1.0, 2.0)))
    saved = json.loads(results.path.read_text())
    assert saved["complete"] is True and len(saved["records"]) == 12
    assert list(tmp_path.iterdir()) == [results.path]  # rewritten in place, no temporary left


def test_the_png_is_named_after_the_json_and_never_replaces_a_file(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    stem = tmp_path / "ssb-cpu-sf1-20260101-120000"
    path = ssb_bench.publish_plot(_records((1.0, 2.0)), ENV, stem)
    assert path == tmp_path / "ssb-cpu-sf1-20260101-120000.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ConfigError, match="are taken; the JSON is written"):
        ssb_bench.publish_plot(_records(), ENV, stem)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_the_legend_stands_beside_the_bars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    boxes: list[tuple[Any, Any]] = []
    close = plt.close

    def closing(fig: Any) -> None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            boxes.append((ax.get_window_extent(renderer),
                          ax.get_legend().get_window_extent(renderer)))
        close(fig)

    monkeypatch.setattr(plt, "close", closing)
    ssb_bench.plot(_records((1.0, 2.0)), ENV, tmp_path / "p.png")
    assert len(boxes) == 2
    for axes_box, legend_box in boxes:
        assert legend_box.x0 >= axes_box.x1  # right of the plotting area: over no bar


def test_bench_ssb_header_progress_and_wrote_lines(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(ssb_bench, "WARM_UP_SECONDS", 0.0)
    monkeypatch.setattr(ssb_bench, "timestamp", lambda: "20260101-120000")
    argv = ["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", "--engines",
            "crystal", "--queries", "q1.1", "--repeats", "1", "--output", str(tmp_path / "r")]
    texts = []
    for _ in range(2):
        out = io.StringIO()
        assert main(argv, out) == 0, out.getvalue()
        texts.append((out.getvalue(), capsys.readouterr()))
    stem = tmp_path / "r" / "ssb-cpu-sf0.002-q1.1-20260101-120000"
    for (text, captured), suffix in zip(texts, ("", "-2"), strict=True):
        err_lines = captured.err.splitlines()
        assert err_lines[0].startswith("indexzoo bench --preset ssb on cpu (")
        assert ", commit " in err_lines[0]
        assert any("rows generated in" in line for line in err_lines)
        assert "rows generated" not in text and "rows generated" not in captured.out
        assert f"wrote {stem}{suffix}.json" in text.splitlines()
        assert f"wrote {stem}{suffix}.png" in text.splitlines()
        saved = json.loads(Path(f"{stem}{suffix}.json").read_text())
        assert saved["complete"] is True and saved["format_version"] == FORMAT_VERSION


def test_a_mistake_in_the_arguments_creates_no_output_folder(tmp_path: Path) -> None:
    rc = main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", "--engines",
               "crystl", "--no-plot", "--output", str(tmp_path / "new")], io.StringIO())
    assert rc != 0 and not (tmp_path / "new").exists()


@pytest.mark.parametrize("option", [["--compare", "old.json"], ["--fail-above", "5"]])
def test_options_ssb_has_no_use_for_are_refused(tmp_path: Path, option: list[str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bench", "--preset", "ssb", "--device", "cpu", "--sf", "0.002", *option,
               "--output", str(tmp_path / "new")], io.StringIO())
    assert rc == 2 and f"{option[0]} does not apply to --preset ssb" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
