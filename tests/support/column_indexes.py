"""A brute-force multi-column index (the reference the ``columns`` conformance checks are
tested with) and deliberately broken variants of it, each breaking one promise of the
multi-column contract."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex
from indexzoo.persist import Array, StateSchema
from indexzoo.plugins.sorted_array import SortedArrayIndex
from indexzoo.results import bitmap_words

from .toy_index import csr


class ScanState(BuildState):
    keys: Any  # (N, d) native keys


def pack_rows(mask: Any) -> Any:
    """(Q, N) bool -> (Q, ceil(N/32)) uint32, LSB-first (flat packbits: CuPy has no axis)."""
    xp = np if isinstance(mask, np.ndarray) else __import__("cupy")
    q, n = mask.shape
    words = bitmap_words(n)
    padded = xp.zeros((q, words * 32), dtype=bool)
    padded[:, :n] = mask
    return xp.packbits(padded.reshape(-1), bitorder="little").view(xp.uint32).reshape(q, words)


class ColumnScan(GpuIndex[ScanState]):
    """Brute force over up to five columns: every lookup compares every row."""

    name: ClassVar[str] = "test-column-scan"
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, dims=5)
    plugin_api: ClassVar[str] = "2.0"
    state_schema: ClassVar[StateSchema] = StateSchema(
        Array("keys", dtype="native", shape=("n", "dims")))

    def _build(self, st: ScanState, keys: Any) -> None:
        assert keys.ndim == 2 and keys.shape[1] == st.dims and keys.flags.f_contiguous
        st.keys = keys

    def _mask(self, st: ScanState, lo: Any, hi: Any) -> Any:
        xp = st.xp
        mask = xp.ones((lo.shape[0], st.n), dtype=bool)
        for j in range(st.dims):
            col = st.keys[:, j][None, :]
            mask &= (col >= lo[:, j][:, None]) & (col <= hi[:, j][:, None])
        return mask

    def _range_bitmap(self, st: ScanState, lo: Any, hi: Any) -> Any:
        return pack_rows(self._mask(st, lo, hi))

    def _point_rowids(self, st: ScanState, q: Any) -> tuple[Any, Any]:
        return csr(st, self._mask(st, q, q))

    def _footprint(self, st: ScanState) -> Footprint:
        return Footprint(breakdown={"keys": int(st.keys.nbytes)},
                         peak_build_bytes=int(st.keys.nbytes))


class IgnoresLastColumn(ColumnScan):
    """Drops the predicate of the last column."""

    name: ClassVar[str] = "broken-ignores-last-column"

    def _mask(self, st: ScanState, lo: Any, hi: Any) -> Any:
        if st.dims > 1:
            lo, hi = lo.copy(), hi.copy()
            lo[:, -1], hi[:, -1] = 0, np.iinfo(lo.dtype).max
        return super()._mask(st, lo, hi)


class MsbFirstBitmap(ColumnScan):
    """Packs bits most significant first (RTScan's artifact's order, not the contract's)."""

    name: ClassVar[str] = "broken-msb-first-bitmap"

    def _range_bitmap(self, st: ScanState, lo: Any, hi: Any) -> Any:
        words = super()._range_bitmap(st, lo, hi)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little").reshape(-1, 32)[:, ::-1]
        return np.packbits(bits.reshape(-1), bitorder="little").view(np.uint32).reshape(
            words.shape)


class DirtyPadding(ColumnScan):
    """Sets the padding bits past the last row."""

    name: ClassVar[str] = "broken-dirty-padding"

    def _range_bitmap(self, st: ScanState, lo: Any, hi: Any) -> Any:
        words = super()._range_bitmap(st, lo, hi)
        if st.n % 32:
            words[:, -1] |= np.uint32(~((1 << (st.n % 32)) - 1) & 0xFFFFFFFF)
        return words


class WritesItsBounds(ColumnScan):
    """Clamps the lower bounds it is given in place (the caller's own array, when the bounds
    are (Q, d) native keys)."""

    name: ClassVar[str] = "broken-writes-its-bounds"

    def _range_bitmap(self, st: ScanState, lo: Any, hi: Any) -> Any:
        lo[lo > hi] = hi[lo > hi]
        return super()._range_bitmap(st, lo, hi)


class BigEndianBitmap(SortedArrayIndex):
    """A one-column index whose fused bitmap is byte-swapped."""

    name: ClassVar[str] = "broken-big-endian-bitmap"

    def _range_bitmap(self, st: Any, lo: Any, hi: Any) -> Any:
        from indexzoo.results import bitmap_from_csr

        offsets, rowids = self._range_rowids(st, lo, hi)
        return bitmap_from_csr(offsets, rowids, st.n).byteswap()


#: broken class -> the check that must catch it (group/name)
EXPECTED_FAILURE: dict[type, str] = {
    IgnoresLastColumn: "columns/conjunctions_match_the_and_of_column_predicates",
    MsbFirstBitmap: "columns/bitmaps_at_row_counts_around_multiples_of_32",
    DirtyPadding: "columns/bitmaps_at_row_counts_around_multiples_of_32",
    WritesItsBounds: "columns/the_callers_columns_are_copied",
    BigEndianBitmap: "out_modes/bitmaps_are_packed_lsb_first_with_zero_padding",
}
