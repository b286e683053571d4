"""Cooperative GPU search of the bulk-loaded B+-tree (layout and CPU twin: ``btree.py``).

One lookup per group of B threads (B = node width, 8, 16 or 32): in every node lane ``l``
reads slot ``l`` (its pivot and its child reference in one coalesced step), the group votes on
"pivot >= x", and the first such lane's child is shared with ``shfl_sync``. Leaves are scanned
the same way, one leaf per step, following the leaf links. Item ``t`` is a thread (lookup
``t // B``, lane ``t % B``); launch with ``lookups * B`` threads.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from .coop import group_of, group_sum, vote
from .targets import Kernel

__all__ = ["COUNT", "FILL", "FIND_ROWID", "SUM"]


@register_jitable
def descend(lane, mask, shift, inner_keys, inner_child, inner_count, level_start, n_levels,
            leaf_keys, leaf_count, width, x, strict):  # type: ignore[no-untyped-def]
    """(leaf, slot) of the first entry >= x (> x if ``strict``), or (-1, 0); same in all lanes.

    Padding slots hold the key dtype's maximum and child -1, so the vote needs no slot count:
    below the root the parent guarantees a real slot qualifies before any padding; at the root
    a chosen padding slot (child -1, or a leaf slot past the count) means "beyond every key".
    """
    node = np.int64(0)
    src = np.int32(shift) - np.int32(1)
    for level in range(n_levels):
        base = (level_start[level] + node) * width + lane
        piv = inner_keys[base]
        child = inner_child[base]
        ge = vote(mask, shift, (piv > x) if strict else (piv >= x))
        if ge == 0:
            return np.int64(-1), np.int64(0)
        node = np.int64(cuda.shfl_sync(mask, child, src + np.int32(cuda.ffs(ge))))
        if node < 0:
            return np.int64(-1), np.int64(0)
    k = leaf_keys[node * width + lane]
    ge = vote(mask, shift, (k > x) if strict else (k >= x))
    slot = np.int64(cuda.ffs(ge)) - 1
    if ge == 0 or slot >= leaf_count[node]:
        return np.int64(-1), np.int64(0)
    return node, slot


@register_jitable
def find_rowid_item(t, inner_keys, inner_child, inner_count, level_start, n_levels, leaf_keys,
                    leaf_rowids, leaf_count, width, lo, hi, out, miss):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, width)
    leaf, slot = descend(lane, mask, shift, inner_keys, inner_child, inner_count, level_start,
                         n_levels, leaf_keys, leaf_count, width, lo[g], False)
    if lane == 0:
        if leaf >= 0 and leaf_keys[leaf * width + slot] <= hi[g]:
            out[g] = leaf_rowids[leaf * width + slot]
        else:
            out[g] = miss


@register_jitable
def count_item(t, inner_keys, inner_child, inner_count, level_start, n_levels, leaf_keys,
               leaf_count, width, fill, n, lo, hi, out):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, width)
    a, sa = descend(lane, mask, shift, inner_keys, inner_child, inner_count, level_start,
                    n_levels, leaf_keys, leaf_count, width, lo[g], False)
    b, sb = descend(lane, mask, shift, inner_keys, inner_child, inner_count, level_start,
                    n_levels, leaf_keys, leaf_count, width, hi[g], True)
    if lane == 0:
        start = n if a < 0 else a * fill + sa
        stop = n if b < 0 else b * fill + sb
        out[g] = stop - start if stop > start else 0


@register_jitable
def sum_item(t, inner_keys, inner_child, inner_count, level_start, n_levels, leaf_keys,
             leaf_rowids, leaf_count, leaf_next, width, values, use_values, lo, hi, out):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, width)
    leaf, slot = descend(lane, mask, shift, inner_keys, inner_child, inner_count, level_start,
                         n_levels, leaf_keys, leaf_count, width, lo[g], False)
    x = hi[g]
    acc = np.uint64(0)
    while leaf >= 0:
        idx = leaf * width + lane
        valid = lane >= slot and lane < leaf_count[leaf]
        k = leaf_keys[idx]
        if valid and k <= x:
            r = leaf_rowids[idx]
            acc += values[np.int64(r)] if use_values else np.uint64(r)
        if vote(mask, shift, valid and k > x) != 0:
            break
        leaf = np.int64(leaf_next[leaf])
        slot = np.int64(0)
    acc = group_sum(acc, mask, width)
    if lane == 0:
        out[g] = acc


@register_jitable
def fill_item(t, inner_keys, inner_child, inner_count, level_start, n_levels, leaf_keys,
              leaf_rowids, leaf_count, leaf_next, width, lo, hi, offsets, out):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, width)
    pos = offsets[g]
    end = offsets[g + 1]
    if pos == end:
        return
    leaf, slot = descend(lane, mask, shift, inner_keys, inner_child, inner_count, level_start,
                         n_levels, leaf_keys, leaf_count, width, lo[g], False)
    below = (np.uint32(1) << np.uint32(lane)) - np.uint32(1)
    x = hi[g]
    while leaf >= 0 and pos < end:
        idx = leaf * width + lane
        valid = lane >= slot and lane < leaf_count[leaf]
        k = leaf_keys[idx]
        take = valid and k <= x
        taken = vote(mask, shift, take)
        if take:
            out[pos + cuda.popc(taken & below)] = leaf_rowids[idx]
        pos += cuda.popc(taken)
        if vote(mask, shift, valid and k > x) != 0:
            break
        leaf = np.int64(leaf_next[leaf])
        slot = np.int64(0)


FIND_ROWID = Kernel(find_rowid_item)
COUNT = Kernel(count_item)
SUM = Kernel(sum_item)
FILL = Kernel(fill_item)
