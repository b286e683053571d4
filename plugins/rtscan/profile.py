"""Per-stage timing of an ``rtscan`` index, for the paper's Fig. 17 and Fig. 18 breakdowns.

An index times nothing unless a timer is attached (``index.stage_timer = StageTimes(...)``);
detached, a stage costs one attribute test. Lookup stages: ``encode`` (predicates to ranks and
codes), ``sieve`` (vector choice and the approximate bitmaps), ``refine`` (boxes and the RT or
direct refine), ``merge`` (the AND of the groups). Build stages: ``build_tables`` (sorts,
codes, mapping tables), ``build_sieve`` (vectors), ``build_bvh`` (cubes and BVHs). Counters:
``queries``, ``boxes``, ``rays`` (RT refine), ``candidates`` (direct refine).

On the GPU a stage is bracketed by CUDA events on the current stream (no synchronisation
inside a lookup); the events are read when :meth:`StageTimes.seconds` is called.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["StageTimer", "StageTimes"]


class StageTimer(Protocol):
    """What an index calls around its stages."""

    def stage(self, name: str) -> contextlib.AbstractContextManager[None]: ...

    def count(self, name: str, value: int) -> None: ...


class StageTimes:
    """Accumulated seconds per stage and counters (``device``: the index's)."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._host: list[tuple[str, float]] = []
        self._events: list[tuple[str, Any, Any]] = []
        self.counts: dict[str, int] = defaultdict(int)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self.device == "cuda":
            import cupy

            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            try:
                yield
            finally:
                end.record()
                self._events.append((name, start, end))
            return
        t = time.perf_counter()
        try:
            yield
        finally:
            self._host.append((name, time.perf_counter() - t))

    def count(self, name: str, value: int) -> None:
        self.counts[name] += int(value)

    def seconds(self) -> dict[str, float]:
        """Total seconds per stage since the last :meth:`reset`."""
        out: dict[str, float] = defaultdict(float)
        for name, sec in self._host:
            out[name] += sec
        if self._events:
            import cupy

            self._events[-1][2].synchronize()
            for name, start, end in self._events:
                out[name] += cupy.cuda.get_elapsed_time(start, end) / 1e3
        return dict(out)

    def shares(self) -> dict[str, float]:
        """Each lookup stage's share of their total (build stages left out)."""
        sec = {k: v for k, v in self.seconds().items() if not k.startswith("build")}
        total = sum(sec.values())
        return {k: v / total for k, v in sec.items()} if total > 0 else {}

    def reset(self) -> None:
        self._host.clear()
        self._events.clear()
        self.counts.clear()
