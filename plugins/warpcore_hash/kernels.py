"""Open addressing with windows of G slots and double hashing, in the style of WarpCore: the
hash function, the probing scheme, the multi-value layout, and the CPU twin of the cooperative
GPU kernels (:mod:`indexzoo.plugins.warpcore_hash.kernels_cuda`).

Table: ``n_windows`` windows of ``group`` slots; slot ``s`` holds a key at ``tkeys[s * stride]``
and its value word at ``tvals[s * stride]``. SoA: two arrays, stride 1. AoS: one array of
(key, value word) pairs, ``tkeys = table`` and ``tvals = table[1:]``, stride 2. An empty slot
holds ``empty`` (the key dtype's maximum); keys equal to it are kept out of band by the caller.

Multi-value layout: the table holds each distinct key once. The value word of a key with one
row is that rowID; the value word of a key with ``m > 1`` rows is ``flag + off`` (``flag`` is the
top bit of the value word's dtype, every rowID lies below it), and its rows form a run of the
overflow array: ``overflow[off + RUN_COUNT] = m``, ``overflow[off + RUN_ROWS + j]`` its rowIDs
(in rowID order on the CPU, in any order on the GPU). A table without multi keys has an empty
overflow array, which lets ``count`` answer a hit without reading the value word.

Probing: ``h = fmix64(k)``; the first window is ``(h >> 32) * n_windows >> 32``, the step
``1 + (h & 0xffffffff) * (n_windows - 1) >> 32`` (both in ``[0, n_windows)`` without a modulo);
``n_windows`` is prime (and below 2^32), so every step visits every window. A key lies in the
first window of its sequence that had an empty slot when its first pair came (lowest empty
lane first); lookups stop at the window holding the key or at the first window with an empty
slot (a miss).

Build, in two passes over the (key, rowID) pairs (:func:`insert_or_count_cpu`,
:func:`place_rows_cpu`; the index drives them, see ``plugins/warpcore_hash``):

1. insert-or-count: a pair whose key is in the table adds 1 to ``counts[slot]`` (the copies
   beyond the first); otherwise it claims the lowest empty slot of the window and stores its
   rowID as the value word. Unique keys never touch ``counts``.
2. only when some count is non-zero, after the caller has turned the value words of multi keys
   into flagged run offsets with ``overflow[off] = 0``: every pair finds its key again and, for
   a multi key, appends its rowID to the run (``overflow[off]`` counts back up to ``m``).

The CPU twin visits windows in the same order and lanes in lane order, so its lookups answer
exactly like the GPU kernels on the same table (the GPU build may put a key in another lane and
the rows of a run in another order than the sequential CPU build; sets of rowIDs, counts and
sums do not change). The hash, the probe sequence and the layout's markers, which both compile
in, are in ``probing.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.targets import DEFAULT_THREADS_PER_BLOCK, GroupKernel, njit_cached

from .probing import (
    NO_SLOT,
    RUN_COUNT,
    RUN_ROWS,
    copy_rows,
    fmix64,
    next_window,
    probe_start,
    row_value,
    run_part_sum,
    slot_rows,
    store_first_row,
)

__all__ = ["COUNT", "FILL", "FIND_ROWID", "NO_SLOT", "RUN_COUNT", "RUN_ROWS", "SUM", "TableRecord",
           "find_slot", "fmix64", "insert_or_count", "insert_or_count_cpu", "next_prime",
           "next_window", "place_rows", "place_rows_cpu", "probe_start", "slot_of", "value_flag"]


def value_flag(dtype: Any) -> np.integer:
    """The flag of value words of ``dtype`` that point into the overflow array: the top bit."""
    dt = np.dtype(dtype)
    return dt.type(1 << (8 * dt.itemsize - 1))


def next_prime(x: int) -> int:
    """The smallest prime >= x (deterministic Miller-Rabin for 64-bit values)."""
    def is_prime(n: int) -> bool:
        if n < 2:
            return False
        for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
            if n % p == 0:
                return n == p
        d, r = n - 1, 0
        while d % 2 == 0:
            d, r = d // 2, r + 1
        for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
            y = pow(a, d, n)
            if y in (1, n - 1):
                continue
            for _ in range(r - 1):
                y = y * y % n
                if y == n - 1:
                    break
            else:
                return False
        return True

    n = max(int(x), 2)
    while not is_prime(n):
        n += 1
    return n


class TableRecord(NamedTuple):
    """A built table as the lookup kernels read it (one kernel argument)."""

    tkeys: Any      # key slots (read with ``stride``)
    tvals: Any      # value words (read with ``stride``)
    stride: Any     # int64: 1 (soa) or 2 (aos)
    overflow: Any   # runs of multi keys: row count, then the rowIDs
    flag: Any       # value words >= flag are flag + offset of a run
    n_windows: Any  # int64
    group: Any      # int64: slots per window, threads per key on the GPU
    empty: Any      # the empty-slot key


# ---------------------------------------------------------------------- probing
@register_jitable
def probe(tkeys, stride, x, n_windows, group, empty):
    """(element index of ``x``'s slot or NO_SLOT, windows probed): the windows of ``x``'s
    sequence until one holds ``x`` (in any lane) or has an empty slot."""
    w, s = probe_start(x, n_windows)
    windows = 0
    while True:
        windows += 1
        base = w * group
        saw_empty = False
        for lane in range(group):
            idx = (base + lane) * stride
            k = tkeys[idx]
            if k == x:
                return idx, windows
            if k == empty:
                saw_empty = True
        if saw_empty:
            return NO_SLOT, windows
        w = next_window(w, s, n_windows)


@register_jitable
def find_slot(tkeys, stride, x, n_windows, group, empty):
    """Element index of ``x``'s slot in ``tkeys``/``tvals``, or NO_SLOT."""
    idx, _ = probe(tkeys, stride, x, n_windows, group, empty)
    return idx


@register_jitable
def slot_of(t, x):
    """Element index of ``x``'s slot in table ``t`` (a :class:`TableRecord`), or NO_SLOT."""
    return find_slot(t.tkeys, t.stride, x, t.n_windows, t.group, t.empty)


@register_jitable
def query_slot(t, x):
    """:func:`slot_of` for a lookup key: NO_SLOT for the empty sentinel itself, which no
    stored key can equal."""
    if x == t.empty:
        return NO_SLOT
    return slot_of(t, x)


# ---------------------------------------------------------------------- CPU build
@njit_cached(nogil=True)
def insert_or_count_cpu(tkeys, tvals, stride, counts, keys, vals, n_windows, group, empty):
    """Build pass 1, sequentially (the twin of ``kernels_cuda.INSERT``): for each pair, add 1
    to ``counts[slot]`` when its key is in the table, else store the key in the lowest empty
    slot of the first window with one and ``vals[i]`` as its value word. Returns the windows
    probed."""
    probes = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        w, s = probe_start(k, n_windows)
        while True:
            probes += 1
            base = w * group
            free = NO_SLOT
            found = NO_SLOT
            for lane in range(group):
                cur = tkeys[(base + lane) * stride]
                if cur == k:
                    found = base + lane
                    break
                if cur == empty and free == NO_SLOT:
                    free = base + lane
            if found != NO_SLOT:
                counts[found] += 1
                break
            if free != NO_SLOT:
                tkeys[free * stride] = k
                tvals[free * stride] = vals[i]
                break
            w = next_window(w, s, n_windows)
    return probes


@njit_cached(nogil=True)
def place_rows_cpu(tkeys, tvals, stride, overflow, flag, keys, rowids, n_windows, group, empty):
    """Build pass 2, sequentially (the twin of ``kernels_cuda.PLACE``): append each pair's
    rowID to its key's overflow run when the key has several rows; pairs in rowID order give
    runs in rowID order. Every key must be in the table. Returns the windows probed."""
    probes = 0
    for i in range(keys.shape[0]):
        idx, windows = probe(tkeys, stride, keys[i], n_windows, group, empty)
        probes += windows
        v = tvals[idx]
        if v >= flag:
            off = np.int64(v - flag)
            pos = np.int64(overflow[off + RUN_COUNT])
            overflow[off + RUN_ROWS + pos] = rowids[i]
            overflow[off + RUN_COUNT] = pos + 1
    return probes


# ---------------------------------------------------------------------- CPU lookups
@register_jitable
def find_rowid_item(i, t, q, out, miss):
    """The key's single rowID or the first of its run; ``miss`` without a match."""
    store_first_row(t, query_slot(t, q[i]), out, i, miss)


@register_jitable
def count_item(i, t, q, out):
    """Rows of the key: 0, 1, or its run's count (the value word is read only when the table
    has multi keys at all)."""
    out[i] = slot_rows(t, query_slot(t, q[i]))


@register_jitable
def sum_item(i, t, values, use_values, q, out):
    """Sum of ``values[rowid]`` over the key's rows (of the rowIDs unless ``use_values``),
    wrapping uint64."""
    acc = np.uint64(0)
    idx = query_slot(t, q[i])
    if idx != NO_SLOT:
        v = t.tvals[idx]
        if v >= t.flag:
            acc = run_part_sum(t, np.int64(v - t.flag), 0, 1, values, use_values)
        else:
            acc = row_value(v, values, use_values)
    out[i] = acc


@register_jitable
def fill_item(i, t, q, offsets, out):
    """The key's rowIDs into ``out[offsets[i]:offsets[i + 1]]`` (sized by ``COUNT``)."""
    pos = offsets[i]
    if pos == offsets[i + 1]:
        return
    idx = query_slot(t, q[i])
    if idx != NO_SLOT:
        copy_rows(t, idx, out, pos, 0, 1)


def _cooperative() -> Any:
    from . import kernels_cuda  # imports numba.cuda: only on the GPU path

    return kernels_cuda


# One thread per lookup on the CPU, one group of G threads (the window) on the GPU.
FIND_ROWID = GroupKernel(find_rowid_item, lambda: _cooperative().find_rowid_group)
COUNT = GroupKernel(count_item, lambda: _cooperative().count_group)
SUM = GroupKernel(sum_item, lambda: _cooperative().sum_group)
FILL = GroupKernel(fill_item, lambda: _cooperative().fill_group)


def insert_or_count(device: str, t: TableRecord, counts: Any, keys: Any, vals: Any,
                    threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> int | None:
    """Build pass 1 on ``device``: the sequential CPU twin (deterministic; returns the windows
    probed) or the cooperative GPU kernel, G threads per pair (returns None)."""
    if device == "cpu":
        return int(insert_or_count_cpu(t.tkeys, t.tvals, t.stride, counts, keys, vals,
                                       t.n_windows, t.group, t.empty))
    _cooperative().INSERT("cuda", int(keys.shape[0]) * int(t.group), t, counts, keys, vals,
                          threads_per_block=threads_per_block)
    return None


def place_rows(device: str, t: TableRecord, keys: Any, rowids: Any,
               threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> int | None:
    """Build pass 2 on ``device`` (as :func:`insert_or_count`)."""
    if device == "cpu":
        return int(place_rows_cpu(t.tkeys, t.tvals, t.stride, t.overflow, t.flag, keys, rowids,
                                  t.n_windows, t.group, t.empty))
    _cooperative().PLACE("cuda", int(keys.shape[0]) * int(t.group), t, keys, rowids,
                         threads_per_block=threads_per_block)
    return None
