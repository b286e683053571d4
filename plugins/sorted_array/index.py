"""``sorted-array``: the SA baseline of the RX paper (Henneberg & Schuhknecht, PVLDB 16,
section 4.1) and of the lightweight-indexing paper (AO+BS without optimisations).

Paper -> code
-------------
* "Sorted with CUB radix sort": :func:`indexzoo.native.sort.sort_pairs` sorts (key, rowID)
  pairs with CuPy's argsort (CUB radix sort) on the GPU, NumPy's stable sort on the CPU.
  Stored: sorted keys and the sorted original offsets (= rowIDs), as in the artifact.
* "Naive binary search": :func:`indexzoo.native.search.lower_bound`, one thread per lookup,
  one numba source compiled for both devices (:mod:`indexzoo.native.sorted_lookup`).
* "Range lookups find the lower bound and then scan": ``range_bounds`` finds the lower bound
  of ``lo``; ``sum`` and ``rowids`` then scan the run of matches.

Decisions where the papers are silent or differ
-----------------------------------------------
* [AMBIG] The artifact's SA point lookup returns one match. Here a point lookup sees every
  duplicate (``count``, ``sum``, ``rowids``); ``rowid`` returns the smallest matching rowID
  (the sort is stable).
* [AMBIG] The end of a run of matches is found by galloping from the lower bound (1, 2, 4,
  ... then binary search) instead of a linear scan, so ``count`` costs O(log m) for m
  matches; the paper's scan remains where every match is visited anyway (``sum``,
  ``rowids``).
* The artifact's binary search is a fixed-skip loop from 2^30 (32-bit positions); ours
  halves ``[lo, hi)`` with 64-bit positions, so more than 2^31 keys work.
"""

from __future__ import annotations

from typing import Any, ClassVar

from indexzoo import Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.native import sorted_lookup as k
from indexzoo.native.csr import gather_runs
from indexzoo.native.sort import sort_pairs
from indexzoo.native.targets import KernelParams, values_arg

__all__ = ["SortedArrayIndex"]


class SortedArrayParams(KernelParams):
    """Parameters of ``sorted-array``."""


class SortedArrayIndex(GpuIndex):
    """Sorted (key, rowID) array with naive binary search: the SA baseline of the RX paper."""

    name: ClassVar[str] = "sorted-array"
    Params: ClassVar[type[IndexParams]] = SortedArrayParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    params: SortedArrayParams

    def _build(self, keys: Any) -> None:
        self._pairs = sort_pairs(keys, self.rowid_dtype)
        self._keys, self._rowids = self._pairs.keys, self._pairs.rowids

    def _footprint(self) -> Footprint:
        return self._pairs.footprint()

    # -------------------------------------------------------------- kernels
    def _launch(self, kernel: Any, n: int, *args: Any) -> None:
        kernel(self.device, n, *args, threads_per_block=self.params.threads_per_block)

    def _rowid(self, kernel: Any, *queries: Any) -> Any:
        out = self.xp.empty(queries[0].shape[0], dtype=self.rowid_dtype)
        self._launch(kernel, out.shape[0], self._keys, self._rowids, *queries, out, self.miss)
        return out

    def _count(self, lo: Any, hi: Any) -> Any:
        out = self.xp.empty(lo.shape[0], dtype=self.rowid_dtype)
        self._launch(k.COUNT, out.shape[0], self._keys, lo, hi, out)
        return out

    def _sum(self, lo: Any, hi: Any) -> Any:
        out = self.xp.empty(lo.shape[0], dtype="uint64")
        values, use_values = values_arg(self._values, self.xp)
        self._launch(k.SUM, out.shape[0], self._keys, self._rowids, values, use_values, lo, hi, out)
        return out

    def _rowids_csr(self, lo: Any, hi: Any) -> tuple[Any, Any]:
        q = lo.shape[0]
        start = self.xp.empty(q, dtype="int64")
        count = self.xp.empty(q, dtype="int64")
        self._launch(k.BOUNDS, q, self._keys, lo, hi, start, count)
        return gather_runs(self.device, self._rowids, start, count,
                           threads_per_block=self.params.threads_per_block)

    # -------------------------------------------------------------- hooks
    def _point_rowid(self, q: Any) -> Any:
        return self._rowid(k.POINT_ROWID, q)

    def _point_count(self, q: Any) -> Any:
        return self._count(q, q)

    def _point_sum(self, q: Any) -> Any:
        return self._sum(q, q)

    def _point_rowids(self, q: Any) -> tuple[Any, Any]:
        return self._rowids_csr(q, q)

    def _range_rowid(self, lo: Any, hi: Any) -> Any:
        return self._rowid(k.RANGE_ROWID, lo, hi)

    def _range_count(self, lo: Any, hi: Any) -> Any:
        return self._count(lo, hi)

    def _range_sum(self, lo: Any, hi: Any) -> Any:
        return self._sum(lo, hi)

    def _range_rowids(self, lo: Any, hi: Any) -> tuple[Any, Any]:
        return self._rowids_csr(lo, hi)
