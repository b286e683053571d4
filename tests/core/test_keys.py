"""The key map: order preserved for every supported dtype, inverse where it exists, the
documented edge cases (NaN, -0.0, long byte strings) and lookups of another dtype."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import indexzoo
from indexzoo import InvalidInput, KeyMap

INT_DTYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float32", "float64"]


def _sign(a: np.ndarray) -> np.ndarray:
    return np.sign(a).astype(np.int8)


def assert_order_preserved(src: np.ndarray) -> None:
    """For every pair: src[i] < src[j] iff enc[i] < enc[j], and == iff ==."""
    km = KeyMap.for_dtype(src.dtype)
    enc = km.encode(src)
    assert enc.dtype == km.target
    a, b = src[:, None], src[None, :]
    ea, eb = enc[:, None], enc[None, :]
    np.testing.assert_array_equal(a < b, ea < eb)
    np.testing.assert_array_equal(a == b, ea == eb)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@given(data=st.data())
def test_integer_maps_preserve_order(dtype: str, data: st.DataObject) -> None:
    arr = data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 60)))
    assert_order_preserved(arr)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@given(data=st.data())
def test_float_maps_preserve_order(dtype: str, data: st.DataObject) -> None:
    arr = data.draw(hnp.arrays(np.dtype(dtype), st.integers(0, 60),
                               elements=st.floats(allow_nan=False, width=np.dtype(dtype).itemsize * 8)))
    assert_order_preserved(arr)


@given(st.lists(st.binary(min_size=0, max_size=8), max_size=60))
def test_short_bytes_map_preserves_order(items: list[bytes]) -> None:
    arr = np.array(items, dtype="S8")
    assert_order_preserved(arr)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=60))
def test_datetime_map_preserves_order(items: list[int]) -> None:
    arr = np.array([i for i in items if i != np.iinfo(np.int64).min], dtype="int64")
    assert_order_preserved(arr.view("datetime64[ns]"))


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES + ["S5", "S8", "datetime64[s]"])
def test_decode_inverts_encode(dtype: str) -> None:
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        info = np.iinfo(dt) if dt.kind != "b" else None
        arr = rng.integers(0, 2, 100).astype(dt) if info is None else \
            rng.integers(info.min, info.max, 100, dtype=dt, endpoint=True)
    elif dt.kind == "f":
        arr = (rng.standard_normal(100) * 1e10).astype(dt)
        arr[:4] = [np.inf, -np.inf, np.finfo(dt).max, np.finfo(dt).tiny]
    elif dt.kind == "M":
        arr = rng.integers(-(2**40), 2**40, 100).astype("datetime64[s]")
    else:
        arr = np.array([bytes(rng.integers(1, 255, rng.integers(0, dt.itemsize + 1)).astype(np.uint8))
                        for _ in range(100)], dtype=dt)
    km = KeyMap.for_dtype(dt)
    back = km.decode(km.encode(arr))
    assert back.dtype == dt
    np.testing.assert_array_equal(back, arr)


@pytest.mark.parametrize("dtype", ["uint16", "int32", "float32", "int8", "bool"])
def test_widened_maps_preserve_order_and_invert(dtype: str) -> None:
    arr = np.array([3, -1, 0, 7, -100, 100], dtype=np.int64).astype(dtype)
    km = KeyMap.for_dtype(dtype).with_target("uint64")
    enc = km.encode(arr)
    assert enc.dtype == np.uint64
    np.testing.assert_array_equal(arr[:, None] < arr[None, :], enc[:, None] < enc[None, :])
    np.testing.assert_array_equal(km.decode(enc), arr)


def test_targets_are_uint32_up_to_32_bits_and_uint64_above() -> None:
    for dt in ["bool", "uint8", "int16", "uint32", "int32", "float32"]:
        assert KeyMap.for_dtype(dt).target == np.uint32
    for dt in ["uint64", "int64", "float64", "S3", "datetime64[ms]"]:
        assert KeyMap.for_dtype(dt).target == np.uint64


def test_nan_keys_are_rejected_with_their_position() -> None:
    km = KeyMap.for_dtype("float64")
    with pytest.raises(InvalidInput, match=r"'keys'.*NaN at position 2"):
        km.encode(np.array([1.0, 2.0, np.nan]))


def test_nat_keys_are_rejected() -> None:
    km = KeyMap.for_dtype("datetime64[s]")
    with pytest.raises(InvalidInput, match="NaT"):
        km.encode(np.array(["2020-01-01", "NaT"], dtype="datetime64[s]"))


def test_negative_zero_and_zero_are_one_key() -> None:
    km = KeyMap.for_dtype("float32")
    enc = km.encode(np.array([-0.0, 0.0], dtype=np.float32))
    assert enc[0] == enc[1]
    back = km.decode(enc)
    assert not np.signbit(back).any()


def test_long_byte_strings_map_to_their_rank_in_the_builds_dictionary() -> None:
    keys = np.array([b"abcdefgh1234", b"abcdefgh9999", b"abcdefgi"], dtype="S12")
    km = KeyMap.for_keys(keys)
    enc = km.encode(keys)
    assert enc.tolist() == [0, 1, 2]  # no two keys share an encoding: no prefix candidates
    np.testing.assert_array_equal(km.decode(enc), keys)


def test_string_dtypes_need_the_builds_values() -> None:
    with pytest.raises(InvalidInput, match=r"KeyMap\.for_keys"):
        KeyMap.for_dtype("S12")


@pytest.mark.parametrize("dtype", ["complex64", "float16", "object", "V8"])
def test_unsupported_key_dtypes_name_the_allowed_ones(dtype: str) -> None:
    with pytest.raises(InvalidInput, match=r"allowed: bool, uint8"):
        KeyMap.for_dtype(dtype)


def test_text_keys_map_through_a_dictionary_in_code_point_order() -> None:
    keys = np.array(["pear", "apple", "Zebra", "apple"])
    km = KeyMap.for_keys(keys)
    assert km.encode(keys).tolist() == [2, 1, 0, 1]


# ---------------------------------------------------------------- lookups of another dtype
@given(st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=40),
       st.sampled_from(INT_DTYPES[1:]), st.sampled_from(["int64", "uint64", "int8", "uint16"]))
def test_integer_point_lookups_compare_by_value(values: list[int], key_dtype: str,
                                                query_dtype: str) -> None:
    kd, qd = np.dtype(key_dtype), np.dtype(query_dtype)
    qinfo = np.iinfo(qd)
    qs = np.array([v for v in values if qinfo.min <= v <= qinfo.max], dtype=qd)
    km = KeyMap.for_dtype(kd)
    enc, outside = km.encode_points(qs)
    kinfo = np.iinfo(kd)
    expect_outside = np.array([not (kinfo.min <= int(v) <= kinfo.max) for v in qs], dtype=bool)
    got_outside = np.zeros(len(qs), bool) if outside is None else outside
    np.testing.assert_array_equal(got_outside, expect_outside)
    inside = ~expect_outside
    np.testing.assert_array_equal(enc[inside], km.encode(qs[inside].astype(kd)))


def test_integer_range_bounds_are_clamped_and_empty_outside() -> None:
    km = KeyMap.for_dtype("uint8")
    lo = np.array([-5, 3, 300, -10], dtype=np.int64)
    hi = np.array([2, 900, 400, -1], dtype=np.int64)
    elo, ehi = km.encode_ranges(lo, hi)
    assert (elo[0], ehi[0]) == (0, 2)
    assert (elo[1], ehi[1]) == (3, 255)
    assert elo[2] > ehi[2] and elo[3] > ehi[3]  # wholly above / below: empty


def test_float64_lookups_on_float32_keys_are_exact() -> None:
    km = KeyMap.for_dtype("float32")
    q = np.array([0.5, 0.1, 1e300, -np.inf])
    _, outside = km.encode_points(q)
    np.testing.assert_array_equal(outside, [False, True, True, False])
    lo, hi = km.encode_ranges(np.array([0.1]), np.array([0.1]))
    assert lo[0] > hi[0]  # no float32 lies in [0.1, 0.1]
    lo, hi = km.encode_ranges(np.array([0.1]), np.array([0.2]))
    first, last = km.decode(np.array([lo[0], hi[0]], dtype=np.uint32))
    assert float(first) >= 0.1 > float(np.nextafter(first, np.float32(-np.inf)))
    assert float(last) <= 0.2 < float(np.nextafter(last, np.float32(np.inf)))


def test_integer_lookups_on_float_keys_are_exact() -> None:
    km = KeyMap.for_dtype("float64")
    q = np.array([3, 2**53 + 1, -(2**63)], dtype=np.int64)
    _, outside = km.encode_points(q)
    np.testing.assert_array_equal(outside, [False, True, False])


def test_lookup_dtype_that_cannot_compare_is_rejected() -> None:
    km = KeyMap.for_dtype("uint32")
    with pytest.raises(InvalidInput, match=r"'queries'.*float64.*integer dtype"):
        km.encode_points(np.array([1.5]))


def test_nan_lookups_are_rejected() -> None:
    km = KeyMap.for_dtype("float64")
    with pytest.raises(InvalidInput, match="NaN"):
        km.encode_points(np.array([1.0, np.nan]))


# ---------------------------------------------------------------------- Python sequences
def _index(keys: object) -> indexzoo.GpuIndex:
    return indexzoo.create("sorted-array", device="cpu").build(keys)


@pytest.mark.parametrize("keys, dtype", [
    ([3, 2**63 + 1], "uint64"),
    ([7, 3, 9], "uint64"),
    ([-7, 3], "int64"),
    ((2**64 - 1, 0), "uint64"),
    ([-1, 2**62], "int64"),
    ([-(2**63), 2**63 - 1], "int64"),
    ([True, False], "bool"),
    ([1.5, 2], "float64"),
    ([], "uint64"),
])
def test_python_sequences_keep_integer_semantics(keys: list[object], dtype: str) -> None:
    index = _index(keys)
    assert index.key_dtype == np.dtype(dtype)
    if keys:
        assert index.point(list(keys), out="count").count.tolist() == [1] * len(keys)


@pytest.mark.parametrize("seq, lo, hi", [
    ([3, 2**64 + 1], "3", "18446744073709551617"),
    ([-1, 2**63], "-1", "9223372036854775808"),
    ([-(2**63) - 1, 5], "-9223372036854775809", "5"),
])
def test_python_integers_beyond_every_key_type_state_the_range(seq: list[int], lo: str, hi: str) -> None:
    msg = (rf"argument 'keys': the sequence holds integers from {lo} to {hi}; the largest key type "
           r"covers \[-2\^63, 2\^63\) \(int64\) or \[0, 2\^64\) \(uint64\)")
    with pytest.raises(InvalidInput, match=msg):
        _index(seq)
    index = _index([1, 2])
    with pytest.raises(InvalidInput, match=msg.replace("'keys'", "'queries'")):
        index.point(seq)
    with pytest.raises(InvalidInput, match=msg.replace("'keys'", "'lo'")):
        index.range(seq, [0] * len(seq))
    with pytest.raises(InvalidInput, match=msg.replace("'keys'", "'values'")):
        indexzoo.create("sorted-array", device="cpu").build([1, 2], values=seq)


def test_huge_python_integers_are_named_by_their_size() -> None:
    with pytest.raises(InvalidInput, match=r"from 1 to <int of 33220 bits>"):
        _index([1, 10**10000])


def test_python_lookups_beyond_int64_compare_by_value() -> None:
    index = _index(np.array([3, 2**63 + 1, 2**64 - 1], dtype=np.uint64))
    assert index.point([2**63 + 1, 4, 2**64 - 1]).rowid.tolist() == [1, int(index.miss), 2]
    assert index.range([2**63], [2**64 - 1]).count.tolist() == [2]
    signed = _index(np.array([-5, 7], dtype=np.int64))
    assert signed.point([2**63 + 1, 7]).rowid.tolist() == [int(signed.miss), 1]
    summed = indexzoo.create("sorted-array", device="cpu").build([1, 2], values=[2**63 + 1, 1])
    assert summed.point([1], out="sum").sum.tolist() == [2**63 + 1]


@pytest.mark.parametrize("keys", [
    np.array([1.5, 2.5]), np.array([-3, 4], dtype=np.int8), np.array([b"ab"], dtype="S2"),
    np.array(["2020-01-01"], dtype="datetime64[s]"), np.array([1, 2], dtype=np.uint32),
])
def test_empty_python_lookups_take_the_key_dtype(keys: np.ndarray) -> None:
    index = _index(keys)
    for out in ("rowid", "count"):
        assert len(getattr(index.point([], out=out), out)) == 0
        assert len(getattr(index.range([], (), out=out), out)) == 0


def test_empty_ndarray_lookups_of_another_dtype_are_still_checked() -> None:
    with pytest.raises(InvalidInput, match="cannot be compared"):
        _index(np.array([1, 2], dtype=np.uint64)).point(np.array([], dtype="U3"))
