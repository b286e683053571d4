"""Deliberately broken indexes: each breaks one promise of the contract, and the conformance
suite must report it. They wrap ``sorted-array`` and change one thing."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from indexzoo import InvalidInput
from indexzoo.plugins.sorted_array import SortedArrayIndex


def _minus_one(hi: Any) -> Any:
    return hi - hi.dtype.type(1)


class OffByOneRangeBound(SortedArrayIndex):
    """Treats the upper range bound as exclusive."""

    name: ClassVar[str] = "broken-off-by-one"

    def _range_rowid(self, lo: Any, hi: Any) -> Any:
        return super()._range_rowid(lo, _minus_one(hi))

    def _range_count(self, lo: Any, hi: Any) -> Any:
        return super()._range_count(lo, _minus_one(hi))

    def _range_sum(self, lo: Any, hi: Any) -> Any:
        return super()._range_sum(lo, _minus_one(hi))

    def _range_rowids(self, lo: Any, hi: Any) -> tuple[Any, Any]:
        return super()._range_rowids(lo, _minus_one(hi))


class DropsDuplicates(SortedArrayIndex):
    """Keeps only the first row of every key."""

    name: ClassVar[str] = "broken-drops-duplicates"

    def _build(self, keys: Any) -> None:
        super()._build(keys)
        xp = self.xp
        first = xp.ones(self._keys.shape[0], dtype=bool)
        first[1:] = self._keys[1:] != self._keys[:-1]
        self._keys, self._rowids = self._keys[first], self._rowids[first]


class WrongMissValue(SortedArrayIndex):
    """Reports rowID 0 instead of index.miss for a lookup without a match."""

    name: ClassVar[str] = "broken-miss-value"

    def _point_rowid(self, q: Any) -> Any:
        r = super()._point_rowid(q)
        return self.xp.where(r == self.miss, self.rowid_dtype.type(0), r)

    def _range_rowid(self, lo: Any, hi: Any) -> Any:
        r = super()._range_rowid(lo, hi)
        return self.xp.where(r == self.miss, self.rowid_dtype.type(0), r)


class IgnoresValuesInSum(SortedArrayIndex):
    """Sums rowIDs even when values were given."""

    name: ClassVar[str] = "broken-ignores-values"

    def _sum(self, lo: Any, hi: Any) -> Any:
        values, self._values = self._values, None
        try:
            return super()._sum(lo, hi)
        finally:
            self._values = values


class CorruptsAfterBadInput(SortedArrayIndex):
    """Loses half its keys when a lookup is rejected."""

    name: ClassVar[str] = "broken-corrupts"

    def point(self, queries: Any, *, out: Any = "rowid") -> Any:
        try:
            return super().point(queries, out=out)
        except InvalidInput:
            half = np.int64(self._keys.shape[0] // 2)
            self._keys, self._rowids = self._keys[:half], self._rowids[:half]
            raise


#: broken class -> the check that must catch it (group/name)
EXPECTED_FAILURE = {
    OffByOneRangeBound: "ranges/range_bounds_are_inclusive",
    DropsDuplicates: "out_modes/point_lookups_see_every_duplicate",
    WrongMissValue: "out_modes/rowid_is_a_match_or_the_miss_value",
    IgnoresValuesInSum: "differential/custom_values_are_summed",
    CorruptsAfterBadInput: "bad_input/bad_input_raises_and_leaves_the_index_correct",
}
