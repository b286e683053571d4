"""The fused scan (``indexzoo.native.scan``), RTScan's CUDA-core peer: one pass over d columns
writes each query's packed bitmap; the same bits as NumPy for every row count around a word,
both key widths, empty and full ranges; the warp body (one ballot per word) agrees with the
scalar body under numba's CUDA simulator."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from helpers import agrees_in_the_simulator

from indexzoo import InvalidInput
from indexzoo.native.scan import scan_bitmap, scan_bitmaps


def reference(cols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    n = cols.shape[0]
    mask = np.all((cols[None, :, :] >= lo[:, None, :]) & (cols[None, :, :] <= hi[:, None, :]),
                  axis=2)
    words = (n + 31) // 32
    padded = np.zeros((lo.shape[0], words * 32), dtype=bool)
    padded[:, :n] = mask
    return np.packbits(padded, axis=1, bitorder="little").view("<u4").astype(np.uint32)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 64, 1000])
@pytest.mark.parametrize("d", [1, 3, 4])
def test_bitmaps_equal_numpys(dtype: type, n: int, d: int) -> None:
    rng = np.random.default_rng(n + d)
    top = np.iinfo(dtype).max
    cols = np.asfortranarray(rng.integers(0, 50, (n, d)).astype(dtype))
    if n:
        cols[0, 0] = top
    lo = rng.integers(0, 40, (25, d)).astype(dtype)
    hi = (lo + rng.integers(0, 30, (25, d))).astype(dtype)
    lo[0], hi[0] = 0, top        # everything
    lo[1, 0], hi[1, 0] = 5, 4    # an empty column predicate: nothing
    lo[2, 0], hi[2, 0] = top, top
    got = scan_bitmaps(cols, lo, hi)
    np.testing.assert_array_equal(got, reference(cols, lo, hi))
    if n % 32:
        assert not (got[:, -1] >> np.uint32(n % 32)).any()  # padding bits


def test_one_query_and_bad_shapes() -> None:
    cols = np.asfortranarray(np.arange(100, dtype=np.uint32).reshape(50, 2))
    got = scan_bitmap(cols, np.array([10, 0], np.uint32), np.array([40, 60], np.uint32))
    want = reference(cols, np.array([[10, 0]], np.uint32), np.array([[40, 60]], np.uint32))[0]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(InvalidInput):
        scan_bitmaps(cols[:, 0], np.zeros(1, np.uint32), np.zeros(1, np.uint32))
    with pytest.raises(InvalidInput):
        scan_bitmaps(cols, np.zeros((1, 2), np.uint32), np.zeros((2, 2), np.uint32))


SCRIPT = textwrap.dedent("""
    import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from indexzoo.native.scan import scan_bitmaps

    rng = np.random.default_rng(5)
    for dtype, n, d in ((np.uint32, 70, 3), (np.uint64, 33, 2), (np.uint32, 64, 1)):
        cols = np.asfortranarray(rng.integers(0, 20, (n, d)).astype(dtype))
        lo = rng.integers(0, 15, (4, d)).astype(dtype)
        hi = (lo + rng.integers(0, 10, (4, d))).astype(dtype)
        cpu = scan_bitmaps(cols, lo, hi, device="cpu")
        warp = scan_bitmaps(cols, lo, hi, device="cuda", group=32, threads_per_block=64)
        one = scan_bitmaps(cols, lo, hi, device="cuda", group=1, threads_per_block=32)
        assert np.array_equal(cpu, warp), (dtype, n, d, cpu, warp)
        assert np.array_equal(cpu, one), (dtype, n, d)
    print("simulator agrees")
""")


def test_the_warp_body_agrees_with_the_scalar_body_in_the_simulator() -> None:
    agrees_in_the_simulator(SCRIPT)
