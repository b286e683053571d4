"""Progress lines for the steps of ``indexzoo run`` and ``indexzoo bench`` that take a while.

A :class:`Progress` writes one status line per step to a stream (standard error by default),
``generating 2^24 keys and lookups  12 s``, redrawn in place (a carriage return, no new line)
by a daemon thread at most :data:`REFRESH_S` apart while the step runs. When the step ends the
line either stays, ending with the step's time (``keep=True``), or is wiped so that the
command's own report line takes its place (``keep=False``).

It shows anything only when the stream is a terminal and ``INDEXZOO_PROGRESS`` is not ``0``:
piped or redirected output, CI logs and captured test output are unchanged (``1`` does not
change that: a line redrawn in place needs a terminal). A command's builds make no lines of
their own meanwhile (:func:`indexzoo.buildtime.set_progress`).
:data:`NO_PROGRESS` is the silent stand-in that functions take by default.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO, TypeVar

from indexzoo import envvars
from indexzoo.display import duration

__all__ = ["NO_PROGRESS", "REFRESH_S", "Progress", "Step", "duration"]

T = TypeVar("T")

#: Seconds between two redraws of a status line.
REFRESH_S = 0.25


class Step:
    """The step being shown: its text, and a detail that :meth:`update` may change while it
    runs (shown as ``text: detail``)."""

    def __init__(self, text: str, clock: Callable[[], float]):
        self.text = text
        self.detail = ""
        self.clock = clock
        self.start = clock()

    def update(self, detail: str) -> None:
        """Show ``text: detail`` from the next redraw on."""
        self.detail = detail

    @property
    def shown(self) -> str:
        return f"{self.text}: {self.detail}" if self.detail else self.text

    @property
    def elapsed(self) -> float:
        return self.clock() - self.start

    def calls(self, fn: Callable[[], T], repeats: int, what: str = "",
              warmup: int = 1) -> Callable[[], T]:
        """``fn``, showing before each call which of ``warmup`` untimed and ``repeats`` timed
        calls it is (``building rx: building, timed run 2/5``), for
        :func:`~indexzoo.tools.timing.time_call`."""
        done = 0
        lead = f"{what}, " if what else ""

        def call() -> T:
            nonlocal done
            done += 1
            if done <= warmup:
                self.update(f"{lead}warm-up (may compile)")
            else:
                self.update(f"{lead}timed run {min(done - warmup, repeats)}/{repeats}")
            return fn()

        return call


class Progress:
    """Status lines on ``stream`` (default ``sys.stderr``), one per step.

    ``enabled`` overrides the decision (by default: the stream is a terminal and
    ``INDEXZOO_PROGRESS`` is not ``0``); ``clock``, ``refresh`` and ``width`` (the terminal's
    columns, for shortening) are there for tests."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, refresh: float = REFRESH_S,
                 width: int | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self._wanted(self.stream) if enabled is None else enabled
        self.clock = clock
        self.refresh = refresh
        self.width = width
        self._lock = threading.Lock()
        self._shown = 0  # characters of the status line now on the terminal

    @staticmethod
    def _wanted(stream: TextIO) -> bool:
        wanted = envvars.PROGRESS.value()  # read always: a malformed value is reported
        try:  # 1 does not draw status lines where there is no terminal to redraw them on
            return wanted is not False and bool(stream.isatty())
        except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
            return False

    @contextlib.contextmanager
    def step(self, text: str, keep: bool = True) -> Iterator[Step]:
        """Show ``text`` and the seconds elapsed until the block ends; then leave
        ``text  <time>`` on its own line (``keep``) or wipe the line. A block left by an
        exception always leaves its line, marked ``stopped``, so that an error message starts
        on a line of its own."""
        st = Step(text, self.clock)
        if not self.enabled:
            yield st
            return
        stop = threading.Event()
        thread = threading.Thread(target=self._redraw, args=(st, stop), daemon=True,
                                  name="indexzoo-progress")
        self._draw(st)
        thread.start()
        ok = False
        try:
            yield st
            ok = True
        finally:
            stop.set()
            thread.join()
            if ok and not keep:
                self._write("")
            elif ok:
                self._write(self._fit(st.text, duration(st.elapsed)), end="\n")
            else:
                self._write(self._fit(st.shown, f"{duration(st.elapsed)} (stopped)"), end="\n")

    def beside(self, stream: TextIO) -> TextIO:
        """``stream``, or, where it is the terminal the status lines go to, a stream whose
        writes first wipe the status line (the next redraw puts it back below them): for the
        report lines a command writes while a step runs."""
        if not self.enabled or stream is not self.stream:
            return stream
        return _Beside(self)  # type: ignore[return-value]

    def _above(self, text: str) -> None:
        with self._lock:
            if self._shown:
                text = "\r" + " " * self._shown + "\r" + text
                self._shown = 0
            self.stream.write(text)

    def _redraw(self, st: Step, stop: threading.Event) -> None:
        while not stop.wait(self.refresh):
            self._draw(st)

    def _draw(self, st: Step) -> None:
        self._write(self._fit(st.shown, duration(st.elapsed)))

    def _fit(self, text: str, tail: str) -> str:
        """``text  tail``, ``text`` shortened where the line would not fit the terminal, so
        that it never wraps (a carriage return must reach its start) and ``tail`` shows."""
        room = max(self._columns() - 1 - len(tail) - 2, 10)
        if len(text) > room:
            text = text[:room - 3] + "..."
        return f"{text}  {tail}"

    def _columns(self) -> int:
        """The terminal's width: ``width`` if given, else that of the stream's terminal (80
        where it does not say)."""
        if self.width is not None:
            return self.width
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
            return shutil.get_terminal_size((80, 24)).columns

    def _write(self, line: str, end: str = "") -> None:
        """Replace the status line with ``line`` (see :meth:`_fit`), then ``end``."""
        with self._lock:
            pad = " " * max(self._shown - len(line), 0)
            try:
                self.stream.write(f"\r{line}{pad}" + (f"\r{line}" if pad and not end else "") + end)
                self.stream.flush()
            except (OSError, ValueError):  # a closed or broken terminal: progress is optional
                self.enabled = False
            self._shown = 0 if end else len(line)


class _Beside:
    """The writes of :meth:`Progress.beside`: ``write`` and ``flush``, enough for a log."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def write(self, text: str) -> int:
        self.progress._above(text)
        return len(text)

    def flush(self) -> None:
        self.progress.stream.flush()


#: Shows nothing: the default of functions that can report progress.
NO_PROGRESS = Progress(enabled=False)
