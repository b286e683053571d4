"""Sorted probes' permutation kernels (``indexzoo.native.permute``): the bucket of every key,
the batch gathered in an order and the answers scattered back give NumPy's results, on the
CPU and under numba's CUDA simulator."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from helpers import agrees_in_the_simulator

from indexzoo.native.permute import bucket_ids, gather, scatter


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n", [0, 1, 7, 40_000])
def test_gather_and_scatter_are_numpys_fancy_indexing(dtype: type, n: int) -> None:
    rng = np.random.default_rng(n)
    src = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
    order = rng.permutation(n).astype(np.int64)
    np.testing.assert_array_equal(gather(src, order, np), src[order])
    want = np.empty_like(src)
    want[order] = src
    np.testing.assert_array_equal(scatter(src, order, np), want)
    np.testing.assert_array_equal(scatter(gather(src, order, np), order, np), src)


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


SCRIPT = textwrap.dedent("""
    import numpy as np
    from indexzoo.native.permute import bucket_ids, gather, scatter

    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True)
    order = rng.permutation(300).astype(np.int64)
    assert np.array_equal(gather(keys, order, np, "cuda"), keys[order])
    back = np.empty_like(keys)
    back[order] = keys
    assert np.array_equal(scatter(keys, order, np, "cuda"), back)
    lo = int(keys.min())
    assert np.array_equal(bucket_ids(keys, lo, 50, np.uint16, np, "cuda"),
                          ((keys - np.uint64(lo)) >> np.uint64(50)).astype(np.uint16))
    print("simulator agrees")
""")


def test_the_kernels_agree_in_the_simulator() -> None:
    agrees_in_the_simulator(SCRIPT)
