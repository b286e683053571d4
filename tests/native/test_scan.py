"""The fused scan (``indexzoo.plugins.fused_scan.kernels``), RTScan's CUDA-core peer: one pass over d columns
writes each query's packed bitmap; the same bits as NumPy for every row count around a word,
both key widths, empty and full ranges; the warp bodies (four words per warp, and the earlier
one word per warp) agree with the scalar body under numba's CUDA simulator."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support.helpers import agrees_in_the_simulator

from indexzoo import InvalidInput
from indexzoo.plugins.fused_scan.kernels import scan_bitmap, scan_bitmaps


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


def test_items_is_one_of_the_warp_bodies_and_more_than_one_only_on_warps() -> None:
    """``items`` (words per warp) is one of ITEMS_CHOICES, and only 1 where one thread makes
    a word."""
    cols = np.asfortranarray(np.arange(100, dtype=np.uint32).reshape(50, 2))
    lo, hi = np.zeros((1, 2), np.uint32), np.full((1, 2), 60, np.uint32)
    for bad in (0, 3, 5, 32):
        with pytest.raises(InvalidInput):
            scan_bitmaps(cols, lo, hi, device="cuda", group=32, items=bad)
    with pytest.raises(InvalidInput):
        scan_bitmaps(cols, lo, hi, device="cuda", group=1, items=4)
    with pytest.raises(InvalidInput):
        scan_bitmaps(cols, lo, hi, items=4)  # the CPU: a group of one
    np.testing.assert_array_equal(scan_bitmaps(cols, lo, hi, items=1), reference(cols, lo, hi))


# Row counts around a warp's group of four words (128 rows, CASES), word counts that are not
# multiples of four, three queries (the query / word-group mapping), both key widths, 1-3
# columns; query 1 has an empty range in its last column. About 0.9k rows: the simulator runs
# every GPU thread as a Python thread. Every warp body: 1, 4, 8 and 16 words per warp, the
# column loop and the bodies written out for the column count.
SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from indexzoo.plugins.fused_scan.kernels import bind_scan, scan_bitmaps

    empty = np.empty

    def poisoned(*args, **kwargs):  # a word the kernel leaves unwritten shows
        out = empty(*args, **kwargs)
        out.view(np.uint8).fill(0xA5)
        return out

    np.empty = poisoned
    rng = np.random.default_rng(5)
    cases = CASES
    for n, dtype, d in cases:
        cols = np.asfortranarray(rng.integers(0, 20, (n, d)).astype(dtype))
        lo = rng.integers(0, 8, (3, d)).astype(dtype)
        hi = (lo + rng.integers(4, 14, (3, d))).astype(dtype)
        lo[1, -1], hi[1, -1] = 9, 8
        match = ((cols[None] >= lo[:, None]) & (cols[None] <= hi[:, None])).all(axis=2)
        bits = np.zeros((3, -(-n // 32) * 32), bool)
        bits[:, :n] = match
        want = np.packbits(bits, axis=1, bitorder="little").view("<u4")
        cpu = scan_bitmaps(cols, lo, hi, device="cpu")
        assert np.array_equal(cpu, want) and cpu[0].any() and not cpu[1].any(), (n, cpu)
        for kw in (dict(group=32, items=4), dict(group=32, items=1), dict(group=1),
                   dict(group=32, items=4, unroll=True), dict(group=32, items=8),
                   dict(group=32, items=16, unroll=True)):
            gpu = scan_bitmaps(cols, lo, hi, device="cuda", threads_per_block=64, **kw)
            assert np.array_equal(cpu, gpu), (n, dtype, d, kw, cpu, gpu)
        for kw in (dict(items=4, unroll=True), dict(items=1), dict(items=16)):
            bound = bind_scan(cols, threads_per_block=64, **kw)
            for rows in (slice(0, 3), slice(1, 2)):  # one launch, two batch sizes
                got = bound(lo[rows], hi[rows])
                assert np.array_equal(cpu[rows], got), ("bound", n, dtype, d, kw, got)
    print("simulator agrees")
""")


#: (rows, key type, columns) of the simulated scans. The default tier's cases take both key
#: widths, one to three columns, one row, less than a group of four words, exactly one group,
#: and two groups and a row; the exhaustive tier's fill in the row counts between (each case
#: costs about 5 s of simulated threads on the 2-core machine).
CASES = "((1, np.uint32, 1), (33, np.uint32, 3), (128, np.uint32, 2), (257, np.uint64, 2))"
CASES_EXHAUSTIVE = ("((31, np.uint64, 2), (127, np.uint64, 1), (129, np.uint64, 3), "
                    "(160, np.uint32, 3))")


def test_the_warp_bodies_agree_with_the_scalar_body_in_the_simulator() -> None:
    """Four words per warp, one word per warp and one thread per word: the same bitmaps as the
    CPU, padding bits included, for row counts around a group of four words; so does the
    launch with the columns bound (``bind_scan``), called with batches of two sizes."""
    agrees_in_the_simulator(SCRIPT.replace("CASES", CASES))


@pytest.mark.exhaustive
def test_the_warp_bodies_agree_in_the_simulator_at_every_row_count_around_a_group() -> None:
    agrees_in_the_simulator(SCRIPT.replace("CASES", CASES_EXHAUSTIVE))


def test_the_scan_floor_benchmark_runs_small_on_the_cpu(tmp_path: Path) -> None:
    """benchmarks/studies/scan_floor.py: the floors, the fused scan and an index, answers checked."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "studies"))
    import scan_floor

    out = tmp_path / "floor.json"
    assert scan_floor.main(["--device", "cpu", "--rows", "3000", "--repeats", "1",
                            "--indexes", "rtscan-direct", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["floor_seconds"] > 0
    checked = [r for r in data["rows_measured"] if r["what"] == "query"]
    assert len(checked) == 20 and all(r["check"] == "ok" for r in checked)
    # the plain reads, answers checked too: of the queries' table and of 1 to 4 uint32 and
    # uint64 columns (on the CPU NumPy's reductions; the kernels are the GPU's)
    floors = [r for r in data["rows_measured"] if r["what"] == "floor"]
    assert floors and all(r["check"] == "ok" for r in floors)
    assert {(r["key_bits"], r["columns"]) for r in floors if r["table"] == "sweep"} == \
        {(b, d) for b in (32, 64) for d in (1, 2, 3, 4)}
    assert data["floor_variant"] in {r["variant"] for r in floors}
