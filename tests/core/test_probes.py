"""Sorted probes group a batch by the top 16 bits of its key span, and the answers go back
in the caller's order (``indexzoo.probes``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from indexzoo.probes import BUCKET_BITS, bucket_ids, gather, probe_order, scatter


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_the_order_is_a_permutation_that_never_goes_back_a_bucket(dtype: type) -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, np.iinfo(dtype).max, 5000, dtype=dtype, endpoint=True)
    order = probe_order(keys, np)
    assert np.array_equal(np.sort(order), np.arange(keys.shape[0]))
    lo, hi = int(keys.min()), int(keys.max())
    shift = max((hi - lo).bit_length() - BUCKET_BITS, 0)
    buckets = (keys[order].astype(object) - lo) >> shift
    assert all(a <= b for a, b in itertools.pairwise(buckets))


def test_keys_of_sixteen_bits_or_fewer_are_fully_sorted() -> None:
    keys = np.array([9, 3, 65535, 0, 3], dtype=np.uint16)
    assert keys[probe_order(keys, np)].tolist() == [0, 3, 3, 9, 65535]


def test_a_bucket_keeps_the_callers_order_and_equal_keys_are_one_bucket() -> None:
    keys = np.array([7, 7, 7], dtype=np.uint64)
    assert probe_order(keys, np).tolist() == [0, 1, 2]
    # the span is 2^40: keys closer than 2^24 share a bucket, so 1 and 2 stay in call order
    keys = np.array([2**40, 2, 1, 0], dtype=np.uint64)
    assert probe_order(keys, np).tolist() == [1, 2, 3, 0]


def test_sixty_four_bits_is_a_full_sort() -> None:
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, 3000, dtype=np.uint64)
    assert np.array_equal(keys[probe_order(keys, np, 64)], np.sort(keys))
    lo = keys.min()
    shift = np.uint64(int(keys.max() - lo).bit_length() - 32)
    grouped = (keys[probe_order(keys, np, 32)] - lo) >> shift
    assert np.all(grouped[:-1] <= grouped[1:])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n", [0, 1, 7, 40_000])
def test_gather_and_scatter_are_inverse_permutations(dtype: type, n: int) -> None:
    rng = np.random.default_rng(n)
    src = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
    order = rng.permutation(n).astype(np.int64)
    np.testing.assert_array_equal(gather(src, order, np), src[order])
    want = np.empty_like(src)
    want[order] = src
    np.testing.assert_array_equal(scatter(src, order, np), want)
    np.testing.assert_array_equal(scatter(gather(src, order, np), order, np), src)


def test_scatter_moves_whole_rows_of_a_bitmap() -> None:
    rows = np.arange(12, dtype=np.uint32).reshape(4, 3)
    order = np.array([2, 0, 3, 1])
    back = scatter(rows, order, np)
    np.testing.assert_array_equal(back[order], rows)


@pytest.mark.parametrize("dtype,narrow,bits", [(np.uint64, np.uint16, 16),
                                               (np.uint32, np.uint16, 16),
                                               (np.uint64, np.uint32, 32)])
def test_bucket_ids_are_the_top_bits_of_the_key_span(dtype: type, narrow: type,
                                                     bits: int) -> None:
    rng = np.random.default_rng(bits)
    top = np.iinfo(dtype).max
    keys = rng.integers(0, top, 5000, dtype=dtype, endpoint=True)
    keys[:2] = 0, top  # the whole span: nothing may wrap
    lo = int(keys.min())
    shift = max((int(keys.max()) - lo).bit_length() - bits, 0)
    want = ((keys - dtype(lo)) >> dtype(shift)).astype(narrow)
    got = bucket_ids(keys, lo, shift, narrow, np)
    assert got.dtype == narrow
    np.testing.assert_array_equal(got, want)
