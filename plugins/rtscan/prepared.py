"""Small GPU range calls with the launches bound (the index's ``_prepared_range``).

A one-query call of the direct refine on the GPU makes four launches (the bounds' ranks, the
plan, the sieve, the strided refine; three in the compact layout, whose ranks and plan are one
launch, :data:`.launches.QUERY_PLAN`) and allocates the plan's arrays. Through the ordinary
kernel calls the host spends about 0.1 ms on them: each launch keys and packs every argument
(23 of them for the plan), and each view of a shared plan buffer is a CuPy call. Here the
fixed arguments (the tables, the sieve, the codes) are bound into each launch once per build
(:meth:`indexzoo.native.targets.Kernel.bind`), so a call writes only the open arrays'
pointers and sizes; the plan's arrays are kept between calls (per thread and stream, so no
two calls in flight share them), and the answer is the one array a call allocates. A lone
call's time is the host's until its first launch plus the device's: on an H200 each CuPy
allocation or view cost about 3 us and each launch about 5 us, against 11 us for the first
kernel. The kernels and their order are those of ``RtscanIndex._answer``; only the host work
differs.

Taken: bitmaps of batches of at most :data:`~.index.STRIDED_QUERIES` queries, one column
group, the direct refine, no stage timer. Anything else goes to the index's hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.targets import Slot

from .bits import words_for
from .launches import QUERY_PLAN, query_plan_group_size, rank_launch
from .plan import DIRECT_COLUMNS, PLAN, RK_COLUMNS, SEL_COLUMNS, SLOTS
from .refine import strided_kernel
from .sieve import SIEVE, sieve_items

__all__ = ["prepared_direct"]


def prepared_direct(index: Any, st: Any, device: str, most: int, per_slot: int,
                    axis: int) -> Callable[[Any, Any], Any]:
    """``(lo, hi) -> bitmaps`` for build ``st`` of ``index`` on ``device`` (``"cuda"``; with
    NumPy arrays, numba's CUDA simulator: tests only): batches of up to ``most`` queries with
    the bound launches, larger ones (and any call while a stage timer is attached) through
    ``index._range_bitmap``. ``per_slot``: the strided refine's threads per slot; ``axis``:
    the ray axis code the plan kernel takes (unused by the direct refine)."""
    p, tables, pa, sv = index.params, st.tables, st.plan_args, st.sieve
    n, d = int(st.n), int(st.lc.shape[1])
    code, i64, u32 = np.dtype(st.lc.dtype), np.dtype(np.int64), np.dtype(np.uint32)
    tpb = p.threads_per_block
    vectors = pa.no_vectors if sv is None else sv.vectors
    bounds, codes = Slot(code, 2), Slot(code, 2)
    kernel, args, group = rank_launch(tables, st.lc, index._sieve_args(st))
    ranked = np.bool_(tables.ranks is not None)
    plan_args = (pa.shifts, pa.group_cols, pa.geo, np.int64(n), np.bool_(p.encoding), ranked,
                 np.bool_(False), np.int64(axis), codes, codes, Slot(i64, 3), Slot(i64, 3),
                 Slot(i64, 3))
    block = query_plan_group_size(d) if hasattr(tables, "sample") else 0
    if block:  # the compact layout: ranks and plan in one launch, a block a query
        both = QUERY_PLAN.bind(device, bounds, bounds, *args, *plan_args, group=block,
                               threads_per_block=block)

        def encode(q: int, lo: Any, hi: Any, plo: Any, phi: Any, rk: Any, sel: Any,
                   boxes: Any) -> None:
            both(q, lo, hi, plo, phi, rk, sel, boxes)
    else:
        ranks = kernel.bind(device, bounds, bounds, *args, Slot(i64, 3), group=group,
                            threads_per_block=tpb)
        plan = PLAN.bind(device, bounds, bounds, st.lc, tables.order, *plan_args,
                         threads_per_block=tpb)

        def encode(q: int, lo: Any, hi: Any, plo: Any, phi: Any, rk: Any, sel: Any,
                   boxes: Any) -> None:
            ranks(2 * d * q, lo, hi, rk)
            plan(q, lo, hi, plo, phi, rk, sel, boxes)
    words = words_for(n)
    rem = n % 32
    tail = np.uint32(0xFFFFFFFF if rem == 0 else (1 << rem) - 1)
    per_query, tiles = sieve_items(1, words, tpb)  # (a query's tiles do not depend on q)
    sieve = SIEVE.bind(device, vectors, Slot(i64, 2), np.int64(words), tail, Slot(u32, 2),
                       np.int64(tpb), np.int64(tiles), threads_per_block=tpb)
    refine = strided_kernel(device).bind(device, tables.order, st.lc, codes, codes,
                                          Slot(i64, 2), Slot(u32, 1), np.int64(words),
                                          np.int64(per_slot), threads_per_block=tpb)
    xp = xp_of(st.lc)
    empty = xp.empty
    stream = _stream_key(xp)
    held = threading.local()
    hook = index._range_bitmap

    def scratch(q: int) -> tuple[Any, ...]:
        """The plan's arrays of a ``q``-query call, kept per thread and stream: the calls of
        one thread on one stream run one after another on the device, so each call's kernels
        are done with them before the next call's first kernel writes them; the caller gets
        only ``out``, allocated each call."""
        mine = held.__dict__.setdefault("arrays", {})
        key = (q, stream())
        arrays = mine.get(key)
        if arrays is None:
            sel = empty((1, q, SEL_COLUMNS), i64)
            boxes = empty((1, q * SLOTS, DIRECT_COLUMNS), i64)
            arrays = mine[key] = (empty((q, d, RK_COLUMNS), i64), sel, sel[0], boxes, boxes[0],
                                  empty((q, d), code), empty((q, d), code))
        return arrays

    def answer(lo: Any, hi: Any) -> Any:
        q = lo.shape[0]
        if q > most or index.stage_timer is not None:
            return hook(st, lo, hi)
        rk, sel, sel0, boxes, boxes0, plo, phi = scratch(q)
        encode(q, lo, hi, plo, phi, rk, sel, boxes)  # the device starts; the host goes on
        out = empty((q, words), u32)
        sieve(q * per_query, sel0, out)  # the approximation, straight into the answer
        refine(q * SLOTS * per_slot, plo, phi, boxes0, out.reshape(-1))
        return out

    return answer


def _stream_key(xp: Any) -> Callable[[], int]:
    """The current stream's handle where ``xp`` is CuPy (the launches run on it), else 0."""
    if getattr(xp, "__name__", "") != "cupy":
        return lambda: 0
    current = xp.cuda.get_current_stream
    return lambda: int(current().ptr)
