"""Ctrl-C (SIGINT) and SIGTERM stop ``indexzoo`` at any moment: exit code 130, the one line
"indexzoo: interrupted", no partial result file (no temporary, no half-drawn PNG; the JSON
only of workloads that finished, whole); also when the KeyboardInterrupt is swallowed on the
way (numba compiles through llvmlite, whose ctypes callbacks drop exceptions).

The signals are sent by the test's own process to a child it started, as the same user (root
on CI): a signal's delivery and handling do not depend on privileges, so this is what an
unprivileged user's ``kill`` does too."""

from __future__ import annotations

import ctypes
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from indexzoo.tools import cli

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix",
                                reason="POSIX signals")


def _interrupted_only(err: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and lines[-1] == "indexzoo: interrupted", err
    assert "Traceback" not in err and "Exception ignored" not in err, err


@ctypes.CFUNCTYPE(None)
def _callback_hit_by_ctrl_c() -> None:
    """A Python callback called from C, hit by Ctrl-C: ctypes drops the KeyboardInterrupt,
    as it does in llvmlite's object-cache callback at the end of every numba compilation."""
    signal.raise_signal(signal.SIGINT)
    for _ in range(1000):  # the handler runs here, inside the callback
        pass


def test_interrupt_swallowed_in_a_ctypes_callback_still_stops_the_command(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGINT)
    finished = []

    def job(args: Any, out: Any) -> int:
        _callback_hit_by_ctrl_c()  # the interrupt is lost here without indexzoo's handler
        deadline = time.monotonic() + 60.0  # a lost interrupt lets the job run to its end
        while time.monotonic() < deadline:
            time.sleep(0.01)
        finished.append(True)
        return 0

    monkeypatch.setattr(cli, "cmd_list", job)
    code = cli.main(["list"], out=io.StringIO())
    assert code == 130 and not finished  # stopped at its next bytecode, not at its end
    _interrupted_only(capsys.readouterr().err)
    assert signal.getsignal(signal.SIGINT) is before  # the previous handler is back


def test_sigterm_stops_a_command_as_ctrl_c_does_and_its_handler_is_restored_after(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    finished = []

    def job(args: Any, out: Any) -> int:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
            return 99  # not handled: a SIGTERM here would end the test run itself
        signal.raise_signal(signal.SIGTERM)  # as `kill PID` or `timeout` sends it
        finished.append(True)
        return 0

    monkeypatch.setattr(cli, "cmd_list", job)
    code = cli.main(["list"], out=io.StringIO())
    assert code == 130 and not finished
    _interrupted_only(capsys.readouterr().err)
    assert signal.getsignal(signal.SIGTERM) is before


def _small_workload(tmp_path: Path) -> Path:
    wl = tmp_path / "small.yaml"
    wl.write_text("name: small\nn_keys: 4096\nn_lookups: 4096\n")
    return wl


def test_interrupt_while_the_plots_are_drawn_keeps_the_json_and_no_plot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import bench

    def interrupted_draw(path: Path) -> None:  # the JSON is written by now
        raise KeyboardInterrupt

    def plot_files(records: Any, stem: Path, info: Any) -> list[tuple[Path, Any]]:
        return [(stem.with_suffix(".png"), interrupted_draw)]

    monkeypatch.setattr(bench, "plot_files", plot_files)
    out = tmp_path / "out"
    code = cli.main(["bench", "--workload", str(_small_workload(tmp_path)), "--device", "cpu",
                     "--indexes", "searchsorted", "--repeats", "1", "--output", str(out)],
                    out=io.StringIO())
    assert code == 130
    _interrupted_only(capsys.readouterr().err)
    (left,) = out.iterdir()  # the workload finished: its JSON stays, the PNG does not
    assert left.suffix == ".json" and json.loads(left.read_text())["records"]


_CHILD = """
import sys
from indexzoo.tools.cli import main
print("ready", flush=True)
sys.exit(main())  # as the console script does: arguments from sys.argv
"""


def _interrupt(args: list[str], wait_for: str, stream: str, cwd: Path,
               sig: int = signal.SIGINT, child_code: str = _CHILD) -> tuple[int, str]:
    """Start ``indexzoo ARGS``, wait until ``stream`` shows ``wait_for``, send ``sig``."""
    child = subprocess.Popen([sys.executable, "-c", child_code, *args], cwd=cwd, bufsize=0,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # unbuffered
    pipe = child.stdout if stream == "stdout" else child.stderr
    assert pipe is not None
    seen = []
    try:
        while wait_for.encode() not in (line := pipe.readline()):
            if not line:
                pytest.fail(f"the child ended before printing {wait_for!r}: {b''.join(seen)!r}")
            seen.append(line)
        seen.append(line)
        time.sleep(0.2)
        child.send_signal(sig)
        _, err = child.communicate(timeout=300)  # a hang guard: a busy machine is slow to exit
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    text = err.decode()
    return child.returncode, b"".join(seen).decode() + text if stream == "stderr" else text


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_bench_mid_run_without_result_files(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "out"
    code, err = _interrupt(["bench", "--workload", str(_small_workload(tmp_path)), "--device",
                            "cpu", "--indexes", "searchsorted", "--repeats", "100000000",
                            "--output", str(out)], "data generated", "stderr", tmp_path, sig)
    assert code == 130
    _interrupted_only(err)
    assert not out.exists() or list(out.iterdir()) == []


def test_ctrl_c_stops_run(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text("index: searchsorted\ndevice: cpu\nworkload: {n_keys: 4096, n_lookups: 1048576}\n"
                    "repeats: 1000\n")
    code, err = _interrupt(["run", str(spec)], "ready", "stdout", tmp_path)
    assert code == 130
    _interrupted_only(err)


def test_ctrl_c_stops_check(tmp_path: Path) -> None:
    pytest.importorskip("hypothesis")
    code, err = _interrupt(["check", "searchsorted", "--device", "cpu"], "indexzoo check",
                           "stdout", tmp_path)
    assert code == 130
    _interrupted_only(err)


# The JSON is written, the PNG half-drawn, when the signal comes: the child's drawing writes a
# few bytes to its file, says so, and waits.
_SLOW_DRAW_CHILD = """
import sys, time
from indexzoo.tools import bench
from indexzoo.tools.cli import main

def slow_draw(target):
    data = b"\\x89PNG half-drawn"
    if hasattr(target, "write"):
        target.write(data)
        target.flush()
    else:
        with open(target, "wb") as f:
            f.write(data)
    print("drawing the plot", file=sys.stderr, flush=True)
    time.sleep(60)

bench.plot_files = lambda records, stem, info: [(stem.with_name(stem.name + ".png"), slow_draw)]
sys.exit(main())
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("created", [True, False], ids=["new-folder", "existing-folder"])
def test_a_signal_while_the_plots_are_drawn_leaves_nothing_partial(
        tmp_path: Path, sig: int, created: bool) -> None:
    out = tmp_path / "out"
    if not created:
        out.mkdir()
        (out / "earlier.json").write_text("{}\n")
    code, err = _interrupt(["bench", "--workload", str(_small_workload(tmp_path)), "--device",
                            "cpu", "--indexes", "searchsorted", "--repeats", "1",
                            "--output", str(out)], "drawing the plot", "stderr", tmp_path, sig,
                           _SLOW_DRAW_CHILD)
    assert code == 130, err
    _interrupted_only(err)
    left = sorted(p.name for p in out.iterdir())
    assert left[:-1] == ([] if created else ["earlier.json"])  # no temporary, no PNG
    assert left[-1].startswith("small-cpu-") and left[-1].endswith(".json")
    assert json.loads((out / left[-1]).read_text())["complete"] is True
