"""Progress on long work: a status line per step on a terminal (standard error), redrawn in
place while the step runs and ending with its time; nothing at all when the stream is not a
terminal or INDEXZOO_PROGRESS=0. ``indexzoo run`` states its plan before any work; ``run`` and
``bench`` show each step."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from indexzoo.tools import runner
from indexzoo.tools.bench import run_bench
from indexzoo.tools.cli import main
from indexzoo.tools.progress import Progress, Step, duration
from indexzoo.tools.runner import run_spec
from indexzoo.tools.workloads import Workload


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def screen(text: str) -> list[str]:
    """The lines a terminal shows after ``text``: a carriage return goes back to the start of
    the line, and what follows overwrites it."""
    lines = []
    for raw in text.split("\n"):
        line = ""
        for part in raw.split("\r"):
            line = part + line[len(part):]
        lines.append(line.rstrip())
    return [line for line in lines if line]


def frames(text: str) -> list[str]:
    """Every status line drawn, in order."""
    return [f.strip() for f in text.replace("\n", "\r").split("\r") if f.strip()]


@pytest.fixture
def updates(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text a step showed, whether or not a redraw came while it was shown."""
    seen: list[str] = []
    real_init, real_update = Step.__init__, Step.update

    def init(self: Step, *args: Any) -> None:
        real_init(self, *args)
        seen.append(self.shown)

    def update(self: Step, detail: str) -> None:
        real_update(self, detail)
        seen.append(self.shown)

    monkeypatch.setattr(Step, "__init__", init)
    monkeypatch.setattr(Step, "update", update)
    return seen


# ---------------------------------------------------------------------- the reporter
def test_a_step_on_a_terminal_ends_with_its_text_and_time() -> None:
    term, clock = Terminal(), Clock()
    p = Progress(term, clock=clock, width=120)
    with p.step("generating 2^24 keys"):
        clock.now += 54.2
    assert screen(term.getvalue()) == ["generating 2^24 keys  54 s"]
    assert term.getvalue().endswith("\n")


def test_the_status_line_is_redrawn_in_place_while_the_step_runs() -> None:
    term, clock = Terminal(), Clock()
    p = Progress(term, clock=clock, refresh=0.01, width=120)
    with p.step("building rx") as st:
        for s in range(1, 6):
            clock.now += 1
            if s == 3:
                st.update("timed run 1/5")
            drawn_before = len(frames(term.getvalue()))
            deadline = time.monotonic() + 120  # a hang guard: the redraw thread draws each step
            while len(frames(term.getvalue())) == drawn_before and time.monotonic() < deadline:
                time.sleep(0.005)
        drawn = term.getvalue()
    assert "\n" not in drawn, "a running step stays on one line"
    shown = frames(drawn)
    assert len(shown) >= 3 and shown[0] == "building rx  0.00 s"
    assert any(f.startswith("building rx: timed run 1/5  ") for f in shown), shown
    assert screen(term.getvalue()) == ["building rx  5.0 s"]


def test_nothing_is_written_when_the_stream_is_not_a_terminal() -> None:
    piped = io.StringIO()
    p = Progress(piped, refresh=0.001)
    threads = threading.active_count()
    with p.step("generating 2^24 keys") as st:
        st.update("half way")
        assert threading.active_count() == threads, "no redrawing thread"
        time.sleep(0.01)
    p.beside(piped).write("a report line\n")
    assert piped.getvalue() == "a report line\n"


def test_INDEXZOO_PROGRESS_0_turns_it_off_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_PROGRESS", "0")
    term = Terminal()
    with Progress(term).step("building rx"):
        pass
    assert term.getvalue() == ""
    monkeypatch.setenv("INDEXZOO_PROGRESS", "1")
    assert Progress(term).enabled


def test_a_wiped_step_leaves_the_line_empty_for_the_report_line() -> None:
    term = Terminal()
    p = Progress(term, width=120)
    with p.step("bench quick, index 3/15 rx", keep=False):
        pass
    term.write("    rx               built in 2171.15 ms\n")
    assert screen(term.getvalue()) == ["    rx               built in 2171.15 ms"]


def test_a_step_left_by_an_error_keeps_its_line_marked_stopped() -> None:
    term, clock = Terminal(), Clock()
    p = Progress(term, clock=clock, width=120)
    with pytest.raises(KeyboardInterrupt), p.step("building rx", keep=False) as st:
        st.update("warm-up (may compile)")
        clock.now += 12
        raise KeyboardInterrupt
    assert screen(term.getvalue()) == ["building rx: warm-up (may compile)  12 s (stopped)"]
    assert term.getvalue().endswith("\n"), "the error message starts on a line of its own"


def test_long_lines_are_shortened_to_the_terminal_keeping_the_time() -> None:
    term, clock = Terminal(), Clock()
    p = Progress(term, clock=clock, width=40)
    with p.step("x" * 100) as st:
        st.update("y" * 50)
        clock.now += 3
    for line in frames(term.getvalue()):
        assert len(line) <= 39, line
    assert screen(term.getvalue())[-1].endswith("...  3.0 s")


def test_report_lines_written_during_a_step_appear_above_its_status_line() -> None:
    term, clock = Terminal(), Clock()
    p = Progress(term, clock=clock, width=120)
    with p.step("timing 15 indexes in 5 rounds"):
        p.beside(term).write("    round 1/5 timed\n")
        clock.now += 2
    assert screen(term.getvalue()) == ["    round 1/5 timed", "timing 15 indexes in 5 rounds  2.0 s"]
    other = io.StringIO()
    assert p.beside(other) is other, "another stream is left as it is"


def test_timed_calls_show_the_warm_up_and_each_timed_run() -> None:
    term = Terminal()
    p = Progress(term, width=120)
    seen = []
    with p.step("building rx") as st:
        call = st.calls(lambda: seen.append(st.shown), 2, "building")
        for _ in range(3):
            call()
    assert seen == ["building rx: building, warm-up (may compile)",
                    "building rx: building, timed run 1/2", "building rx: building, timed run 2/2"]


@pytest.mark.parametrize(("seconds", "text"), [(0.123, "0.12 s"), (3.14, "3.1 s"), (54.2, "54 s"),
                                               (185, "3 min 05 s"), (7800, "2 h 10 min")])
def test_durations_are_short(seconds: float, text: str) -> None:
    assert duration(seconds) == text


# ---------------------------------------------------------------------- indexzoo run
def _spec(tmp_path: Path) -> Path:
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\nworkload:\n  n_keys: 4096\n"
                    "  n_lookups: 1000\n  hit_rate: 0.75\nrepeats: 2\n")
    return spec


def test_run_states_its_plan_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_work(*a: object, **k: object) -> None:
        raise RuntimeError("the data was generated")

    monkeypatch.setattr(runner, "generate_keys", no_work)
    out = io.StringIO()
    with pytest.raises(RuntimeError, match="the data was generated"):
        main(["run", str(_spec(tmp_path))], out=out)
    plan = out.getvalue().splitlines()
    assert len(plan) == 2, plan
    assert plan[0].startswith("plan       sorted-array on cpu, params {")
    assert plan[1] == ("           build on 4,096 (2^12) uniform u64 keys, generated; then 1,000 "
                       "point lookups (hit rate 0.75, out=rowid, 1 batch(es)); each timed 2 "
                       "time(s) after a warm-up")


def test_run_on_a_terminal_shows_each_step_and_its_time(tmp_path: Path, updates: list[str]) -> None:
    term, out = Terminal(), io.StringIO()
    assert run_spec(_spec(tmp_path), out, steps=Progress(term, refresh=0.01, width=200)) == 0
    shown = screen(term.getvalue())
    assert [line.rsplit("  ", 1)[0] for line in shown] == [
        "generating 4,096 (2^12) keys and 1,000 lookups on cpu", "building sorted-array",
        "1,000 lookups", "counting the hits"]
    assert all(line.rsplit("  ", 1)[1].endswith(" s") for line in shown)
    assert "1,000 lookups: timed run 2/2" in updates
    assert out.getvalue().startswith("plan       sorted-array")
    assert "hits       750 of 1,000" in out.getvalue()


def test_run_piped_writes_nothing_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(_spec(tmp_path))], out=io.StringIO()) == 0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------- indexzoo bench
def test_bench_on_a_terminal_shows_the_data_each_index_and_the_timing_rounds(
        updates: list[str]) -> None:
    term, log = Terminal(), io.StringIO()
    tiny = Workload(name="tiny", n_keys=4096, n_lookups=4096)
    run_bench([tiny], ["sorted-array"], "cpu", repeats=2, progress=log,
              steps=Progress(term, width=200))
    for text in ("bench tiny, generating the data",
                 "bench tiny, index 1/2 searchsorted",
                 "bench tiny, index 2/2 sorted-array: building, warm-up (may compile)",
                 "bench tiny, index 2/2 sorted-array: building, timed run 2/2",
                 "bench tiny, index 2/2 sorted-array: checking the answers",
                 "bench tiny, timing 2 index(es), 2 round(s)"):
        assert text in updates, (text, updates)
    assert frames(term.getvalue())[0].startswith("bench tiny, generating the data  ")
    assert screen(term.getvalue()) == [], "each step gives way to bench's own report line"
    assert "sorted-array     built in" in log.getvalue()


def test_bench_of_several_workloads_says_which_one_it_is_at(updates: list[str]) -> None:
    sizes = [Workload(name=f"n{n}", n_keys=n, n_lookups=1024) for n in (1024, 2048)]
    run_bench(sizes, ["sorted-array"], "cpu", repeats=1, progress=io.StringIO(),
              steps=Progress(Terminal(), width=200))
    assert "bench n1024, workload 1/2, generating the data" in updates
    assert "bench n2048, workload 2/2, index 2/2 sorted-array: building, timed run 1/1" in updates


def test_bench_piped_writes_no_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "small.yaml"
    wl.write_text("name: small\nn_keys: 2048\nn_lookups: 2048\n")
    code = main(["bench", "--workload", str(wl), "--device", "cpu", "--repeats", "1",
                 "--indexes", "sorted-array", "--no-plot", "--output", str(tmp_path / "out")],
                out=io.StringIO())
    assert code == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "sorted-array     built in" in err
