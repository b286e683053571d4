"""Cooperative GPU search of the bulk-loaded B+-tree (layout and CPU twin: ``kernels.py``; the
leaf layouts' indexing: ``nodes.py``).

One lookup per group of B threads (B = node width, 8, 16 or 32): in every node lane ``l``
reads slot ``l`` (its pivot and its child reference in one coalesced step), the group votes on
"pivot >= x", and the first such lane's child is shared with ``shfl_sync``. Leaves are scanned
the same way, one leaf per step, following the leaf links. Thread ``th`` serves lookup
``th // B`` as lane ``th % B``: these are the cooperative bodies of ``kernels.py``'s
:class:`~indexzoo.native.targets.GroupKernel` operations (run with ``group=B``), one set per
leaf layout (:func:`group_operations`; lane ``l`` reads slot ``l`` of a leaf wherever the
layout puts it: ``interleaved`` keeps a leaf's keys contiguous, ``paired`` spreads them over
two lines).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from indexzoo.native.coop import group_of, group_sum, vote

from .nodes import leaf_indexing

__all__ = ["GroupOperations", "count_group", "fill_group", "find_rowid_group", "group_operations",
           "sum_group"]


class GroupOperations(NamedTuple):
    """The cooperative bodies for one leaf layout."""

    find_rowid_group: Any
    count_group: Any
    sum_group: Any
    fill_group: Any


@functools.cache
def group_operations(leaf_layout: str = "split") -> GroupOperations:
    """The cooperative bodies with ``leaf_layout``'s indexing compiled in."""
    key_at, rowid_at, _ = leaf_indexing(leaf_layout)

    @register_jitable
    def descend(lane, mask, shift, t, x, strict):
        """(leaf, slot) of the first entry >= x (> x if ``strict``), or (-1, 0); same in all
        lanes.

        Padding slots hold the key dtype's maximum and child -1, so the vote needs no slot
        count: below the root the parent guarantees a real slot qualifies before any padding;
        at the root a chosen padding slot (child -1, or a leaf slot past the count) means
        "beyond every key".
        """
        node = np.int64(0)
        src = np.int32(shift) - np.int32(1)
        for level in range(t.n_levels):
            base = (t.level_start[level] + node) * t.width + lane
            piv = t.inner_keys[base]
            child = t.inner_child[base]
            ge = vote(mask, shift, (piv > x) if strict else (piv >= x))
            if ge == 0:
                return np.int64(-1), np.int64(0)
            node = np.int64(cuda.shfl_sync(mask, child, src + np.int32(cuda.ffs(ge))))
            if node < 0:
                return np.int64(-1), np.int64(0)
        k = t.leaf_keys[key_at(t, node, lane)]
        ge = vote(mask, shift, (k > x) if strict else (k >= x))
        slot = np.int64(cuda.ffs(ge)) - 1
        if ge == 0 or slot >= t.leaf_count[node]:
            return np.int64(-1), np.int64(0)
        return node, slot

    @register_jitable
    def find_rowid_group(th, t, lo, hi, out, miss):
        g, lane, mask, shift = group_of(th, t.width)
        leaf, slot = descend(lane, mask, shift, t, lo[g], False)
        if lane == 0:
            if leaf >= 0 and t.leaf_keys[key_at(t, leaf, slot)] <= hi[g]:
                out[g] = t.leaf_rowids[rowid_at(t, leaf, slot)]
            else:
                out[g] = miss

    @register_jitable
    def count_group(th, t, lo, hi, out):
        g, lane, mask, shift = group_of(th, t.width)
        a, sa = descend(lane, mask, shift, t, lo[g], False)
        b, sb = descend(lane, mask, shift, t, hi[g], True)
        if lane == 0:
            start = t.n if a < 0 else a * t.fill + sa
            stop = t.n if b < 0 else b * t.fill + sb
            out[g] = stop - start if stop > start else 0

    @register_jitable
    def sum_group(th, t, values, use_values, lo, hi, out):
        g, lane, mask, shift = group_of(th, t.width)
        leaf, slot = descend(lane, mask, shift, t, lo[g], False)
        x = hi[g]
        acc = np.uint64(0)
        while leaf >= 0:
            valid = lane >= slot and lane < t.leaf_count[leaf]
            k = t.leaf_keys[key_at(t, leaf, lane)]
            if valid and k <= x:
                r = t.leaf_rowids[rowid_at(t, leaf, lane)]
                acc += values[np.int64(r)] if use_values else np.uint64(r)
            if vote(mask, shift, valid and k > x) != 0:
                break
            leaf = np.int64(t.leaf_next[leaf])
            slot = np.int64(0)
        acc = group_sum(acc, mask, t.width)
        if lane == 0:
            out[g] = acc

    @register_jitable
    def fill_group(th, t, lo, hi, offsets, out):
        g, lane, mask, shift = group_of(th, t.width)
        pos = offsets[g]
        end = offsets[g + 1]
        if pos == end:
            return
        leaf, slot = descend(lane, mask, shift, t, lo[g], False)
        below = (np.uint32(1) << np.uint32(lane)) - np.uint32(1)
        x = hi[g]
        while leaf >= 0 and pos < end:
            valid = lane >= slot and lane < t.leaf_count[leaf]
            k = t.leaf_keys[key_at(t, leaf, lane)]
            take = valid and k <= x
            taken = vote(mask, shift, take)
            if take:
                out[pos + cuda.popc(taken & below)] = t.leaf_rowids[rowid_at(t, leaf, lane)]
            pos += cuda.popc(taken)
            if vote(mask, shift, valid and k > x) != 0:
                break
            leaf = np.int64(t.leaf_next[leaf])
            slot = np.int64(0)

    return GroupOperations(find_rowid_group, count_group, sum_group, fill_group)


# the split layout's bodies (the default)
find_rowid_group, count_group, sum_group, fill_group = group_operations()
