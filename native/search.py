"""Searches in a sorted key array, as numba-jitable functions for both devices.

``keys`` is sorted ascending and may hold duplicates; positions are int64.
"""

from __future__ import annotations

from numba.extending import register_jitable

__all__ = ["lower_bound", "range_bounds", "upper_bound_from"]


@register_jitable
def lower_bound(keys, x):
    """First position ``p`` with ``keys[p] >= x``, or ``len(keys)``.

    The naive binary search of the RX paper's SA baseline: halve ``[lo, hi)`` until empty.
    """
    lo = 0
    hi = keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@register_jitable
def upper_bound_from(keys, start, x):
    """First position ``p > start`` with ``keys[p] > x``, or ``len(keys)``, given
    ``keys[start] <= x``.

    Galloping (1, 2, 4, ... past ``start``) then binary search: O(log m) for m matches, so a
    run of duplicates or a wide range costs little more than one lookup.
    """
    n = keys.shape[0]
    lo = start + 1
    hi = n
    step = 1
    while True:
        probe = lo + step - 1
        if probe >= n:
            break
        if keys[probe] > x:
            hi = probe
            break
        lo = probe + 1
        step <<= 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@register_jitable
def range_bounds(keys, lo, hi):
    """``(start, stop)``: the positions of the keys in ``[lo, hi]`` are ``start..stop-1``.

    Empty (``start == stop``) when no key qualifies, including ``lo > hi``.
    """
    start = lower_bound(keys, lo)
    if start < keys.shape[0] and keys[start] <= hi:
        return start, upper_bound_from(keys, start, hi)
    return start, start
