"""The lightweight family's records and one-thread searches, shared by the CPU twins and the
operations (``kernels.py``) and the GPU driver (``kernels_cuda.py``): the names of the
locate modes and of the driver's options, the records a build hands to the kernels, the key
readers that see pinned keys, every scheme's locate function and :data:`SCHEMES`. It imports
neither of the two, so the GPU module never imports ``kernels.py``.

Records
-------
Every scheme stores the (key, rowID) pairs sorted by key (AO), permuted into Eytzinger order
(EO), or sorted with a pivot buffer on top (AO+PB). The kernels read a build through one flat
:class:`LayoutRecord` (arrays and int64 scalars, one kernel argument). Arrays are addressed as
``keys[p * stride]`` and ``rowids[p * stride]``: ``stride`` 1 for two separate arrays (SoA), 2
for one interleaved array whose odd words are the rowIDs (AoS; ``rowids`` is then
``table[1:]``). Fields a scheme does not use are stand-ins (a one-slot pivot buffer, zeros).

The GPU driver may pin the top of the structure in shared memory: ``pin`` (the shared array; an
empty array on the CPU) holds the pinned keys, :class:`PinRecord` says which (``pa``, ``pbb``,
``ps``; :data:`NO_PINNING` on the CPU). See :func:`ao_key` and :func:`front_key`.

Locate
------
Each scheme has a *locate* function with one signature (so the GPU driver in
``kernels_cuda.py`` can be generated for any of them)::

    locate(x, lane, mask, shift, mode, lay, pin, pins) -> int64

``mode`` :data:`POINT`: the rowID of a match, or :data:`NOT_FOUND`. :data:`RANK`: the sorted
position of the first key ``>= x`` (``n`` if none), which makes a range ``[lo, hi]`` the sorted
positions ``rank(lo) .. rank(hi + 1) - 1``. :data:`FIRST`: the rowID of the first key ``>= x``,
or :data:`NOT_FOUND`. ``lane/mask/shift`` are unused here (one thread per lookup); the
cooperative K-ary versions in ``kernels_cuda.py`` take them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from .eytzinger import eo_source

__all__ = [
    "FIRST", "NOT_FOUND", "NO_PINNING", "NO_REORDER", "POINT", "RANK", "REORDER_DOUBLE",
    "REORDER_SINGLE", "SCHEMES", "SORT_IDX_DTYPE", "SORT_RES_DTYPE", "WARP",
    "DriverPlan", "LayoutRecord", "PinRecord", "SharedOffsets",
    "ao_bs_finish", "ao_bs_locate", "ao_key", "emit", "eo_bs_locate", "eo_child", "eo_ks_locate",
    "eo_lb_finish", "front_key", "pb_bs_locate", "pb_finish", "pb_key", "pb_ks_locate",
]

# ------------------------------------------------------------------ names

#: ``mode`` of the locate functions: the rowID of a match (point lookups).
POINT = np.int64(0)
#: ``mode``: the sorted position of the first key >= x, ``n`` if none (range bounds).
RANK = np.int64(1)
#: ``mode``: the rowID of the first key >= x (the first match of a range).
FIRST = np.int64(2)
#: A locate result in modes POINT and FIRST when there is no such key (stored as ``miss``).
NOT_FOUND = np.int64(-1)

#: The GPU driver's reordering: none, results written from the sorted tile (single), or put
#: back into tile order in shared memory first (double).
NO_REORDER, REORDER_SINGLE, REORDER_DOUBLE = 0, 1, 2

#: Lanes of a warp: the multi-threaded range scans' group, and how many entries a lane scans
#: alone before the warp takes its range over.
WARP = 32

#: The driver's reordering buffers in shared memory: the tile's keys (the pinned keys' dtype),
#: their positions and the results, each aligned to 8 bytes (at most 16 bytes of padding).
SORT_IDX_DTYPE, SORT_RES_DTYPE = np.dtype(np.uint32), np.dtype(np.int64)
_SHARED_ALIGN = 8
_SORT_ALIGN_SLACK = 16


class LayoutRecord(NamedTuple):
    """A build as the kernels read it (one kernel argument; see the module docstring)."""

    keys: Any  # key words: SoA keys, or the AoS (key, rowID) table
    rowids: Any  # rowIDs (AoS: a view of the table from its second word)
    stride: Any  # int64: 1 (SoA) or 2 (AoS)
    n: Any  # int64: entries
    pb: Any  # pivot buffer, levels top first (a one-slot stand-in without one)
    pbo: Any  # int64 array: where each pivot-buffer level starts, plus the end
    levels: Any  # int64: pivot-buffer levels
    k: Any  # int64: arity K (2 for binary search)
    chunk: Any  # int64: keys per chunk under the pivot buffer (n without one)
    pad: Any  # int64: 1 for binary EO (the leading empty slot), else 0
    step0: Any  # int64: AO+BS's first step, the largest power of two <= n
    h: Any  # int64: EO's complete levels (eytzinger.eo_shape)
    b: Any  # int64: EO's keys in the partial leaf level


class PinRecord(NamedTuple):
    """Which keys the GPU driver pins in shared memory (see :func:`ao_key`, :func:`front_key`)."""

    pa: Any  # int64: AO+BS: keys of whole steps; EO/PB: the first pa slots
    pbb: Any  # int64: AO+BS "full": keys of the next step, stored after the pa
    ps: Any  # int64: AO+BS: log2 of the gap between the pa keys


#: No pinned keys (the CPU, and ``pinning="none"``).
NO_PINNING = PinRecord(np.int64(0), np.int64(0), np.int64(0))


class SharedOffsets(NamedTuple):
    """Element offsets of the driver's reordering buffers in its dynamic shared memory, after
    the pinned keys (int64 each)."""

    keys: Any  # the tile's keys, in the pinned keys' dtype
    idx: Any  # their positions in the tile (uint32)
    res: Any  # the results, for double reordering (int64)


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


@dataclass(frozen=True)
class DriverPlan:
    """How the GPU driver runs one build's lookups (host side; fixed at build time).

    ``group`` threads answer one lookup (K-1 for the K-ary schemes, else 1); each group answers
    ``per_thread`` lookups of a tile of ``threads_per_block / group * per_thread``;
    ``max_blocks`` caps the grid (static scheduling: SMs x blocks per SM; 0: dynamic, one block
    per tile); ``pin_dtype`` is the dtype of the pinned keys and of the reordering tile.
    """

    scheme: str
    group: int
    per_thread: int
    reorder: int
    threads_per_block: int
    max_blocks: int
    pin_dtype: str

    @property
    def tile(self) -> int:
        """Lookups one block answers per grid-stride step."""
        return self.threads_per_block // self.group * self.per_thread

    @property
    def sort_bytes(self) -> int:
        """Shared memory the reordering reserves per block (0 without reordering)."""
        if self.reorder == NO_REORDER:
            return 0
        entry = np.dtype(self.pin_dtype).itemsize + SORT_IDX_DTYPE.itemsize + SORT_RES_DTYPE.itemsize
        return self.tile * entry + _SORT_ALIGN_SLACK

    def shared(self, pins: PinRecord) -> tuple[SharedOffsets, int]:
        """The reordering buffers' offsets and the block's dynamic shared bytes."""
        item = np.dtype(self.pin_dtype).itemsize
        idx, res, align = SORT_IDX_DTYPE.itemsize, SORT_RES_DTYPE.itemsize, _SHARED_ALIGN
        pin_bytes = _align(int(pins.pa + pins.pbb) * item, align)
        o_keys = pin_bytes // item
        o_idx = _align(pin_bytes + self.tile * item, align) // idx
        o_res = _align(o_idx * idx + self.tile * idx, align) // res
        size = (o_res * res + self.tile * res) if self.reorder != NO_REORDER else pin_bytes
        return SharedOffsets(np.int64(o_keys), np.int64(o_idx), np.int64(o_res)), size


# ------------------------------------------------------------------ reading keys (pinning)


@register_jitable
def ao_key(lay, p, pin, pins):
    """``keys[p]`` of a sorted array, from shared memory when pinned.

    AO+BS pinning keeps the keys its first steps visit: those at ``n-1 - j*g`` (g = 2^ps) for
    ``j < pa`` ("steps"), and for full pinning also ``pbb`` keys of the next step, at the odd
    multiples ``n-1 - (2j+1)*g/2``, stored after them.
    """
    if pins.pa > 0:
        d = lay.n - 1 - p
        g = np.int64(1) << pins.ps
        if (d & (g - 1)) == 0:
            j = d >> pins.ps
            if j < pins.pa:
                return pin[j]
        elif pins.pbb > 0 and pins.ps > 0 and (d & ((g >> 1) - 1)) == 0:
            j = (d >> (pins.ps - 1)) >> 1
            if j < pins.pbb:
                return pin[pins.pa + j]
    return lay.keys[p * lay.stride]


@register_jitable
def front_key(keys, stride, p, pin, pa):
    """``keys[p]`` of an EO array or a pivot buffer, whose first ``pa`` slots may be pinned."""
    if p < pa:
        return pin[p]
    return keys[p * stride]


@register_jitable
def pb_key(lay, p, pin, pins):
    """Pivot ``p`` of the pivot buffer, whose first ``pa`` slots may be pinned."""
    return front_key(lay.pb, 1, p, pin, pins.pa)


# ------------------------------------------------------------------ AO + BS


@register_jitable
def ao_bs_search(lay, x, pin, pins):
    """The paper's offset-based back-to-front binary search (Listing 1), with the halving of
    ``step`` on every iteration (as printed, n = 2^k loops forever). Returns
    ``min(lower_bound(x), n - 1)``."""
    offset = lay.n - 1
    step = lay.step0
    while step > 0:
        if step <= offset:
            p = offset - step
            if ao_key(lay, p, pin, pins) >= x:
                offset = p
        step >>= 1
    return offset


@register_jitable
def ao_bs_finish(p, x, mode, lay):
    """``p = min(lower_bound(x), n - 1)`` as the locate functions' result."""
    kv = lay.keys[p * lay.stride]
    if mode == POINT:
        if kv == x:
            return np.int64(lay.rowids[p * lay.stride])
        return NOT_FOUND
    if kv < x:
        return lay.n if mode == RANK else NOT_FOUND
    return p if mode == RANK else np.int64(lay.rowids[p * lay.stride])


@register_jitable
def ao_bs_locate(x, lane, mask, shift, mode, lay, pin, pins):
    return ao_bs_finish(ao_bs_search(lay, x, pin, pins), x, mode, lay)


# ------------------------------------------------------------------ EO + BS / EO + KS


@register_jitable
def eo_bs_search(lay, x, mode, pin, pa):
    """Binary Eytzinger descent: node j (0-based) at slot ``j + pad``, children 2j+1, 2j+2.

    POINT: the slot of a match (early exit), or -1; else the slot of the first key >= x (the
    last node on the path whose key is >= x), or -1.
    """
    j = np.int64(0)
    cand = np.int64(-1)
    while j < lay.n:
        kv = front_key(lay.keys, lay.stride, j + lay.pad, pin, pa)
        if mode == POINT and kv == x:
            return j
        if kv >= x:
            cand = j
            j = 2 * j + 1
        else:
            j = 2 * j + 2
    return np.int64(-1) if mode == POINT else cand


@register_jitable
def eo_ks_search(lay, x, mode, pin, pa):
    """K-ary Eytzinger descent, one thread (the CPU twin of the cooperative GPU search): node j
    holds slots j(K-1) .. j(K-1)+K-2, children jK+1 .. jK+K. Same results as eo_bs_search."""
    j = np.int64(0)
    cand = np.int64(-1)
    k = lay.k
    m = k - 1
    n = lay.n
    while True:
        base = j * m
        if base >= n:
            break
        c = np.int64(0)
        while c < m and base + c < n:
            kv = front_key(lay.keys, lay.stride, base + c + lay.pad, pin, pa)
            if kv >= x:
                if mode == POINT and kv == x:
                    return base + c
                break
            c += 1
        if c < m and base + c < n:
            cand = base + c
        j = j * k + 1 + c
    return np.int64(-1) if mode == POINT else cand


@register_jitable
def eo_child(keys, stride, pad, n, m, base, x):
    """The child of the K-ary EO node whose slots start at ``base`` on the path of ``x``: how
    many of its ``m = K-1`` keys (those below slot ``n``) are ``< x`` (the range scans' descent,
    CPU and GPU; ``keys`` unpinned)."""
    c = np.int64(0)
    while c < m and base + c < n and keys[(base + c + pad) * stride] < x:
        c += 1
    return c


@register_jitable
def eo_finish(slot, mode, lay, k):
    """A located EO slot (-1: none) as the locate functions' result; ``k`` the arity (a
    constant 2 for binary EO)."""
    if mode != RANK:
        if slot < 0:
            return NOT_FOUND
        return np.int64(lay.rowids[(slot + lay.pad) * lay.stride])
    if slot < 0:
        return lay.n
    return eo_source(slot, lay.n, k, lay.h, lay.b)


@register_jitable
def eo_lb_finish(cand, x, mode, lay, k):
    """The EO slot of the first key >= x (-1: none) as the locate functions' result (POINT
    checks that it matches)."""
    if mode == POINT:
        if cand >= 0 and lay.keys[(cand + lay.pad) * lay.stride] == x:
            return np.int64(lay.rowids[(cand + lay.pad) * lay.stride])
        return NOT_FOUND
    return eo_finish(cand, mode, lay, k)


@register_jitable
def eo_bs_locate(x, lane, mask, shift, mode, lay, pin, pins):
    return eo_finish(eo_bs_search(lay, x, mode, pin, pins.pa), mode, lay, 2)


@register_jitable
def eo_ks_locate(x, lane, mask, shift, mode, lay, pin, pins):
    slot = eo_ks_search(lay, x, RANK, pin, pins.pa)  # the lower bound, like the GPU
    return eo_lb_finish(slot, x, mode, lay, lay.k)


# ------------------------------------------------------------------ AO + PB (+ BS / KS)


@register_jitable
def pb_descend(lay, x, pin, pins):
    """Walk the pivot buffer from the root: the index of the chunk that holds the lower bound
    (c = number of the node's pivots < x; node = node*K + c). Pivots of a node ascend and the
    padding is the key maximum, so counting stops at the first pivot >= x."""
    node = np.int64(0)
    k = lay.k
    m = k - 1
    for lvl in range(lay.levels):
        base = lay.pbo[lvl] + node * m
        c = np.int64(0)
        while c < m and pb_key(lay, base + c, pin, pins) < x:
            c += 1
        node = node * k + c
    return node


@register_jitable
def pb_finish(p, x, mode, lay):
    """The lower bound ``p`` of x in the sorted array as the locate functions' result."""
    if mode == POINT:
        if p < lay.n and lay.keys[p * lay.stride] == x:
            return np.int64(lay.rowids[p * lay.stride])
        return NOT_FOUND
    if mode == FIRST:
        return np.int64(lay.rowids[p * lay.stride]) if p < lay.n else NOT_FOUND
    return p


@register_jitable
def pb_bs_locate(x, lane, mask, shift, mode, lay, pin, pins):
    node = pb_descend(lay, x, pin, pins)
    lo = node * lay.chunk
    hi = min(lo + lay.chunk, lay.n)
    while lo < hi:  # binary search inside the chunk
        mid = (lo + hi) >> 1
        if lay.keys[mid * lay.stride] < x:
            lo = mid + 1
        else:
            hi = mid
    return pb_finish(lo, x, mode, lay)


@register_jitable
def pb_ks_locate(x, lane, mask, shift, mode, lay, pin, pins):
    """AO+PB+KS, one thread (the CPU twin of the cooperative GPU search): K-ary pivot buffer,
    then the chunk scanned in order (the GPU group reads it K-1 keys at a time)."""
    node = pb_descend(lay, x, pin, pins)
    p = node * lay.chunk
    end = min(p + lay.chunk, lay.n)
    while p < end and lay.keys[p * lay.stride] < x:
        p += 1
    return pb_finish(p, x, mode, lay)


# ------------------------------------------------------------------ lookups


@register_jitable
def emit(out, j, res, miss, mode):
    """Store a locate result: ``miss`` for NOT_FOUND (POINT, FIRST), ranks as they are."""
    if mode != RANK and res < 0:
        out[j] = miss
    else:
        out[j] = res


#: The one-thread locate function of each scheme (the CPU twins of the GPU driver's).
SCHEMES = {
    "ao-bs": ao_bs_locate,
    "eo-bs": eo_bs_locate,
    "eo-ks": eo_ks_locate,
    "ao-pb-bs": pb_bs_locate,
    "ao-pb-ks": pb_ks_locate,
}
