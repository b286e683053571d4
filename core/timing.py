"""Timing device work: CUDA events on the GPU, ``perf_counter`` on the CPU.

Every measurement runs the work once untimed (warm-up: compilation, module load, caches),
then ``repeats`` times, each timed alone; report the median. On the GPU the events bracket
the region on the current stream and the host waits for the end event, so asynchronous
launches are counted to their completion, and host overhead between launches shows up as
GPU idle time inside the region, as a user would see it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .interrupts import check as _check_interrupt

__all__ = ["Timing", "synchronize", "time_call"]


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


def synchronize(device: str) -> None:
    """Wait until the device has finished everything queued so far."""
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        cupy.cuda.runtime.deviceSynchronize()


def time_call(fn: Callable[[], Any], device: str, repeats: int = 5, warmup: int = 1) -> Timing:
    """Time ``fn()`` ``repeats`` times after ``warmup`` untimed calls.

    Between calls, an interrupt that was swallowed on the way (see :mod:`indexzoo.interrupts`)
    is raised again."""
    for _ in range(warmup):
        _check_interrupt()
        fn()
    synchronize(device)
    out: list[float] = []
    if device == "cuda":
        import cupy

        for _ in range(repeats):
            _check_interrupt()
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        _check_interrupt()
        return Timing(tuple(out))
    for _ in range(repeats):
        _check_interrupt()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    _check_interrupt()
    return Timing(tuple(out))
