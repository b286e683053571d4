"""The scalar pieces of the WarpCore-style hash table that its CPU twin (``kernels.py``) and its
GPU kernels (``kernels_cuda.py``) both compile in: the hash, the probe sequence (first window
and step, both by multiply-shift), the markers of the multi-value layout, what ``sum`` adds for
a row, and the lookups' answers from a found slot (one thread on the CPU, the group's lanes on
the GPU: lane ``first`` of ``step`` lanes takes rows ``first, first + step, ...`` of a run; the
CPU passes 0 and 1). The table, the layout and the probing scheme are described in ``kernels.py``.
This module imports neither of the two, so the GPU module never imports the CPU one.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

__all__ = ["NO_SLOT", "RUN_COUNT", "RUN_ROWS", "copy_rows", "fmix64", "next_window",
           "probe_start", "row_value", "run_part_sum", "slot_rows", "store_first_row"]

#: What a slot search (``hashing.find_slot``) returns for a key that is not in the table.
NO_SLOT = -1
#: Position of a run's row count, relative to its offset in the overflow array.
RUN_COUNT = 0
#: Position of a run's first rowID, relative to its offset in the overflow array.
RUN_ROWS = 1


@register_jitable
def fmix64(x):
    """MurmurHash3's 64-bit finaliser: a bijective mixer of uint64."""
    x = np.uint64(x)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


@register_jitable
def probe_start(key, n_windows):
    """(first window, step) of ``key``'s probe sequence, both int64.

    One fmix64; its upper 32 bits pick the first window and its lower 32 bits the step, each
    mapped onto its range by a multiply-shift (Lemire's fast range reduction) instead of a
    64-bit modulo, which costs a GPU far more than the hash itself.
    """
    h = fmix64(np.uint64(key))
    hi = h >> np.uint64(32)
    lo = h & np.uint64(0xFFFFFFFF)
    w = np.int64((hi * np.uint64(n_windows)) >> np.uint64(32))
    s = np.int64(np.uint64(1) + ((lo * np.uint64(n_windows - 1)) >> np.uint64(32)))
    return w, s


@register_jitable
def next_window(w, s, n_windows):
    w += s
    if w >= n_windows:
        w -= n_windows
    return w


@register_jitable
def row_value(r, values, use_values):
    """What ``sum`` adds for rowID ``r``: ``values[r]``, or ``r`` itself without values."""
    return values[np.int64(r)] if use_values else np.uint64(r)


# ---------------------------------------------------------------------- answers from a slot
# ``t`` is a ``kernels.TableRecord``, ``idx`` the element index of a key's slot (``NO_SLOT``:
# not in the table).


@register_jitable
def store_first_row(t, idx, out, j, miss):
    """``out[j]`` = the key's single rowID or the first of its run; ``miss`` for NO_SLOT."""
    if idx == NO_SLOT:
        out[j] = miss
    else:
        v = t.tvals[idx]
        if v >= t.flag:
            out[j] = t.overflow[np.int64(v - t.flag) + RUN_ROWS]
        else:
            out[j] = v


@register_jitable
def slot_rows(t, idx):
    """Rows of the key: 0 (NO_SLOT), 1, or its run's count (the value word is read only when
    the table has multi keys at all)."""
    c = np.int64(0)
    if idx != NO_SLOT:
        c = np.int64(1)
        if t.overflow.shape[0] != 0:  # no multi keys: a hit is one row, no value word read
            v = t.tvals[idx]
            if v >= t.flag:
                c = np.int64(t.overflow[np.int64(v - t.flag) + RUN_COUNT])
    return c


@register_jitable
def run_part_sum(t, off, first, step, values, use_values):
    """What ``sum`` adds for rows ``first, first + step, ...`` of the run at ``off``."""
    m = np.int64(t.overflow[off + RUN_COUNT])
    acc = np.uint64(0)
    j = np.int64(first)
    while j < m:
        acc += row_value(t.overflow[off + RUN_ROWS + j], values, use_values)
        j += step
    return acc


@register_jitable
def copy_rows(t, idx, out, pos, first, step):
    """The rowIDs of the key at slot ``idx`` (not NO_SLOT) into ``out[pos:]``: a run's rows
    ``first, first + step, ...`` (lane ``first`` of a group of ``step``: coalesced), a single
    rowID by lane 0."""
    v = t.tvals[idx]
    if v >= t.flag:
        off = np.int64(v - t.flag)
        m = np.int64(t.overflow[off + RUN_COUNT])
        j = np.int64(first)
        while j < m:
            out[pos + j] = t.overflow[off + RUN_ROWS + j]
            j += step
    elif first == 0:
        out[pos] = v
