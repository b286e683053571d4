"""How long a build takes, told before it starts: a prediction from the index class's measured
rate, a line on standard error before a long build and one with its time after it, and the
``indexzoo`` logger's records of every build.

A build of more than :data:`NOTE_FROM_S` predicted seconds writes, on standard error::

    indexzoo: building rx over 10,000,000 keys on cpu: about 38 s
    indexzoo: built rx over 10,000,000 keys on cpu in 41 s

The prediction is ``n / rate`` seconds, ``rate`` being the class's ``build_rate`` for the
device (keys a second, measured at :data:`RATE_MEASURED_AT` keys: 2^22 on the CPU, 2^26 on a
GPU), slowed by :data:`GROWTH_PER_DOUBLING` per doubling of the keys beyond that (a sort's
depth and the data outgrowing the caches; about what ``rx`` lost from 2^22 to 2^24 keys on
the CPU, ``benchmarks/results/cpu/2026-11-29-build-rates/``). The CPU figures come from a
2-core machine: on more cores the parallel parts of a build go faster than predicted. The
prediction leaves out compiling the kernels, which a process's first build may add. A class
without a rate for the device predicts nothing and writes no lines.

Whether the lines are written follows the conventions of tqdm and pip: by default only where
standard error is a terminal, so that piped output, logs and captured test output stay as
they were, and not where the application's logging already shows the ``indexzoo`` logger's
INFO records (which say the same); ``INDEXZOO_PROGRESS=0`` turns them off, ``1`` writes them
wherever standard error goes; :func:`set_progress` decides for the process, over both. The
command line turns them off while a command runs: its own status lines show its builds.

The logger: each build's start at DEBUG (at INFO, with the prediction, before a build of more
than :data:`NOTE_FROM_S`) and its time at DEBUG, at INFO from :data:`LONG_BUILD_S`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TextIO

from . import envvars
from .display import duration, printable

__all__ = ["GROWTH_PER_DOUBLING", "LONG_BUILD_S", "NOTE_FROM_S", "RATE_MEASURED_AT", "log",
           "predicted_seconds", "progress_setting", "set_progress", "told"]

#: Diagnostics of indexzoo (builds and their times). Silent unless the application configures
#: logging.
log = logging.getLogger("indexzoo")
#: Builds at least this long are told at INFO (shorter ones at DEBUG).
LONG_BUILD_S = 2.0
#: Builds predicted to take longer than this say so on standard error, before and after.
NOTE_FROM_S = 5.0
#: The key count the classes' ``build_rate`` figures are measured at, by device.
RATE_MEASURED_AT: Mapping[str, int] = {"cpu": 1 << 22, "cuda": 1 << 26}
#: How much slower a key gets per doubling of the keys beyond :data:`RATE_MEASURED_AT`.
GROWTH_PER_DOUBLING = 0.125

_setting: bool | None = None


def set_progress(enabled: bool | None) -> bool | None:
    """Whether long builds of this process write their lines on standard error: True always,
    False never, None (the default) as ``INDEXZOO_PROGRESS`` says, else only on a terminal.
    Returns the setting it replaces (to put it back)."""
    global _setting
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"set_progress takes True, False or None, got {enabled!r}")
    previous, _setting = _setting, enabled
    return previous


def progress_setting() -> bool | None:
    """What :func:`set_progress` set last (None: decided by the environment)."""
    return _setting


def predicted_seconds(rates: Mapping[str, float], device: str, n: int) -> float | None:
    """Seconds a build of ``n`` keys should take on ``device`` at ``rates`` (keys a second by
    device, see the module docstring); None where ``rates`` has no figure for the device."""
    rate = rates.get(device)
    if not rate or n <= 0:
        return None
    at = RATE_MEASURED_AT.get(device, 1 << 22)
    growth = 1.0 + GROWTH_PER_DOUBLING * max(0.0, math.log2(n / at))
    return n / rate * growth


def _shown(stream: TextIO) -> bool:
    """Whether the lines go to ``stream``: the setting, else the environment variable, else a
    terminal that the application's logging does not already tell the builds on."""
    if _setting is not None:
        return _setting
    wanted = envvars.PROGRESS.value()
    if wanted is not None:
        return wanted
    if log.isEnabledFor(logging.INFO) and log.hasHandlers():
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _write(stream: TextIO, line: str) -> None:
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):  # a closed or broken stream: the lines are optional
        pass


@contextlib.contextmanager
def told(name: str, n: int, device: str, rates: Mapping[str, float],
         what: str = "keys") -> Iterator[None]:
    """Around the build of index ``name`` over ``n`` keys (``what``: ``rows`` for a table) on
    ``device``: the logger's records, and the lines on standard error where the build is
    predicted (from ``rates``) to take longer than :data:`NOTE_FROM_S`."""
    count, name = f"{n:,}", printable(name)
    predicted = predicted_seconds(rates, device, n)
    long = predicted is not None and predicted > NOTE_FROM_S
    stream = sys.stderr
    noted = long and _shown(stream)
    if long:
        log.info("%s: building on %s %s (%s), about %s", name, count, what, device,
                 duration(predicted or 0.0))
    else:
        log.debug("%s: building on %s %s (%s)", name, count, what, device)
    if noted:
        _write(stream, f"indexzoo: building {name} over {count} {what} on {device}: about "
                       f"{duration(predicted or 0.0)}")
    t0 = time.perf_counter()
    yield
    took = time.perf_counter() - t0
    log.log(logging.INFO if took >= LONG_BUILD_S else logging.DEBUG,
            "%s: built on %s %s (%s) in %.2f s", name, count, what, device, took)
    if noted:
        _write(stream, f"indexzoo: built {name} over {count} {what} on {device} in "
                       f"{duration(took)}")
