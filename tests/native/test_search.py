"""The binary searches every sorted index is built on, against NumPy's searchsorted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

from indexzoo.native.search import lower_bound, range_bounds, upper_bound_from


@njit
def _all_bounds(keys, lo, hi):  # type: ignore[no-untyped-def]
    lb = np.empty(lo.shape[0], np.int64)
    s = np.empty(lo.shape[0], np.int64)
    e = np.empty(lo.shape[0], np.int64)
    for i in range(lo.shape[0]):
        lb[i] = lower_bound(keys, lo[i])
        s[i], e[i] = range_bounds(keys, lo[i], hi[i])
    return lb, s, e


@njit
def _upper(keys, start, x):  # type: ignore[no-untyped-def]
    return upper_bound_from(keys, start, x)


@given(st.lists(st.integers(0, 40), max_size=70), st.lists(st.integers(-1, 42), max_size=30))
def test_bounds_equal_numpy_searchsorted(keys_list: list[int], probes: list[int]) -> None:
    keys = np.sort(np.array(keys_list, dtype=np.uint64))
    p = np.array([max(v, 0) for v in probes], dtype=np.uint64)
    lo, hi = p, p + np.uint64(3)
    lb, s, e = _all_bounds(keys, lo, hi)
    np.testing.assert_array_equal(lb, np.searchsorted(keys, lo, "left"))
    expect_e = np.searchsorted(keys, hi, "right")
    empty = expect_e <= lb
    np.testing.assert_array_equal(s, lb)
    np.testing.assert_array_equal(e, np.where(empty, lb, expect_e))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 15, 16, 17, 1023, 1024, 1025])
def test_power_of_two_sizes_and_neighbours(n: int) -> None:
    keys = np.arange(0, 2 * n, 2, dtype=np.uint32)
    probes = np.arange(-1, 2 * n + 2).clip(0).astype(np.uint32)
    lb, _, _ = _all_bounds(keys, probes, probes)
    np.testing.assert_array_equal(lb, np.searchsorted(keys, probes, "left"))


@pytest.mark.parametrize("run", [1, 2, 3, 4, 5, 31, 32, 33, 1000])
def test_galloping_finds_the_end_of_a_run_of_duplicates(run: int) -> None:
    keys = np.concatenate([np.zeros(3), np.full(run, 5), np.full(4, 9)]).astype(np.uint64)
    assert _upper(keys, 3, np.uint64(5)) == 3 + run
    assert _upper(keys, 3, np.uint64(8)) == 3 + run
    assert _upper(keys, 3, np.uint64(9)) == len(keys)


def test_extreme_keys() -> None:
    top = np.iinfo(np.uint64).max
    keys = np.array([0, 1, top - 1, top, top], dtype=np.uint64)
    lo = np.array([0, top, top - 1, 2], dtype=np.uint64)
    hi = np.array([0, top, top, top - 2], dtype=np.uint64)
    _, s, e = _all_bounds(keys, lo, hi)
    assert (e - s).tolist() == [1, 2, 3, 0]
