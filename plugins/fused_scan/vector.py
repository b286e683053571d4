"""The fused scan's GPU body with 16-byte loads (``vector_scan.cu``, compiled by CuPy's
``RawKernel`` at first use): the default GPU body of ``fused-scan``.

numba's CUDA kernels load a ``uint32`` column four bytes at a time; at 1e8 rows x 3 columns on
an H200 the best numba body reached 0.73-0.78 of a plain 16-byte-load read of the same columns
(``benchmarks/results/h200/2026-11-29-large-checks-bf0618d``). This body loads each column a
16-byte vector per lane (4 uint32 or 2 uint64 rows) and stores each warp's 32 bitmap words
at once: on the same GPU 0.99-1.02 of that read at 1 to 4 uint32 and 1 to 2 uint64 columns
(``docs/plugins/fused-scan.md``).

It needs every column on a 16-byte boundary: a Fortran-order table whose column stride is a
multiple of the rows of a vector. :func:`vector_table` lays the keys out so (a copy with up to
three rows of padding per column when the row count is not such a multiple; the index keeps
the rows ``0 .. n-1`` of it as its keys). The CPU runs the numba scalar body of
:mod:`indexzoo.plugins.fused_scan.kernels`; the tests run this body on the CPU under an
emulation (``tests/support/scan_host.cpp``).
"""

from __future__ import annotations

import functools
import importlib.resources
import struct
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from indexzoo.devices import import_cupy
from indexzoo.errors import InvalidInput
from indexzoo.native.cudalaunch import param_buffer

__all__ = ["MAX_WRITTEN_OUT", "THREADS", "UNROLLS", "bind_vector_scan", "default_unroll", "source",
           "vector_rows", "vector_table"]

#: Column counts the body is written out for (more: a loop over the columns).
MAX_WRITTEN_OUT = 8
#: Vectors of each column a lane may have in flight (a warp's chunk is 8 steps of a vector a
#: lane for uint32 keys, 16 for uint64).
UNROLLS = (1, 2, 4, 8, 16)
#: Threads per block (the fastest on an H200 at 1 to 4 columns).
THREADS = 128
#: Queries one launch takes, one a row of blocks (grid.y); more are launched again.
MAX_GRID_Y = 65535
#: Rows a 16-byte vector holds, by the keys' width in bytes.
_ROWS = {4: 4, 8: 2}


@functools.cache
def source() -> str:
    """The CUDA C++ of the body (``vector_scan.cu``, shipped with the package)."""
    return importlib.resources.files(__package__).joinpath("vector_scan.cu").read_text()


def vector_rows(dtype: Any) -> int:
    """Rows of ``dtype`` keys one 16-byte load holds (uint32: 4, uint64: 2)."""
    dt = np.dtype(dtype)
    if dt not in (np.uint32, np.uint64):
        raise InvalidInput(f"the vector scan takes uint32 or uint64 keys, got {dt}")
    return _ROWS[dt.itemsize]


def _aligned(arr: Any) -> bool:
    return int(arr.data.ptr) % 16 == 0


def vector_table(keys: Any) -> tuple[Any, Any]:
    """``(table, keys)``: the (ld, d) Fortran-order table the body reads, ``ld`` the row count
    rounded up to a multiple of :func:`vector_rows` (every column on a 16-byte boundary), and
    the view of its first n rows, equal to ``keys``. ``keys`` (a CuPy (n, d) array) is used as
    the table where it already is one; otherwise copied once (padding rows zero)."""
    cupy = import_cupy()
    n, d = int(keys.shape[0]), int(keys.shape[1])
    r = vector_rows(keys.dtype)
    if n % r == 0 and keys.flags.f_contiguous and _aligned(keys):
        return keys, keys
    table = cupy.zeros((-(-n // r) * r, d), dtype=keys.dtype, order="F")
    table[:n] = keys
    return table, table[:n]


@functools.cache
def _kernel(wide: bool, written_out: int, unroll: int) -> Any:
    cupy = import_cupy()
    options = (f"-DFS_WIDE={int(wide)}", f"-DFS_D={written_out}", f"-DFS_U={unroll}",
               "-std=c++17")
    return cupy.RawKernel(source(), "fused_scan", options=options)


def default_unroll(dtype: Any, columns: int = 2) -> int:
    """Vectors of a column each lane has in flight: 8 rows at two columns or more (2 vectors
    of uint32 keys, 4 of uint64), 16 rows at one uint32 column, where 8 leave too few bytes in
    flight a warp; the fastest on an H200 (``docs/plugins/fused-scan.md``)."""
    rows = 16 if columns == 1 and vector_rows(dtype) == 4 else 8
    return rows // vector_rows(dtype)


def bind_vector_scan(table: Any, n: int, *, unroll: int | None = None,
                     threads_per_block: int = THREADS) -> Callable[[Any, Any], Any]:
    """The scan over the first ``n`` rows of ``table`` (from :func:`vector_table`): a function
    ``(lo, hi) -> bitmaps`` for (Q, d) C-contiguous CuPy bounds of the table's dtype, returning
    (Q, ceil(n/32)) uint32 bitmaps (a new array, every word written). ``unroll`` (one of
    :data:`UNROLLS`, at most the steps of a warp's chunk: 8 for uint32, 16 for uint64):
    vectors of each column a lane has in flight (default :func:`default_unroll`)."""
    cupy = import_cupy()
    ld, d = int(table.shape[0]), int(table.shape[1])
    r = vector_rows(table.dtype)
    u = default_unroll(table.dtype, d) if unroll is None else unroll
    if u not in UNROLLS or u > 32 // r:
        raise InvalidInput(f"unroll must be one of {UNROLLS} up to {32 // r} for {table.dtype} "
                           f"keys, got {unroll}")
    if threads_per_block < 32 or threads_per_block > 1024 or threads_per_block % 32:
        raise InvalidInput("threads_per_block must be a multiple of 32 from 32 to 1024, got "
                           f"{threads_per_block}")
    if not table.flags.f_contiguous or ld % r or not _aligned(table) or not 0 <= n <= ld:
        raise InvalidInput("the vector scan reads a table from vector_table()")
    kernel = _kernel(table.dtype == np.uint64, d if d <= MAX_WRITTEN_OUT else 0, u)
    words = -(-n // 32)
    warps = -(-words // 32)  # a warp writes 32 words
    blocks = max(1, -(-warps // (threads_per_block // 32)))
    u32 = np.uint32
    launch = _launcher(kernel, table, ld, d, n, words, blocks, threads_per_block)
    alloc = cupy.cuda.alloc  # the current allocator, as cupy.empty takes it
    ndarray = cupy.ndarray

    def scan(lo: Any, hi: Any) -> Any:
        q = int(lo.shape[0])
        if not (q and words):
            return cupy.empty((q, words), dtype=u32)
        # The answer's memory, the launch, and only then its array: a lone query waits for
        # its launch, and making the array first cost it 2 to 5 us on the hosts of two H200s
        # (benchmarks/results/h200/2026-11-30-fused-scan-launch-first/)
        memory = alloc(q * words * 4)
        launch(q, lo, hi, memory)
        return ndarray((q, words), dtype=u32, memptr=memory)

    return scan


#: ``fused_scan``'s parameters as C lays them out: the table, ld, d, n, lo, hi, queries,
#: words, out.
_PARAMS = struct.Struct("@PqiqPPqqP")


def _launcher(kernel: Any, table: Any, ld: int, d: int, n: int, words: int, blocks: int,
              threads: int) -> Callable[[int, Any, Any, Any], None]:
    """``launch(q, lo, hi, memory)``: the kernel over ``q`` queries ((q, d) C-contiguous
    bounds of the table's dtype), writing the answer into ``memory`` (a CuPy
    ``MemoryPointer`` of ``q * words`` uint32), one query a row of blocks: a launch for each
    :data:`MAX_GRID_Y` queries. Through the driver's ``cuLaunchKernel`` with one packed
    parameter buffer per thread (the fixed parameters written once; a launch writes the
    bounds' and the answer's pointers and the count). CuPy's own call packs each argument
    anew: at one uint32 column, where a query reads for about 0.09 ms, its 20 us of host time
    before the launch was a fifth of a lone call. On another device than the table's (made
    current by the caller) it takes CuPy's call."""
    cupy = import_cupy()
    device = cupy.cuda.runtime.getDevice()
    function = kernel.kernel  # compiled here, for the table's device
    ptr = int(function.ptr)
    table_ptr = int(table.data.ptr)
    head = (table, np.int64(ld), np.int32(d), np.int64(n))
    row = d * table.dtype.itemsize  # bytes of one query's bounds
    local = threading.local()
    get_device = cupy.cuda.runtime.getDevice
    stream = cupy.cuda.get_current_stream
    launch_kernel = cupy.cuda.driver.launchKernel

    def launch(q: int, lo: Any, hi: Any, memory: Any) -> None:
        if get_device() != device:
            out = cupy.ndarray((q, words), dtype=np.uint32, memptr=memory)
            for s in range(0, q, MAX_GRID_Y):
                e = min(q, s + MAX_GRID_Y)
                kernel((blocks, e - s), (threads,),
                       (*head, lo[s:e], hi[s:e], np.int64(e - s), np.int64(words), out[s:e]))
            return
        buf = getattr(local, "buf", None)
        if buf is None:  # this thread's first launch
            buf = param_buffer(local, bytes(_PARAMS.size), _PARAMS.size, device)
        lo_ptr, hi_ptr, out_ptr, on = lo.data.ptr, hi.data.ptr, memory.ptr, stream().ptr
        if q <= MAX_GRID_Y:
            _PARAMS.pack_into(buf, 0, table_ptr, ld, d, n, lo_ptr, hi_ptr, q, words, out_ptr)
            launch_kernel(ptr, blocks, q, 1, threads, 1, 1, 0, on, 0, local.extra_ptr)
            return
        for s in range(0, q, MAX_GRID_Y):  # the driver reads the buffer as it launches
            m = min(MAX_GRID_Y, q - s)
            _PARAMS.pack_into(buf, 0, table_ptr, ld, d, n, lo_ptr + s * row, hi_ptr + s * row,
                              m, words, out_ptr + s * words * 4)
            launch_kernel(ptr, blocks, m, 1, threads, 1, 1, 0, on, 0, local.extra_ptr)

    return launch
