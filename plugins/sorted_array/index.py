"""``sorted-array``: the SA baseline of the RX paper (Henneberg & Schuhknecht, PVLDB 16,
section 4.1) and of the lightweight-indexing paper (AO+BS without optimisations).

Paper -> code
-------------
* "Sorted with CUB radix sort": :func:`indexzoo.native.sort.sort_pairs` sorts (key, rowID)
  pairs with CuPy's argsort (CUB radix sort) on the GPU, NumPy's stable sort on the CPU.
  Stored: sorted keys and the sorted original offsets (= rowIDs), as in the artifact.
* "Naive binary search": :func:`indexzoo.native.search.lower_bound`, one thread per lookup,
  one numba source compiled for both devices (:mod:`indexzoo.plugins.sorted_array.kernels`).
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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams, Operation
from indexzoo.native.lazy import lazy_module
from indexzoo.native.sort import SortedPairs, pairs_schema, sort_pairs
from indexzoo.native.targets import Slot, one_per_item, values_arg
from indexzoo.persist import StateSchema

from .params import SortedArrayParams

if TYPE_CHECKING:
    from indexzoo.native import csr

    from . import kernels as k
else:  # imported when an index is built or loaded: the registry lists the class without them
    csr = lazy_module("indexzoo.native.csr")
    k = lazy_module("indexzoo.plugins.sorted_array.kernels")

__all__ = ["SortedArrayIndex", "SortedArrayState"]


class SortedArrayState(BuildState):
    """One build of ``sorted-array``: the sorted (key, rowID) pairs."""

    pairs: SortedPairs


class SortedArrayIndex(GpuIndex[SortedArrayState]):
    """Sorted (key, rowID) array with naive binary search: the SA baseline of the RX paper."""

    name: ClassVar[str] = "sorted-array"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-26-defaults-c90bde0/: 9.2 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 4e6, "cuda": 7.3e9}
    Params: ClassVar[type[IndexParams]] = SortedArrayParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: the sorted pairs (see :func:`~indexzoo.native.sort.pairs_schema`)
    state_schema: ClassVar[StateSchema] = StateSchema(pairs_schema("pairs"))
    #: a point lookup q is the range [q, q], but for rowid (one search, not two)
    points_as_ranges: ClassVar[bool] = True
    params: SortedArrayParams

    def _build(self, st: SortedArrayState, keys: Any) -> None:
        st.pairs = sort_pairs(keys, st.rowid_dtype)

    def _footprint(self, st: SortedArrayState) -> Footprint:
        return st.pairs.footprint()

    # -------------------------------------------------------------- kernels
    def _launch(self, kernel: Any, n: int, *args: Any) -> None:
        kernel(self.device, n, *args, threads_per_block=self.params.threads_per_block)

    def _rowid(self, st: SortedArrayState, kernel: Any, *queries: Any) -> Any:
        out = st.xp.empty(queries[0].shape[0], dtype=st.rowid_dtype)
        self._launch(kernel, out.shape[0], st.pairs.keys, st.pairs.rowids, *queries, out,
                     st.miss)
        return out

    # -------------------------------------------------------------- hooks
    def _prepared_point(self, st: SortedArrayState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups with the sorted pairs bound into the launch: a call allocates the
        answer and launches (the small-batch path)."""
        if op.out != "rowid":
            return None
        launch = k.POINT_ROWID.bind(self.device, st.pairs.keys, st.pairs.rowids,
                                    Slot(st.native_dtype), Slot(st.rowid_dtype), st.miss,
                                    threads_per_block=self.params.threads_per_block)
        return one_per_item(launch, st.xp, st.rowid_dtype)

    def _point_rowid(self, st: SortedArrayState, q: Any) -> Any:
        return self._rowid(st, k.POINT_ROWID, q)

    def _range_rowid(self, st: SortedArrayState, lo: Any, hi: Any) -> Any:
        return self._rowid(st, k.RANGE_ROWID, lo, hi)

    def _range_count(self, st: SortedArrayState, lo: Any, hi: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype=st.rowid_dtype)
        self._launch(k.COUNT, out.shape[0], st.pairs.keys, lo, hi, out)
        return out

    def _range_sum(self, st: SortedArrayState, lo: Any, hi: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype="uint64")
        values, use_values = values_arg(st.values, st.xp)
        self._launch(k.SUM, out.shape[0], st.pairs.keys, st.pairs.rowids, values, use_values,
                     lo, hi, out)
        return out

    def _range_rowids(self, st: SortedArrayState, lo: Any, hi: Any) -> tuple[Any, Any]:
        q = lo.shape[0]
        start = st.xp.empty(q, dtype="int64")
        count = st.xp.empty(q, dtype="int64")
        self._launch(k.BOUNDS, q, st.pairs.keys, lo, hi, start, count)
        return csr.gather_runs(self.device, st.pairs.rowids, start, count,
                               threads_per_block=self.params.threads_per_block)
