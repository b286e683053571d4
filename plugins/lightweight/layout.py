"""The shape of a lightweight build, from its options and its key count alone: the layout's
scalars (stride, padding, EO levels, AO+BS's first step), the dtypes and lengths of its key and
rowID arrays, and its pivot buffer's plan. The build lays its arrays out by it
(``LightweightIndex._build``) and a load checks a file's layout against it
(:mod:`.saved`), so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.devices import xp_of

from .eytzinger import eo_shape
from .params import LightweightParams
from .pivots import PB_GATHER, PivotPlan, chunk_for_levels, full_chunk, pb_plan

__all__ = ["CACHE_LINE_BYTES", "LayoutShape", "layout_shape", "pivot_buffer"]

#: A coarse pivot buffer's default chunk: one cache line of keys (SoA) or pairs (AoS) [§4.5].
CACHE_LINE_BYTES = 128


@dataclass(frozen=True)
class LayoutShape:
    """What a build of ``n`` keys with some options lays out (see the module docstring)."""

    n: int
    k: int          # arity K (2 for binary search)
    pad: int        # 1 for binary EO (the leading empty slot), else 0
    stride: int     # 1 (SoA) or 2 (AoS)
    h: int          # EO's complete levels
    b: int          # EO's keys in the partial leaf level
    step0: int      # AO+BS's first step
    eo: bool
    keys_dtype: np.dtype    # of the key array (the pair table in AoS)
    rowids_dtype: np.dtype  # of the rowID array (a view of the pair table in AoS)
    keys_length: int
    rowids_length: int
    chunk: int      # keys per chunk under the pivot buffer (n, at least 1, without one)
    pivots: PivotPlan | None  # the pivot buffer's plan, None without one


def layout_shape(p: LightweightParams, n: int, key_dtype: Any, rowid_dtype: Any) -> LayoutShape:
    """The shape of a build of ``n`` keys of ``key_dtype`` with options ``p``."""
    kdt, rdt = np.dtype(key_dtype), np.dtype(rowid_dtype)
    k = p.arity
    eo = p.layout == "eo"
    pad = 1 if (eo and p.search == "binary") else 0
    wide = kdt == np.uint64 or rdt == np.uint64
    wdt = np.dtype(np.uint64 if wide else np.uint32)
    slots = n + pad
    stride = 1 if p.memory_layout == "soa" else 2
    h, b = eo_shape(n, k) if eo else (0, 0)
    step0 = 1 << (n.bit_length() - 1) if n else 0
    if stride == 1:
        keys = (kdt, slots)
        rowids = (rdt, slots)
    else:
        keys = (wdt, 2 * slots)
        rowids = (wdt, max(2 * slots - 1, 0))
    chunk, plan = _pivots(p, n, k, keys[0].itemsize * stride)
    return LayoutShape(n=n, k=k, pad=pad, stride=stride, h=h, b=b, step0=step0, eo=eo,
                       keys_dtype=keys[0], rowids_dtype=rowids[0], keys_length=keys[1],
                       rowids_length=rowids[1], chunk=chunk, pivots=plan)


def _pivots(p: LightweightParams, n: int, k: int, entry_bytes: int) -> tuple[int, PivotPlan | None]:
    """(chunk, plan) of the pivot buffer; (max(n, 1), None) without one."""
    if p.pivot_buffer == "none":
        return max(n, 1), None
    if p.pivot_buffer == "full":
        chunk = full_chunk(k)
    elif p.pb_levels is None:  # chunks of one cache line: keys (SoA) or pairs (AoS)
        chunk = full_chunk(k)
        while chunk * k * entry_bytes <= CACHE_LINE_BYTES:
            chunk *= k
    else:
        chunk = chunk_for_levels(n, k, p.pb_levels)
    plan = pb_plan(n, k, chunk)
    return plan.chunk, plan


def pivot_buffer(device: str, shape: LayoutShape, sorted_keys: Any,
                 threads_per_block: int) -> tuple[Any, Any]:
    """(pivot buffer, its level offsets) of ``sorted_keys`` for ``shape``: a one-slot
    stand-in and ``[0]`` without pivots (the kernels take them anyway)."""
    xp = xp_of(sorted_keys)
    plan = shape.pivots
    if plan is None or not plan.slots:
        return xp.zeros(1, dtype=sorted_keys.dtype), xp.zeros(1, dtype=np.int64)
    pb = xp.empty(plan.slots, dtype=sorted_keys.dtype)
    pbo = xp.asarray(plan.offsets())
    sentinel = sorted_keys.dtype.type(np.iinfo(sorted_keys.dtype).max)
    PB_GATHER(device, plan.slots, sorted_keys, pb, pbo, plan.levels, shape.n, shape.k,
              plan.chunk, sentinel, threads_per_block=threads_per_block)
    return pb, pbo
