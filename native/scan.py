"""The fused scan: a conjunction of inclusive range predicates over d columns, evaluated in one
pass over the columns and written as a packed bitmap (the contract's ``"bitmap"`` layout: row
``r`` is bit ``r % 32``, least significant first, of word ``r // 32``; bits past the last row
zero). The CUDA-core peer of RTScan's benchmarks, in the manner of Crystal's fused selection
kernels: one kernel reads each row's columns, stops at the first predicate it fails, and no
intermediate per-column result is ever written.

One operation (:data:`SCAN`, a :class:`~indexzoo.native.targets.GroupKernel`) with two bodies:

* the scalar body (the CPU, and the GPU with ``group=1``): item = one output word of one
  query, built from its 32 rows;
* the cooperative body (GPU, ``group=32``), Crystal's tile of items per thread: item = a group
  of :data:`ITEMS` consecutive output words of one query, served by one warp. Lane ``l`` holds
  rows ``32 (w0 + k) + l`` for ``k < ITEMS``; column by column it first issues the loads of all
  its rows still alive (no work between them, so ITEMS requests per lane are in flight at
  once, each warp-wide load 32 consecutive values: coalesced), then tests them; ITEMS ballots
  make the words, which lanes ``0 .. ITEMS-1`` store side by side. With one row per lane (one
  4-byte load in flight) a scan of uint32 columns used a small share of the memory bandwidth;
  the loads in flight are what a bandwidth-bound scan needs more of, so ITEMS words per warp
  are faster (measured: ``docs/plugins/rtscan.md``). ``items=1`` keeps that earlier body (one
  word per warp) for A/B comparison on the GPU.

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

__all__ = ["ITEMS", "SCAN", "WARP", "scan_bitmap", "scan_bitmaps"]

WARP = 32
#: Output words per warp of the cooperative body (its body is written out for four).
ITEMS = 4


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


#: numba.cuda, once a warp body is made (CPU programs never import it); a module global, as
#: numba-cuda kernels read them.
cuda: Any = None


def _import_cuda() -> None:
    global cuda
    if cuda is None:
        from numba import cuda as numba_cuda

        cuda = numba_cuda


def _cooperative() -> Any:
    """The warp body, :data:`ITEMS` words per warp (imports numba.cuda: GPU only)."""
    _import_cuda()

    @register_jitable
    def scan_group(th, cols, lo, hi, n, words, out):
        # warp i serves word group g of query q: words w0 .. w0 + ITEMS - 1
        wg = (words + ITEMS - 1) // ITEMS
        i = th // 32
        lane = th - i * 32
        q = i // wg
        w0 = (i - q * wg) * ITEMS
        # the items as scalars, not a local array, so that they stay in registers; a row
        # past the end is never alive, which leaves the padding bits zero
        r0 = w0 * 32 + lane
        r1 = r0 + 32
        r2 = r0 + 64
        r3 = r0 + 96
        a0 = r0 < n
        a1 = r1 < n
        a2 = r2 < n
        a3 = r3 < n
        for j in range(cols.shape[1]):
            lo_j = lo[q, j]
            hi_j = hi[q, j]
            # every load before any test: ITEMS independent requests per lane in flight
            v0 = cols[r0, j] if a0 else lo_j
            v1 = cols[r1, j] if a1 else lo_j
            v2 = cols[r2, j] if a2 else lo_j
            v3 = cols[r3, j] if a3 else lo_j
            a0 = a0 and v0 >= lo_j and v0 <= hi_j
            a1 = a1 and v1 >= lo_j and v1 <= hi_j
            a2 = a2 and v2 >= lo_j and v2 <= hi_j
            a3 = a3 and v3 >= lo_j and v3 <= hi_j
            if not (a0 or a1 or a2 or a3):
                break  # every row of this lane failed a predicate: no more loads
        full = np.uint32(0xFFFFFFFF)
        b0 = cuda.ballot_sync(full, a0)
        b1 = cuda.ballot_sync(full, a1)
        b2 = cuda.ballot_sync(full, a2)
        b3 = cuda.ballot_sync(full, a3)
        # lane k stores word w0 + k: the warp's stores are consecutive
        if lane < ITEMS and w0 + lane < words:
            word = b0 if lane == 0 else (b1 if lane == 1 else (b2 if lane == 2 else b3))
            out[q, w0 + lane] = np.uint32(word)

    return scan_group


def _cooperative_word() -> Any:
    """The earlier warp body, one word per warp, one row per lane (``items=1``)."""
    _import_cuda()

    @register_jitable
    def scan_group_word(th, cols, lo, hi, n, words, out):
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

    return scan_group_word


#: The fused scan; ``group=32`` on the GPU (one warp per :data:`ITEMS` words), 1 on the CPU.
SCAN = GroupKernel(scan_item, _cooperative, name="fused_scan")
#: The same with the one-word warp body (``items=1``), for comparison.
_SCAN_WORD = GroupKernel(scan_item, _cooperative_word, name="fused_scan_word")


def _device(arr: Any) -> str:
    return "cpu" if xp_of(arr) is np else "cuda"


def scan_bitmaps(cols: Any, lo: Any, hi: Any, *, device: str | None = None,
                 group: int | None = None, items: int | None = None,
                 threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> Any:
    """The packed bitmaps (Q, ceil(N/32)) uint32 of Q conjunctive range queries over the
    (N, d) ``cols``: bit ``r`` of row ``q`` is set iff ``lo[q, j] <= cols[r, j] <= hi[q, j]``
    for every ``j``. One launch for the batch (each query's word reads its own bounds).
    ``device`` defaults to the arrays' ("cuda" with NumPy arrays: numba's simulator, tests
    only); ``group`` to 32 on the GPU, 1 on the CPU; ``items``, the words per warp of the
    ``group=32`` body, to :data:`ITEMS` (1: the one-word body, for comparison; with
    ``group=1`` only 1)."""
    xp = xp_of(cols)
    if cols.ndim != 2:
        raise InvalidInput(f"cols must be (N, d), got shape {tuple(cols.shape)}")
    dev = device or _device(cols)
    g = group if group is not None else (1 if dev == "cpu" else WARP)
    if g not in (1, WARP):
        raise InvalidInput(f"group must be 1 or {WARP}, got {g}")
    k = items if items is not None else (ITEMS if g == WARP else 1)
    if k not in (1, ITEMS) or (g == 1 and k != 1):
        raise InvalidInput(f"items must be 1 or {ITEMS} with group={WARP}, 1 with group=1; "
                           f"got items={items}, group={g}")
    n, d = int(cols.shape[0]), int(cols.shape[1])
    lo = xp.ascontiguousarray(xp.asarray(lo, dtype=cols.dtype).reshape(-1, d))
    hi = xp.ascontiguousarray(xp.asarray(hi, dtype=cols.dtype).reshape(-1, d))
    if lo.shape != hi.shape:
        raise InvalidInput(f"lo and hi differ in shape: {tuple(lo.shape)}, {tuple(hi.shape)}")
    q, words = int(lo.shape[0]), (n + WARP - 1) // WARP
    # every word is written by the kernel (padding bits as zeros): no memset of the bitmaps
    out = xp.empty((q, words), dtype=np.uint32)
    if q == 0 or words == 0:
        return out
    args = (cols, lo, hi, np.int64(n), np.int64(words), out)
    if dev == "cpu" or g == 1:  # the scalar body: item = one word
        SCAN(dev, q * words, *args, threads_per_block=threads_per_block)
    elif k == 1:  # item = one word, one warp each
        _SCAN_WORD(dev, q * words, *args, group=WARP, threads_per_block=threads_per_block)
    else:  # item = ITEMS words of one query (the last group of a query may be short)
        SCAN(dev, q * -(-words // ITEMS), *args, group=WARP,
             threads_per_block=threads_per_block)
    return out


def scan_bitmap(cols: Any, lo: Any, hi: Any, **kwargs: Any) -> Any:
    """One query: the (ceil(N/32),) uint32 bitmap of ``lo[j] <= cols[:, j] <= hi[j]`` for all
    ``j`` (see :func:`scan_bitmaps`)."""
    return scan_bitmaps(cols, lo, hi, **kwargs)[0]
