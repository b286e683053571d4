"""The fused scan's GPU body with 16-byte loads (``plugins/fused_scan/vector_scan.cu``,
``indexzoo.plugins.fused_scan.vector``).

Without a GPU the CUDA C++ body runs on the CPU under an emulation of the CUDA features it uses
(``tests/support/scan_host.cpp`` over ``cuda_host.h``, compiled with the host C++ compiler):
its bitmaps equal NumPy's for row counts around the vector width, the warp's chunk and the
word, one to five columns (the loop body past the written-out ones), several queries over
fewer grid rows, bounds at the key type's ends and empty ranges; every byte of the rows it
must read is read once per query with aligned loads, nothing else. The source compiles for a
Hopper GPU with ``nvcc`` where it is installed. On a GPU (``-m gpu``) ``fused-scan`` with the
vector body answers like NumPy through the index, saved and loaded, and like the numba body.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import indexzoo
from indexzoo.errors import InvalidInput
from indexzoo.plugins.fused_scan import vector

HERE = Path(__file__).resolve().parent
EMULATION = HERE.parents[1] / "support" / "scan_host.cpp"
SOURCE = HERE.parents[2] / "plugins" / "fused_scan" / "vector_scan.cu"
U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)


def bitmaps_of(cols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(Q, ceil(n/32)) words: bit r of word r // 32 (least significant first) set iff
    ``lo[q, j] <= cols[r, j] <= hi[q, j]`` for every column j; padding bits zero."""
    n = cols.shape[0]
    out = np.zeros((lo.shape[0], -(-n // 32)), dtype=np.uint32)
    for q in range(lo.shape[0]):
        match = np.all((cols >= lo[q]) & (cols <= hi[q]), axis=1)
        for r in np.flatnonzero(match):
            out[q, r // 32] |= np.uint32(1 << (int(r) % 32))
    return out


@pytest.fixture(scope="module")
def emulation(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler to run the vector body on the CPU")
    lib = tmp_path_factory.mktemp("scan") / "scan_host.so"
    done = subprocess.run([cxx, "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread",
                           "-Wno-unknown-pragmas", "-o", str(lib), str(EMULATION)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(lib))


def table_of(cols: np.ndarray) -> tuple[np.ndarray, int]:
    """The layout ``vector_table`` makes on the GPU, in a 16-byte-aligned NumPy buffer: the
    (ld, d) Fortran-order table, ld the row count rounded up to whole vectors, padding rows
    filled with keys that match every query (so that a body that failed to mask them shows)."""
    n, d = cols.shape
    r = vector.vector_rows(cols.dtype)
    ld = max(-(-n // r) * r, r)
    raw = np.zeros(ld * d * cols.dtype.itemsize + 16, dtype=np.uint8)
    start = (-raw.ctypes.data) % 16
    flat = raw[start:start + ld * d * cols.dtype.itemsize].view(cols.dtype)
    table = flat.reshape((ld, d), order="F")
    table[:] = 1  # every query below takes 1
    table[:n] = cols
    return table, ld


CASES = [
    # n, d, dtype, body written out for (0: the loop), unroll, threads a block, queries (one
    # a row of blocks)
    (1, 1, U32, 1, 2, 32, 1),
    (3, 2, U32, 2, 2, 32, 2),
    (31, 3, U32, 3, 1, 32, 1),
    (32, 1, U32, 1, 4, 64, 3),
    (1000, 3, U32, 3, 2, 64, 2),
    (1025, 2, U32, 2, 4, 32, 1),
    (2051, 5, U32, 0, 2, 64, 2),
    (4100, 1, U32, 1, 2, 64, 1),
    (1, 1, U64, 1, 4, 32, 1),
    (33, 3, U64, 3, 2, 32, 2),
    (1023, 2, U64, 2, 4, 64, 1),
    (2049, 5, U64, 0, 1, 64, 3),
]


@pytest.mark.parametrize(("n", "d", "dtype", "written_out", "unroll", "block", "queries"),
                         CASES)
def test_the_body_answers_like_numpy_and_reads_every_row_once_a_query(
        emulation: ctypes.CDLL, n: int, d: int, dtype: np.dtype, written_out: int,
        unroll: int, block: int, queries: int) -> None:
    rng = np.random.default_rng(n * 7 + d)
    top = int(np.iinfo(dtype).max)
    cols = rng.integers(0, top, size=(n, d), dtype=dtype, endpoint=True)
    cols[0] = top  # the key type's ends
    if n > 1:
        cols[1] = 0
    lo = rng.integers(0, top // 2, size=(queries, d), dtype=dtype, endpoint=True)
    hi = lo + dtype.type(top // 2)
    lo[0] = 0  # a query of every key (from 0 to the largest) ...
    hi[0] = top
    if queries > 1:  # ... and one that is empty (lo > hi in its last column)
        lo[1, -1], hi[1, -1] = 5, 4
    table, ld = table_of(cols)
    words = -(-n // 32)
    warps = -(-words // 32)
    grid = max(1, -(-warps // (block // 32)))
    out = np.full((queries, words), 0xDEADBEEF, dtype=np.uint32)
    base = table.ctypes.data
    size = table.nbytes
    counts = np.zeros(size, dtype=np.uint8)
    faults = np.zeros(3, dtype=np.int64)
    rc = emulation.emu_scan(
        int(dtype == U64), written_out, unroll, grid, queries, block,
        ctypes.c_void_p(base), ctypes.c_longlong(ld), d, ctypes.c_longlong(n),
        ctypes.c_void_p(np.ascontiguousarray(lo).ctypes.data),
        ctypes.c_void_p(np.ascontiguousarray(hi).ctypes.data), ctypes.c_longlong(queries),
        ctypes.c_longlong(words), ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(base),
        ctypes.c_size_t(size), ctypes.c_void_p(counts.ctypes.data),
        ctypes.c_void_p(faults.ctypes.data))
    assert rc == 0, "a shuffle not every lane of a warp reached" if rc == -1 else "no instance"
    np.testing.assert_array_equal(out, bitmaps_of(cols, lo, hi))
    assert faults[0] == 0, f"{faults[0]} misaligned loads"
    assert faults[1] == 0, f"{faults[1]} loads outside the table"
    assert faults[2] > 0, "no 16-byte load"
    r = vector.vector_rows(dtype)
    read_rows = -(-n // r) * r  # the rows of the vectors that hold rows < n
    want = np.zeros((ld, d), dtype=np.uint8, order="F")
    want[:read_rows] = queries
    per_byte = np.repeat(want.reshape(-1, order="F"), dtype.itemsize)
    assert np.array_equal(counts, per_byte), "bytes read other than once a query"


def test_vector_rows_and_unrolls_follow_the_key_width() -> None:
    assert vector.vector_rows(np.uint32) == 4 and vector.vector_rows(np.uint64) == 2
    assert vector.default_unroll(np.uint32) == 2 and vector.default_unroll(np.uint64) == 4
    assert vector.default_unroll(np.uint32, 1) == 4 and vector.default_unroll(np.uint64, 1) == 4
    with pytest.raises(InvalidInput, match="uint32 or uint64"):
        vector.vector_rows(np.int32)


def test_the_body_is_the_default_and_the_numba_body_stays_selectable() -> None:
    assert indexzoo.create("fused-scan").params.body == "vector"
    assert indexzoo.create("fused-scan", params={"body": "numba"}).params.body == "numba"


def test_the_source_ships_with_the_package() -> None:
    assert "fs_scan" in vector.source()


@pytest.mark.parametrize("options", [["-DFS_D=3", "-DFS_U=2"],
                                     ["-DFS_WIDE=1", "-DFS_D=0", "-DFS_U=4"]])
def test_the_source_compiles_for_a_hopper_gpu(tmp_path: Path, options: list[str]) -> None:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("no nvcc")
    ptx = tmp_path / "scan.ptx"
    done = subprocess.run([nvcc, "-arch=sm_90", "-ptx", "-std=c++17", *options, "-o", str(ptx),
                           str(SOURCE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert ".entry fused_scan" in text
    assert ("ld.global.cs.v2.u64" if "-DFS_WIDE=1" in options else "ld.global.cs.v4.u32") in text


# ---------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 5, 1023, 1025, 4099, (1 << 20) + 3])
@pytest.mark.parametrize("dtype", [U32, U64])
@pytest.mark.parametrize("d", [1, 3, 9])
def test_the_index_answers_like_numpy_on_the_gpu(n: int, dtype: np.dtype, d: int) -> None:
    import cupy

    rng = np.random.default_rng(n + d)
    top = int(np.iinfo(dtype).max)
    cols = rng.integers(0, top, size=(n, d), dtype=dtype, endpoint=True)
    lo = rng.integers(0, top // 2, size=(5, d), dtype=dtype, endpoint=True)
    hi = lo + dtype.type(top // 2)
    lo[1, 0], hi[1, 0] = 5, 4
    lo[2], hi[2] = 0, top
    index = indexzoo.create("fused-scan", device="cuda").build([c for c in cols.T])
    assert index.params.body == "vector"
    bounds = ([cupy.asarray(c) for c in lo.T], [cupy.asarray(c) for c in hi.T])
    want = bitmaps_of(cols, lo, hi)
    got = cupy.asnumpy(index.range(*bounds, out="bitmap").bitmap)
    np.testing.assert_array_equal(got, want)
    count = index.range(*bounds, out="count").to_host().count
    np.testing.assert_array_equal(count, np.all(
        (cols[None] >= lo[:, None]) & (cols[None] <= hi[:, None]), axis=2).sum(axis=1))
    again = indexzoo.from_bytes(index.to_bytes(), device="cuda")
    np.testing.assert_array_equal(cupy.asnumpy(again.range(*bounds, out="bitmap").bitmap), want)
    numba = indexzoo.create("fused-scan", device="cuda", params={"body": "numba"})
    numba.build([c for c in cols.T])
    np.testing.assert_array_equal(cupy.asnumpy(numba.range(*bounds, out="bitmap").bitmap), want)


@pytest.mark.gpu
def test_a_build_binds_its_vector_scan_once_for_both_paths_and_again_for_new_threads() -> None:
    """The pipeline's calls (bounds by column, NumPy bounds) and the prepared call (CuPy
    bounds of the table's dtype) launch one bound scan of the build; other threads a block
    bind a scan of their own, and every call answers like NumPy."""
    import cupy

    rng = np.random.default_rng(5)
    cols = rng.integers(0, 1000, size=(4099, 2), dtype=U32)
    lo, hi = np.array([[100, 0], [7, 900]], U32), np.array([[600, 999], [6, 999]], U32)
    want = bitmaps_of(cols, lo, hi)
    index = indexzoo.create("fused-scan", device="cuda").build(cols)
    calls = [lambda: index.range(lo, hi, out="bitmap"),  # NumPy: the pipeline
             lambda: index.range({0: (lo[:, 0], hi[:, 0]), 1: (lo[:, 1], hi[:, 1])},
                                 out="bitmap"),
             lambda: index.range(cupy.asarray(lo), cupy.asarray(hi), out="bitmap")]
    for call in calls * 2:
        np.testing.assert_array_equal(cupy.asnumpy(call().bitmap), want)
    scans = index.state.scans
    assert list(scans) == [index.params.threads_per_block]
    other = 256 if index.params.threads_per_block != 256 else 64
    index.params = index.params.model_copy(update={"threads_per_block": other})
    for call in calls:
        np.testing.assert_array_equal(cupy.asnumpy(call().bitmap), want)
    assert len(scans) == 2 and index.params.threads_per_block in scans


@pytest.mark.gpu
def test_more_queries_than_a_launch_takes_are_answered_by_several_launches() -> None:
    """One query a row of blocks, at most MAX_GRID_Y rows a launch: a batch of more is
    launched again from where the last launch stopped, bounds and answers alike."""
    import cupy

    rng = np.random.default_rng(9)
    cols = rng.integers(0, 1 << 20, size=(200, 2), dtype=U32)
    q = vector.MAX_GRID_Y + 37
    lo = rng.integers(0, 1 << 20, size=(q, 2), dtype=U32)
    hi = lo + rng.integers(0, 1 << 19, size=(q, 2), dtype=U32)
    index = indexzoo.create("fused-scan", device="cuda").build(cols)
    got = index.range(cupy.asarray(lo), cupy.asarray(hi), out="bitmap").bitmap
    np.testing.assert_array_equal(cupy.asnumpy(got), bitmaps_of(cols, lo, hi))
