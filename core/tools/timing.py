"""Timing device work: CUDA events on the GPU, ``perf_counter`` on the CPU.

Every measurement runs the work once untimed (warm-up: compilation, module load, caches),
then ``repeats`` times, each timed alone; report the median. On the GPU the events bracket
the region on the current stream and the host waits for the end event, so asynchronous
launches are counted to their completion, and host overhead between launches shows up as
GPU idle time inside the region, as a user would see it.

A :class:`Timing` keeps every repetition's seconds, so a figure can be stated with its spread:
:attr:`Timing.half_spread` is half the range of the repetitions relative to their median,
``(max - min) / median / 2``, printed as ``±x%``; two figures whose ranges
(:meth:`Timing.overlaps`) overlap cannot be ordered with confidence.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .interrupts import check as _check_interrupt

__all__ = ["Timing", "synchronize", "time_call", "time_once"]


@dataclass(frozen=True)
class Timing:
    """Seconds of each timed repetition (warm-up excluded)."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """(max - min) / median: how far apart the repetitions are."""
        m = self.median
        return (max(self.seconds) - min(self.seconds)) / m if m > 0 else 0.0

    @property
    def half_spread(self) -> float:
        """(max - min) / median / 2: the ``±`` of a figure, as a fraction of its median."""
        return self.spread / 2

    def spread_text(self) -> str:
        """``±4%``: half the range of the repetitions relative to their median; empty for one."""
        if len(self.seconds) < 2:
            return ""
        h = self.half_spread * 100
        return f"±{h:.0f}%" if h >= 1 or h == 0 else f"±{h:.1f}%"

    @property
    def fastest(self) -> float:
        return min(self.seconds)

    @property
    def slowest(self) -> float:
        return max(self.seconds)

    def overlaps(self, other: Timing) -> bool:
        """Whether the ranges [fastest, slowest] of the two timings share a point: then the
        order of their medians may change from run to run. Timings of one repetition each
        state no range, and overlap only when they are equal."""
        return self.fastest <= other.slowest and other.fastest <= self.slowest


def synchronize(device: str) -> None:
    """Wait until the device has finished everything queued so far."""
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        cupy.cuda.runtime.deviceSynchronize()


def time_once(fn: Callable[[], Any], device: str) -> float:
    """Seconds of one call of ``fn()`` (CUDA events on the GPU, ``perf_counter`` on the CPU);
    the caller warms up and synchronises before."""
    _check_interrupt()
    if device == "cuda":
        import cupy

        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(cupy.cuda.get_elapsed_time(start, end)) / 1e3
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_call(fn: Callable[[], Any], device: str, repeats: int = 5, warmup: int = 1) -> Timing:
    """Time ``fn()`` ``repeats`` times after ``warmup`` untimed calls.

    Between calls, an interrupt that was swallowed on the way (see :mod:`indexzoo.tools.interrupts`)
    is raised again."""
    for _ in range(warmup):
        _check_interrupt()
        fn()
    synchronize(device)
    out = [time_once(fn, device) for _ in range(repeats)]
    _check_interrupt()
    return Timing(tuple(out))
