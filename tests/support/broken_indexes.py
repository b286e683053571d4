"""Deliberately broken indexes: each breaks one promise of the contract, and the conformance
suite must report it. They wrap ``sorted-array`` and change one thing.

The subtly wrong ones (:data:`SUBTLE_FAILURE`) answer right on most inputs and go wrong past
one threshold of their own (a batch size, a number of distinct keys, a number of copies, a
bound's top bit, a sum past 64 bits, a model's error): each names the suite size at which
``indexzoo check`` catches it and the check that does."""

from __future__ import annotations

import time
import weakref
from typing import Any, ClassVar, Literal

import numpy as np

from indexzoo import Capabilities, InvalidInput
from indexzoo.native.csr import gather_runs_xp
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

# ---------------------------------------------------------------------------------------
# Subtly wrong indexes: right on most inputs, wrong past one threshold. Each answers every
# lookup from the positions [start, stop) of its matches in the sorted keys, found with NumPy
# (CPU only); each changes how those positions are found in one way.


class _AnswersFromBounds(SortedArrayIndex):
    """``sorted-array`` answering every out mode from the bounds :meth:`_bounds` finds."""

    name: ClassVar[str] = "bounds-reference"
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True,
                                                        duplicates=True, devices=("cpu",))

    def _bounds(self, st: Any, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = st.pairs.keys
        start = np.searchsorted(keys, lo, side="left")
        return start, np.maximum(np.searchsorted(keys, hi, side="right"), start)

    def _point_rowid(self, st: Any, q: Any) -> Any:
        return self._range_rowid(st, q, q)

    def _range_rowid(self, st: Any, lo: Any, hi: Any) -> Any:
        start, stop = self._bounds(st, lo, hi)
        out = np.full(lo.shape[0], st.miss, dtype=st.rowid_dtype)
        hit = stop > start
        out[hit] = st.pairs.rowids[start[hit]]  # the smallest matching rowID: a stable sort
        return out

    def _range_count(self, st: Any, lo: Any, hi: Any) -> Any:
        start, stop = self._bounds(st, lo, hi)
        return (stop - start).astype(st.rowid_dtype)

    def _range_sum(self, st: Any, lo: Any, hi: Any) -> Any:
        start, stop = self._bounds(st, lo, hi)
        prefix = self._prefix(st)
        return prefix[stop] - prefix[start]

    def _range_rowids(self, st: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
        start, stop = self._bounds(st, lo, hi)
        return gather_runs_xp(st.pairs.rowids, start, stop - start)

    @staticmethod
    def _prefix(st: Any) -> np.ndarray:
        """Sums of the values of the first i sorted keys (uint64, wrapping)."""
        rows = st.pairs.rowids.astype(np.int64)
        vals = rows.astype(np.uint64) if st.values is None else st.values[rows]
        prefix = np.zeros(rows.shape[0] + 1, dtype=np.uint64)
        np.cumsum(vals, dtype=np.uint64, out=prefix[1:])
        return prefix


class MissesEveryKthLookupInLargeBatches(_AnswersFromBounds):
    """In a batch of more than 300,007 lookups, every 93,001st lookup finds nothing, as a
    kernel whose large-batch path (a grid-stride loop, a chunked launch) skips an item would."""

    name: ClassVar[str] = "broken-every-kth-in-large-batches"
    BATCH_OVER: ClassVar[int] = 300_007
    EVERY: ClassVar[int] = 93_001

    def _bounds(self, st: Any, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start, stop = super()._bounds(st, lo, hi)
        if lo.shape[0] > self.BATCH_OVER:
            stop[self.EVERY - 1::self.EVERY] = start[self.EVERY - 1::self.EVERY]
        return start, stop


class _LearnedBounds(_AnswersFromBounds):
    """A learned index: piecewise linear models over the distinct keys, SEGMENT keys each,
    predict a key's rank, and the search looks only inside the model's error window (the
    largest error of the segment's keys, at most MOST_WINDOW). Right while no error exceeds
    MOST_WINDOW and the slopes are kept in float64."""

    SEGMENT: ClassVar[int] = 1 << 62  # one model over all keys
    MOST_WINDOW: ClassVar[float] = float("inf")
    #: slopes rounded to float32 where the build has more distinct keys than this
    FLOAT32_ABOVE: ClassVar[int] = 1 << 62

    def _model(self, st: Any) -> tuple[np.ndarray, ...]:
        """(distinct keys, position of each one's first copy and n, segment heads, segment
        ends, slopes, error windows) of build ``st``, made once per build (and again for a
        loaded or unpickled one: the saved state holds the sorted pairs only)."""
        model = _MODELS.get(st)
        if model is None:
            model = _MODELS[st] = self._fit(st.pairs.keys)
        return model

    def _fit(self, k: np.ndarray) -> tuple[np.ndarray, ...]:
        first = np.ones(k.shape[0], dtype=bool)
        first[1:] = k[1:] != k[:-1]
        u = k[first]
        d = u.shape[0]
        seg = min(self.SEGMENT, max(d, 1))
        heads = np.arange(0, d, seg)
        ends = np.minimum(heads + seg, d) - 1
        span = (u[ends] - u[heads]).astype(np.float64)
        slope = np.where(span > 0, (ends - heads) / np.where(span > 0, span, 1), 0.0)
        j = np.arange(d)
        err = np.abs(self._predict(u, heads, u[heads], slope, j // seg) - j)
        window = np.minimum(np.maximum.reduceat(err, heads), self.MOST_WINDOW) if d else err
        if d > self.FLOAT32_ABOVE:
            slope = slope.astype(np.float32).astype(np.float64)
        return u, np.append(np.flatnonzero(first), k.shape[0]), heads, ends, slope, window

    @staticmethod
    def _predict(x: np.ndarray, heads: np.ndarray, head_keys: np.ndarray, slope: np.ndarray,
                 s: np.ndarray) -> np.ndarray:
        return heads[s] + slope[s] * (x - head_keys[s]).astype(np.float64)

    def _rank(self, st: Any, x: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
        """The position in the sorted keys of the first key >= x (left) or > x (right), as
        the model's window search finds it."""
        u, firsts, heads, ends, slope, window = self._model(st)
        if not u.shape[0]:
            return np.zeros(x.shape[0], dtype=np.int64)
        s = np.maximum(np.searchsorted(u[heads], x, side="right") - 1, 0)
        p = self._predict(np.maximum(x, u[0]), heads, u[heads], slope, s)
        a = np.ceil(p - window[s] - 1e-7).astype(np.int64)
        b = np.floor(p + window[s] + 1e-7).astype(np.int64) + 1
        a, b = np.clip(a, heads[s], ends[s] + 1), np.clip(b, heads[s], ends[s] + 1)
        found = np.clip(np.searchsorted(u, x, side=side), a, b)  # nothing outside the window
        return firsts[found]

    def _bounds(self, st: Any, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = self._rank(st, lo, "left")
        return start, np.maximum(self._rank(st, hi, "right"), start)


#: build state -> its learned model (kept out of the state, whose saved form is fixed)
_MODELS: weakref.WeakKeyDictionary[Any, tuple[np.ndarray, ...]] = weakref.WeakKeyDictionary()


class LearnedIndex(_LearnedBounds):
    """The learned index the subtle ones below break: models of 10,000 keys, float64 slopes,
    error windows as wide as the largest error (right on every input)."""

    name: ClassVar[str] = "learned-reference"
    SEGMENT: ClassVar[int] = 10_000


class Float32SlopeAboveManyKeys(_LearnedBounds):
    """Keeps its models' slopes in float32 once built on more than 1,234,567 distinct keys
    (float64 below): a key at the edge of its model's error window is then predicted a
    little outside it and missed (about 5 keys in 100,000)."""

    name: ClassVar[str] = "broken-float32-slope"
    SEGMENT: ClassVar[int] = 10_000
    FLOAT32_ABOVE: ClassVar[int] = 1_234_567


class NoFallbackOutsideTheWindow(_LearnedBounds):
    """Searches at most 150 positions either side of its models' predictions (models of
    10,000 keys) and never beyond: a key whose model errs by more is missed."""

    name: ClassVar[str] = "broken-no-fallback"
    SEGMENT: ClassVar[int] = 10_000
    MOST_WINDOW: ClassVar[float] = 150.0


class LosesCopiesAtTheRangeEnd(_AnswersFromBounds):
    """A range (lo < hi) ending on a key with more than 3 copies counts only 3 of them, as
    a scan that gallops a fixed 3 steps past the upper bound's first copy would."""

    name: ClassVar[str] = "broken-copies-at-range-end"
    SCANNED: ClassVar[int] = 3

    def _bounds(self, st: Any, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start, stop = super()._bounds(st, lo, hi)
        first_hi = np.searchsorted(st.pairs.keys, hi, side="left")
        cut = (lo < hi) & (stop - first_hi > self.SCANNED)
        stop[cut] = np.maximum(first_hi[cut] + self.SCANNED, start[cut])
        return start, stop


class SignedUpperBound(_AnswersFromBounds):
    """Compares a uint64 range's bounds as int64: a range from below 2^63 to 2^63 or above
    (its upper bound "negative") is empty."""

    name: ClassVar[str] = "broken-signed-upper-bound"

    def _bounds(self, st: Any, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start, stop = super()._bounds(st, lo, hi)
        if lo.dtype == np.uint64:
            half = np.uint64(1 << 63)
            stop = np.where((lo < half) & (hi >= half), start, stop)
        return start, stop


class SaturatingSum(_AnswersFromBounds):
    """A sum past 2^64 - 1 stays at 2^64 - 1 instead of wrapping modulo 2^64."""

    name: ClassVar[str] = "broken-saturating-sum"

    def _range_sum(self, st: Any, lo: Any, hi: Any) -> Any:
        start, stop = self._bounds(st, lo, hi)
        rows = st.pairs.rowids.astype(np.int64)
        vals = rows.astype(np.uint64) if st.values is None else st.values[rows]
        approx = np.zeros(rows.shape[0] + 1)
        np.cumsum(vals.astype(np.float64), out=approx[1:])
        wrapped = super()._range_sum(st, lo, hi)
        return np.where(approx[stop] - approx[start] >= 2.0**64,
                        np.uint64(2**64 - 1), wrapped)


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

#: subtly wrong class -> (the suite size that catches it, the check that must fail there)
SUBTLE_FAILURE: dict[type, tuple[str, str]] = {
    MissesEveryKthLookupInLargeBatches: ("large", "sizes/large_batches_answer_every_lookup"),
    Float32SlopeAboveManyKeys: ("large", "sizes/large_key_sets_answer_every_key"),
    LosesCopiesAtTheRangeEnd: ("small", "differential/differential_duplicates"),
    SignedUpperBound: ("small", "extremes/extreme_keys_in_data_and_lookups"),
    SaturatingSum: ("small", "differential/custom_values_are_summed"),
    NoFallbackOutsideTheWindow: ("small", "differential/differential_clustered"),
}
#: the correct index each subtly wrong one breaks
SUBTLE_BASE: dict[type, type] = {
    cls: LearnedIndex if issubclass(cls, _LearnedBounds) else _AnswersFromBounds
    for cls in SUBTLE_FAILURE}
