"""Lookups in a sorted (key, rowID) array: the per-item bodies and their kernels.

Arrays: ``keys`` sorted ascending, ``rowids[p]`` the rowID of ``keys[p]``; lookups ``q`` or
``lo``/``hi`` have the keys' dtype. A point lookup is the range ``[q, q]`` (pass ``q`` twice).
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.search import lower_bound, range_bounds
from indexzoo.native.targets import Kernel

__all__ = ["BOUNDS", "COUNT", "POINT_ROWID", "RANGE_ROWID", "SUM"]


@register_jitable
def point_rowid_item(i, keys, rowids, q, out, miss):
    x = q[i]
    p = lower_bound(keys, x)
    if p < keys.shape[0] and keys[p] == x:
        out[i] = rowids[p]
    else:
        out[i] = miss


@register_jitable
def range_rowid_item(i, keys, rowids, lo, hi, out, miss):
    p = lower_bound(keys, lo[i])
    if p < keys.shape[0] and keys[p] <= hi[i]:
        out[i] = rowids[p]
    else:
        out[i] = miss


@register_jitable
def count_item(i, keys, lo, hi, out):
    start, stop = range_bounds(keys, lo[i], hi[i])
    out[i] = stop - start


@register_jitable
def bounds_item(i, keys, lo, hi, start, count):
    s, e = range_bounds(keys, lo[i], hi[i])
    start[i] = s
    count[i] = e - s


@register_jitable
def sum_item(i, keys, rowids, values, use_values, lo, hi, out):
    """Sum of ``values[rowid]`` (of the rowIDs themselves unless ``use_values``), wrapping."""
    start, stop = range_bounds(keys, lo[i], hi[i])
    acc = np.uint64(0)
    for p in range(start, stop):
        r = rowids[p]
        acc += values[r] if use_values else np.uint64(r)
    out[i] = acc


POINT_ROWID = Kernel(point_rowid_item)
RANGE_ROWID = Kernel(range_rowid_item)
COUNT = Kernel(count_item)
BOUNDS = Kernel(bounds_item)
SUM = Kernel(sum_item)
