"""The order in which sorted probes (``sort_probes=True``) hand a batch to an index.

A full sort of 64-bit keys costs eight radix passes, which on a GPU is about as much time as
the random lookups of a cheap index (``docs/architecture-notes.md``, "Sorted probes"). Such
lookups need only be *grouped*, not sorted: two lookups whose keys share their top bits follow
the same path through the upper levels of any ordered index and land in neighbouring leaves or
slots, which the caches then serve. So the batch is ordered by the top ``bits`` bits
(``probe_sort_bits``, default :data:`BUCKET_BITS`) of its own key span,
``(key - min) >> shift`` as the narrowest unsigned type that holds them: two radix passes for
16 bits. Within a bucket the order is the caller's. An index whose lookups cost far more than
the sort and gain from coherence inside a bucket (the ray-tracing ones, whose rays of one warp
should share as much of their traversal as they can) defaults to 32 bits: 2^32 groups order
2^27 lookups about as finely as a full sort, in half its radix passes.

With 2^26 uniform keys a bucket covers 1/65536 of the key span (about a thousand keys); a span
stretched by a few outliers puts most lookups in few buckets and leaves them in the caller's
order, which is correct but gains nothing (a full sort would gain there).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["BUCKET_BITS", "bucket_ids", "gather", "probe_order", "scatter"]

#: Bits of the key span that order a batch (65536 buckets)
BUCKET_BITS = 16


def probe_order(keys: Any, xp: Any, bits: int = BUCKET_BITS) -> Any:
    """A permutation of ``keys`` (encoded unsigned keys, one per lookup) that groups them by
    the top ``bits`` bits of their span (a full sort when ``bits`` covers the key type)."""
    # NumPy's stable sort of 16-bit integers is a radix sort; CuPy's argsort is one for any
    # integer type, with as many passes as the type has bytes
    def argsort(a: Any) -> Any:
        return xp.argsort(a, kind="stable") if xp is np else xp.argsort(a)

    if keys.dtype.itemsize * 8 <= bits:
        return argsort(keys)
    lo = int(keys.min())
    span = int(keys.max()) - lo
    shift = max(span.bit_length() - bits, 0)
    narrow = np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64
    return argsort(bucket_ids(keys, lo, shift, narrow, xp))


def bucket_ids(keys: Any, lo: int, shift: int, dtype: Any, xp: Any) -> Any:
    """``((keys - lo) >> shift)`` as ``dtype`` (``lo`` the batch's minimum, so nothing wraps,
    and ``shift`` leaves values that fit ``dtype``). On the GPU one fused elementwise kernel:
    CuPy's array expression makes three passes over the batch."""
    t = keys.dtype.type
    if xp is np:
        return ((keys - t(lo)) >> t(shift)).astype(dtype)
    out = xp.empty(keys.shape[0], dtype=dtype)
    _bucket_kernel(xp)(keys, t(lo), t(shift), out)
    return out


@functools.cache
def _bucket_kernel(cupy: Any) -> Any:
    return cupy.ElementwiseKernel("T k, T lo, T s", "U out", "out = (U)((k - lo) >> s)",
                                  "indexzoo_probe_buckets")


def gather(src: Any, order: Any, xp: Any) -> Any:
    """``src[order]``: a batch (1-D) put in the order ``order``."""
    return xp.take(src, order)


def scatter(src: Any, order: Any, xp: Any) -> Any:
    """The array ``dst`` with ``dst[order] = src``: answers given in the order ``order`` put
    back in the caller's (``order`` a permutation of ``src``'s rows; one row per lookup)."""
    dst = xp.empty_like(src)
    dst[order] = src
    return dst
