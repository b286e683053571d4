"""Lookup results handed on (docs/results.md): ``to_pandas()``, ``to_arrow()``, DLPack, and
the miss policy ``miss="sentinel" | -1 | "mask"`` of ``to_host``, ``to_pandas`` and
``to_arrow``.

A GPU result is copied to the host for pandas and Arrow and handed over as the device array
itself through DLPack; on a machine without a GPU a stand-in device array checks that path
(which methods of the array are called), and the test marked ``gpu`` runs it with CuPy.
"""

from __future__ import annotations

import sys
import typing
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo import InvalidInput, LookupResult, MissingDependency, result_export

KEYS = np.array([30, 10, 20, 10], dtype=np.uint32)  # rowIDs 0, 1, 2, 3
ONE_EACH = np.array([20, 25, 30], dtype=np.uint32)  # row 2, no row, row 0
EVERY = np.array([10, 25, 20], dtype=np.uint32)  # rows 1 and 3, no row, row 2
MISS = np.iinfo(np.uint32).max


@pytest.fixture(scope="module")
def index() -> indexzoo.GpuIndex:
    return indexzoo.create("sorted-array", device="cpu").build(KEYS)


def sorted_pairs(frame: Any) -> list[tuple[int, int]]:
    return sorted(zip(frame["query"].tolist(), frame["rowid"].tolist(), strict=True))


# ---------------------------------------------------------------------- the miss policy
def test_the_miss_policies_are_sentinel_minus_one_and_mask() -> None:
    assert typing.get_args(indexzoo.Miss) == ("sentinel", -1, "mask")
    assert result_export.MISS_POLICIES == ("sentinel", -1, "mask")


def test_by_default_a_miss_is_index_miss_the_rowid_dtypes_maximum(index: Any) -> None:
    rowid = index.point(ONE_EACH).to_host().rowid
    assert rowid.dtype == np.uint32 and rowid.tolist() == [2, index.miss, 0]
    assert index.miss == MISS


def test_miss_minus_one_gives_int64_rowids_with_minus_one_for_a_miss(index: Any) -> None:
    rowid = index.point(ONE_EACH).to_host(miss=-1).rowid
    assert rowid.dtype == np.int64 and rowid.tolist() == [2, -1, 0]
    assert index.point(ONE_EACH).to_host(miss=np.int64(-1)).rowid.tolist() == [2, -1, 0]


def test_miss_mask_gives_a_masked_array_masked_at_the_misses(index: Any) -> None:
    rowid = index.point(ONE_EACH).to_host(miss="mask").rowid
    assert isinstance(rowid, np.ma.MaskedArray) and rowid.dtype == np.uint32
    assert rowid.mask.tolist() == [False, True, False]
    assert rowid.tolist() == [2, None, 0]


def test_wide_rowids_keep_their_policy() -> None:
    wide = LookupResult("rowid", rowid=np.array([5, np.iinfo(np.uint64).max, 0], np.uint64))
    assert wide.to_host(miss=-1).rowid.tolist() == [5, -1, 0]
    assert wide.to_host(miss="mask").rowid.mask.tolist() == [False, True, False]
    assert wide.to_arrow(miss="mask").to_pylist() == [5, None, 0]


@pytest.mark.parametrize("out", ["count", "sum", "rowids", "bitmap"])
def test_modes_without_a_miss_value_read_the_same_under_every_policy(index: Any, out: str
                                                                      ) -> None:
    """No match is a count or sum of 0, an empty list, a zero bitmap row: not a miss."""
    res = index.point(EVERY, out=out)
    plain = res.to_host()
    for miss in (-1, "mask"):
        got = res.to_host(miss=miss)
        for name in ("count", "sum", "offsets", "rowids", "bitmap"):
            a, b = getattr(got, name), getattr(plain, name)
            assert (a is None and b is None) or np.array_equal(a, b)
        assert res.to_arrow(miss=miss).equals(res.to_arrow())
        assert res.to_pandas(miss=miss).equals(res.to_pandas())


@pytest.mark.parametrize("miss", ["none", "MASK", None, 0, -2, True, -1.0, "-1"])
@pytest.mark.parametrize("method", ["to_host", "to_pandas", "to_arrow"])
def test_a_miss_policy_that_does_not_exist_is_a_value_error_naming_the_choices(
        index: Any, miss: Any, method: str) -> None:
    res = index.point(ONE_EACH)
    with pytest.raises(InvalidInput, match=r"argument 'miss': expected 'sentinel' .* -1 .* "
                                           r"'mask' .*got ") as err:
        getattr(res, method)(miss=miss)
    assert isinstance(err.value, ValueError)


# ---------------------------------------------------------------------- pandas
@pytest.mark.parametrize("out,dtype,values", [
    ("rowid", "uint32", [2, MISS, 0]), ("count", "uint32", [1, 0, 1]), ("sum", "uint64", [2, 0, 0])])
def test_one_value_per_lookup_is_a_series_named_after_the_mode_indexed_by_query(
        index: Any, out: str, dtype: str, values: list[int]) -> None:
    pd = pytest.importorskip("pandas")
    series = index.point(ONE_EACH, out=out).to_pandas()
    assert isinstance(series, pd.Series)
    assert (series.name, str(series.dtype), series.tolist()) == (out, dtype, values)
    assert series.index.equals(pd.RangeIndex(3)) and series.index.name == "query"


def test_pandas_rowids_under_each_miss_policy(index: Any) -> None:
    pd = pytest.importorskip("pandas")
    res = index.point(ONE_EACH)
    assert res.to_pandas().tolist() == [2, MISS, 0]
    minus = res.to_pandas(miss=-1)
    assert str(minus.dtype) == "int64" and minus.tolist() == [2, -1, 0]
    masked = res.to_pandas(miss="mask")
    assert str(masked.dtype) == "UInt32" and masked.isna().tolist() == [False, True, False]
    assert masked.dropna().tolist() == [2, 0] and masked.name == "rowid"
    assert masked.iloc[1] is pd.NA


@pytest.mark.parametrize("out", ["rowids", "bitmap"])
def test_every_match_is_a_frame_of_query_and_rowid_pairs(index: Any, out: str) -> None:
    pd = pytest.importorskip("pandas")
    frame = index.point(EVERY, out=out).to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["query", "rowid"]
    assert (str(frame["query"].dtype), str(frame["rowid"].dtype)) == ("int64", "uint32")
    # a lookup without a match (25, the second) has no row; pairs come by lookup
    assert sorted_pairs(frame) == [(0, 1), (0, 3), (2, 2)]
    assert frame["query"].is_monotonic_increasing


def test_the_pairs_join_back_to_the_rows_and_count_like_out_count(index: Any) -> None:
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame({"key": KEYS, "name": ["c", "a", "b", "d"]})
    pairs = index.point(EVERY, out="rowids").to_pandas()
    joined = pairs.merge(table, left_on="rowid", right_index=True)
    assert sorted(zip(joined["query"], joined["name"], strict=True)) == [(0, "a"), (0, "d"),
                                                                         (2, "b")]
    per_lookup = pairs.groupby("query").size().reindex(range(len(EVERY)), fill_value=0)
    assert per_lookup.tolist() == index.point(EVERY, out="count").to_host().count.tolist()


# ---------------------------------------------------------------------- Arrow
def test_one_value_per_lookup_is_an_arrow_array(index: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    res = index.point(ONE_EACH)
    plain = res.to_arrow()
    assert isinstance(plain, pa.Array) and plain.type == pa.uint32()
    assert plain.to_pylist() == [2, MISS, 0] and plain.null_count == 0
    assert res.to_arrow(miss=-1).type == pa.int64()
    assert res.to_arrow(miss=-1).to_pylist() == [2, -1, 0]
    masked = res.to_arrow(miss="mask")
    assert masked.type == pa.uint32() and masked.to_pylist() == [2, None, 0]
    assert index.point(ONE_EACH, out="sum").to_arrow().type == pa.uint64()


@pytest.mark.parametrize("out", ["rowids", "bitmap"])
def test_every_match_is_an_arrow_list_array_of_one_list_per_lookup(index: Any, out: str) -> None:
    pa = pytest.importorskip("pyarrow")
    lists = index.point(EVERY, out=out).to_arrow()
    assert isinstance(lists, pa.ListArray) and lists.type == pa.list_(pa.uint32())
    assert [sorted(x) for x in lists.to_pylist()] == [[1, 3], [], [2]]


def test_past_32_bit_offsets_the_list_array_is_a_large_one(monkeypatch: pytest.MonkeyPatch,
                                                           index: Any) -> None:
    pa = pytest.importorskip("pyarrow")
    monkeypatch.setattr(result_export, "LARGE_LIST_FROM", 4)  # 2^31 matches, made small
    assert isinstance(index.point(EVERY, out="rowids").to_arrow(), pa.ListArray)  # 3 matches
    big = index.point(np.append(EVERY, 10), out="rowids").to_arrow()  # 5 matches
    assert isinstance(big, pa.LargeListArray) and len(big) == 4
    assert [sorted(x) for x in big.to_pylist()] == [[1, 3], [], [2], [1, 3]]


def test_an_empty_batch_is_an_empty_series_frame_and_array(index: Any) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    none = np.array([], dtype=np.uint32)
    assert len(index.point(none).to_pandas()) == 0
    assert len(index.point(none).to_arrow()) == 0
    assert len(index.point(none, out="rowids").to_pandas()) == 0
    assert len(index.point(none, out="rowids").to_arrow()) == 0


# ---------------------------------------------------------------------- DLPack
@pytest.mark.parametrize("out", ["rowid", "count", "sum"])
def test_a_one_array_result_is_that_array_through_dlpack(index: Any, out: str) -> None:
    res = index.point(ONE_EACH, out=out)
    got = np.from_dlpack(res)
    held = getattr(res, out)
    assert res.__dlpack_device__() == (1, 0)  # the CPU
    assert np.shares_memory(got, held) and got.dtype == held.dtype
    assert got.tolist() == held.tolist()  # misses as index.miss: the array as it is


@pytest.mark.parametrize("out,instead", [("rowids", "result.offsets and result.rowids"),
                                         ("bitmap", "result.bitmap")])
def test_a_listing_result_refuses_dlpack_naming_what_to_take_instead(
        index: Any, out: str, instead: str) -> None:
    res = index.point(EVERY, out=out)
    for hand_over in (np.from_dlpack, lambda r: r.__dlpack_device__()):
        with pytest.raises(BufferError, match=rf"out='{out}'.*take {instead}.*to_arrow\(\)"):
            hand_over(res)
    for part in ("offsets", "rowids") if out == "rowids" else ("bitmap",):
        assert np.array_equal(np.from_dlpack(getattr(res, part)), getattr(res, part))


def test_a_result_left_on_a_dask_cluster_refuses_dlpack_and_computes_for_pandas() -> None:
    da = pytest.importorskip("dask.array")
    pytest.importorskip("pandas")
    lazy = LookupResult("count", count=da.from_array(np.array([2, 0, 1], np.uint32), chunks=2))
    with pytest.raises(BufferError, match=r"Dask array.*result\.to_host\(\)"):
        np.from_dlpack(lazy)
    assert lazy.to_pandas().tolist() == [2, 0, 1]


# ---------------------------------------------------------------------- results on a GPU
class StandInDeviceArray:
    """What a result's methods use of a CuPy array: ``get`` (a copy to the host),
    ``__dlpack__`` and ``__dlpack_device__``; each call is recorded."""

    def __init__(self, host: np.ndarray) -> None:
        self.host, self.calls = host, []  # type: list[tuple[str, dict[str, Any]]]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.host.shape

    @property
    def dtype(self) -> np.dtype:
        return self.host.dtype

    def get(self) -> np.ndarray:
        self.calls.append(("get", {}))
        return self.host.copy()

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.calls.append(("__dlpack__", kwargs))
        return self.host.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        self.calls.append(("__dlpack_device__", {}))
        return (2, 0)  # CUDA device 0


def on_gpu(res: LookupResult) -> LookupResult:
    return LookupResult(res.out, **{name: StandInDeviceArray(getattr(res, name))
                                    for name in ("rowid", "count", "sum", "offsets", "rowids",
                                                 "bitmap") if getattr(res, name) is not None})


def test_a_gpu_result_is_copied_to_the_host_for_pandas_and_arrow(index: Any) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    res = on_gpu(index.point(ONE_EACH))
    assert res.device == "cuda"
    assert res.to_pandas(miss=-1).tolist() == [2, -1, 0]
    assert res.to_arrow(miss="mask").to_pylist() == [2, None, 0]
    assert [c for c, _ in res.rowid.calls] == ["get", "get"]
    lists = on_gpu(index.point(EVERY, out="rowids"))
    assert [sorted(x) for x in lists.to_arrow().to_pylist()] == [[1, 3], [], [2]]
    assert sorted_pairs(on_gpu(index.point(EVERY, out="bitmap")).to_pandas()) == [
        (0, 1), (0, 3), (2, 2)]


def test_dlpack_of_a_gpu_result_is_the_device_arrays_own_without_a_host_copy(index: Any
                                                                             ) -> None:
    res = on_gpu(index.point(ONE_EACH, out="count"))
    assert res.__dlpack_device__() == (2, 0)
    res.__dlpack__(stream=7, max_version=(1, 0))
    assert res.count.calls == [("__dlpack_device__", {}),
                               ("__dlpack__", {"stream": 7, "max_version": (1, 0)})]
    assert np.from_dlpack(res).tolist() == [1, 0, 1]  # the stand-in's capsule is a host one


@pytest.mark.gpu
def test_a_cupy_result_hands_over_its_device_array_and_converts_on_the_host() -> None:
    import cupy

    gpu = indexzoo.create("sorted-array", device="cuda").build(KEYS)
    res = gpu.point(ONE_EACH)
    taken = cupy.from_dlpack(res)
    assert taken.data.ptr == res.rowid.data.ptr
    assert res.to_host(miss=-1).rowid.tolist() == [2, -1, 0]
    assert res.to_arrow(miss="mask").to_pylist() == [2, None, 0]
    assert sorted_pairs(gpu.point(EVERY, out="rowids").to_pandas()) == [(0, 1), (0, 3), (2, 2)]


# ---------------------------------------------------------------------- optional packages
@pytest.mark.parametrize("method,package,extra", [("to_pandas", "pandas", "pandas"),
                                                  ("to_arrow", "pyarrow", "arrow")])
def test_without_its_package_a_conversion_names_the_extra_that_installs_it(
        monkeypatch: pytest.MonkeyPatch, index: Any, method: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import pandas/pyarrow now fails
    res = on_gpu(index.point(ONE_EACH))
    with pytest.raises(MissingDependency, match=rf"LookupResult\.{method}\(\) needs the optional "
                       rf"package '{package}' \(indexzoo's {extra} extra\).*install it with: "
                       rf"pip install") as err:
        getattr(res, method)()
    assert isinstance(err.value, ImportError)
    assert res.rowid.calls == []  # refused before the GPU result was copied
    assert index.point(ONE_EACH).to_host(miss=-1).rowid.tolist() == [2, -1, 0]  # needs neither
