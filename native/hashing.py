"""Open addressing with windows of G slots and double hashing, as in WarpCore: the hash
function, the probing scheme, and the CPU twin of the cooperative GPU kernels.

Table: ``n_windows`` windows of ``group`` slots; slot ``s`` holds a key at ``tkeys[s * stride]``
and its value (a rowID) at ``tvals[s * stride]``. SoA: two arrays, stride 1. AoS: one array of
(key, value) pairs, ``tkeys = table`` and ``tvals = table[1:]``, stride 2. An empty slot holds
``empty`` (the key dtype's maximum); keys equal to it are kept out of band by the caller.

Probing: ``h = fmix64(k)``; the first window is ``(h >> 32) * n_windows >> 32``, the step
``1 + (h & 0xffffffff) * (n_windows - 1) >> 32`` (both in ``[0, n_windows)`` without a modulo);
``n_windows`` is prime (and below 2^32), so every step visits every window. Inserts take the
first empty slot (lowest lane first) along the sequence; a key's pairs therefore all lie before
the first window that still has an empty slot, and lookups stop there.

The CPU twin visits windows in the same order and lanes in lane order, so it answers exactly
like the GPU kernels on the same table (the GPU build may place duplicates of a key in another
order than the sequential CPU build; sets of rowIDs, counts and sums do not change).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .targets import Kernel

__all__ = ["COUNT", "FILL", "FIND_ROWID", "SUM", "build_cpu", "fmix64", "next_prime",
           "probe_start"]

@register_jitable
def fmix64(x):  # type: ignore[no-untyped-def]
    """MurmurHash3's 64-bit finaliser: a bijective mixer of uint64."""
    x = np.uint64(x)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


@register_jitable
def probe_start(key, n_windows):  # type: ignore[no-untyped-def]
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
def next_window(w, s, n_windows):  # type: ignore[no-untyped-def]
    w += s
    if w >= n_windows:
        w -= n_windows
    return w


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


# ---------------------------------------------------------------------- CPU build
@njit(nogil=True, cache=True)
def build_cpu(tkeys, tvals, stride, keys, rowids, n_windows, group, empty):  # type: ignore[no-untyped-def]
    """Insert (keys[i], rowids[i]) one after another: the sequential twin of the GPU build."""
    for i in range(keys.shape[0]):
        k = keys[i]
        w, s = probe_start(k, n_windows)
        placed = False
        while not placed:
            base = w * group
            for lane in range(group):
                idx = (base + lane) * stride
                if tkeys[idx] == empty:
                    tkeys[idx] = k
                    tvals[idx] = rowids[i]
                    placed = True
                    break
            w = next_window(w, s, n_windows)


# ---------------------------------------------------------------------- CPU lookups
@register_jitable
def find_rowid_item(i, tkeys, tvals, stride, q, out, n_windows, group, empty, miss):  # type: ignore[no-untyped-def]
    x = q[i]
    out[i] = miss
    if x == empty:
        return
    w, s = probe_start(x, n_windows)
    while True:
        base = w * group
        saw_empty = False
        for lane in range(group):
            idx = (base + lane) * stride
            k = tkeys[idx]
            if k == x:
                out[i] = tvals[idx]
                return
            if k == empty:
                saw_empty = True
        if saw_empty:
            return
        w = next_window(w, s, n_windows)


@register_jitable
def count_item(i, tkeys, stride, q, out, n_windows, group, empty):  # type: ignore[no-untyped-def]
    x = q[i]
    c = 0
    if x != empty:
        w, s = probe_start(x, n_windows)
        while True:
            base = w * group
            saw_empty = False
            for lane in range(group):
                k = tkeys[(base + lane) * stride]
                if k == x:
                    c += 1
                elif k == empty:
                    saw_empty = True
            if saw_empty:
                break
            w = next_window(w, s, n_windows)
    out[i] = c


@register_jitable
def sum_item(i, tkeys, tvals, stride, values, use_values, q, out, n_windows, group, empty):  # type: ignore[no-untyped-def]
    """Sum of ``values[rowid]`` over the matches (of the rowIDs unless ``use_values``)."""
    x = q[i]
    acc = np.uint64(0)
    if x != empty:
        w, s = probe_start(x, n_windows)
        while True:
            base = w * group
            saw_empty = False
            for lane in range(group):
                idx = (base + lane) * stride
                k = tkeys[idx]
                if k == x:
                    r = tvals[idx]
                    acc += values[np.int64(r)] if use_values else np.uint64(r)
                elif k == empty:
                    saw_empty = True
            if saw_empty:
                break
            w = next_window(w, s, n_windows)
    out[i] = acc


@register_jitable
def fill_item(i, tkeys, tvals, stride, q, offsets, out, n_windows, group, empty):  # type: ignore[no-untyped-def]
    x = q[i]
    pos = offsets[i]
    if pos == offsets[i + 1] or x == empty:
        return
    w, s = probe_start(x, n_windows)
    while True:
        base = w * group
        saw_empty = False
        for lane in range(group):
            idx = (base + lane) * stride
            k = tkeys[idx]
            if k == x:
                out[pos] = tvals[idx]
                pos += 1
            elif k == empty:
                saw_empty = True
        if saw_empty:
            return
        w = next_window(w, s, n_windows)


FIND_ROWID = Kernel(find_rowid_item)
COUNT = Kernel(count_item)
SUM = Kernel(sum_item)
FILL = Kernel(fill_item)
