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

from typing import Any, ClassVar

from indexzoo import Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.native.csr import gather_runs_xp
from indexzoo.native.sort import sort_pairs

__all__ = ["SearchsortedIndex"]


class SearchsortedIndex(GpuIndex):
    """numpy/cupy ``searchsorted`` over sorted (key, rowID) pairs: the peer of every benchmark."""

    name: ClassVar[str] = "searchsorted"
    Params: ClassVar[type[IndexParams]] = IndexParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)

    def _build(self, keys: Any) -> None:
        self._pairs = sort_pairs(keys, self.rowid_dtype)
        self._keys, self._rowids = self._pairs.keys, self._pairs.rowids

    def _footprint(self) -> Footprint:
        return self._pairs.footprint()

    def _first(self, start: Any, hit: Any) -> Any:
        xp = self.xp
        last = xp.minimum(start, self._keys.shape[0] - 1)
        return xp.where(hit(last), self._rowids[last], self.miss).astype(self.rowid_dtype)

    def _runs(self, start: Any, stop: Any) -> tuple[Any, Any]:
        return gather_runs_xp(self._rowids, start, self.xp.maximum(stop - start, 0))

    def _point_rowid(self, q: Any) -> Any:
        start = self.xp.searchsorted(self._keys, q, side="left")
        return self._first(start, lambda p: self._keys[p] == q)

    def _point_count(self, q: Any) -> Any:
        xp = self.xp
        n = xp.searchsorted(self._keys, q, side="right") - xp.searchsorted(self._keys, q)
        return n.astype(self.rowid_dtype)

    def _point_rowids(self, q: Any) -> tuple[Any, Any]:
        xp = self.xp
        return self._runs(xp.searchsorted(self._keys, q, side="left"),
                          xp.searchsorted(self._keys, q, side="right"))

    def _range_rowid(self, lo: Any, hi: Any) -> Any:
        start = self.xp.searchsorted(self._keys, lo, side="left")
        return self._first(start, lambda p: (self._keys[p] >= lo) & (self._keys[p] <= hi))

    def _range_count(self, lo: Any, hi: Any) -> Any:
        xp = self.xp
        n = xp.searchsorted(self._keys, hi, side="right") - xp.searchsorted(self._keys, lo)
        return xp.maximum(n, 0).astype(self.rowid_dtype)

    def _range_rowids(self, lo: Any, hi: Any) -> tuple[Any, Any]:
        xp = self.xp
        return self._runs(xp.searchsorted(self._keys, lo, side="left"),
                          xp.searchsorted(self._keys, hi, side="right"))
