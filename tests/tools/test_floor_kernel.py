"""The scan floor's kernels (``indexzoo.tools.floor_kernel``, ``floor_kernel.cu``).

Without a GPU their CUDA C++ bodies run on the CPU under an emulation of the few CUDA features
they use (``tests/support/floor_host.cpp``, compiled with the host C++ compiler): every byte of
every column is read exactly once, nothing else is read, every 16-byte load is aligned and
the bulk of each column goes through them, and the answers equal NumPy's, for column starts
off a 16-byte boundary, row counts that are not a multiple of the vector width, and grids of
one and several blocks. The source also compiles for a Hopper GPU with ``nvcc`` where it is
installed. On a GPU (``-m gpu``, skipped without one) the kernels themselves are checked
against NumPy, and so is the bench's vector-read reference.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import shutil
import subprocess
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexzoo.errors import InvalidInput
from indexzoo.tools import floor_kernel as fk

HERE = Path(__file__).resolve().parent
EMULATION = HERE.parent / "support" / "floor_host.cpp"
SOURCE = HERE.parents[1] / "core" / "tools" / "floor_kernel.cu"
U32, U64 = np.dtype(np.uint32), np.dtype(np.uint64)


# ---------------------------------------------------------------------- NumPy, independently
def words_sum(cols: list[np.ndarray]) -> int:
    """The sum of the columns' 32-bit words (their bytes read as little-endian uint32) mod
    2^32."""
    return sum(int(np.frombuffer(c.tobytes(), "<u4").sum(dtype=np.uint64)) for c in cols) \
        % (1 << 32)


def bitmap_of(cols: list[np.ndarray], bounds: list[int]) -> np.ndarray:
    """Bit r of word r // 32 (least significant first) set iff every column is below its bound."""
    n = cols[0].shape[0]
    out = np.zeros(-(-n // 32), dtype=np.uint32)
    for r in range(n):
        if all(int(c[r]) < b for c, b in zip(cols, bounds, strict=True)):
            out[r // 32] |= np.uint32(1 << (r % 32))
    return out


# ---------------------------------------------------------------------- the emulation
@pytest.fixture(scope="module")
def emulation(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler to run the floor kernels' bodies on the CPU")
    lib = tmp_path_factory.mktemp("floor") / "floor_host.so"
    done = subprocess.run([cxx, "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread",
                           "-Wno-unknown-pragmas", "-o", str(lib), str(EMULATION)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(lib))


class Region:
    """Columns laid in one 16-byte-aligned buffer, each starting ``shift`` bytes past a 16-byte
    boundary, with 48 bytes between them that no kernel may read."""

    GAP = 48

    def __init__(self, cols: list[np.ndarray], shifts: list[int]) -> None:
        size = sum(c.nbytes + 16 + self.GAP for c in cols) + 32
        raw = np.zeros(size + 16, dtype=np.uint8)
        start = (-raw.ctypes.data) % 16
        self.buf = raw[start:start + size]
        self.views: list[np.ndarray] = []
        self.spans: list[tuple[int, int]] = []
        at = self.GAP
        for c, s in zip(cols, shifts, strict=True):
            at = -(-at // 16) * 16 + s
            self.buf[at:at + c.nbytes] = np.frombuffer(c.tobytes(), dtype=np.uint8)
            self.views.append(self.buf[at:at + c.nbytes].view(c.dtype))
            self.spans.append((at, at + c.nbytes))
            at += c.nbytes + self.GAP
        self.counts = np.zeros(size, dtype=np.uint8)
        self.faults = np.zeros(3, dtype=np.int64)

    def args(self) -> tuple[Any, ...]:
        return (ctypes.c_void_p(self.buf.ctypes.data), ctypes.c_size_t(self.buf.shape[0]),
                ctypes.c_void_p(self.counts.ctypes.data), ctypes.c_void_p(self.faults.ctypes.data))

    def read_once(self) -> None:
        want = np.zeros_like(self.counts)
        for a, b in self.spans:
            want[a:b] = 1
        assert np.array_equal(self.counts, want), (
            f"bytes read other than once: {np.flatnonzero(self.counts != want)[:10]}")
        assert self.faults[0] == 0, f"{self.faults[0]} misaligned loads"
        assert self.faults[1] == 0, f"{self.faults[1]} loads outside the columns"


def pointers(views: list[np.ndarray]) -> Any:
    arr = (ctypes.c_void_p * 4)(*[v.ctypes.data for v in views],
                                *[views[0].ctypes.data] * (4 - len(views)))
    return arr


def columns(n: int, d: int, dtype: np.dtype, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    cols = [rng.integers(0, top, size=n, dtype=dtype, endpoint=True) for _ in range(d)]
    for c in cols:  # the extremes too
        c[: min(n, 2)] = [0, top][: min(n, 2)]
    return cols


def run_read(lib: ctypes.CDLL, cols: list[np.ndarray], shifts: list[int], unroll: int,
             grid: int, block: int) -> Region:
    region = Region(cols, shifts)
    words = (ctypes.c_longlong * 4)(*[v.nbytes // 4 for v in region.views],
                                    *[0] * (4 - len(cols)))
    out = np.zeros(grid, dtype=np.uint32)
    rc = lib.emu_read(len(cols), unroll, grid, block, pointers(region.views), words,
                      ctypes.c_void_p(out.ctypes.data), *region.args())
    assert rc == 0, "a barrier broke (a shuffle not every lane of a warp reached)" \
        if rc == -1 else f"no instance for d={len(cols)} unroll={unroll}"
    region.read_once()
    assert int(out.sum(dtype=np.uint64)) % (1 << 32) == words_sum(cols)
    return region


READ_CASES = [
    # n, d, dtype, column starts past a 16-byte boundary (bytes), unroll, grid, block
    (0, 1, U32, [0], 4, 1, 32),
    (1, 1, U32, [4], 4, 1, 32),
    (3, 2, U32, [0, 12], 1, 2, 32),
    (5, 3, U32, [4, 8, 12], 2, 1, 64),
    (17, 4, U32, [0, 4, 8, 12], 4, 2, 64),
    (1000, 1, U32, [0], 4, 3, 64),
    (1027, 3, U32, [12, 0, 4], 4, 3, 64),
    (777, 4, U32, [8, 8, 0, 4], 2, 2, 32),
    (2053, 2, U32, [0, 0], 1, 1, 32),
    (0, 2, U64, [0, 8], 4, 1, 32),
    (1, 1, U64, [8], 1, 1, 32),
    (513, 3, U64, [8, 0, 8], 4, 2, 64),
    (1000, 4, U64, [0, 0, 0, 0], 2, 3, 64),
]


@pytest.mark.parametrize(("n", "d", "dtype", "shifts", "unroll", "grid", "block"), READ_CASES)
def test_the_vector_read_reads_every_byte_once_and_sums_the_words(
        emulation: ctypes.CDLL, n: int, d: int, dtype: np.dtype, shifts: list[int],
        unroll: int, grid: int, block: int) -> None:
    cols = columns(n, d, dtype, seed=n + d)
    region = run_read(emulation, cols, shifts, unroll, grid, block)
    # the bulk in 16-byte loads: all but the words before a column's first 16-byte boundary
    # and after its last whole 16 bytes
    vecs = 0
    for (a, b), s in zip(region.spans, shifts, strict=True):
        head = min((16 - s) % 16 // 4, (b - a) // 4)
        vecs += ((b - a) // 4 - head) // 4
    assert region.faults[2] == vecs


def run_bitmap(lib: ctypes.CDLL, cols: list[np.ndarray], bounds: list[int], shifts: list[int],
               unroll: int, grid: int, block: int) -> tuple[Region, np.ndarray]:
    region = Region(cols, shifts)
    n = cols[0].shape[0]
    wide = cols[0].dtype == U64
    t = np.array(bounds + [0] * (4 - len(bounds)), dtype=cols[0].dtype)
    out = np.full(-(-n // 32), 0xDEADBEEF, dtype=np.uint32)  # every word must be written
    rc = lib.emu_bitmap(int(wide), len(cols), unroll, grid, block, pointers(region.views),
                        ctypes.c_void_p(t.ctypes.data), ctypes.c_longlong(n),
                        ctypes.c_void_p(out.ctypes.data), *region.args())
    assert rc == 0, "a barrier broke (a shuffle not every lane of a warp reached)" \
        if rc == -1 else f"no instance for d={len(cols)} unroll={unroll}"
    region.read_once()
    return region, out


BITMAP_CASES = [
    # n, d, dtype, shifts, unroll, grid, block
    (0, 1, U32, [0], 2, 1, 32),
    (1, 1, U32, [0], 2, 1, 32),
    (31, 2, U32, [0, 0], 1, 1, 32),
    (33, 2, U32, [0, 4], 2, 1, 32),
    (128, 1, U32, [0], 1, 1, 32),
    (126, 1, U32, [0], 1, 1, 32),  # one warp's 32 groups, the last partial
    (63, 2, U64, [0, 0], 1, 1, 32),
    (1000, 3, U32, [0, 0, 0], 2, 2, 64),
    (1001, 3, U32, [0, 4, 8], 2, 2, 64),  # a Fortran table's columns at 1001 rows
    (4099, 4, U32, [0, 0, 0, 0], 4, 2, 64),
    (2000, 4, U32, [12, 0, 0, 0], 1, 3, 32),
    (65, 1, U64, [0], 2, 1, 32),
    (1000, 2, U64, [0, 0], 2, 2, 64),
    (999, 3, U64, [0, 8, 0], 4, 1, 64),
    (2051, 4, U64, [0, 0, 0, 0], 1, 3, 64),
]


@pytest.mark.parametrize(("n", "d", "dtype", "shifts", "unroll", "grid", "block"), BITMAP_CASES)
def test_the_bitmap_read_reads_every_byte_once_and_writes_every_word(
        emulation: ctypes.CDLL, n: int, d: int, dtype: np.dtype, shifts: list[int],
        unroll: int, grid: int, block: int) -> None:
    cols = columns(n, d, dtype, seed=3 * n + d)
    top = int(np.iinfo(dtype).max)
    rng = np.random.default_rng(n)
    # per column a bound near its median, the last at the maximum, with four columns the first
    # one drawn at random
    bounds = [int(np.median(c)) if n else top for c in cols]
    bounds[-1] = top
    if d == 4:
        bounds[0] = int(rng.integers(0, top // 2))
    region, got = run_bitmap(emulation, cols, bounds, shifts, unroll, grid, block)
    assert np.array_equal(got, bitmap_of(cols, bounds))
    assert np.array_equal(got, fk.below_bitmap(cols, bounds))
    rows = 2 if dtype == U64 else 4
    assert region.faults[2] == sum(n // rows for s in shifts if s == 0)


def test_an_empty_selection_still_writes_zeros(emulation: ctypes.CDLL) -> None:
    cols = columns(300, 2, U32, seed=7)
    _, got = run_bitmap(emulation, cols, [0, 2**32 - 1], [0, 0], 2, 1, 64)
    assert not got.any() and got.shape == (10,)


# ---------------------------------------------------------------------- the Python side
class FakeKernel:
    """``cupy.RawKernel`` of floor_kernel.cu, run by the emulation: the Python wrappers'
    launches (argument order, padding, grids, the slices of the output) checked without a GPU."""

    attributes = types.MappingProxyType({"num_regs": 40})

    def __init__(self, lib: ctypes.CDLL, code: str, name: str, options: tuple[str, ...]) -> None:
        assert code == fk.source()
        self.lib, self.name = lib, name
        opts = dict(o[2:].split("=") for o in options)
        self.d, self.unroll, self.wide = int(opts["IZ_D"]), int(opts["IZ_UNROLL"]), \
            opts["IZ_WIDE"] == "1"

    def __call__(self, grid: tuple[int], block: tuple[int], args: tuple[Any, ...]) -> None:
        ptrs = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in args[:4]])
        faults = np.zeros(3, dtype=np.int64)
        tail = (None, ctypes.c_size_t(0), None, ctypes.c_void_p(faults.ctypes.data))
        if self.name == "floor_read":
            words = (ctypes.c_longlong * 4)(*[int(w) for w in args[4:8]])
            assert all(isinstance(w, np.int64) for w in args[4:8])
            rc = self.lib.emu_read(self.d, self.unroll, grid[0], block[0], ptrs, words,
                                   ctypes.c_void_p(args[8].ctypes.data), *tail)
        else:
            key = np.uint64 if self.wide else np.uint32
            assert all(type(b) is key for b in args[4:8]) and isinstance(args[8], np.int64)
            bounds = np.array(args[4:8], dtype=key)
            rc = self.lib.emu_bitmap(int(self.wide), self.d, self.unroll, grid[0], block[0], ptrs,
                                     ctypes.c_void_p(bounds.ctypes.data), ctypes.c_longlong(args[8]),
                                     ctypes.c_void_p(args[9].ctypes.data), *tail)
        assert rc == 0 and faults[0] == 0, (rc, faults)


@pytest.fixture
def fake_cupy(emulation: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> Any:
    """CuPy as far as floor_kernel uses it: NumPy arrays, the kernels run by the emulation, a GPU
    of two multiprocessors of 128 threads."""

    attributes = {"MultiProcessorCount": 2, "MaxThreadsPerMultiProcessor": 128}
    cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(attributes=attributes))

    class Fake:
        ndarray, uint32, zeros = np.ndarray, np.uint32, staticmethod(np.zeros)
        cuda: Any = None

        @staticmethod
        def RawKernel(code: str, name: str, options: tuple[str, ...]) -> FakeKernel:
            return FakeKernel(emulation, code, name, options)

    Fake.cuda = cuda
    monkeypatch.setattr(fk, "import_cupy", lambda *a: Fake)
    fk._kernel.cache_clear()
    yield Fake
    fk._kernel.cache_clear()


def test_the_vector_read_launches_four_columns_at_a_time(fake_cupy: Any) -> None:
    cols = columns(1001, 3, U32, seed=5) + columns(700, 3, U64, seed=6)
    cols = [c[1:] for c in cols]  # off a 16-byte boundary
    # the longest column of each launch (699 uint64 keys) holds 349 whole 16 bytes: in one
    # pass 6 blocks of 64 threads, one load each; the fake GPU holds 4 such blocks at once
    read = fk.VectorRead(cols, unroll=1, threads=64, grid="full")
    assert read.blocks == [4, 4] and read.out.shape == (8,)
    read.out[:] = 12345
    assert read() is read.out and read.total() == words_sum(cols) == fk.word_sum(cols)
    read = fk.VectorRead(cols, unroll=1, threads=64)  # one pass, the default
    assert read.blocks == [6, 6]
    read.out[:] = 12345
    assert read() is read.out and read.total() == words_sum(cols)
    read = fk.VectorRead(cols, unroll=2, threads=64)
    read.out[:] = 12345
    assert read() is read.out and read.total() == words_sum(cols) == fk.word_sum(cols)
    read = fk.VectorRead(np.asfortranarray(np.column_stack(cols[:3])), threads=64, blocks=3)
    read()
    assert read.blocks == [3] and read.total() == words_sum(cols[:3])


def test_the_bitmap_read_launches_with_its_bounds(fake_cupy: Any) -> None:
    for dtype in (U32, U64):
        host = columns(1001, 4, dtype, seed=8)
        table = np.asfortranarray(np.column_stack(host))
        bounds = [int(np.median(c)) for c in host]
        for d in (1, 4):
            read = fk.BitmapRead(table[:, :d], bounds[:d], threads=64)
            read.out[:] = 0xDEADBEEF
            assert np.array_equal(read(), bitmap_of(host[:d], bounds[:d]))
        read = fk.BitmapRead(host[:2], threads=64)  # bounds default to the maximum
        assert np.array_equal(read(), bitmap_of(host[:2], [int(np.iinfo(dtype).max)] * 2))
    with pytest.raises(InvalidInput, match="1 to 4 columns"):
        fk.BitmapRead(columns(10, 5, U32, seed=1))
    with pytest.raises(InvalidInput, match="one dtype"):
        fk.BitmapRead([np.zeros(4, np.uint32), np.zeros(4, np.uint64)])
    with pytest.raises(InvalidInput, match="one length"):
        fk.BitmapRead([np.zeros(4, np.uint32), np.zeros(5, np.uint32)])
    with pytest.raises(InvalidInput, match="bounds"):
        fk.BitmapRead([np.zeros(4, np.uint32)], [2**32])
    with pytest.raises(InvalidInput, match="threads"):
        fk.VectorRead([np.zeros(4, np.uint32)], threads=100)


def test_the_bench_times_both_reads_on_the_gpu_path(fake_cupy: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo.tools import references
    from indexzoo.tools.workloads import Workload, generate

    data = generate(Workload(name="r", n_keys=1001, n_lookups=30, range_hits=4), "cpu")
    monkeypatch.setattr(references, "array_module", lambda device: np)
    calls = references.reference_calls(data, "cuda")
    assert list(calls) == [references.SCAN_VECTOR, references.SCAN_REDUCTION]
    sums = calls[references.SCAN_VECTOR]()
    assert int(sums.sum(dtype=np.uint64)) % (1 << 32) == words_sum([data.keys])
    assert calls[references.SCAN_REDUCTION]() == [data.keys.max()]
    # key columns the kernel cannot read in place: the reduction alone
    strided = dataclasses.replace(data, keys=data.keys[::2])
    assert list(references.reference_calls(strided, "cuda")) == [references.SCAN_REDUCTION]


def test_the_study_times_and_checks_every_floor_on_the_gpu_path(
        fake_cupy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse
    import sys

    sys.path.insert(0, str(HERE.parents[1] / "benchmarks" / "studies"))
    import scan_floor

    monkeypatch.setattr(scan_floor, "array_module", lambda device: np)
    monkeypatch.setattr(scan_floor, "to_device", lambda a, device: a)
    args = argparse.Namespace(device="cuda", rows=1001, floor_columns="1,3", floor_bits="32,64",
                              vector="1x64,4x64xpass", bitmap="2x64")
    rows: list[dict[str, Any]] = []
    scan_floor.floor_sweep(args, lambda fn: (fn(), 1e-3)[1], rows)
    reads = [r for r in rows if r["what"] == "floor"]
    assert len(reads) == 2 * 2 * 6 and all(r["check"] == "ok" for r in reads), reads
    assert {r["read"] for r in reads} == {"vector", "reduction", "bitmap"}
    summaries = [r for r in rows if r["what"] == "floor summary"]
    assert len(summaries) == 4 and all(r["bitmap_floor_seconds"] for r in summaries)


def test_the_source_ships_with_the_package() -> None:
    text = fk.source()
    assert text == SOURCE.read_text()
    assert 'extern "C" __global__ void floor_read' in text
    assert 'extern "C" __global__ void floor_bitmap' in text


def test_key_columns_takes_lists_tables_and_single_columns() -> None:
    a = np.arange(10, dtype=np.uint32)
    assert len(fk.key_columns(a)) == 1
    assert len(fk.key_columns([a, a.astype(np.uint64)])) == 2
    table = np.asfortranarray(np.arange(30, dtype=np.uint32).reshape(10, 3))
    got = fk.key_columns(table)
    assert [c.tolist() for c in got] == [table[:, j].tolist() for j in range(3)]
    with pytest.raises(InvalidInput, match="not contiguous"):
        fk.key_columns(np.ascontiguousarray(table))  # a C-order table's columns are strided
    with pytest.raises(InvalidInput, match="dtype"):
        fk.key_columns([np.arange(4, dtype=np.uint16)])
    with pytest.raises(InvalidInput, match="no columns"):
        fk.key_columns([])
    with pytest.raises(InvalidInput, match="1-D"):
        fk.key_columns([table])


def test_grid_blocks_is_one_pass_at_most_a_full_gpu() -> None:
    assert fk.grid_blocks(0, 1024, 1056) == 1
    assert fk.grid_blocks(1025, 1024, 1056) == 2
    assert fk.grid_blocks(10**9, 1024, 1056) == 1056


def test_a_full_grid_is_the_blocks_that_fit_at_once() -> None:
    """A Hopper multiprocessor: 2048 threads, 32 blocks, 65536 registers."""
    sm = {"MaxThreadsPerMultiProcessor": 2048, "MaxBlocksPerMultiprocessor": 32,
          "MaxRegistersPerMultiprocessor": 65536}
    assert fk.resident_blocks(256, 32, sm) == 8
    assert fk.resident_blocks(256, 0, sm) == 8  # registers unknown: the thread limit
    assert fk.resident_blocks(256, 40, sm) == 6  # 1280 registers a warp: 51 warps
    assert fk.resident_blocks(128, 64, sm) == 8
    assert fk.resident_blocks(32, 16, sm) == 32
    assert fk.resident_blocks(1024, 255, sm) == 1


def test_the_numpy_checks_agree_with_the_plain_definitions() -> None:
    cols = [*columns(1001, 3, U32, seed=1), columns(1001, 1, U64, seed=2)[0]]
    assert fk.word_sum(cols) == words_sum(cols)
    cols = columns(70, 2, U64, seed=3)
    bounds = [int(np.median(cols[0])), 2**64 - 1]
    assert np.array_equal(fk.below_bitmap(cols, bounds), bitmap_of(cols, bounds))


# ---------------------------------------------------------------------- the GPU compiler
@pytest.mark.parametrize("options", [["-DIZ_D=3", "-DIZ_UNROLL=4"],
                                     ["-DIZ_D=4", "-DIZ_UNROLL=2", "-DIZ_WIDE=1"]])
def test_the_source_compiles_for_a_hopper_gpu(tmp_path: Path, options: list[str]) -> None:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("no nvcc")
    ptx = tmp_path / "floor.ptx"
    done = subprocess.run([nvcc, "-arch=sm_90", "-ptx", *options, "-o", str(ptx), str(SOURCE)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert ".entry floor_read" in text and ".entry floor_bitmap" in text
    assert "ld.global.nc.v4.u32" in text  # the 16-byte loads
    if "-DIZ_WIDE=1" in options:
        assert "ld.global.nc.v2.u64" in text


# ---------------------------------------------------------------------- on a GPU
GPU_SIZES = [0, 1, 3, 5, 1000, 1027, (1 << 20) + 3]


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_SIZES)
@pytest.mark.parametrize("dtype", [U32, U64])
def test_the_vector_read_on_the_gpu(n: int, dtype: np.dtype) -> None:
    import cupy

    host = columns(n + 1, 5, dtype, seed=n)
    # separate columns (each off by one key: not on a 16-byte boundary), and the columns of a
    # Fortran-order table (at an odd row count, each at its own offset from a boundary)
    dev = [cupy.asarray(c)[1:] for c in host]
    want = [c[1:] for c in host]
    for d in (1, 3, 4, 5):  # five columns: two launches
        for unroll in (1, 4):
            read = fk.VectorRead(dev[:d], unroll=unroll)
            read()
            cupy.cuda.get_current_stream().synchronize()
            assert read.total() == words_sum(want[:d]), (n, d, unroll)
    table = cupy.asfortranarray(cupy.asarray(np.column_stack(want[:3])))
    read = fk.VectorRead(table, blocks=7)
    read()
    assert read.total() == words_sum(want[:3])


@pytest.mark.gpu
@pytest.mark.parametrize("n", GPU_SIZES)
@pytest.mark.parametrize("dtype", [U32, U64])
def test_the_bitmap_read_on_the_gpu(n: int, dtype: np.dtype) -> None:
    import cupy

    host = columns(n, 4, dtype, seed=n + 1)
    top = int(np.iinfo(dtype).max)
    bounds = [min(int(np.quantile(c, 0.7)), top) if n else top for c in host]
    table = cupy.asfortranarray(cupy.asarray(np.column_stack(host)))
    dev = [cupy.asarray(c) for c in host]
    for d in (1, 2, 3, 4):
        want = fk.below_bitmap(host[:d], bounds[:d])
        if n <= 1027:
            assert np.array_equal(want, bitmap_of(host[:d], bounds[:d]))
        for cols in (dev[:d], table[:, :d]):
            for unroll in (1, 2, 4):
                read = fk.BitmapRead(cols, bounds[:d], unroll=unroll)
                read.out.fill(0xDEADBEEF)  # every word must be written
                got = cupy.asnumpy(read())
                assert np.array_equal(got, want), (n, d, unroll)


@pytest.mark.gpu
def test_the_bench_scan_reference_on_the_gpu() -> None:
    from indexzoo.tools.references import SCAN_REDUCTION, SCAN_VECTOR, reference_calls
    from indexzoo.tools.workloads import Workload, generate

    data = generate(Workload(name="r", n_keys=100_003, n_lookups=30, range_hits=4), "cuda")
    calls = reference_calls(data, "cuda")
    assert set(calls) == {SCAN_VECTOR, SCAN_REDUCTION}
    keys = data.keys.get()
    assert int(calls[SCAN_REDUCTION]()[0]) == int(keys.max())
    sums = calls[SCAN_VECTOR]().get()
    assert int(sums.sum(dtype=np.uint64)) % (1 << 32) == words_sum([keys])
