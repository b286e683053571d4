"""A build predicted to take more than a few seconds says so from Python: one line on standard
error before it (the index, the keys, the device, the predicted time) and one with its time
after it; by default only where standard error is a terminal and the application's logging
does not already show the ``indexzoo`` logger's records; ``INDEXZOO_PROGRESS`` and
``indexzoo.set_progress`` switch it; the logger's records are there either way, and a command
of the command line writes no such lines (its status lines show its builds)."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import indexzoo
from indexzoo import buildtime
from indexzoo.contract import check_plugin_class
from indexzoo.errors import PluginError
from indexzoo.registry import builtin
from indexzoo.tools.cli import main
from indexzoo.tools.progress import Progress
from indexzoo.tools.runner import run_spec

KEYS = np.arange(1000, dtype=np.uint64)
#: 1,000 keys at 100 keys a second: a build predicted to take 10 s (it takes a moment).
SLOW = {"cpu": 100.0}
BEFORE = "indexzoo: building sorted-array over 1,000 keys on cpu: about 10 s"
AFTER = "indexzoo: built sorted-array over 1,000 keys on cpu in "


class Terminal(io.StringIO):
    """Standard error on a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _decided_by_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from the default: no setting, no INDEXZOO_PROGRESS."""
    monkeypatch.delenv("INDEXZOO_PROGRESS", raising=False)
    before = buildtime.set_progress(None)
    yield
    buildtime.set_progress(before)


def _slow_index(monkeypatch: pytest.MonkeyPatch, rates: dict[str, float] = SLOW) -> indexzoo.GpuIndex:
    index = indexzoo.create("sorted-array", device="cpu")
    monkeypatch.setattr(type(index), "build_rate", rates)
    return index


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("indexzoo: buil")]


def test_a_long_build_says_so_before_and_its_time_after_when_turned_on(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    indexzoo.set_progress(True)
    _slow_index(monkeypatch).build(KEYS)
    said = _lines(capsys.readouterr().err)
    assert len(said) == 2 and said[0] == BEFORE and said[1].startswith(AFTER), said


def test_nothing_is_written_when_turned_off_even_on_a_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("INDEXZOO_PROGRESS", "1")
    indexzoo.set_progress(False)  # the program's setting decides over the variable
    _slow_index(monkeypatch).build(KEYS)
    assert term.getvalue() == ""


def test_the_logger_tells_the_long_build_whether_or_not_the_lines_are_written(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    for setting in (True, False):
        indexzoo.set_progress(setting)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="indexzoo"):
            _slow_index(monkeypatch).build(KEYS)
        said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "indexzoo"]
        assert said[0] == (logging.INFO, "sorted-array: building on 1,000 keys (cpu), about 10 s")
        assert said[1][1].startswith("sorted-array: built on 1,000 keys (cpu) in ")


def test_by_default_a_terminal_gets_the_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    _slow_index(monkeypatch).build(KEYS)
    assert _lines(term.getvalue())[0] == BEFORE


def test_by_default_piped_or_captured_output_gets_nothing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _slow_index(monkeypatch).build(KEYS)
    assert capsys.readouterr().err == ""


def test_INDEXZOO_PROGRESS_1_writes_them_anywhere_and_0_nowhere(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("INDEXZOO_PROGRESS", "1")
    _slow_index(monkeypatch).build(KEYS)
    assert _lines(capsys.readouterr().err)[0] == BEFORE
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("INDEXZOO_PROGRESS", "0")
    _slow_index(monkeypatch).build(KEYS)
    assert term.getvalue() == ""


def test_logging_that_shows_the_builds_replaces_the_lines_by_default(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """An application that shows the indexzoo logger's INFO records sees the build once."""
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with caplog.at_level(logging.INFO, logger="indexzoo"):
        _slow_index(monkeypatch).build(KEYS)
    assert term.getvalue() == ""
    assert any("about 10 s" in r.getMessage() for r in caplog.records)


def test_builds_predicted_short_or_not_at_all_write_nothing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    indexzoo.set_progress(True)
    _slow_index(monkeypatch, {"cpu": 1000.0}).build(KEYS)  # about 1 s
    _slow_index(monkeypatch, {"cuda": 1.0}).build(KEYS)  # no figure for the CPU
    assert capsys.readouterr().err == ""


def test_the_prediction_is_linear_up_to_the_measured_size_and_slower_beyond() -> None:
    at = buildtime.RATE_MEASURED_AT["cpu"]
    rates = {"cpu": 1e6}
    assert buildtime.predicted_seconds(rates, "cpu", at // 4) == pytest.approx(at / 4 / 1e6)
    four_times = buildtime.predicted_seconds(rates, "cpu", 4 * at)
    assert four_times == pytest.approx(4 * at / 1e6 * (1 + 2 * buildtime.GROWTH_PER_DOUBLING))
    assert buildtime.predicted_seconds(rates, "cuda", at) is None
    assert buildtime.predicted_seconds(rates, "cpu", 0) is None


def test_set_progress_returns_the_setting_it_replaces_and_takes_only_booleans() -> None:
    assert indexzoo.set_progress(True) is None
    assert indexzoo.set_progress(False) is True
    assert buildtime.progress_setting() is False
    with pytest.raises(TypeError, match="set_progress takes True, False or None"):
        indexzoo.set_progress("yes")  # type: ignore[arg-type]


def test_every_built_in_family_states_its_cpu_build_rate() -> None:
    table = indexzoo.available()
    missing = [n for n in builtin() if n != "sharded" and "cpu" not in table[n].build_rate]
    assert missing == []


def test_a_malformed_build_rate_breaks_the_plugin_contract(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cls = type(indexzoo.create("sorted-array", device="cpu"))
    for bad in ({"gpu": 1e6}, {"cpu": 0}, {"cpu": float("inf")}, [("cpu", 1e6)]):
        monkeypatch.setattr(cls, "build_rate", bad)
        with pytest.raises(PluginError, match="build_rate must map 'cpu' and/or 'cuda' to keys "
                                              "a second"):
            check_plugin_class(cls)


def test_a_command_writes_no_build_lines_of_its_own_and_run_shows_the_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("INDEXZOO_PROGRESS", "1")
    monkeypatch.setattr(type(indexzoo.create("sorted-array", device="cpu")), "build_rate", SLOW)
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\nworkload: {n_keys: 1000, n_lookups: 100}\n"
                    "repeats: 1\n")
    assert main(["run", str(spec)], io.StringIO()) == 0
    assert _lines(capsys.readouterr().err) == []
    assert buildtime.progress_setting() is None, "the command puts the setting back"
    status = Terminal()
    run_spec(spec, io.StringIO(), steps=Progress(status, enabled=True, width=200))
    assert "building sorted-array, about 10 s each  " in status.getvalue()
