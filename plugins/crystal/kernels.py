"""The kernels of ``crystal``: one query's filter, group-by and aggregation in one pass.

Result layout, shared by both kernels and the host: one int64 array ``res`` of ``rows`` rows of
``n_slots`` words, row-major. Row 0 holds each slot's COUNT; ``row_of[3 * e + k]`` is the row of
expression ``e``'s SUM (k = 0), MIN (1) or MAX (2), -1 where the query does not ask for it. The
SUM rows come first, so rows ``0 .. n_add - 1`` are the ones a row adds into, and the MIN and
MAX rows follow. A slot's first qualifying row appends the slot to ``touched`` (``n_touched[0]``
counts them), so the host gathers only the slots the query filled, never the whole array.

* :func:`item_kernel` (both devices): one thread per row, global atomics. The CPU's kernel and
  the GPU's for result arrays too large for shared memory.
* :func:`private_kernel` (GPU): Crystal's block-level pre-aggregation. Each block keeps the
  COUNT and SUM rows in shared memory, walks its rows grid-stride, adds with shared-memory
  atomics, then adds its non-zero slots into ``res``. A query whose qualifying rows go to a few
  slots (SSB's Q1.x: one) otherwise makes every such row contend on the same global words.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.groupagg import atomics, expr_value, passes
from indexzoo.native.targets import BlockKernel, Kernel

__all__ = ["item_kernel", "private_kernel"]


@functools.cache
def item_kernel(device: str) -> Kernel:
    """``(n_rows, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts, row_of,
    n_slots, res, touched, n_touched)``, one item per row."""
    add, amin, amax, _ = atomics(device)

    @register_jitable
    def crystal_item(i, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts,
                     row_of, n_slots, res, touched, n_touched):
        if not passes(i, fcols, starts, lo, hi):
            return
        g = np.int64(0)
        for j in range(len(gcols)):
            g += (np.int64(gcols[j][i]) - gmin[j]) * gstride[j]
        if add(res, g, np.int64(1)) == 0:
            touched[add(n_touched, 0, np.int64(1))] = g
        for e in range(len(tstarts) - 1):
            v = expr_value(i, vcols, terms, tstarts[e], tstarts[e + 1])
            r = row_of[3 * e]
            if r >= 0:
                add(res, r * n_slots + g, v)
            r = row_of[3 * e + 1]
            if r >= 0:
                amin(res, r * n_slots + g, v)
            r = row_of[3 * e + 2]
            if r >= 0:
                amax(res, r * n_slots + g, v)

    return Kernel(crystal_item, name="crystal_query")


_PRIVATE = """
def crystal_private(n, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts,
                    row_of, n_slots, n_add, res, touched, n_touched):
    sh = cuda.shared.array(0, I64)
    t = cuda.threadIdx.x
    w = t
    while w < n_add * n_slots:
        sh[w] = 0
        w += cuda.blockDim.x
    cuda.syncthreads()
    n_exprs = len(tstarts) - 1
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        if passes(i, fcols, starts, lo, hi):
            g = np.int64(0)
            for j in range(len(gcols)):
                g += (np.int64(gcols[j][i]) - gmin[j]) * gstride[j]
            cuda.atomic.add(sh, g, np.int64(1))
            for e in range(n_exprs):
                v = expr_value(i, vcols, terms, tstarts[e], tstarts[e + 1])
                r = row_of[3 * e]
                if r >= 0:
                    cuda.atomic.add(sh, r * n_slots + g, v)
                r = row_of[3 * e + 1]
                if r >= 0:
                    cuda.atomic.min(res, r * n_slots + g, v)
                r = row_of[3 * e + 2]
                if r >= 0:
                    cuda.atomic.max(res, r * n_slots + g, v)
        i += step
    cuda.syncthreads()
    s = t
    while s < n_slots:
        c = sh[s]
        if c != 0:
            if cuda.atomic.add(res, s, c) == 0:
                touched[cuda.atomic.add(n_touched, 0, np.int64(1))] = s
            for r in range(1, n_add):
                cuda.atomic.add(res, r * n_slots + s, sh[r * n_slots + s])
        s += cuda.blockDim.x
"""


@functools.cache
def private_kernel() -> BlockKernel:
    """``(n_rows, ..., row_of, n_slots, n_add, res, touched, n_touched)`` (the item kernel's
    arguments with ``n_add``, the rows kept in shared memory, before ``res``), launched on a
    grid the caller sizes to the device, with ``8 * n_add * n_slots`` bytes of dynamic shared
    memory."""
    from numba import types

    return BlockKernel("crystal_private", _PRIVATE, {"np": np, "I64": types.int64,
                                                     "passes": passes, "expr_value": expr_value})


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


def launch_private(n_rows: int, args: tuple[Any, ...], n_add: int, n_slots: int,
                   threads: int) -> None:
    """:func:`private_kernel` over ``n_rows`` rows: as many blocks as fit the multiprocessors
    at once (by threads and by shared memory), none idle for lack of rows."""
    shared = 8 * n_add * n_slots
    per_sm = max(1, min(2048 // threads, (228 * 1024) // (shared + 1024)))
    blocks = max(1, min(sm_count() * per_sm, -(-n_rows // threads)))
    private_kernel()(blocks, threads, n_rows, *args, shared_mem=shared)
