"""Permutations of a lookup batch, for sorted probes (``indexzoo.probes``): the bucket of every
key, the batch gathered in an order, and the answers scattered back.

Each is one kernel (one source for the CPU and the GPU). The bucket ids are the one gain over
CuPy's array expressions: ``((q - lo) >> s).astype`` makes three passes over the batch, the
kernel one. The gather and the scatter run at the random-access floor either way (each random
write of 4 bytes costs a read and a write of its 32-byte sector); they are kernels so that the
CPU and the GPU share them. Measured: ``docs/plugins/sorted-array.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.extending import register_jitable

from .targets import Kernel

__all__ = ["BUCKETS", "GATHER", "SCATTER", "bucket_ids", "gather", "scatter"]


@register_jitable
def bucket_item(i, keys, lo, shift, out):
    out[i] = (keys[i] - lo) >> shift


@register_jitable
def gather_item(j, src, order, dst):
    dst[j] = src[order[j]]


@register_jitable
def scatter_item(j, src, order, dst):
    dst[order[j]] = src[j]


#: ``out[i] = (keys[i] - lo) >> shift`` (cast to ``out``'s dtype): a key's bucket.
BUCKETS = Kernel(bucket_item, name="probe_buckets")
#: ``dst[j] = src[order[j]]``.
GATHER = Kernel(gather_item, name="probe_gather")
#: ``dst[order[j]] = src[j]`` (``order`` a permutation: every ``dst`` element written once).
SCATTER = Kernel(scatter_item, name="probe_scatter")


def _device(xp: Any, device: str | None) -> str:
    """``device``, or the device of ``xp`` ("cuda" with NumPy: numba's simulator, tests)."""
    return device or ("cpu" if xp is np else "cuda")


def bucket_ids(keys: Any, lo: int, shift: int, dtype: Any, xp: Any,
               device: str | None = None) -> Any:
    """``((keys - lo) >> shift)`` as ``dtype``, in one pass (``lo`` the batch's minimum, so
    nothing wraps, and ``shift`` leaves values that fit ``dtype``)."""
    out = xp.empty(keys.shape[0], dtype=dtype)
    BUCKETS(_device(xp, device), int(keys.shape[0]), keys, keys.dtype.type(lo),
            keys.dtype.type(shift), out)
    return out


def gather(src: Any, order: Any, xp: Any, device: str | None = None) -> Any:
    """``src[order]`` for a 1-D ``src``."""
    dst = xp.empty(order.shape[0], dtype=src.dtype)
    GATHER(_device(xp, device), int(order.shape[0]), src, order, dst)
    return dst


def scatter(src: Any, order: Any, xp: Any, device: str | None = None) -> Any:
    """The array ``dst`` with ``dst[order] = src`` for a 1-D ``src`` and a permutation
    ``order`` of its length."""
    dst = xp.empty_like(src)
    SCATTER(_device(xp, device), int(order.shape[0]), src, order, dst)
    return dst
