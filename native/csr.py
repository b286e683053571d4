"""Materialising matches as CSR (``offsets``, ``rowids``) from runs in a rowID array."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of as _xp

from .targets import Kernel

__all__ = ["GATHER_RUNS", "gather_runs", "gather_runs_xp", "offsets_from_counts"]



@register_jitable
def gather_runs_item(i, src, start, offsets, out):
    base = offsets[i]
    s = start[i]
    for j in range(offsets[i + 1] - base):
        out[base + j] = src[s + j]


GATHER_RUNS = Kernel(gather_runs_item)


def offsets_from_counts(counts: Any) -> Any:
    """int64 CSR offsets (length Q+1) from per-query counts."""
    xp = _xp(counts)
    offsets = xp.zeros(counts.shape[0] + 1, dtype=np.int64)
    xp.cumsum(counts, out=offsets[1:])
    return offsets


def gather_runs(device: str, src: Any, start: Any, counts: Any,
                threads_per_block: int = 256) -> tuple[Any, Any]:
    """CSR of the runs ``src[start[i] : start[i] + counts[i]]``, one run per query."""
    xp = _xp(src)
    offsets = offsets_from_counts(counts)
    total = int(offsets[-1])
    out = xp.empty(total, dtype=src.dtype)
    if total:
        GATHER_RUNS(device, int(counts.shape[0]), src, start, offsets, out,
                    threads_per_block=threads_per_block)
    return offsets, out


def gather_runs_xp(src: Any, start: Any, counts: Any) -> tuple[Any, Any]:
    """CSR of the runs ``src[start[i] : start[i] + counts[i]]`` with array operations only
    (repeat + arange): no kernel of ours, for peers and rare fix-ups."""
    xp = _xp(src)
    offsets = offsets_from_counts(counts)
    total = int(offsets[-1])
    skip = xp.repeat(start - offsets[:-1], counts)
    return offsets, src[xp.arange(total, dtype="int64") + skip]
