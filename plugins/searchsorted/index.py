"""``searchsorted``: what a user writes without an index library, kept as the peer that every
benchmark states its ratios against.

The same stable-sorted (key, rowID) pairs as ``sorted-array``; every lookup is composed of
library calls only: ``numpy.searchsorted`` on the CPU, ``cupy.searchsorted`` on the GPU, plus
gathers, comparisons and a repeat for ``rowids``. ``sum`` is left to the base class, which
derives it from ``rowids`` (so this plugin also exercises that path).

* ``rowid``: ``p = searchsorted(keys, q, "left")``; a hit when ``keys[p] == q``.
* ``count``: ``searchsorted(.., "right") - searchsorted(.., "left")``.
* ranges: ``searchsorted(keys, lo, "left")`` and ``searchsorted(keys, hi, "right")``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.native.lazy import lazy_module
from indexzoo.native.sort import SortedPairs, pairs_schema, sort_pairs
from indexzoo.persist import StateSchema

if TYPE_CHECKING:
    from indexzoo.native import csr
else:  # imported on first use: the registry lists the class without the kernels
    csr = lazy_module("indexzoo.native.csr")

__all__ = ["SearchsortedIndex", "SearchsortedState"]


class SearchsortedState(BuildState):
    """One build of ``searchsorted``: the sorted (key, rowID) pairs."""

    pairs: SortedPairs


class SearchsortedIndex(GpuIndex[SearchsortedState]):
    """numpy/cupy ``searchsorted`` over sorted (key, rowID) pairs: the peer of every benchmark."""

    name: ClassVar[str] = "searchsorted"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-26-defaults-c90bde0/: 9.2 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 4e6, "cuda": 7.3e9}
    Params: ClassVar[type[IndexParams]] = IndexParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: the sorted pairs (see :func:`~indexzoo.native.sort.pairs_schema`)
    state_schema: ClassVar[StateSchema] = StateSchema(pairs_schema("pairs"))

    def _build(self, st: SearchsortedState, keys: Any) -> None:
        st.pairs = sort_pairs(keys, st.rowid_dtype)

    def _footprint(self, st: SearchsortedState) -> Footprint:
        return st.pairs.footprint()

    @staticmethod
    def _first(st: SearchsortedState, start: Any, hit: Any) -> Any:
        keys, rowids = st.pairs.keys, st.pairs.rowids
        last = st.xp.minimum(start, keys.shape[0] - 1)
        return st.xp.where(hit(keys[last]), rowids[last], st.miss).astype(st.rowid_dtype)

    @staticmethod
    def _runs(st: SearchsortedState, start: Any, stop: Any) -> tuple[Any, Any]:
        return csr.gather_runs_xp(st.pairs.rowids, start, st.xp.maximum(stop - start, 0))

    def _point_rowid(self, st: SearchsortedState, q: Any) -> Any:
        start = st.xp.searchsorted(st.pairs.keys, q, side="left")
        return self._first(st, start, lambda k: k == q)

    def _point_count(self, st: SearchsortedState, q: Any) -> Any:
        xp, keys = st.xp, st.pairs.keys
        n = xp.searchsorted(keys, q, side="right") - xp.searchsorted(keys, q)
        return n.astype(st.rowid_dtype)

    def _point_rowids(self, st: SearchsortedState, q: Any) -> tuple[Any, Any]:
        xp, keys = st.xp, st.pairs.keys
        return self._runs(st, xp.searchsorted(keys, q, side="left"),
                          xp.searchsorted(keys, q, side="right"))

    def _range_rowid(self, st: SearchsortedState, lo: Any, hi: Any) -> Any:
        start = st.xp.searchsorted(st.pairs.keys, lo, side="left")
        return self._first(st, start, lambda k: (k >= lo) & (k <= hi))

    def _range_count(self, st: SearchsortedState, lo: Any, hi: Any) -> Any:
        xp, keys = st.xp, st.pairs.keys
        n = xp.searchsorted(keys, hi, side="right") - xp.searchsorted(keys, lo)
        return xp.maximum(n, 0).astype(st.rowid_dtype)

    def _range_rowids(self, st: SearchsortedState, lo: Any, hi: Any) -> tuple[Any, Any]:
        xp, keys = st.xp, st.pairs.keys
        return self._runs(st, xp.searchsorted(keys, lo, side="left"),
                          xp.searchsorted(keys, hi, side="right"))
