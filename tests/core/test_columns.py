"""Multi-column input (capabilities.dims > 1) and the bitmap out mode, specified on a
brute-force column index."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.column_indexes import ColumnScan

from indexzoo import InvalidInput, Unsupported
from indexzoo.results import (
    bitmap_from_csr,
    count_from_bitmap,
    csr_from_bitmap,
)

A = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.uint32)
B = np.array([2, 7, 1, 8, 2, 8, 1, 8], dtype=np.int64) - 4
C = np.array([0.5, -1.0, 2.5, 0.0, -0.0, 3.0, 1.5, 2.0], dtype=np.float32)


def brute(lo: list, hi: list) -> list[np.ndarray]:
    cols = [A, B, C][:len(lo)]
    q = next(len(x) for x in [*lo, *hi] if x is not None)
    out = []
    for i in range(q):
        m = np.ones(A.shape[0], bool)
        for c, a, b in zip(cols, lo, hi, strict=True):
            if a is not None:
                m &= c >= a[i]
            if b is not None:
                m &= c <= b[i]
        out.append(np.flatnonzero(m))
    return out


def test_bitmap_bits_are_lsb_first_and_padding_is_zero() -> None:
    offsets = np.array([0, 3, 3, 4], dtype=np.int64)
    rowids = np.array([0, 33, 31, 34], dtype=np.uint32)
    words = bitmap_from_csr(offsets, rowids, 35)
    assert words.shape == (3, 2) and words.dtype == np.uint32
    assert words[0].tolist() == [1 | (1 << 31), 1 << 1]
    assert words[1].tolist() == [0, 0] and words[2].tolist() == [0, 1 << 2]
    assert np.array_equal(words[0].view(np.uint8), np.packbits(
        np.isin(np.arange(64), [0, 31, 33]), bitorder="little"))
    off, rows = csr_from_bitmap(words, np.uint32)
    assert off.tolist() == [0, 3, 3, 4] and rows.tolist() == [0, 31, 33, 34]  # ascending
    assert count_from_bitmap(words, np.uint32).tolist() == [3, 0, 1]


def test_every_index_offers_bitmaps_derived_from_its_rowids() -> None:
    from indexzoo import create

    index = create("sorted-array").build(np.array([7, 3, 7, 1], np.uint32))
    res = index.point(np.array([7, 2], np.uint32), out="bitmap")
    assert res.bitmap.tolist() == [[0b0101], [0]]
    assert res.matches(0).tolist() == [0, 2]


def test_build_takes_a_2d_array_or_a_list_of_columns_of_any_dtypes() -> None:
    idx = ColumnScan().build([A, B, C])
    assert idx.key_dtypes == (A.dtype, B.dtype, C.dtype) and len(idx) == 8
    same = ColumnScan().build(np.column_stack([A, B]))
    lo, hi = [np.array([1, 2]), np.array([-3, 0])], [np.array([4, 9]), np.array([3, 4])]
    want = brute(lo, hi)
    for index in (ColumnScan().build([A, B]), same):
        got = index.range(lo, hi, out="rowids")
        assert [got.matches(i).tolist() for i in range(2)] == [w.tolist() for w in want]
    assert "rows of (uint32, int64, float32)" in repr(idx)


def test_none_leaves_one_side_of_a_column_open() -> None:
    idx = ColumnScan().build([A, B, C])
    lo = [None, np.array([-3]), None]
    hi = [np.array([4]), None, np.array([1.0])]
    got = idx.range(lo, hi, out="bitmap").matches(0)
    assert got.tolist() == brute(lo, hi)[0].tolist()


def test_float_bounds_round_inwards_and_minus_zero_equals_zero() -> None:
    idx = ColumnScan().build([A, C])
    res = idx.point([np.array([1, 5], np.uint32), np.array([0.0, 0.0], np.float32)],
                    out="rowids")
    assert res.matches(0).tolist() == [3] and res.matches(1).tolist() == [4]


def test_a_bound_outside_a_columns_dtype_empties_or_opens_that_side() -> None:
    idx = ColumnScan().build([A, B])
    lo = [np.array([-5, 2**40], np.int64), np.array([-(2**62), -100], np.int64)]
    hi = [np.array([2**40, 2**41], np.int64), np.array([2**62, 100], np.int64)]
    got = idx.range(lo, hi, out="count").count.tolist()
    assert got == [8, 0]


def test_point_lookups_outside_a_columns_dtype_miss() -> None:
    idx = ColumnScan().build([A, B])
    res = idx.point([np.array([3, 2**40], np.int64), np.array([-2, -2], np.int64)], out="count")
    assert res.count.tolist() == [1, 0]


@pytest.mark.parametrize("call", [
    lambda i: i.point([np.array([1], np.uint32)]),
    lambda i: i.point(np.zeros((1, 3), np.uint32)),
    lambda i: i.range([np.array([1])], [np.array([1]), np.array([1])]),
    lambda i: i.range([np.array([1]), None], [np.array([1, 2]), None]),
    lambda i: i.range([None, None], [None, None]),
    lambda i: i.range([np.array([np.nan]), None], [np.array([1.0]), None]),
    lambda i: i.range([np.ma.masked_array([1], mask=[True]), None], [np.array([1]), None]),
], ids=["too-few-columns", "too-many-columns", "lo-hi-columns", "lo-hi-lengths", "all-none",
        "nan", "masked-column"])
def test_bad_lookups_raise_invalid_input_and_change_nothing(call) -> None:  # type: ignore[no-untyped-def]
    idx = ColumnScan().build([A, B])
    before = idx.range([np.array([0]), None], [None, np.array([0])], out="bitmap").bitmap
    with pytest.raises(InvalidInput):
        call(idx)
    after = idx.range([np.array([0]), None], [None, np.array([0])], out="bitmap").bitmap
    assert np.array_equal(before, after)


def test_bad_builds_raise_and_keep_the_previous_build() -> None:
    idx = ColumnScan().build([A, B])
    for bad in ([A, B[:3]], [A] * 6, np.zeros((2, 2, 2), np.uint32), [A, None]):
        with pytest.raises(InvalidInput):
            idx.build(bad)
    assert idx.key_dtypes == (A.dtype, B.dtype)


def test_a_multi_column_index_takes_one_column_as_a_1d_array() -> None:
    idx = ColumnScan().build(A)
    assert idx.point(np.array([1], np.uint32), out="rowids").matches(0).tolist() == [1, 3]
    assert idx.range(np.array([2]), np.array([4]), out="count").count.tolist() == [3]


def test_updates_of_multi_column_builds_are_unsupported() -> None:
    class Updatable(ColumnScan):
        from indexzoo import Capabilities

        name = "test-updatable-columns"
        capabilities = Capabilities(point=True, range=True, dims=3, updates=True)

    with pytest.raises(Unsupported):
        Updatable().build([A, B]).update([0], [1])


def test_sorted_probes_sort_by_the_first_column() -> None:
    idx = ColumnScan({"sort_probes": True}).build([A, B])
    q = [np.array([9, 1, 3], np.uint32), np.array([4, 3, -2], np.int64)]
    res = idx.point(q, out="rowids")
    assert [res.matches(i).tolist() for i in range(3)] == [[5], [1], [0]]


def test_bitmaps_that_cannot_fit_raise_resource_error_before_any_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo import ResourceError, lookup, result_memory

    idx = ColumnScan().build([A, B])
    monkeypatch.setattr(result_memory, "available_memory", lambda device: (64, "a test's 64 B"))
    monkeypatch.setattr(lookup, "BITMAP_CHECK_FROM", 0)  # check even this small request
    with pytest.raises(ResourceError, match="out='bitmap' for 100 lookups over 8 rows"):
        idx.range([np.zeros(100, np.uint32), None], [None, np.zeros(100, np.int64)],
                  out="bitmap")
    assert idx.range([np.zeros(100, np.uint32), None], [None, np.zeros(100, np.int64)],
                     out="count").count.shape == (100,)  # other modes go by chunks


def test_small_bitmaps_skip_the_free_memory_query(monkeypatch: pytest.MonkeyPatch) -> None:
    # reading the free memory costs a file read (host) or a driver call (GPU) per call
    from indexzoo import result_memory

    def no_query(device: str) -> None:
        raise AssertionError("available_memory was queried for a small bitmap")

    idx = ColumnScan().build([A, B])
    monkeypatch.setattr(result_memory, "available_memory", no_query)
    res = idx.range([np.zeros(3, np.uint32), None], [None, np.zeros(3, np.int64)], out="bitmap")
    assert res.bitmap.shape[0] == 3


def test_native_2d_bounds_reach_the_index_without_assembly() -> None:
    """(Q, d) bounds already of the index's native dtype are handed on as they are (made
    C-contiguous at most): no per-column copies per call. Any bound that needs the key map
    (another dtype, a bound past the keys' range) takes the column-by-column path, with the
    same answers."""
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    class Spy(ColumnScan):
        def _range_bitmap(self, st: Any, lo: Any, hi: Any) -> Any:
            seen.append((lo, hi))
            return super()._range_bitmap(st, lo, hi)

    cols = np.column_stack([A, A[::-1], A + 1]).astype(np.uint32)
    idx = Spy(device="cpu").build(cols)
    lo = np.array([[1, 2, 2], [0, 0, 0]], np.uint32)
    hi = np.array([[5, 9, 6], [9, 9, 9]], np.uint32)
    mask = np.all((cols[None] >= lo[:, None]) & (cols[None] <= hi[:, None]), axis=2)
    want = [np.flatnonzero(m).tolist() for m in mask]

    def answers(a: object, b: object) -> list[list[int]]:
        got = idx.range(a, b, out="bitmap")
        return [got.matches(i).tolist() for i in range(2)]

    assert answers(lo, hi) == want
    assert seen[-1][0] is lo and seen[-1][1] is hi  # on the CPU: the caller's own arrays
    assert answers(np.asfortranarray(lo), np.asfortranarray(hi)) == want
    assert seen[-1][0].flags.c_contiguous and np.array_equal(seen[-1][0], lo)
    for other in (lo.astype(np.uint64), [lo[:, 0], lo[:, 1], lo[:, 2]]):
        assert answers(other, hi) == want
        assert seen[-1][0] is not lo and np.array_equal(seen[-1][0], lo)
    beyond = hi.astype(np.uint64)
    beyond[1, 2] = 2**40  # past every uint32 key: clamped by the key map
    clamped = hi.copy()
    clamped[1, 2] = 2**32 - 1
    assert answers(lo, beyond) == answers(lo, clamped)
    assert np.array_equal(seen[-2][1], clamped) and seen[-2][1] is not clamped
