"""The cooperative GPU kernels of the WarpCore-style hash table (see ``kernels.py`` for the
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

Thread ``th`` of these kernels serves key ``th // G`` as lane ``th % G``; the lookups are the
cooperative bodies of ``kernels.py``'s GroupKernel operations, the build passes run through
``hashing.insert_or_count`` and ``hashing.place_rows``. Every kernel takes the table as one
:class:`~indexzoo.plugins.warpcore_hash.kernels.TableRecord`. Block sizes are multiples of 32. This module
imports ``numba.cuda`` and is only imported for indexes on the ``cuda`` device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from indexzoo.native.coop import group_of, group_sum, vote
from indexzoo.native.targets import Kernel

from .probing import (
    NO_SLOT,
    RUN_COUNT,
    RUN_ROWS,
    copy_rows,
    next_window,
    probe_start,
    row_value,
    run_part_sum,
    slot_rows,
    store_first_row,
)

__all__ = ["INSERT", "PLACE", "count_group", "fill_group", "find_rowid_group", "sum_group"]

#: Outcomes of a group's claim on one lane (shared from the leader lane with ``shfl_sync``).
LOST = 0      # another key took the slot: try the next empty lane
CLAIMED = 1   # the slot is the group's: key and value word stored
COUNTED = 2   # a pair of the same key took it first: counted there


@register_jitable
def coop_find(t, x, lane, mask, shift):
    """Element index of ``x``'s slot in table ``t``, or NO_SLOT; every lane gets the same."""
    w, s = probe_start(x, t.n_windows)
    while True:
        base = w * t.group
        k = t.tkeys[(base + lane) * t.stride]
        hit = vote(mask, shift, k == x)
        if hit != 0:
            return (base + np.int64(cuda.ffs(hit)) - 1) * t.stride
        if vote(mask, shift, k == t.empty) != 0:
            return NO_SLOT
        w = next_window(w, s, t.n_windows)


# ---------------------------------------------------------------------- build
@register_jitable
def insert_item(th, t, counts, keys, vals):
    """Pass 1, insert-or-count (twin: ``hashing.insert_or_count_cpu``)."""
    g, lane, mask, shift = group_of(th, t.group)
    k = keys[g]
    w, s = probe_start(k, t.n_windows)
    while True:
        base = w * t.group
        idx = (base + lane) * t.stride
        cur = t.tkeys[idx]
        hit = vote(mask, shift, cur == k)
        if hit != 0:
            if lane == np.int32(cuda.ffs(hit)) - 1:
                cuda.atomic.add(counts, base + lane, 1)
            return
        free = vote(mask, shift, cur == t.empty)
        while free != 0:
            leader = np.int32(cuda.ffs(free)) - 1
            outcome = np.int32(LOST)
            if lane == leader:
                old = cuda.atomic.cas(t.tkeys, idx, t.empty, k)
                if old == t.empty:
                    t.tvals[idx] = vals[g]
                    outcome = np.int32(CLAIMED)
                elif old == k:
                    cuda.atomic.add(counts, base + lane, 1)
                    outcome = np.int32(COUNTED)
            outcome = cuda.shfl_sync(mask, outcome, np.int32(shift) + leader)
            if outcome != LOST:
                return
            free &= ~(np.uint32(1) << np.uint32(leader))
        w = next_window(w, s, t.n_windows)


@register_jitable
def place_item(th, t, keys, rowids):
    """Pass 2: append the pair's rowID to its key's run (twin: ``hashing.place_rows_cpu``)."""
    g, lane, mask, shift = group_of(th, t.group)
    idx = coop_find(t, keys[g], lane, mask, shift)
    if lane == 0:
        v = t.tvals[idx]
        if v >= t.flag:
            off = np.int64(v - t.flag)
            pos = np.int64(cuda.atomic.add(t.overflow, off + RUN_COUNT, 1))
            t.overflow[off + RUN_ROWS + pos] = rowids[g]


# ---------------------------------------------------------------------- lookups
@register_jitable
def find_rowid_group(th, t, q, out, miss):
    g, lane, mask, shift = group_of(th, t.group)
    x = q[g]
    idx = NO_SLOT
    if x != t.empty:  # out of band: the caller answers these
        idx = coop_find(t, x, lane, mask, shift)
    if lane == 0:
        store_first_row(t, idx, out, g, miss)


@register_jitable
def count_group(th, t, q, out):
    g, lane, mask, shift = group_of(th, t.group)
    x = q[g]
    idx = NO_SLOT
    if x != t.empty:
        idx = coop_find(t, x, lane, mask, shift)
    if lane == 0:
        out[g] = slot_rows(t, idx)


@register_jitable
def sum_group(th, t, values, use_values, q, out):
    g, lane, mask, shift = group_of(th, t.group)
    x = q[g]
    idx = NO_SLOT
    if x != t.empty:
        idx = coop_find(t, x, lane, mask, shift)
    acc = np.uint64(0)
    if idx != NO_SLOT:
        v = t.tvals[idx]  # the same word in every lane: one load per group
        if v >= t.flag:  # the lanes share the run, then add up their parts
            acc = run_part_sum(t, np.int64(v - t.flag), lane, t.group, values, use_values)
            acc = group_sum(acc, mask, t.group)
        elif lane == 0:
            acc = row_value(v, values, use_values)
    if lane == 0:
        out[g] = acc


@register_jitable
def fill_group(th, t, q, offsets, out):
    g, lane, mask, shift = group_of(th, t.group)
    x = q[g]
    pos = offsets[g]
    if pos == offsets[g + 1] or x == t.empty:
        return
    idx = coop_find(t, x, lane, mask, shift)
    if idx == NO_SLOT:
        return
    copy_rows(t, idx, out, pos, lane, t.group)  # lane l copies rows l, l + G, ...: coalesced


INSERT = Kernel(insert_item)
PLACE = Kernel(place_item)
