"""The calls ``indexzoo bench`` times, and how many of them fill one timed repetition: shared
by the benchmark (:mod:`indexzoo.tools.bench`) and its duration estimate
(:mod:`indexzoo.tools.estimate`), which times the same calls on a sample."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from indexzoo.results import LookupResult, Out

from .workloads import Dataset

__all__ = ["MAX_CALLS", "MIN_REPETITION_S", "REWARM_BELOW_S", "build_call", "calls_per_repetition",
           "lookup_call"]

#: Calls shorter than this are preceded, in interleaved timing, by one untimed call of the same
#: index, so that its data is back in the caches as when repetitions run back to back.
REWARM_BELOW_S = 0.2
#: A repetition lasts at least this long: a shorter call is repeated within one repetition
#: (as many times as fill it, at most :data:`MAX_CALLS`) and the mean per call is kept, so
#: that timer resolution and scheduling noise do not dominate short calls.
MIN_REPETITION_S = 0.01
MAX_CALLS = 1000


def calls_per_repetition(seconds: float) -> int:
    """How many calls of ``seconds`` each one timed repetition makes."""
    if seconds <= 0:
        return MAX_CALLS
    return max(1, min(MAX_CALLS, math.ceil(MIN_REPETITION_S / seconds)))


def lookup_call(index: Any, data: Dataset, out: Out) -> Callable[[], list[LookupResult]]:
    """One timed lookup call: every batch of the workload, points or ranges, with ``out``."""
    batches = data.batches()
    if data.queries is not None:
        return lambda: [index.point(b[0], out=out) for b in batches]
    return lambda: [index.range(b[0], b[1], out=out) for b in batches]


def build_call(index: Any, keys: Any) -> Callable[[], Any]:
    """One timed build of ``index`` on ``keys``."""
    return lambda: index.build(keys)
