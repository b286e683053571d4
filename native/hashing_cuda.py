"""The cooperative GPU kernels of the WarpCore-style hash table (see ``hashing.py`` for the
table, the multi-value layout and the probing scheme; its CPU functions are these kernels'
twins).

A group of ``group`` adjacent threads (1, 2, 4, 8, 16 or 32; a divisor of the warp) serves one
key: lane ``l`` reads slot ``l`` of the current window, the group votes (``ballot_sync``) on
"holds my key" and "is empty", and moves on to the next window of the double-hashing sequence
until a window holds the key or has an empty slot. The table holds each distinct key once, so
a lookup ends at the first window holding its key; the group then reads the key's value word
and, for a key with several rows, shares the work on its overflow run (lane ``l`` takes rows
``l, l + G, ...``: coalesced reads and writes).

Build pass 1 (``INSERT``): a group whose key is in the window adds 1 to ``counts[slot]``;
otherwise it claims the lowest empty lane's slot with a compare-and-swap. A lost race returns
the winner's key: if that is the group's own key, the group counts there; else it tries the
next empty lane of its vote, and the next window once none is left (a window whose lanes all
hold other keys stays so: there are no deletions). Hence every key ends up in exactly one slot,
the first slot of its sequence that was empty when the first of its pairs came. Build pass 2
(``PLACE``): every pair finds its key and, for a multi key, appends its rowID to the run with
an atomic add on the run's count (rows of a run in any order).

Item ``t`` of these kernels is a thread: key ``t // group``, lane ``t % group``; launch them
with ``n_keys * group`` items and a block size that is a multiple of 32. This module imports
``numba.cuda`` and is only imported for indexes on the ``cuda`` device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from .coop import group_of, group_sum, vote
from .hashing import NO_SLOT, RUN_COUNT, RUN_ROWS, next_window, probe_start, row_value
from .targets import Kernel

__all__ = ["COUNT", "FILL", "FIND_ROWID", "INSERT", "PLACE", "SUM"]

#: Outcomes of a group's claim on one lane (shared from the leader lane with ``shfl_sync``).
LOST = 0      # another key took the slot: try the next empty lane
CLAIMED = 1   # the slot is the group's: key and value word stored
COUNTED = 2   # a pair of the same key took it first: counted there


@register_jitable
def coop_find(tkeys, stride, x, n_windows, group, empty, lane, mask, shift):
    """Element index of ``x``'s slot, or NO_SLOT; every lane of the group gets the same."""
    w, s = probe_start(x, n_windows)
    while True:
        base = w * group
        k = tkeys[(base + lane) * stride]
        hit = vote(mask, shift, k == x)
        if hit != 0:
            return (base + np.int64(cuda.ffs(hit)) - 1) * stride
        if vote(mask, shift, k == empty) != 0:
            return NO_SLOT
        w = next_window(w, s, n_windows)


# ---------------------------------------------------------------------- build
@register_jitable
def insert_item(t, tkeys, tvals, stride, counts, keys, vals, n_windows, group, empty):
    """Pass 1, insert-or-count (twin: ``hashing.insert_or_count_cpu``)."""
    g, lane, mask, shift = group_of(t, group)
    k = keys[g]
    w, s = probe_start(k, n_windows)
    while True:
        base = w * group
        idx = (base + lane) * stride
        cur = tkeys[idx]
        hit = vote(mask, shift, cur == k)
        if hit != 0:
            if lane == np.int32(cuda.ffs(hit)) - 1:
                cuda.atomic.add(counts, base + lane, 1)
            return
        free = vote(mask, shift, cur == empty)
        while free != 0:
            leader = np.int32(cuda.ffs(free)) - 1
            outcome = np.int32(LOST)
            if lane == leader:
                old = cuda.atomic.cas(tkeys, idx, empty, k)
                if old == empty:
                    tvals[idx] = vals[g]
                    outcome = np.int32(CLAIMED)
                elif old == k:
                    cuda.atomic.add(counts, base + lane, 1)
                    outcome = np.int32(COUNTED)
            outcome = cuda.shfl_sync(mask, outcome, np.int32(shift) + leader)
            if outcome != LOST:
                return
            free &= ~(np.uint32(1) << np.uint32(leader))
        w = next_window(w, s, n_windows)


@register_jitable
def place_item(t, tkeys, tvals, stride, overflow, flag, keys, rowids, n_windows, group, empty):
    """Pass 2: append the pair's rowID to its key's run (twin: ``hashing.place_rows_cpu``)."""
    g, lane, mask, shift = group_of(t, group)
    idx = coop_find(tkeys, stride, keys[g], n_windows, group, empty, lane, mask, shift)
    if lane == 0:
        v = tvals[idx]
        if v >= flag:
            off = np.int64(v - flag)
            pos = np.int64(cuda.atomic.add(overflow, off + RUN_COUNT, 1))
            overflow[off + RUN_ROWS + pos] = rowids[g]


# ---------------------------------------------------------------------- lookups
@register_jitable
def find_rowid_item(t, tkeys, tvals, stride, overflow, flag, q, out, n_windows, group, empty,
                    miss):
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    idx = NO_SLOT
    if x != empty:  # out of band: the caller answers these
        idx = coop_find(tkeys, stride, x, n_windows, group, empty, lane, mask, shift)
    if lane == 0:
        if idx == NO_SLOT:
            out[g] = miss
        else:
            v = tvals[idx]
            if v >= flag:
                out[g] = overflow[np.int64(v - flag) + RUN_ROWS]
            else:
                out[g] = v


@register_jitable
def count_item(t, tkeys, tvals, stride, overflow, flag, q, out, n_windows, group, empty):
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    idx = NO_SLOT
    if x != empty:
        idx = coop_find(tkeys, stride, x, n_windows, group, empty, lane, mask, shift)
    if lane == 0:
        c = np.int64(0)
        if idx != NO_SLOT:
            c = np.int64(1)
            if overflow.shape[0] != 0:  # no multi keys: a hit is one row, no value word read
                v = tvals[idx]
                if v >= flag:
                    c = np.int64(overflow[np.int64(v - flag) + RUN_COUNT])
        out[g] = c


@register_jitable
def sum_item(t, tkeys, tvals, stride, overflow, flag, values, use_values, q, out, n_windows,
             group, empty):
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    idx = NO_SLOT
    if x != empty:
        idx = coop_find(tkeys, stride, x, n_windows, group, empty, lane, mask, shift)
    acc = np.uint64(0)
    if idx != NO_SLOT:
        v = tvals[idx]  # the same word in every lane: one load per group
        if v >= flag:  # the lanes share the run, then add up their parts
            off = np.int64(v - flag)
            m = np.int64(overflow[off + RUN_COUNT])
            j = np.int64(lane)
            while j < m:
                acc += row_value(overflow[off + RUN_ROWS + j], values, use_values)
                j += group
            acc = group_sum(acc, mask, group)
        elif lane == 0:
            acc = row_value(v, values, use_values)
    if lane == 0:
        out[g] = acc


@register_jitable
def fill_item(t, tkeys, tvals, stride, overflow, flag, q, offsets, out, n_windows, group,
              empty):
    g, lane, mask, shift = group_of(t, group)
    x = q[g]
    pos = offsets[g]
    if pos == offsets[g + 1] or x == empty:
        return
    idx = coop_find(tkeys, stride, x, n_windows, group, empty, lane, mask, shift)
    if idx == NO_SLOT:
        return
    v = tvals[idx]
    if v >= flag:  # lane l copies rows l, l + G, ...: coalesced
        off = np.int64(v - flag)
        m = np.int64(overflow[off + RUN_COUNT])
        j = np.int64(lane)
        while j < m:
            out[pos + j] = overflow[off + RUN_ROWS + j]
            j += group
    elif lane == 0:
        out[pos] = v


INSERT = Kernel(insert_item)
PLACE = Kernel(place_item)
FIND_ROWID = Kernel(find_rowid_item)
COUNT = Kernel(count_item)
SUM = Kernel(sum_item)
FILL = Kernel(fill_item)
