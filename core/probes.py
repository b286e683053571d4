"""The order in which sorted probes (``sort_probes=True``) hand a batch to an index.

A full sort of 64-bit keys costs eight radix passes, which on a GPU is about as much time as
the random lookups it is meant to speed up. Lookups need only be *grouped*, not sorted: two
lookups whose keys share their top bits follow the same path through the upper levels of any
ordered index and land in neighbouring leaves or slots, which the caches then serve. So the
batch is ordered by the top :data:`BUCKET_BITS` bits of its own key span,
``(key - min) >> shift`` as ``uint16``: two radix passes. Within a bucket the order is the
caller's.

With 2^26 uniform keys a bucket covers 1/65536 of the key span (about a thousand keys); a span
stretched by a few outliers puts most lookups in few buckets and leaves them in the caller's
order, which is correct but gains nothing (a full sort would gain there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["BUCKET_BITS", "probe_order"]

#: Bits of the key span that order a batch (65536 buckets)
BUCKET_BITS = 16


def probe_order(keys: Any, xp: Any) -> Any:
    """A permutation of ``keys`` (encoded unsigned keys, one per lookup) that groups them by
    the top :data:`BUCKET_BITS` bits of their span."""
    if keys.dtype.itemsize * 8 <= BUCKET_BITS:
        return xp.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)
    lo = keys.min()
    span = int(keys.max() - lo)
    shift = keys.dtype.type(max(span.bit_length() - BUCKET_BITS, 0))
    bucket = ((keys - lo) >> shift).astype(np.uint16)
    # NumPy's stable sort of 16-bit integers is a radix sort; CuPy's argsort is one for any
    # integer type, with as many passes as the type has bytes
    return xp.argsort(bucket, kind="stable") if xp is np else xp.argsort(bucket)
