"""Pieces of grouped aggregation kernels, for the query engines (``indexzoo.query``): one
source for both devices.

* :func:`atomics` -> ``(add, amin, amax, aor)``: jitable ``f(array, index, value) -> old`` on
  integer arrays, for ``device`` ("cpu": LLVM ``atomicrmw``, since numba has no CPU atomics and
  its parallel loops race without; "cuda": ``numba.cuda.atomic``, imported only then).
* :func:`passes`: does row ``i`` satisfy every column's intervals (columns as a homogeneous
  tuple of arrays, intervals as CSR ``starts``/``lo``/``hi``)? :func:`in_intervals` tests
  one value against one column's intervals.
* :func:`expr_value`: an expression (rows ``terms[s:e]`` of ``(coef, a, b)``, column indexes
  into a tuple of arrays, -1 for none) at row ``i``.
* :func:`accumulate`: COUNT, and per expression SUM/MIN/MAX, of one row into group ``g``.
* :func:`zero_prefix` and :func:`read_packed`: a prepared query's result buffer zeroed (one
  memset on the GPU) and its packed groups copied back, a first batch and then the rest.

Kernels that use them (the crystal and rtcudb engines) build their bodies per device around
:func:`atomics`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from .cpu_atomics import atomic_rmw

__all__ = ["NEED_MAX", "NEED_MIN", "NEED_SUM", "accumulate", "atomics", "expr_value", "host_buffer",
           "in_intervals", "packed_records", "passes", "read_packed", "zero_prefix"]

NEED_SUM, NEED_MIN, NEED_MAX = 1, 2, 4


#: numba.cuda, once :func:`atomics` made the GPU's (CPU kernels never import it).
cuda: Any = None


@functools.cache
def atomics(device: str) -> tuple[Any, Any, Any, Any]:
    """``(add, amin, amax, aor)`` for ``device`` (signed min/max)."""
    if device == "cpu":
        return atomic_rmw("add"), atomic_rmw("min"), atomic_rmw("max"), atomic_rmw("or")
    from numba import config

    if config.ENABLE_CUDASIM:  # the simulator swaps the module only in the kernel's own globals
        return _simulated_atomics()
    global cuda
    if cuda is None:
        from numba import cuda as numba_cuda

        cuda = numba_cuda

    @register_jitable
    def add(a, i, v):
        return cuda.atomic.add(a, i, v)

    @register_jitable
    def amin(a, i, v):
        return cuda.atomic.min(a, i, v)

    @register_jitable
    def amax(a, i, v):
        return cuda.atomic.max(a, i, v)

    @register_jitable
    def aor(a, i, v):
        return cuda.atomic.or_(a, i, v)

    return add, amin, amax, aor


def _simulated_atomics() -> tuple[Any, Any, Any, Any]:
    """The atomics of numba's CUDA simulator (tests only): its running kernel's fake module."""
    from numba.cuda.simulator.kernel import _get_kernel_context

    def add(a: Any, i: Any, v: Any) -> Any:
        return _get_kernel_context().atomic.add(a, i, v)

    def amin(a: Any, i: Any, v: Any) -> Any:
        return _get_kernel_context().atomic.min(a, i, v)

    def amax(a: Any, i: Any, v: Any) -> Any:
        return _get_kernel_context().atomic.max(a, i, v)

    def aor(a: Any, i: Any, v: Any) -> Any:
        return _get_kernel_context().atomic.or_(a, i, v)

    return add, amin, amax, aor


@register_jitable
def in_intervals(v, j, starts, lo, hi):
    """Whether ``v`` lies in one of constraint ``j``'s intervals ``[lo[k], hi[k]]``, k in
    ``starts[j]..starts[j+1]``."""
    found = False
    for k in range(starts[j], starts[j + 1]):
        if lo[k] <= v and v <= hi[k]:
            found = True
            break
    return found


@register_jitable
def passes(i, cols, starts, lo, hi):
    ok = True
    for j in range(len(cols)):
        if not in_intervals(np.int64(cols[j][i]), j, starts, lo, hi):
            ok = False
            break
    return ok


@register_jitable
def expr_value(i, cols, terms, s, e):
    total = np.int64(0)
    for t in range(s, e):
        v = np.int64(terms[t, 0])
        a = terms[t, 1]
        b = terms[t, 2]
        if a >= 0:
            v *= np.int64(cols[a][i])
        if b >= 0:
            v *= np.int64(cols[b][i])
        total += v
    return total


@functools.cache
def accumulate(device: str) -> Any:
    """``f(g, e, n_exprs, value, need, sums, mins, maxs)``: value of expression ``e`` into
    group ``g``'s SUM/MIN/MAX slots (``need`` bits say which)."""
    add, amin, amax, _ = atomics(device)

    @register_jitable
    def acc(g, e, n_exprs, value, need, sums, mins, maxs):
        slot = g * n_exprs + e
        if need & 1:
            add(sums, slot, value)
        if need & 2:
            amin(mins, slot, value)
        if need & 4:
            amax(maxs, slot, value)

    return acc


def zero_prefix(buf: Any, n_words: int) -> None:
    """Zero the first ``n_words`` int64 words of ``buf``: one asynchronous memset on CuPy's
    current stream for a GPU array, a slice assignment for a NumPy one."""
    if isinstance(buf, np.ndarray):
        buf[:n_words] = 0
        return
    import cupy

    cupy.cuda.runtime.memsetAsync(buf.data.ptr, 0, 8 * n_words,
                                  cupy.cuda.get_current_stream().ptr)


def host_buffer(packed: Any, n_words: int) -> np.ndarray | None:
    """A page-locked int64 host buffer of ``n_words`` for :func:`read_packed`'s first copy of
    the device array ``packed`` (None for a NumPy one): a copy into page-locked memory is one
    DMA, where a copy into pageable memory is staged by the driver."""
    if isinstance(packed, np.ndarray):
        return None
    import cupy

    mem = cupy.cuda.alloc_pinned_memory(8 * max(n_words, 1))
    return np.frombuffer(mem, dtype=np.int64, count=max(n_words, 1))


def read_packed(packed: Any, width: int, first: int, host: np.ndarray | None = None
                ) -> np.ndarray:
    """The records a compaction kernel packed: ``packed[0]`` their number ``m``, then ``m``
    records of ``width`` int64 words, the first word a group's code. One copy brings back the
    number and ``first`` records (into ``host``, a :func:`host_buffer` of at least that size,
    where given), a second the rest where there are more. Returns the (m, width) records in
    ascending order of code (a new array: ``host`` may be reused)."""
    from indexzoo.devices import to_numpy

    n = min(1 + first * width, int(packed.shape[0]))
    got = packed[:n].get(out=host[:n]) if host is not None else to_numpy(packed[:n])
    return packed_records(got, packed, width, first)


def packed_records(got: np.ndarray, packed: Any, width: int, first: int) -> np.ndarray:
    """:func:`read_packed`'s records from ``got``, the first words of ``packed`` already on the
    host (the number and up to ``first`` records); the rest copied from ``packed`` where the
    kernel packed more. The records are a new array, never a view of ``got``."""
    from indexzoo.devices import to_numpy

    m = int(got[0])
    if m > first:
        got = np.concatenate([got, to_numpy(packed[got.size:1 + m * width])])
    records = got[1:1 + m * width].reshape(m, width)
    return records[np.argsort(records[:, 0], kind="stable")]
