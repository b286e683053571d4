"""Ctrl-C (and SIGTERM) that always stops the command line.

Python turns SIGINT into KeyboardInterrupt at the next bytecode the main thread runs. When
that bytecode belongs to a callback that C code invoked, the exception cannot reach the
caller and is dropped with an "Exception ignored" message: numba compiles through llvmlite,
whose MCJIT object cache calls back into Python (``ExecutionEngine._raw_object_cache_notify``)
at the end of every compilation, so a Ctrl-C during compilation was lost that way and the
benchmark ran to its end. ``__del__`` methods and weakref callbacks drop it the same way.

:func:`handling_interrupts` (used by ``indexzoo``'s ``main``) installs a handler for SIGINT and
SIGTERM that records the interrupt before raising KeyboardInterrupt. SIGTERM (``kill``,
``timeout``, a batch scheduler's time limit) is handled exactly as Ctrl-C: the command stops
with exit code 130 and removes its unfinished result files, instead of dying where it stands.
If the exception is dropped, the record stays: :func:`check` (called between workloads,
indexes and timed repetitions) raises it again, and a watchdog thread interrupts the main
thread again every quarter second until the command has acknowledged the interrupt
(:func:`acknowledge`). On leaving, the previous handlers are restored.

:func:`deferred` holds interrupts off for a short step that must not stop halfway (giving a
group of result files their names, or removing them): an interrupt that arrives meanwhile is
recorded and raised when the step is over.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["SIGNALS", "acknowledge", "check", "deferred", "handling_interrupts", "pending"]

_RETRY_S = 0.25

#: The signals handled as an interrupt (those this platform has).
SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))


class _State:
    def __init__(self) -> None:
        self.pending = False  # an interrupt arrived and has not been acknowledged
        self.done = False  # acknowledged: the command is cleaning up; ignore further interrupts
        self.active = False
        self.deferring = 0  # inside deferred(): record interrupts, raise them afterwards
        self.watchdog: threading.Thread | None = None
        self.wake = threading.Event()


_state = _State()


def pending() -> bool:
    """Whether an interrupt arrived that the command has not acted on yet."""
    return _state.pending and not _state.done


def check() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived (a check point between steps)."""
    if _state.pending and not _state.done:
        raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold interrupts off for the duration of a short step that must finish once begun: a
    SIGINT or SIGTERM that arrives meanwhile is recorded, not raised; :func:`check` raises it
    (inside the step, where the step chooses to stop) or the watchdog does, soon after the
    step. Outside :func:`handling_interrupts`, or in another thread, it changes nothing."""
    if not _state.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1


def acknowledge() -> None:
    """The command has caught the KeyboardInterrupt: stop re-raising it."""
    _state.done = True
    _state.wake.set()


def _watchdog() -> None:
    while not _state.wake.wait(_RETRY_S):
        if _state.done or not _state.active:
            return
        _thread.interrupt_main(signal.SIGINT)  # runs _handler in the main thread again


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.done:
        return
    _state.pending = True
    if _state.watchdog is None:
        _state.watchdog = threading.Thread(target=_watchdog, name="indexzoo-interrupt",
                                           daemon=True)
        _state.watchdog.start()
    if _state.deferring:
        return  # check() or the watchdog raises it once the step is over
    raise KeyboardInterrupt


def _quiet_unraisable(previous: Any) -> Any:
    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _state.pending:
            return  # recorded; check() or the watchdog raises it where it can propagate
        previous(unraisable)

    return hook


@contextmanager
def handling_interrupts() -> Iterator[None]:
    """Install the handler of :data:`SIGNALS` for the duration (main thread only; a no-op
    elsewhere); the previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread() or _state.active:
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in SIGNALS:
            previous[signum] = signal.signal(signum, _handler)
    except (ValueError, OSError):  # signals unavailable here
        _restore(previous)
        yield
        return
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(previous_hook)
    _state.pending = _state.done = False
    _state.deferring = 0
    _state.wake.clear()
    _state.active = True
    try:
        yield
    finally:
        _state.done = True  # from here on _handler ignores interrupts
        _state.active = False
        _state.wake.set()
        watchdog, _state.watchdog = _state.watchdog, None
        if watchdog is not None:
            watchdog.join(timeout=1.0)
            _settle()  # a last interrupt_main from the watchdog lands in _handler, not later
        _restore(previous)
        sys.unraisablehook = previous_hook
        _state.pending = _state.done = False
        _state.deferring = 0


def _restore(previous: dict[signal.Signals, Any]) -> None:
    """Put back the handlers ``signal.signal`` returned (None: one installed from C, replaced
    by Python's default)."""
    for signum, handler in previous.items():
        if handler is None:
            handler = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        signal.signal(signum, handler)


def _settle() -> None:
    """Let the main thread run pending signal handlers (they run at Python calls)."""
    for _ in range(3):
        _noop()


def _noop() -> None:
    return None
