"""Keys as tables hold them: nulls under one policy, text and byte strings through an
order-preserving dictionary (exact answers, never prefix candidates), time-zone-aware
timestamps, categoricals, columns selected and bounded by name, and error messages given in
full."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo import InvalidInput, Unsupported
from indexzoo.join import join

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")


def _index(name: str = "sorted-array") -> Any:
    return indexzoo.create(name, device="cpu")


def _rowids(res: Any) -> list[list[int]]:
    h = res.to_host()
    return [sorted(h.rowids[h.offsets[i]:h.offsets[i + 1]].tolist())
            for i in range(h.offsets.shape[0] - 1)]


# ---------------------------------------------------------------------- nulls
WITH_NULL: dict[str, Callable[[], Any]] = {
    "pandas float (NaN is pandas' null)": lambda: pd.Series([5.0, 7.0, None, 9.0]),
    "pandas Int64": lambda: pd.Series([5, 7, None, 9], dtype="Int64"),
    "pandas object text": lambda: pd.Series(["e", "g", None, "i"], dtype=object),
    "pandas string": lambda: pd.Series(["e", "g", None, "i"], dtype="string"),
    "arrow int64": lambda: pa.array([5, 7, None, 9]),
    "arrow chunked": lambda: pa.chunked_array([[5, 7], [None, 9]]),
    "arrow string": lambda: pa.array(["e", "g", None, "i"]),
    "polars int64": lambda: pl.Series([5, 7, None, 9]),
    "polars string": lambda: pl.Series(["e", "g", None, "i"]),
    "python list": lambda: [5, 7, None, 9],
    "numpy masked array": lambda: np.ma.masked_array([5, 7, 8, 9], mask=[0, 0, 1, 0]),
}


@pytest.mark.parametrize("kind", list(WITH_NULL))
def test_a_null_key_is_refused_naming_null_and_its_position(kind: str) -> None:
    with pytest.raises(InvalidInput, match=r"argument 'keys': null at position 2; .*nulls='skip'"):
        _index().build(WITH_NULL[kind]())


@pytest.mark.parametrize("kind", list(WITH_NULL))
def test_skipped_null_rows_never_match_and_the_others_keep_their_rowids(kind: str) -> None:
    keys = WITH_NULL[kind]()
    index = _index().build(keys, nulls="skip")
    assert len(index) == 4
    text = "string" in kind or "text" in kind
    present = ["e", "g", "i"] if text else [5, 7, 9]
    assert index.point(present, out="rowid").to_host().rowid.tolist() == [0, 1, 3]
    assert index.range(present[:1], present[-1:], out="rowids").to_host().rowids.tolist() \
        == [0, 1, 3]
    bitmap = index.range(present[:1], present[-1:], out="bitmap").to_host().bitmap
    assert bitmap.tolist() == [[0b1011]]
    assert index.range(present[:1], present[-1:], out="sum").to_host().sum.tolist() == [4]


def test_a_null_lookup_is_refused_or_misses_under_the_builds_policy() -> None:
    refusing = _index().build(pd.Series([1, 2, 3], dtype="Int64"))
    with pytest.raises(InvalidInput, match=r"argument 'queries': null at position 1"):
        refusing.point(pd.Series([1, None], dtype="Int64"))
    skipping = _index().build(pd.Series([1, None, 3], dtype="Int64"), nulls="skip")
    got = skipping.point(pd.Series([1, None, 3], dtype="Int64"), out="count").to_host()
    assert got.count.tolist() == [1, 0, 1]
    got = skipping.range(pa.array([None, 1]), pa.array([3, 3]), out="count").to_host()
    assert got.count.tolist() == [0, 2]


def test_a_null_in_a_table_names_its_column() -> None:
    table = pd.DataFrame({"a": [1, 2, 3], "b": pd.Series([1.0, 2.0, None])})
    with pytest.raises(InvalidInput, match=r"'keys\[1\]' \(column 'b'\): null at position 2"):
        _index("fused-scan").build(table)
    index = _index("fused-scan").build(table, nulls="skip")
    assert index.point([[1, 3], [1.0, 2.0]], out="rowid").to_host().rowid.tolist() \
        == [0, index.miss]


def test_an_unknown_null_policy_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="'refuse', 'skip'"):
        _index().build([1, 2], nulls="drop")  # type: ignore[arg-type]


def test_updates_of_a_build_that_skipped_nulls_are_unsupported() -> None:
    index = _index("rx").build([1, None, 3], nulls="skip")
    with pytest.raises(Unsupported, match="build again"):
        index.update([0], [5])


# ---------------------------------------------------------------------- text and bytes
TEXT: dict[str, Callable[[list[str]], Any]] = {
    "numpy": np.array,
    "list": list,
    "pandas object": lambda v: pd.Series(v, dtype=object),
    "pandas string": lambda v: pd.Series(v, dtype="string"),
    "pandas categorical": lambda v: pd.Series(v, dtype="category"),
    "arrow": pa.array,
    "arrow dictionary": lambda v: pa.array(v).dictionary_encode(),
    "polars": pl.Series,
    "polars categorical": lambda v: pl.Series(v, dtype=pl.Categorical),
}
WORDS = ["pear", "apple", "fig", "apple", "kiwi", "Zebra"]


@pytest.mark.parametrize("kind", list(TEXT))
def test_text_keys_answer_points_and_ranges_exactly(kind: str) -> None:
    index = _index().build(TEXT[kind](WORDS))
    got = index.point(["apple", "fig", "banana", "appl", "apples"], out="rowids")
    assert _rowids(got) == [[1, 3], [2], [], [], []]
    # bounds that are not keys: the dictionary's order places them exactly
    got = index.range(["b", "a", "apple", "zz"], ["kiwi", "apple", "apple", "zzz"],
                      out="rowids")
    assert _rowids(got) == [[2, 4], [1, 3], [1, 3], []]
    assert index.range(["A"], ["Zz"], out="count").to_host().count.tolist() == [1]


def test_byte_strings_of_any_length_answer_exactly_without_prefix_candidates() -> None:
    keys = np.array([b"customer-0001", b"customer-0002", b"cust"])
    index = _index().build(keys)
    got = index.point(np.array([b"customer-0003", b"customer-0002", b"cust", b"customer"]),
                      out="rowids")
    assert _rowids(got) == [[], [1], [2], []]
    got = index.range(np.array([b"customer-0001x"]), np.array([b"customer-0002"]),
                      out="rowids")
    assert _rowids(got) == [[1]]


def test_short_byte_keys_compare_exactly_with_longer_lookups() -> None:
    index = _index().build(np.array([b"abcdefgh", b"abcdefgi", b"ab"]))
    got = index.point(np.array([b"abcdefgh-x", b"abcdefgh\0\0"]), out="count").to_host()
    assert got.count.tolist() == [0, 1]
    got = index.range(np.array([b"abcdefgh-x", b"a"]), np.array([b"zz", b"abcdefgh-x"]),
                      out="rowids")
    assert _rowids(got) == [[1], [0, 2]]


def test_join_pairs_only_equal_byte_strings() -> None:
    assert len(join([b"customer-0001", b"customer-0002"], [b"customer-0003"])) == 0
    res = join([b"customer-0001", b"customer-0002"], [b"customer-0002"]).to_host()
    assert list(zip(res.left.tolist(), res.right.tolist(), strict=True)) == [(1, 0)]


@pytest.mark.parametrize("sides", [(3, 1), (1, 3)])
def test_a_float_int_join_works_whichever_side_is_smaller(sides: tuple[int, int]) -> None:
    floats = np.array([1.0, 2.5, 3.0][: sides[0]] if sides[0] == 3 else [3.0])
    ints = np.array([3, 1, 2][: sides[1]] if sides[1] == 3 else [3], dtype=np.int64)
    for left, right in ((floats, ints), (ints, floats)):
        res = join(left, right).to_host()
        got = {(int(a), int(b)) for a, b in zip(res.left, res.right, strict=True)}
        want = {(i, j) for i, x in enumerate(left) for j, y in enumerate(right) if x == y}
        assert got == want


def test_text_lookups_against_bytes_keys_are_invalid_input() -> None:
    index = _index().build(np.array([b"a", b"b"]))
    with pytest.raises(InvalidInput, match="cannot be compared"):
        index.point(["a"])


# ---------------------------------------------------------------------- time zones
def test_time_zone_aware_timestamps_are_keys_compared_as_instants() -> None:
    paris = pd.Series(pd.to_datetime(["2024-03-01 10:00", "2024-03-01 12:00"])
                      ).dt.tz_localize("Europe/Paris")
    index = _index().build(paris)
    same_instant = pd.Series(pd.to_datetime(["2024-03-01 09:00"])).dt.tz_localize("UTC")
    assert index.point(same_instant, out="rowid").to_host().rowid.tolist() == [0]
    arrow = pa.array([1709283600_000000], pa.timestamp("us", tz="Asia/Tokyo"))  # 09:00 UTC
    assert index.point(arrow, out="rowid").to_host().rowid.tolist() == [0]
    lo = [pd.Timestamp("2024-03-01 10:30", tz="Europe/Paris")]
    hi = [pd.Timestamp("2024-03-01 12:00", tz="Europe/Paris")]
    assert index.range(lo, hi, out="rowids").to_host().rowids.tolist() == [1]


def test_arrow_and_polars_timestamps_with_time_zones_are_keys() -> None:
    instants = [1_700_000_000_000_000, 1_700_000_360_000_000]
    arrow = pa.array(instants, pa.timestamp("us", tz="America/New_York"))
    polars = pl.Series(arrow)
    for keys in (arrow, polars):
        index = _index().build(keys)
        assert index.point(pa.array(instants[1:], pa.timestamp("us", tz="UTC")),
                           out="rowid").to_host().rowid.tolist() == [1]


def test_a_tz_naive_lookup_against_tz_aware_keys_says_so() -> None:
    index = _index().build(pd.Series(pd.date_range("2024", periods=3, tz="UTC")))
    with pytest.raises(InvalidInput, match="tz-naive lookups are ambiguous"):
        index.point(np.array(["2024-01-01"], dtype="datetime64[ns]"))
    naive = _index().build(np.array(["2024-01-01"], dtype="datetime64[ns]"))
    with pytest.raises(InvalidInput, match="tz-naive timestamps"):
        naive.point(pd.Series(pd.date_range("2024", periods=1, tz="UTC")))


# ---------------------------------------------------------------------- categoricals
def test_categoricals_are_keys_by_value_not_by_code() -> None:
    ordered = pd.Categorical(["high", "low", "mid"], categories=["low", "mid", "high"],
                             ordered=True)
    index = _index().build(pd.Series(ordered))
    # by value: "high" < "low" < "mid" as text, whatever the declared order
    assert index.range(["h"], ["lz"], out="rowids").to_host().rowids.tolist() == [0, 1]
    numbers = pd.Series(pd.Categorical([30, 10, 20]))
    assert _index().build(numbers).point([10], out="rowid").to_host().rowid.tolist() == [1]


# ---------------------------------------------------------------------- columns by name
def test_columns_select_by_name_and_bounds_are_given_by_name() -> None:
    table = pd.DataFrame({"a": [1, 2, 3, 4], "skip": ["x"] * 4, "b": [10.0, 20.0, 30.0, 40.0]})
    index = _index("fused-scan").build(table, columns=["b", "a"])
    assert index.column_names == ("b", "a")
    assert index.key_dtypes == (np.dtype(np.float64), np.dtype(np.int64))
    got = index.range({"a": (2, 4), "b": (None, 30.0)}, out="rowids").to_host()
    assert got.rowids.tolist() == [1, 2]
    got = index.range({"a": ([1, 3], [2, 4])}, out="count").to_host()
    assert got.count.tolist() == [2, 2]
    # a lookup table is read by the index's column names, in its own column order
    queries = pd.DataFrame({"a": [3, 1], "b": [30.0, 20.0], "other": [0, 0]})
    assert index.point(queries, out="rowid").to_host().rowid.tolist() == [2, index.miss]


def test_a_one_column_index_takes_one_named_column_of_a_table() -> None:
    table = pa.table({"id": [7, 8, 9], "name": ["x", "y", "z"]})
    index = _index().build(table, columns=["name"])
    assert index.column_names == ("name",)
    assert index.point(pa.table({"name": ["y"]}), out="rowid").to_host().rowid.tolist() == [1]
    assert index.range({"name": ("y", "zz")}, out="count").to_host().count.tolist() == [2]


def test_unknown_column_names_are_invalid_input_naming_the_columns() -> None:
    table = pd.DataFrame({"a": [1], "b": [2]})
    with pytest.raises(InvalidInput, match=r"no column named 'c'; the table has \['a', 'b'\]"):
        _index("fused-scan").build(table, columns=["a", "c"])
    index = _index("fused-scan").build(table)
    with pytest.raises(InvalidInput, match=r"no column named 'z'; its columns are"):
        index.range({"z": (1, 2)})


# ---------------------------------------------------------------------- whole messages
class _Unreadable:
    """An array-like whose conversion fails with a long message (as torch's does for a
    bfloat16 tensor or one that requires grad)."""

    dtype = "torch.bfloat16"
    requires_grad = True

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. " * 4
                           + "Use tensor.detach().numpy() instead.")


def test_a_conversion_error_is_reported_whole_with_the_type_in_full() -> None:
    with pytest.raises(InvalidInput) as err:
        _index().build(_Unreadable())
    text = str(err.value)
    assert "of dtype torch.bfloat16 with requires_grad=True" in text
    assert text.endswith("Use tensor.detach().numpy() instead.)")
    assert "..." not in text
