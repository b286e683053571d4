"""The fused scan: a conjunction of inclusive range predicates over d columns, evaluated in one
pass over the columns and written as a packed bitmap (the contract's ``"bitmap"`` layout: row
``r`` is bit ``r % 32``, least significant first, of word ``r // 32``; bits past the last row
zero). The CUDA-core peer of RTScan's benchmarks, in the manner of Crystal's fused selection
kernels: one kernel reads each row's columns, stops at the first predicate it fails, and no
intermediate per-column result is ever written.

One operation (:data:`SCAN`, a :class:`~indexzoo.native.targets.GroupKernel`), item = one
output word of one query:

* the scalar body (the CPU, and the GPU with ``group=1``) builds the word from its 32 rows;
* the cooperative body (GPU, ``group=32``): lane ``l`` of a warp tests row ``32 w + l`` (the
  warp reads 32 consecutive rows of a column at once: coalesced) and the warp's ballot is the
  word, which lane 0 stores.

:func:`scan_bitmaps` answers a batch of queries with one launch; :func:`scan_bitmap` one query.
Columns are an (N, d) array of one unsigned dtype (Fortran order reads each column
contiguously); bounds are (Q, d) (or (d,)) arrays of the same dtype, ``lo > hi`` in a column
matches nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo import InvalidInput
from indexzoo.devices import xp_of

from .targets import DEFAULT_THREADS_PER_BLOCK, GroupKernel

__all__ = ["SCAN", "WARP", "scan_bitmap", "scan_bitmaps"]

WARP = 32


@register_jitable
def _row_matches(cols, lo, hi, q, r):
    """Whether row ``r`` satisfies every column's predicate of query ``q``."""
    for j in range(cols.shape[1]):
        v = cols[r, j]
        if v < lo[q, j] or v > hi[q, j]:
            return False
    return True


@register_jitable
def scan_item(i, cols, lo, hi, n, words, out):
    """Word ``i % words`` of query ``i // words`` from its (up to) 32 rows."""
    q = i // words
    w = i - q * words
    first = w * 32
    last = min(first + 32, n)
    word = np.uint32(0)
    for r in range(first, last):
        if _row_matches(cols, lo, hi, q, r):
            word |= np.uint32(np.uint32(1) << np.uint32(r - first))
    out[q, w] = word


#: numba.cuda, once the warp body is made (CPU programs never import it); a module global, as
#: numba-cuda kernels read them.
cuda: Any = None


def _cooperative() -> Any:
    """The warp body (imports numba.cuda: GPU only)."""
    global cuda
    if cuda is None:
        from numba import cuda as numba_cuda

        cuda = numba_cuda

    @register_jitable
    def scan_group(th, cols, lo, hi, n, words, out):
        i = th // 32
        lane = th - i * 32
        q = i // words
        w = i - q * words
        r = w * 32 + lane
        ok = False
        if r < n:
            ok = _row_matches(cols, lo, hi, q, r)
        word = cuda.ballot_sync(np.uint32(0xFFFFFFFF), ok)
        if lane == 0:
            out[q, w] = np.uint32(word)

    return scan_group


#: The fused scan; ``group=32`` on the GPU (one warp per word), 1 on the CPU.
SCAN = GroupKernel(scan_item, _cooperative, name="fused_scan")


def _device(arr: Any) -> str:
    return "cpu" if xp_of(arr) is np else "cuda"


def scan_bitmaps(cols: Any, lo: Any, hi: Any, *, device: str | None = None,
                 group: int | None = None,
                 threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> Any:
    """The packed bitmaps (Q, ceil(N/32)) uint32 of Q conjunctive range queries over the
    (N, d) ``cols``: bit ``r`` of row ``q`` is set iff ``lo[q, j] <= cols[r, j] <= hi[q, j]``
    for every ``j``. One launch for the batch (each query's word reads its own bounds).
    ``device`` defaults to the arrays' ("cuda" with NumPy arrays: numba's simulator, tests
    only); ``group`` to 32 on the GPU, 1 on the CPU."""
    xp = xp_of(cols)
    if cols.ndim != 2:
        raise InvalidInput(f"cols must be (N, d), got shape {tuple(cols.shape)}")
    n, d = int(cols.shape[0]), int(cols.shape[1])
    lo = xp.ascontiguousarray(xp.asarray(lo, dtype=cols.dtype).reshape(-1, d))
    hi = xp.ascontiguousarray(xp.asarray(hi, dtype=cols.dtype).reshape(-1, d))
    if lo.shape != hi.shape:
        raise InvalidInput(f"lo and hi differ in shape: {tuple(lo.shape)}, {tuple(hi.shape)}")
    q, words = int(lo.shape[0]), (n + WARP - 1) // WARP
    out = xp.zeros((q, words), dtype=np.uint32)
    if q == 0 or words == 0:
        return out
    dev = device or _device(cols)
    g = group if group is not None else (1 if dev == "cpu" else WARP)
    if g not in (1, WARP):
        raise InvalidInput(f"group must be 1 or {WARP}, got {g}")
    SCAN(dev, q * words, cols, lo, hi, np.int64(n), np.int64(words), out, group=g,
         threads_per_block=threads_per_block)
    return out


def scan_bitmap(cols: Any, lo: Any, hi: Any, **kwargs: Any) -> Any:
    """One query: the (ceil(N/32),) uint32 bitmap of ``lo[j] <= cols[:, j] <= hi[j]`` for all
    ``j`` (see :func:`scan_bitmaps`)."""
    return scan_bitmaps(cols, lo, hi, **kwargs)[0]
