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

    NumPy's stable argsort on the CPU; on the GPU CuPy's argsort (a CUB radix sort of
    (key, index) pairs). Peak bytes count the int64 permutation, the sort's double buffers
    (one extra copy of keys and permutation, as CUB's out-of-place radix sort holds) and
    the two outputs.
    """
    n = int(keys.shape[0])
    if isinstance(keys, np.ndarray):
        order = np.argsort(keys, kind="stable")
    else:
        import cupy

        order = cupy.argsort(keys)
    sorted_keys = keys[order]
    rowids = order.astype(rowid_dtype)
    kb, rb = keys.dtype.itemsize, np.dtype(rowid_dtype).itemsize
    peak = n * (2 * (kb + 8))  # permutation + sort double buffers (keys and indices)
    peak = max(peak, n * (8 + kb + rb))  # permutation + both outputs, after the sort
    return SortedPairs(sorted_keys, rowids, peak)
