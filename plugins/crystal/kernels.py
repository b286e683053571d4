"""The kernels of ``crystal``: one query's filter, group-by and aggregation in one pass, and the
compaction of the slots it filled.

Result layout, shared by the kernels and the host: ``res`` holds ``rows`` rows of ``n_slots``
int64 words, row-major. Row 0 holds each slot's COUNT; ``row_of[3 * e + k]`` is the row of
expression ``e``'s SUM (k = 0), MIN (1) or MAX (2), -1 where the query does not ask for it. The
SUM rows come first, so rows ``0 .. n_add - 1`` are the ones a row adds into, and the MIN and
MAX rows follow. A slot's first qualifying row appends the slot to ``touched``
(``n_touched[0]`` counts them); :func:`compact_kernel` then packs the touched slots' rows, so
the host copies back only the slots the query filled, never the whole array.

* :func:`item_kernel` (both devices): one thread per row, atomics into ``res``. The CPU's
  kernel, and the GPU's for result arrays too large for shared memory.
* :func:`private_kernel` (GPU): Crystal's block-level pre-aggregation. Each block keeps the
  COUNT and SUM rows in shared memory and walks its rows grid-stride; each thread sums the
  rows of one slot in registers while consecutive qualifying rows stay in it, so a query with
  one slot (SSB's Q1.x) makes one shared-memory add a thread, not one a row. The block then
  adds its non-zero slots into ``res``.

Both load a row's first four filter, group and value columns (the tuples are padded to four
with a column already read) before testing any: the loads are independent, so a warp waits
for one memory round trip a row, not one per column as when each column is loaded only after
the previous one passed. That costs no bytes beyond the floor, which counts every needed
column whole (and a 32-byte sector holds eight rows, so SSB's selective filters touch most
sectors of the later columns anyway); the chain of dependent loads is what kept the kernel at
2-3x its read floor on the H100 on the queries whose rows qualify most.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.groupagg import atomics, expr_value
from indexzoo.native.targets import BlockKernel, Kernel

__all__ = ["MAX_PRIVATE_ROWS", "compact_kernel", "item_kernel", "launch_grid", "private_kernel"]

#: The most COUNT and SUM rows the private kernel sums in registers (one query's SUMs + 1).
MAX_PRIVATE_ROWS = 8


@register_jitable
def within(v, k, starts, lo, hi):
    """Is ``v`` in one of column ``k``'s intervals?"""
    for t in range(starts[k], starts[k + 1]):  # noqa: SIM110 (numba compiles loops, not any())
        if lo[t] <= v and v <= hi[t]:
            return True
    return False


@register_jitable
def load4(i, cols):
    """Row ``i`` of the first four columns of ``cols``, as int64 (independent loads)."""
    return (np.int64(cols[0][i]), np.int64(cols[1][i]), np.int64(cols[2][i]),
            np.int64(cols[3][i]))


@register_jitable
def passes4(i, f, cols, starts, lo, hi):
    """Does row ``i`` pass every column's intervals? ``f``: its values of the first four
    columns (:func:`load4`); ``cols`` holds a multiple of four columns, each further four
    loaded together before any of them is tested."""
    if not (within(f[0], 0, starts, lo, hi) and within(f[1], 1, starts, lo, hi)
            and within(f[2], 2, starts, lo, hi) and within(f[3], 3, starts, lo, hi)):
        return False
    for b in range(4, len(cols), 4):
        v0 = np.int64(cols[b][i])
        v1 = np.int64(cols[b + 1][i])
        v2 = np.int64(cols[b + 2][i])
        v3 = np.int64(cols[b + 3][i])
        if not (within(v0, b, starts, lo, hi) and within(v1, b + 1, starts, lo, hi)
                and within(v2, b + 2, starts, lo, hi) and within(v3, b + 3, starts, lo, hi)):
            return False
    return True


@register_jitable
def slot4(gv, gmin, gstride):
    """The perfect-hash slot of a row's four (padded) group values."""
    return ((gv[0] - gmin[0]) * gstride[0] + (gv[1] - gmin[1]) * gstride[1]
            + (gv[2] - gmin[2]) * gstride[2] + (gv[3] - gmin[3]) * gstride[3])


@register_jitable
def value4(i, vv, vcols, terms, s, e):
    """An expression (rows ``terms[s:e]``) at row ``i``: from ``vv``, the row's loaded values
    of the value columns, where there are four; else from the columns."""
    if len(vcols) != 4:
        return expr_value(i, vcols, terms, s, e)
    total = np.int64(0)
    for t in range(s, e):
        v = np.int64(terms[t, 0])
        a = terms[t, 1]
        b = terms[t, 2]
        if a >= 0:
            v *= vv[a]
        if b >= 0:
            v *= vv[b]
        total += v
    return total


@functools.cache
def item_kernel(device: str) -> Kernel:
    """``(n_rows, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts, row_of,
    n_slots, res, touched, n_touched)``, one item per row."""
    add, amin, amax, _ = atomics(device)

    @register_jitable
    def crystal_item(i, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts,
                     row_of, n_slots, res, touched, n_touched):
        f = load4(i, fcols)
        gv = load4(i, gcols)
        vv = load4(i, vcols)
        if not passes4(i, f, fcols, starts, lo, hi):
            return
        g = slot4(gv, gmin, gstride)
        for e in range(len(tstarts) - 1):
            v = value4(i, vv, vcols, terms, tstarts[e], tstarts[e + 1])
            r = row_of[3 * e]
            if r >= 0:
                add(res, r * n_slots + g, v)
            r = row_of[3 * e + 1]
            if r >= 0:
                amin(res, r * n_slots + g, v)
            r = row_of[3 * e + 2]
            if r >= 0:
                amax(res, r * n_slots + g, v)
        # the COUNT last: only this add waits for its old value (a slot's first row lists it)
        if add(res, g, np.int64(1)) == 0:
            touched[add(n_touched, 0, np.int64(1))] = g

    return Kernel(crystal_item, name="crystal_query")


_PRIVATE = """
def crystal_private(n, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts,
                    row_of, n_slots, n_add, res, touched, n_touched):
    sh = cuda.shared.array(0, I64)
    mine = cuda.local.array(MAX_ROWS, I64)  # this thread's sums of slot `last`
    t = cuda.threadIdx.x
    w = t
    while w < n_add * n_slots:
        sh[w] = 0
        w += cuda.blockDim.x
    for r in range(MAX_ROWS):
        mine[r] = 0
    cuda.syncthreads()
    n_exprs = len(tstarts) - 1
    last = np.int64(-1)
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        f = load4(i, fcols)
        gv = load4(i, gcols)
        vv = load4(i, vcols)
        if passes4(i, f, fcols, starts, lo, hi):
            g = slot4(gv, gmin, gstride)
            if g != last:
                if last >= 0:
                    for r in range(n_add):
                        cuda.atomic.add(sh, r * n_slots + last, mine[r])
                        mine[r] = 0
                last = g
            mine[0] += 1
            for e in range(n_exprs):
                v = value4(i, vv, vcols, terms, tstarts[e], tstarts[e + 1])
                r = row_of[3 * e]
                if r >= 0:
                    mine[r] += v
                r = row_of[3 * e + 1]
                if r >= 0:
                    cuda.atomic.min(res, r * n_slots + g, v)
                r = row_of[3 * e + 2]
                if r >= 0:
                    cuda.atomic.max(res, r * n_slots + g, v)
        i += step
    if last >= 0:
        for r in range(n_add):
            cuda.atomic.add(sh, r * n_slots + last, mine[r])
    cuda.syncthreads()
    s = t
    while s < n_slots:
        c = sh[s]
        if c != 0:
            for r in range(1, n_add):
                cuda.atomic.add(res, r * n_slots + s, sh[r * n_slots + s])
            if cuda.atomic.add(res, s, c) == 0:
                touched[cuda.atomic.add(n_touched, 0, np.int64(1))] = s
        s += cuda.blockDim.x
"""


@functools.cache
def private_kernel() -> BlockKernel:
    """``(n_rows, ..., row_of, n_slots, n_add, res, touched, n_touched)`` (the item kernel's
    arguments with ``n_add``, the rows kept in shared memory, before ``res``; ``n_add`` at most
    :data:`MAX_PRIVATE_ROWS`), on a grid of the caller's (:func:`launch_grid`) with
    ``8 * n_add * n_slots`` bytes of dynamic shared memory."""
    from numba import types

    return BlockKernel("crystal_private", _PRIVATE, {
        "np": np, "I64": types.int64, "MAX_ROWS": MAX_PRIVATE_ROWS, "load4": load4,
        "passes4": passes4, "slot4": slot4, "value4": value4})


@register_jitable
def compact_item(k, n_touched, touched, res, rows, n_slots, packed):
    """Slot ``k`` of the touched list packed as ``(slot, row 0, .., row rows-1)`` after
    ``packed[0]``, which receives their number."""
    m = n_touched[0]
    if k == 0:
        packed[0] = m
    if k < m:
        s = touched[k]
        base = 1 + k * (rows + 1)
        packed[base] = s
        for r in range(rows):
            packed[base + 1 + r] = res[r * n_slots + s]


@functools.cache
def compact_kernel() -> Kernel:
    """``(n_slots, n_touched, touched, res, rows, n_slots, packed)``: one item per slot."""
    return Kernel(compact_item, name="crystal_compact")


def sm_count() -> int:
    """The current GPU's multiprocessors (4 where CuPy cannot say, as under the simulator)."""
    return _sm_count()


@functools.cache
def _sm_count() -> int:
    try:
        import cupy

        return int(cupy.cuda.Device().attributes["MultiProcessorCount"])
    except Exception:  # no CuPy or no device: numba's simulator
        return 4


def launch_grid(threads: int, shared: int) -> Any:
    """``blocks(n_rows)`` for the private kernel: as many blocks as the multiprocessors hold at
    once (by threads and by ``shared`` bytes of shared memory each), none idle for lack of
    rows."""
    per_sm = max(1, min(2048 // threads, (228 * 1024) // (shared + 1024)))
    most = sm_count() * per_sm
    return lambda n: max(1, min(most, -(-n // threads)))
