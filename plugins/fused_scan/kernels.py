"""The fused scan: a conjunction of inclusive range predicates over d columns, evaluated in one
pass over the columns and written as a packed bitmap (the contract's ``"bitmap"`` layout: row
``r`` is bit ``r % 32``, least significant first, of word ``r // 32``; bits past the last row
zero). The CUDA-core peer of RTScan's benchmarks, in the manner of Crystal's fused selection
kernels: one kernel reads each row's columns, stops at the first predicate it fails, and no
intermediate per-column result is ever written.

One operation (:data:`SCAN`, a :class:`~indexzoo.native.targets.GroupKernel`) with two bodies:

* the scalar body (the CPU, and the GPU with ``group=1``): item = one output word of one
  query, built from its 32 rows;
* the warp bodies (GPU, ``group=32``), Crystal's tile of items per thread: item = a group of
  ``items`` consecutive output words of one query, served by one warp. Lane ``l`` holds rows
  ``32 (w0 + k) + l`` for ``k < items`` (each warp-wide load 32 consecutive values:
  coalesced); ballots make the words, which lanes ``0 .. items-1`` store side by side. The
  body is generated for each ``items`` (:data:`ITEMS_CHOICES`) in one of two forms
  (:func:`_warp_source`): a loop over the columns that issues one column's loads, tests
  them and stops once every row of the lane has failed; or, for up to
  :data:`UNROLLED_COLUMNS` columns, the body written out for the column count with every
  column's loads first, then the tests. A scan is bound by the loads in flight: the loop
  has ``items`` per lane at a time, the written-out body ``d * items``, and is the faster
  (``docs/plugins/fused-scan.md`` has the measurements against a plain read of the same
  columns). ``items=1`` is the earliest body, one row per lane.

:func:`scan_bitmaps` answers a batch of queries with one launch; :func:`scan_bitmap` one query.
Columns are an (N, d) array of one unsigned dtype (Fortran order reads each column
contiguously); bounds are (Q, d) (or (d,)) arrays of the same dtype, ``lo > hi`` in a column
matches nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.errors import InvalidInput
from indexzoo.native.targets import DEFAULT_THREADS_PER_BLOCK, GroupKernel, Slot

__all__ = ["ITEMS", "ITEMS_CHOICES", "SCAN", "UNROLLED_COLUMNS", "WARP", "bind_scan",
           "scan_bitmap", "scan_bitmaps", "scan_kernel"]

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


def _warp_source(items: int, columns: int) -> str:
    """The source of the warp body serving ``items`` consecutive output words per warp.

    Lane ``l`` holds the rows ``32 (w0 + k) + l``, ``k < items``, as scalars (registers, not a
    local array). ``columns=0``: any number of columns, column by column, each column's loads
    issued before its tests and the loop left once every row of the lane has failed (no more
    loads for it). ``columns=D``: exactly D columns, written out: the loads of every column
    come first (a row past the end reads the last row and is never alive), then every test,
    so ``D * items`` independent requests per lane are in flight at once; nothing is skipped.
    """
    ks = range(items)
    lines = [
        "def scan_group(th, cols, lo, hi, n, words, out):",
        f"    wg = (words + {items - 1}) // {items}",
        "    i = th // 32",
        "    lane = th - i * 32",
        "    q = i // wg",
        f"    w0 = (i - q * wg) * {items}",
        "    base = w0 * 32 + lane",
    ]
    lines += [f"    r{k} = base + {32 * k}" for k in ks]
    lines += [f"    a{k} = r{k} < n" for k in ks]
    if columns == 0:
        lines += ["    for j in range(cols.shape[1]):",
                  "        lo_j = lo[q, j]",
                  "        hi_j = hi[q, j]"]
        lines += [f"        v{k} = cols[r{k}, j] if a{k} else lo_j" for k in ks]
        lines += [f"        a{k} = a{k} and v{k} >= lo_j and v{k} <= hi_j" for k in ks]
        lines += [f"        if not ({' or '.join(f'a{k}' for k in ks)}):",
                  "            break"]
    else:
        lines += ["    last = n - 1"]
        lines += [f"    c{k} = r{k} if r{k} < n else last" for k in ks]
        for j in range(columns):
            lines += [f"    v{k}_{j} = cols[c{k}, {j}]" for k in ks]
        for j in range(columns):
            lines += [f"    lo_{j} = lo[q, {j}]", f"    hi_{j} = hi[q, {j}]"]
        for k in ks:
            tests = " and ".join(f"v{k}_{j} >= lo_{j} and v{k}_{j} <= hi_{j}"
                                 for j in range(columns))
            lines += [f"    a{k} = a{k} and {tests}"]
    lines += ["    full = np.uint32(0xFFFFFFFF)"]
    lines += [f"    b{k} = cuda.ballot_sync(full, a{k})" for k in ks]
    # lane k stores word w0 + k: the warp's stores are consecutive
    lines += [f"    if lane < {items} and w0 + lane < words:",
              f"        word = b{items - 1}"]
    lines += [f"        if lane == {k}:\n            word = b{k}" for k in ks[:-1]]
    lines += ["        out[q, w0 + lane] = np.uint32(word)"]
    return "\n".join(lines) + "\n"


def _warp_body(items: int, columns: int) -> Any:
    """The warp body of :func:`_warp_source` (imports numba.cuda: GPU only)."""
    _import_cuda()
    namespace = {"np": np, "cuda": cuda}
    exec(_warp_source(items, columns), namespace)
    return register_jitable(namespace["scan_group"])


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


#: Words per warp the warp bodies are made for (1: one row per lane, the earliest body).
ITEMS_CHOICES = (1, 2, 4, 8, 16)
#: Column counts the written-out bodies are made for (more columns take the loop).
UNROLLED_COLUMNS = 4
_lock = threading.Lock()
_kernels: dict[tuple[int, int], GroupKernel] = {}


def scan_kernel(items: int, columns: int) -> GroupKernel:
    """The fused scan with ``items`` words per warp on the GPU and, ``columns > 0``, the body
    written out for exactly that many columns (see :func:`_warp_source`); the CPU runs the
    scalar body either way."""
    key = (items, columns)
    with _lock:
        if key not in _kernels:
            if items == 1:
                coop = _cooperative_word
            else:
                def coop() -> Any:
                    return _warp_body(items, columns)
            _kernels[key] = GroupKernel(scan_item, coop, name=f"fused_scan_{items}x{columns}")
        return _kernels[key]


#: The fused scan's default GPU body: ``group=32``, :data:`ITEMS` words per warp, the loop.
SCAN = scan_kernel(ITEMS, 0)


def _device(arr: Any) -> str:
    return "cpu" if xp_of(arr) is np else "cuda"


def scan_bitmaps(cols: Any, lo: Any, hi: Any, *, device: str | None = None,
                 group: int | None = None, items: int | None = None,
                 unroll: bool = False,
                 threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> Any:
    """The packed bitmaps (Q, ceil(N/32)) uint32 of Q conjunctive range queries over the
    (N, d) ``cols``: bit ``r`` of row ``q`` is set iff ``lo[q, j] <= cols[r, j] <= hi[q, j]``
    for every ``j``. One launch for the batch (each query's word reads its own bounds).
    ``device`` defaults to the arrays' ("cuda" with NumPy arrays: numba's simulator, tests
    only); ``group`` to 32 on the GPU, 1 on the CPU; ``items``, the words per warp of the
    ``group=32`` body, one of :data:`ITEMS_CHOICES`, to :data:`ITEMS` (1: the one-word body;
    with ``group=1`` only 1); ``unroll``: with ``group=32`` and at most
    :data:`UNROLLED_COLUMNS` columns, the body written out for ``d`` columns, every load
    first (see :func:`_warp_source`)."""
    xp = xp_of(cols)
    if cols.ndim != 2:
        raise InvalidInput(f"cols must be (N, d), got shape {tuple(cols.shape)}")
    dev = device or _device(cols)
    g = group if group is not None else (1 if dev == "cpu" else WARP)
    if g not in (1, WARP):
        raise InvalidInput(f"group must be 1 or {WARP}, got {g}")
    k = items if items is not None else (ITEMS if g == WARP else 1)
    if k not in ITEMS_CHOICES or (g == 1 and k != 1):
        raise InvalidInput(f"items must be one of {ITEMS_CHOICES} with group={WARP}, 1 with "
                           f"group=1; got items={items}, group={g}")
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
        return out
    columns = d if (unroll and k > 1 and d <= UNROLLED_COLUMNS) else 0
    # item = k words of one query (the last group of a query may be short), one warp each
    scan_kernel(k, columns)(dev, q * -(-words // k), *args, group=WARP,
                            threads_per_block=threads_per_block)
    return out


def bind_scan(cols: Any, *, items: int = ITEMS, unroll: bool = False,
              threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> Any:
    """The GPU scan of :func:`scan_bitmaps` over the (N, d) ``cols`` with the columns
    bound into the launch (:meth:`~indexzoo.native.targets.GroupKernel.bind`): a function
    ``(lo, hi) -> bitmaps`` for (Q, d) C-contiguous bounds of the columns' dtype, whose call
    costs an allocation and a launch. It keeps ``cols`` alive. (NumPy ``cols`` run on numba's
    CUDA simulator: tests only.)"""
    if items not in ITEMS_CHOICES:
        raise InvalidInput(f"items must be one of {ITEMS_CHOICES}, got {items}")
    n, d = int(cols.shape[0]), int(cols.shape[1])
    words = (n + WARP - 1) // WARP
    per_query = -(-words // items)  # items (groups of `items` words) per query
    columns = d if (unroll and items > 1 and d <= UNROLLED_COLUMNS) else 0
    bounds = Slot(np.dtype(cols.dtype), 2)
    launch = scan_kernel(items, columns).bind(
        "cuda", cols, bounds, bounds, np.int64(n), np.int64(words), Slot(np.dtype(np.uint32), 2),
        group=WARP, threads_per_block=threads_per_block)
    empty, u32 = xp_of(cols).empty, np.uint32

    def scan(lo: Any, hi: Any) -> Any:
        q = lo.shape[0]
        out = empty((q, words), dtype=u32)
        launch(q * per_query, lo, hi, out)
        return out

    return scan


def scan_bitmap(cols: Any, lo: Any, hi: Any, **kwargs: Any) -> Any:
    """One query: the (ceil(N/32),) uint32 bitmap of ``lo[j] <= cols[:, j] <= hi[j]`` for all
    ``j`` (see :func:`scan_bitmaps`)."""
    return scan_bitmaps(cols, lo, hi, **kwargs)[0]
