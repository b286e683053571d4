"""Warp intrinsics for numba's CUDA simulator, which has none: ``ballot_sync``, ``shfl_sync``,
``shfl_xor_sync``, ``syncwarp``, ``popc`` and ``ffs``, enough to run the cooperative kernels
(groups of G threads voting and sharing) on the CPU in tests; and ``syncthreads`` for the
helpers a kernel calls (the simulator gives its barrier to the kernel function only).

The simulator runs every thread of a block as a Python thread. A warp intrinsic here is an
exchange among the lanes of its ``mask``: each lane posts its value, all wait at a barrier of
the mask's lanes, read, and wait again before the next exchange may overwrite. Like the
hardware, every lane named in the mask must call it; unlike the hardware, converged lanes
outside the mask are not reported (``indexzoo.native.coop.vote`` masks them anyway).

Usage, in a process started with ``NUMBA_ENABLE_CUDASIM=1`` before any kernel runs::

    from support import cudasim_warp; cudasim_warp.install()
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["install"]

_lock = threading.Lock()
_exchanges: dict[tuple[Any, ...], dict[str, Any]] = {}


def _lane() -> tuple[Any, int, tuple[Any, ...]]:
    th: Any = threading.current_thread()
    tid = int(th.thread_id)
    b = th.blockIdx
    return th, tid % 32, (b.x, b.y, b.z, tid // 32)


def _exchange(mask: Any, value: Any) -> dict[int, Any]:
    """Every lane of ``mask`` posts ``value``; returns lane -> value for all of them."""
    _, lane, where = _lane()
    m = int(mask) & 0xFFFFFFFF
    key = (*where, m)
    with _lock:
        ex = _exchanges.get(key)
        if ex is None:
            ex = _exchanges[key] = {"barrier": threading.Barrier(bin(m).count("1")),
                                    "values": {}}
    ex["values"][lane] = value
    ex["barrier"].wait()
    got = dict(ex["values"])
    ex["barrier"].wait()
    return got


def ballot_sync(mask: Any, predicate: Any) -> np.uint32:
    bits = 0
    for lane, v in _exchange(mask, bool(predicate)).items():
        if v:
            bits |= 1 << lane
    return np.uint32(bits)


def shfl_sync(mask: Any, value: Any, src_lane: Any) -> Any:
    return _exchange(mask, value)[int(src_lane) % 32]


def shfl_xor_sync(mask: Any, value: Any, lane_mask: Any) -> Any:
    _, lane, _ = _lane()
    return _exchange(mask, value)[lane ^ int(lane_mask)]


def syncwarp(mask: Any = 0xFFFFFFFF) -> None:
    _exchange(mask, None)


def popc(x: Any) -> Any:
    return type(x)(bin(int(x) & ((1 << 64) - 1)).count("1"))


def ffs(x: Any) -> Any:
    v = int(x) & ((1 << 64) - 1)
    return np.uint32((v & -v).bit_length())


def syncthreads() -> None:
    """The block's barrier (the simulator has one, reached only through its own module
    inside a kernel; helpers outside the kernel call ``numba.cuda``'s)."""
    threading.current_thread().syncthreads()  # type: ignore[attr-defined]


def install() -> None:
    """Add the intrinsics to the simulator's ``numba.cuda`` (needs NUMBA_ENABLE_CUDASIM=1)."""
    from numba import config, cuda

    if not config.ENABLE_CUDASIM:
        raise RuntimeError("cudasim_warp needs NUMBA_ENABLE_CUDASIM=1")
    from numba.cuda.simulator import kernelapi

    fns = {"ballot_sync": ballot_sync, "shfl_sync": shfl_sync,
           "shfl_xor_sync": shfl_xor_sync, "syncwarp": syncwarp, "popc": popc, "ffs": ffs}
    for name, fn in fns.items():
        setattr(cuda, name, fn)
        setattr(kernelapi.FakeCUDAModule, name, staticmethod(fn))
    cuda.syncthreads = syncthreads  # the simulator's own, for helpers outside kernels
