"""The scan floor on the GPU: the plainest read of key columns the device allows, as a CUDA C++
kernel with 16-byte loads (``floor_kernel.cu``, compiled with CuPy's ``RawKernel`` at first
use; numba cannot issue a 16-byte load from a ``uint32`` column).

* :class:`VectorRead`: every byte of the columns read once (``floor_read``): each thread sums
  the 32-bit words of its 16-byte loads (so no load can be dropped) and each block writes one
  sum. Any number of 4- or 8-byte columns of any length; a column that does not start on a
  16-byte boundary is read one word a thread up to the first boundary, and so are the words
  after its last whole 16 bytes. Four columns a launch.
* :class:`BitmapRead`: the floor of a scan that writes a bitmap (``floor_bitmap``): 1 to 4
  uint32 or uint64 columns of one length read once, bit ``r`` set iff ``c_j[r] < t_j`` for
  every column ``j``, one 32-bit word written per 32 rows (the fused scan's bitmap layout:
  little-endian bits, padding bits zero). A column off a 16-byte boundary (a column of a
  Fortran-order table whose row count is not a multiple of 4, say) and the last partial group
  of rows are read a key a load.

Both return their device result, so that a caller can check them with :func:`word_sum` and
:func:`below_bitmap` (NumPy). Nothing here is imported until the GPU reference is asked for.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Sequence
from typing import Any

import numpy as np

from indexzoo.devices import import_cupy, to_numpy
from indexzoo.errors import InvalidInput

__all__ = ["BITMAP_UNROLL", "GRIDS", "MAX_COLUMNS", "READ_UNROLL", "THREADS", "BitmapRead",
           "VectorRead", "below_bitmap", "grid_blocks", "key_columns", "resident_blocks", "source",
           "word_sum"]

#: Columns one launch reads (the kernels take four column pointers).
MAX_COLUMNS = 4
#: 16-byte loads each thread of ``floor_read`` has in flight per column.
READ_UNROLL = 4
#: Steps of 32 row groups each warp of ``floor_bitmap`` loads before it tests them.
BITMAP_UNROLL = 2
#: Threads per block of both kernels.
THREADS = 256


@functools.cache
def source() -> str:
    """The CUDA C++ of both kernels (``floor_kernel.cu``, shipped with the package)."""
    return importlib.resources.files(__package__).joinpath("floor_kernel.cu").read_text()


def key_columns(columns: Any) -> list[Any]:
    """``columns`` as a list of 1-D contiguous arrays: a list or tuple of 1-D arrays, one 1-D
    array, or a 2-D (rows, columns) table whose columns are each contiguous (Fortran order,
    or a single column). Each a 4- or 8-byte numeric dtype; anything else is InvalidInput (a
    floor must read the columns where they are, never a copy)."""
    if isinstance(columns, (list, tuple)):
        cols = list(columns)
    elif getattr(columns, "ndim", None) == 1:
        cols = [columns]
    elif getattr(columns, "ndim", None) == 2:
        cols = [columns[:, j] for j in range(int(columns.shape[1]))]
    else:
        raise InvalidInput("columns must be a 1-D array, a 2-D table or a list of 1-D arrays, "
                           f"got {type(columns).__name__}")
    if not cols:
        raise InvalidInput("no columns to read")
    for j, c in enumerate(cols):
        if getattr(c, "ndim", None) != 1:
            raise InvalidInput(f"column {j} is not a 1-D array")
        if c.dtype.kind not in "uif" or c.dtype.itemsize not in (4, 8):
            raise InvalidInput(f"column {j} has dtype {c.dtype}; the floor reads 4- or 8-byte "
                               "numbers")
        if not c.flags.c_contiguous:
            raise InvalidInput(f"column {j} is not contiguous (a C-order table's column?): "
                               "the floor reads columns where they are")
    return cols


def grid_blocks(units: int, per_block: int, full: int) -> int:
    """Blocks for ``units`` pieces of work, ``per_block`` of them a block per pass: enough for
    one pass, at most ``full`` (the blocks the whole GPU holds at once; the kernels stride
    over the rest), at least one."""
    return max(1, min(full, -(-units // max(per_block, 1))))


def resident_blocks(threads: int, regs: int, device: dict[str, int]) -> int:
    """Blocks of ``threads`` threads using ``regs`` registers each (0: unknown) that one
    multiprocessor holds at once, by ``device``'s limits (CuPy's device attributes): threads,
    blocks and registers per multiprocessor, registers given to a warp 256 at a time. Shared
    memory does not bind (the kernels take 128 bytes a block)."""
    per_sm = min(int(device.get("MaxThreadsPerMultiProcessor", 2048)) // threads,
                 int(device.get("MaxBlocksPerMultiprocessor", 32)))
    if regs > 0:
        per_warp = -(-regs * 32 // 256) * 256
        warps = int(device.get("MaxRegistersPerMultiprocessor", 65536)) // per_warp
        per_sm = min(per_sm, warps // (threads // 32))
    return max(per_sm, 1)


def _full_grid(kernel: Any, threads: int) -> int:
    """Blocks of ``kernel`` at ``threads`` a block that the current GPU runs at once, so that a
    grid-stride launch ends in one wave (a block more than fits would run alone at the end)."""
    cupy = import_cupy()
    device = cupy.cuda.Device().attributes
    try:  # compiles the kernel for this GPU (cached) and reads its register count
        regs = int(kernel.attributes.get("num_regs", 0))
    except Exception:  # an older CuPy without the attribute: the thread limit alone
        regs = 0
    return int(device["MultiProcessorCount"]) * resident_blocks(threads, regs, device)


#: Grids: ``pass``, one block per ``threads * unroll`` loads, each thread's loads in one pass
#: (the default: the fastest read on an H200 at 1e8 rows x 1 to 4 uint32 columns, 4.0-4.4 TB/s
#: against 3.7-4.1 TB/s, benchmarks/results/h200/2026-11-29-large-checks-bf0618d); ``full``,
#: one wave of resident blocks striding over the columns.
GRIDS = ("full", "pass")


@functools.cache
def _kernel(name: str, d: int, unroll: int, wide: bool) -> Any:
    cupy = import_cupy()
    options = (f"-DIZ_D={d}", f"-DIZ_UNROLL={unroll}", f"-DIZ_WIDE={int(wide)}")
    return cupy.RawKernel(source(), name, options=options)


def _check_launch(unroll: int, threads: int, grid: str) -> None:
    if unroll < 1 or unroll > 16:
        raise InvalidInput(f"unroll must be 1 to 16, got {unroll}")
    if threads < 32 or threads > 1024 or threads % 32:
        raise InvalidInput(f"threads must be a multiple of 32 from 32 to 1024, got {threads}")
    if grid not in GRIDS:
        raise InvalidInput(f"grid must be one of {', '.join(GRIDS)}, got {grid!r}")


def _blocks(kernel: Any, units: int, per_block: int, threads: int, grid: str,
            blocks: int | None) -> int:
    if blocks:
        return int(blocks)
    return grid_blocks(units, per_block, (1 << 31) - 1 if grid == "pass"
                       else _full_grid(kernel, threads))


class VectorRead:
    """One plain read of every byte of ``columns`` (:func:`key_columns`) with 16-byte loads.
    Calling it launches ``floor_read`` on CuPy's current stream, once per four columns, and
    returns the sums of the blocks (a uint32 device array, written in place each call);
    :meth:`total` folds them: the sum of every 32-bit word of the columns, mod 2^32.
    ``grid`` (:data:`GRIDS`) sizes the grid, ``blocks`` fixes it."""

    def __init__(self, columns: Any, *, unroll: int = READ_UNROLL, threads: int = THREADS,
                 grid: str = "pass", blocks: int | None = None) -> None:
        _check_launch(unroll, threads, grid)
        cupy = import_cupy()
        cols = key_columns(columns)
        if any(not isinstance(c, cupy.ndarray) for c in cols):
            raise InvalidInput("the vector read reads CuPy arrays (columns on the GPU)")
        words = [c.view(cupy.uint32) for c in cols]
        self.columns, self.unroll, self.threads = cols, unroll, threads
        self.nbytes = sum(int(c.nbytes) for c in cols)
        plans: list[tuple[Any, int, tuple[Any, ...]]] = []
        for at in range(0, len(words), MAX_COLUMNS):
            part = words[at:at + MAX_COLUMNS]
            vecs = max(int(w.shape[0]) // 4 for w in part)
            kernel = _kernel("floor_read", len(part), unroll, False)
            n_blocks = _blocks(kernel, vecs, threads * unroll, threads, grid, blocks)
            pad = MAX_COLUMNS - len(part)
            ptrs = part + [part[0]] * pad  # never read: the kernel is compiled for len(part)
            sizes = [np.int64(w.shape[0]) for w in part] + [np.int64(0)] * pad
            plans.append((kernel, n_blocks, (*ptrs, *sizes)))
        self.blocks = [b for _, b, _ in plans]
        self.out = cupy.zeros(sum(self.blocks), dtype=cupy.uint32)
        self._launches = []
        at = 0
        for kernel, n_blocks, args in plans:
            self._launches.append((kernel, (n_blocks,), (threads,),
                                   (*args, self.out[at:at + n_blocks])))
            at += n_blocks

    def __call__(self) -> Any:
        for kernel, grid, block, args in self._launches:
            kernel(grid, block, args)
        return self.out

    def total(self) -> int:
        """The sum of every 32-bit word of the columns mod 2^32, from the last call's blocks."""
        return int(to_numpy(self.out).sum(dtype=np.uint64) & np.uint64(0xFFFFFFFF))


class BitmapRead:
    """The floor of a bitmap-out scan over 1 to 4 ``columns`` of one length and one dtype
    (uint32 or uint64): bit ``r`` of the bitmap is set iff ``columns[j][r] < bounds[j]`` for
    every ``j`` (``bounds`` default to the dtype's maximum: every row but those holding it).
    Calling it launches ``floor_bitmap`` on CuPy's current stream and returns the bitmap,
    ceil(N/32) uint32 words (written in full, in place, each call). ``grid`` and ``blocks``
    as for :class:`VectorRead`."""

    def __init__(self, columns: Any, bounds: Sequence[int] | None = None, *,
                 unroll: int = BITMAP_UNROLL, threads: int = THREADS, grid: str = "pass",
                 blocks: int | None = None) -> None:
        _check_launch(unroll, threads, grid)
        cupy = import_cupy()
        cols = key_columns(columns)
        if any(not isinstance(c, cupy.ndarray) for c in cols):
            raise InvalidInput("the bitmap read reads CuPy arrays (columns on the GPU)")
        dtype, n = cols[0].dtype, int(cols[0].shape[0])
        if len(cols) > MAX_COLUMNS:
            raise InvalidInput(f"the bitmap read takes 1 to {MAX_COLUMNS} columns, got {len(cols)}")
        if dtype not in (np.uint32, np.uint64) or any(c.dtype != dtype for c in cols):
            raise InvalidInput("the bitmap read takes uint32 or uint64 columns of one dtype, got "
                               + ", ".join(str(c.dtype) for c in cols))
        if any(int(c.shape[0]) != n for c in cols):
            raise InvalidInput("the bitmap read takes columns of one length")
        top = int(np.iinfo(dtype).max)
        bounds = [top] * len(cols) if bounds is None else [int(b) for b in bounds]
        if len(bounds) != len(cols) or any(b < 0 or b > top for b in bounds):
            raise InvalidInput(f"bounds must be one {dtype} per column, got {bounds}")
        self.columns, self.bounds, self.n = cols, bounds, n
        self.unroll, self.threads = unroll, threads
        self.nbytes = sum(int(c.nbytes) for c in cols)
        self.out = cupy.zeros(-(-n // 32), dtype=cupy.uint32)
        self.out_bytes = int(self.out.nbytes)
        wide = dtype == np.uint64
        rows_per_lane = 2 if wide else 4
        groups = -(-n // rows_per_lane)  # one 16-byte load of each column a lane
        chunks = -(-groups // 32)  # a warp's 32 lanes
        kernel = _kernel("floor_bitmap", len(cols), unroll, bool(wide))
        self.blocks = _blocks(kernel, chunks, threads // 32 * unroll, threads, grid, blocks)
        pad = MAX_COLUMNS - len(cols)
        scalar = np.uint64 if wide else np.uint32
        args = (*cols, *[cols[0]] * pad, *[scalar(b) for b in bounds], *[scalar(0)] * pad,
                np.int64(n), self.out)
        self._launch = (kernel, (self.blocks,), (threads,), args)

    def __call__(self) -> Any:
        kernel, grid, block, args = self._launch
        kernel(grid, block, args)
        return self.out


# ---------------------------------------------------------------------- NumPy, to check them
def word_sum(columns: Any) -> int:
    """The sum of every 32-bit word of ``columns`` mod 2^32, with NumPy (what
    :meth:`VectorRead.total` must give)."""
    total = 0
    for c in key_columns(columns):
        total += int(np.ascontiguousarray(to_numpy(c)).view(np.uint32).sum(dtype=np.uint64))
    return total & 0xFFFFFFFF


def below_bitmap(columns: Any, bounds: Sequence[int]) -> np.ndarray:
    """The bitmap :class:`BitmapRead` must give, with NumPy: ceil(N/32) little-endian uint32
    words, bit ``r`` set iff ``columns[j][r] < bounds[j]`` for every ``j``, padding zero."""
    cols = [to_numpy(c) for c in key_columns(columns)]
    n = int(cols[0].shape[0])
    match = np.ones(n, dtype=bool)
    for c, b in zip(cols, bounds, strict=True):
        match &= c < c.dtype.type(b)
    bits = np.zeros(-(-n // 32) * 32, dtype=bool)
    bits[:n] = match
    return np.packbits(bits, bitorder="little").view("<u4")
