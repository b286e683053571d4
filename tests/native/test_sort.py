"""sort_pairs: the stable order of the keys, whichever way it sorts (integer keys: packed
(key, position) words where the keys' span and their positions fit 64 bits, else the unstable
argsort with its runs of equal keys put in position order; other keys: NumPy's stable
argsort)."""

from __future__ import annotations

import numpy as np
import pytest

from indexzoo.native.sort import sort_pairs

INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _spans(dtype):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    return {"whole range": (lo, hi), "few values": (0, 3), "at the bottom": (lo, lo + 5),
            "at the top": (hi - 5, hi)}


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000, 2048, 70_000])
def test_the_order_is_numpys_stable_argsort_at_the_ends_of_every_integer_dtype(dtype, n):
    rng = np.random.default_rng(n)
    for lo, hi in _spans(dtype).values():
        keys = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
        got = sort_pairs(keys, np.uint32)
        order = np.argsort(keys, kind="stable")
        np.testing.assert_array_equal(got.rowids, order.astype(np.uint32))
        np.testing.assert_array_equal(got.keys, keys[order])
        assert got.keys.dtype == keys.dtype and got.rowids.dtype == np.uint32


def test_keys_whose_span_and_positions_need_more_than_64_bits_sort_stably_too():
    big = np.iinfo(np.int64)
    few = np.array([big.max, 0, big.min, 0, big.max, big.min], dtype=np.int64)
    np.testing.assert_array_equal(sort_pairs(few, np.uint64).rowids, [2, 5, 1, 3, 0, 4])
    keys = np.tile(few, 1000)  # as many as the faster sorts take
    np.testing.assert_array_equal(sort_pairs(keys, np.uint64).rowids,
                                  np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_wide_keys_with_long_runs_of_equal_keys_sort_stably(dtype):
    info = np.iinfo(dtype)
    values = np.array([info.min, info.max, 0, 7, info.max - 1], dtype=dtype)
    keys = np.random.default_rng(3).choice(values, 50_000)
    got = sort_pairs(keys, np.uint32)
    np.testing.assert_array_equal(got.rowids, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(got.keys, np.sort(keys))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floats_sort_stably(dtype):
    keys = np.array([1.5, -0.0, 0.0, -2.0, 1.5, np.inf, -np.inf], dtype=dtype)
    got = sort_pairs(keys, np.uint32)
    np.testing.assert_array_equal(got.rowids, np.argsort(keys, kind="stable"))


def test_the_peak_it_reports_covers_the_keys_rowids_and_permutation():
    keys = np.arange(1000, dtype=np.uint64)[::-1].copy()
    got = sort_pairs(keys, np.uint32)
    assert got.peak_bytes >= 1000 * (8 + 8 + 4)
    assert got.footprint().breakdown == {"keys": 8000, "rowids": 4000}
