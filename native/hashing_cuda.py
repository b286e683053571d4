"""The cooperative GPU kernels of the WarpCore-style hash table (see ``hashing.py`` for the
table layout and probing scheme; its CPU functions are these kernels' twins).

A group of ``group`` adjacent threads (1, 2, 4, 8, 16 or 32; a divisor of the warp) serves one
key: lane ``l`` reads slot ``l`` of the current window, the group votes (``ballot_sync``) on
"holds my key" and "is empty", and moves on to the next window of the double-hashing sequence
until a window has an empty slot. Inserts claim the lowest empty lane's slot with a
compare-and-swap; a lost race clears that lane from the vote and tries the next one.

Item ``t`` of these kernels is a thread: key ``t // group``, lane ``t % group``; launch them
with ``n_keys * group`` items and a block size that is a multiple of 32. This module imports
``numba.cuda`` and is only imported for indexes on the ``cuda`` device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from .coop import group_of, group_sum, vote
from .hashing import next_window, probe_start
from .targets import Kernel

__all__ = ["COUNT", "FILL", "FIND_ROWID", "INSERT", "SUM"]


@register_jitable
def insert_item(t, tkeys, tvals, stride, keys, rowids, n_windows, group, empty):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, group)
    k = keys[g]
    w, s = probe_start(k, n_windows)
    while True:
        idx = (w * group + lane) * stride
        free = vote(mask, shift, tkeys[idx] == empty)
        while free != 0:
            leader = np.int32(cuda.ffs(free)) - 1
            won = np.int32(0)
            if lane == leader and cuda.atomic.cas(tkeys, idx, empty, k) == empty:
                tvals[idx] = rowids[g]
                won = np.int32(1)
            won = cuda.shfl_sync(mask, won, np.int32(shift) + leader)
            if won != 0:
                return
            free &= ~(np.uint32(1) << np.uint32(leader))
        w = next_window(w, s, n_windows)


@register_jitable
def find_rowid_item(t, tkeys, tvals, stride, q, out, n_windows, group, empty, miss):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    if x == empty:  # out of band: the caller answers these
        if lane == 0:
            out[g] = miss
        return
    w, s = probe_start(x, n_windows)
    while True:
        idx = (w * group + lane) * stride
        k = tkeys[idx]
        hit = vote(mask, shift, k == x)
        if hit != 0:
            if lane == np.int32(cuda.ffs(hit)) - 1:
                out[g] = tvals[idx]
            return
        if vote(mask, shift, k == empty) != 0:
            if lane == 0:
                out[g] = miss
            return
        w = next_window(w, s, n_windows)


@register_jitable
def count_item(t, tkeys, stride, q, out, n_windows, group, empty):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    c = np.int64(0)
    if x != empty:
        w, s = probe_start(x, n_windows)
        while True:
            k = tkeys[(w * group + lane) * stride]
            c += cuda.popc(vote(mask, shift, k == x))
            if vote(mask, shift, k == empty) != 0:
                break
            w = next_window(w, s, n_windows)
    if lane == 0:
        out[g] = c


@register_jitable
def sum_item(t, tkeys, tvals, stride, values, use_values, q, out, n_windows, group, empty):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    acc = np.uint64(0)
    if x != empty:
        w, s = probe_start(x, n_windows)
        while True:
            idx = (w * group + lane) * stride
            k = tkeys[idx]
            if k == x:
                r = tvals[idx]
                acc += values[np.int64(r)] if use_values else np.uint64(r)
            if vote(mask, shift, k == empty) != 0:
                break
            w = next_window(w, s, n_windows)
    acc = group_sum(acc, mask, group)
    if lane == 0:
        out[g] = acc


@register_jitable
def fill_item(t, tkeys, tvals, stride, q, offsets, out, n_windows, group, empty):  # type: ignore[no-untyped-def]
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    pos = offsets[g]
    if pos == offsets[g + 1] or x == empty:
        return
    below = (np.uint32(1) << np.uint32(lane)) - np.uint32(1)
    w, s = probe_start(x, n_windows)
    while True:
        idx = (w * group + lane) * stride
        k = tkeys[idx]
        hit = vote(mask, shift, k == x)
        if k == x:
            out[pos + cuda.popc(hit & below)] = tvals[idx]
        pos += cuda.popc(hit)
        if vote(mask, shift, k == empty) != 0:
            return
        w = next_window(w, s, n_windows)


INSERT = Kernel(insert_item)
FIND_ROWID = Kernel(find_rowid_item)
COUNT = Kernel(count_item)
SUM = Kernel(sum_item)
FILL = Kernel(fill_item)
