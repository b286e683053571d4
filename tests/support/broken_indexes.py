"""Deliberately broken indexes: each breaks one promise of the contract, and the conformance
suite must report it. They wrap ``sorted-array`` and change one thing."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from indexzoo import InvalidInput
from indexzoo.native.sort import SortedPairs
from indexzoo.native.targets import values_arg
from indexzoo.plugins.sorted_array import SortedArrayIndex
from indexzoo.plugins.sorted_array import kernels as k


def _minus_one(hi: Any) -> Any:
    return hi - hi.dtype.type(1)


class OffByOneRangeBound(SortedArrayIndex):
    """Treats the upper range bound as exclusive."""

    name: ClassVar[str] = "broken-off-by-one"

    def _range_rowid(self, st: Any, lo: Any, hi: Any) -> Any:
        return super()._range_rowid(st, lo, _minus_one(hi))

    def _range_count(self, st: Any, lo: Any, hi: Any) -> Any:
        return super()._range_count(st, lo, _minus_one(hi))

    def _range_sum(self, st: Any, lo: Any, hi: Any) -> Any:
        return super()._range_sum(st, lo, _minus_one(hi))

    def _range_rowids(self, st: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
        return super()._range_rowids(st, lo, _minus_one(hi))


class DropsDuplicates(SortedArrayIndex):
    """Keeps only the first row of every key."""

    name: ClassVar[str] = "broken-drops-duplicates"

    def _build(self, st: Any, keys: Any) -> None:
        super()._build(st, keys)
        k = st.pairs.keys
        first = st.xp.ones(k.shape[0], dtype=bool)
        first[1:] = k[1:] != k[:-1]
        st.pairs = SortedPairs(k[first], st.pairs.rowids[first], st.pairs.peak_bytes)


class WrongMissValue(SortedArrayIndex):
    """Reports rowID 0 instead of index.miss for a lookup without a match."""

    name: ClassVar[str] = "broken-miss-value"

    def _point_rowid(self, st: Any, q: Any) -> Any:
        r = super()._point_rowid(st, q)
        return st.xp.where(r == st.miss, st.rowid_dtype.type(0), r)

    def _range_rowid(self, st: Any, lo: Any, hi: Any) -> Any:
        r = super()._range_rowid(st, lo, hi)
        return st.xp.where(r == st.miss, st.rowid_dtype.type(0), r)


class IgnoresValuesInSum(SortedArrayIndex):
    """Sums rowIDs even when values were given."""

    name: ClassVar[str] = "broken-ignores-values"

    def _range_sum(self, st: Any, lo: Any, hi: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype="uint64")
        values, use_values = values_arg(None, st.xp)
        self._launch(k.SUM, out.shape[0], st.pairs.keys, st.pairs.rowids, values, use_values,
                     lo, hi, out)
        return out


class CorruptsAfterBadInput(SortedArrayIndex):
    """Loses half its keys when a lookup is rejected."""

    name: ClassVar[str] = "broken-corrupts"

    def point(self, queries: Any, *, out: Any = "rowid") -> Any:
        try:
            return super().point(queries, out=out)
        except InvalidInput:
            st = self.state
            half = np.int64(st.pairs.keys.shape[0] // 2)
            object.__setattr__(st, "pairs", SortedPairs(st.pairs.keys[:half],
                                                        st.pairs.rowids[:half], 0))
            raise


class KeepsTheCallersValues(SortedArrayIndex):
    """Sums the caller's values array itself instead of its own copy."""

    name: ClassVar[str] = "broken-keeps-values"

    def build(self, keys: Any, values: Any = None) -> Any:
        super().build(keys, values)
        if values is not None and isinstance(values, np.ndarray):
            object.__setattr__(self.state, "values", values.view(np.uint64)
                               if values.dtype.itemsize == 8 else self.state.values)
        return self


class RebuildsInPlace(SortedArrayIndex):
    """Publishes a rebuild in two steps (the keys of the new build with the rowIDs of the old
    one for a moment), as an index that builds into its live state would."""

    name: ClassVar[str] = "broken-rebuilds-in-place"

    def _build(self, st: Any, keys: Any) -> None:
        super()._build(st, keys)
        old = self.state if self.is_built else None  # the live build, which lookups read
        if old is not None and st.n <= old.n:  # never longer keys than rowIDs: no bad reads
            object.__setattr__(old, "pairs", SortedPairs(st.pairs.keys, old.pairs.rowids, 0))
            object.__setattr__(old, "values", st.values)
            time.sleep(0.002)



class WrongSumInLargeBatches(SortedArrayIndex):
    """Sums one too many in every batch of more than 5,000 lookups, as a kernel whose large-batch
    path (a parallel loop, a chunked launch) has a bug would."""

    name: ClassVar[str] = "broken-large-batch-sum"

    def _range_sum(self, st: Any, lo: Any, hi: Any) -> Any:  # point sums too: [q, q]
        total = super()._range_sum(st, lo, hi)
        return total + total.dtype.type(1) if lo.shape[0] > 5000 else total

#: broken class -> the check that must catch it (group/name)
EXPECTED_FAILURE = {
    OffByOneRangeBound: "ranges/range_bounds_are_inclusive",
    DropsDuplicates: "out_modes/point_lookups_see_every_duplicate",
    WrongMissValue: "out_modes/rowid_is_a_match_or_the_miss_value",
    IgnoresValuesInSum: "differential/custom_values_are_summed",
    CorruptsAfterBadInput: "bad_input/bad_input_raises_and_leaves_the_index_correct",
    KeepsTheCallersValues: "ownership/changing_the_callers_arrays_after_build_changes_no_answer",
    RebuildsInPlace: "concurrency/lookups_racing_rebuilds_answer_from_one_build",
    WrongSumInLargeBatches: "sizes/batches_above_every_threshold_answer_right",
}
