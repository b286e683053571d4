"""Sorting (key, rowID) pairs: the build step of every sorted-array index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.contract import Footprint
from indexzoo.persist import Array, Nested, Value

__all__ = ["SortedPairs", "pairs_schema", "sort_pairs"]


@dataclass(frozen=True)
class SortedPairs:
    """Keys sorted ascending and the rowID (original position) of each; duplicates keep
    their original order, so the first of a run has the smallest rowID."""

    keys: Any
    rowids: Any
    peak_bytes: int  # most bytes held at once while sorting (outputs included)

    def footprint(self) -> Footprint:
        """Keys and rowIDs held, and the sort's peak."""
        return Footprint(breakdown={"keys": int(self.keys.nbytes),
                                    "rowids": int(self.rowids.nbytes)},
                         peak_build_bytes=self.peak_bytes)


def pairs_schema(prefix: str) -> Nested:
    """The saved form of :class:`SortedPairs` at ``prefix`` of a state, for the plugin's
    ``state_schema``: ``n`` keys of the native dtype in order, their rowIDs each of ``0 ..
    n - 1`` once (a lookup reads ``values[rowid]`` with what it finds there)."""
    return Nested(prefix,
                  Array("keys", dtype="native", shape=("n",), order="nondecreasing"),
                  Array("rowids", dtype="rowid", shape=("n",), permutation=True),
                  Value("peak_bytes", int, at_least=0))


def sort_pairs(keys: Any, rowid_dtype: Any) -> SortedPairs:
    """Stable sort of ``keys`` with their positions, on the keys' device.

    On the CPU integer keys are sorted with NumPy's vectorised (unstable) sorts and made
    stable by packing positions into the words sorted (:func:`_packed_sort`, else
    :func:`_stable_order`); other keys with NumPy's stable argsort. On the GPU CuPy's
    argsort (a CUB radix sort of (key, index) pairs). Peak bytes count the int64
    permutation, the sort's double buffers (one extra copy of keys and permutation, as CUB's
    out-of-place radix sort holds) and the two outputs.
    """
    n = int(keys.shape[0])
    packed = _packed_sort(keys) if isinstance(keys, np.ndarray) else None
    if packed is not None:
        sorted_keys, order = packed
    else:
        if isinstance(keys, np.ndarray):
            fast = _stable_order(keys)
            order = fast if fast is not None else np.argsort(keys, kind="stable")
        else:
            import cupy

            order = cupy.argsort(keys)
        sorted_keys = keys[order]
    rowids = order.astype(rowid_dtype)
    kb, rb = keys.dtype.itemsize, np.dtype(rowid_dtype).itemsize
    # permutation + sort double buffers (keys and indices); the CPU's faster sorts hold at
    # most 16 + kb bytes a key at once (_packed_sort: words, shifted words, keys narrowed
    # from them; _stable_order: 17), and 8 + kb + rb after them: under it
    peak = n * (2 * (kb + 8))
    peak = max(peak, n * (8 + kb + rb))  # permutation + both outputs, after the sort
    return SortedPairs(sorted_keys, rowids, peak)


#: Keys from which the CPU sorts by :func:`_stable_order`: below, its few extra passes cost
#: more than they save (10 keys: 18 us against 4 us for the stable argsort; 1,000: even).
FAST_FROM = 2048


def _fast(keys: np.ndarray) -> bool:
    """Whether the CPU's faster sorts take ``keys``: integers, one column, at least
    :data:`FAST_FROM` of them."""
    return keys.dtype.kind in "iu" and keys.ndim == 1 and int(keys.shape[0]) >= FAST_FROM


def _stable_order(keys: np.ndarray) -> np.ndarray | None:
    """The stable order of integer ``keys`` (as ``np.argsort(kind="stable")``, int64) whose
    span and positions do not fit one word together (:func:`_packed_sort` takes the others),
    from NumPy's unstable argsort, several times faster than its stable sort on 64-bit keys:
    its runs of equal keys then get their positions in order by one sort of (run number,
    position) words. None for other keys, and where run numbers and positions do not fit one
    word either, and below :data:`FAST_FROM` keys."""
    n = int(keys.shape[0])
    if not _fast(keys):
        return None
    shift = (n - 1).bit_length()
    if 2 * shift > 64:  # run numbers and positions do not fit one word
        return None
    order = np.argsort(keys)
    ordered = keys[order]
    change = ordered[1:] != ordered[:-1]
    del ordered
    if change.all():  # no two keys equal: every order is the stable one
        return order
    words = np.empty(n, dtype=np.uint64)
    words[0] = 0
    np.cumsum(change, out=words[1:])  # each key's run number
    del change
    words <<= np.uint64(shift)
    words |= order.view(np.uint64)
    del order
    words.sort()  # runs in key order, positions ascending within each
    words &= np.uint64((1 << shift) - 1)
    return words.view(np.int64)


#: Positions packed into the words at a time (:func:`_packed_sort`): one small buffer reused,
#: instead of a fresh array of every position whose first touch costs more than the OR.
POSITIONS_AT_ONCE = 1 << 16


def _packed_sort(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The keys sorted and their stable order (int64) by one sort of packed words, or None
    where they do not fit one word (or are not for the faster sorts, :func:`_fast`): each
    key's offset from the smallest in the high bits, its position in the low
    ``bit_length(n - 1)`` bits. The words are distinct and ordered as (key, position), so
    NumPy's unstable vectorised sort of them gives the stable order, several times faster
    than the stable argsort on a CPU with AVX-512 or AVX2; the sorted keys are the high bits
    plus the smallest key (a pass over the words instead of a gather of the keys in that
    order), the order the low bits.
    """
    if not _fast(keys):
        return None
    n = int(keys.shape[0])
    low, high = int(keys.min()), int(keys.max())
    shift = (n - 1).bit_length()
    if (high - low).bit_length() + shift > 64:
        return None
    signed = keys.dtype.kind == "i"
    words = keys.astype(np.int64 if signed else np.uint64).view(np.uint64)
    base = np.uint64(low % (1 << 64))
    words -= base  # offsets from the smallest key, wrapping
    words <<= np.uint64(shift)
    positions = np.arange(min(n, POSITIONS_AT_ONCE), dtype=np.uint64)
    for start in range(0, n, POSITIONS_AT_ONCE):
        stop = min(n, start + POSITIONS_AT_ONCE)
        words[start:stop] |= positions[:stop - start]
        positions += np.uint64(POSITIONS_AT_ONCE)
    words.sort()
    ordered = words >> np.uint64(shift)
    ordered += base  # back to the keys, wrapping as they were taken
    sorted_keys = (ordered.view(np.int64) if signed else ordered).astype(keys.dtype, copy=False)
    del ordered
    words &= np.uint64((1 << shift) - 1)
    return sorted_keys, words.view(np.int64)
