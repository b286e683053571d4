"""Searches in a sorted key array, as numba-jitable functions for both devices.

``keys`` is sorted ascending and may hold duplicates; positions are int64.
"""

from __future__ import annotations

from numba.extending import register_jitable

__all__ = ["bisect", "lower_bound", "lower_bound_from", "range_bounds", "upper_bound_from"]


@register_jitable
def bisect(keys, lo, hi, x, strict):
    """First position in ``[lo, hi)`` whose key is ``>= x`` (``> x`` if ``strict``), or ``hi``,
    by halving ``[lo, hi)`` until it is empty."""
    while lo < hi:
        mid = (lo + hi) >> 1
        k = keys[mid]
        if k < x or (strict and k == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@register_jitable
def _gallop(keys, start, x, strict):
    """First position ``p >= start`` whose key is ``>= x`` (``> x`` if ``strict``), or
    ``len(keys)``: galloping (1, 2, 4, ... past ``start``) then binary search, O(log d) for a
    distance d from ``start``."""
    n = keys.shape[0]
    lo = start
    hi = n
    step = 1
    while True:
        probe = lo + step - 1
        if probe >= n:
            break
        k = keys[probe]
        if not (k < x or (strict and k == x)):
            hi = probe
            break
        lo = probe + 1
        step <<= 1
    return bisect(keys, lo, hi, x, strict)


@register_jitable
def lower_bound(keys, x):
    """First position ``p`` with ``keys[p] >= x``, or ``len(keys)``.

    The naive binary search of the RX paper's SA baseline: halve ``[lo, hi)`` until empty.
    """
    return bisect(keys, 0, keys.shape[0], x, False)


@register_jitable
def lower_bound_from(keys, start, x):
    """First position ``p >= start`` with ``keys[p] >= x``, or ``len(keys)`` (galloping)."""
    return _gallop(keys, start, x, False)


@register_jitable
def upper_bound_from(keys, start, x):
    """First position ``p > start`` with ``keys[p] > x``, or ``len(keys)``, given
    ``keys[start] <= x``.

    Galloping (1, 2, 4, ... past ``start``) then binary search: O(log m) for m matches, so a
    run of duplicates or a wide range costs little more than one lookup.
    """
    return _gallop(keys, start + 1, x, True)


@register_jitable
def range_bounds(keys, lo, hi):
    """``(start, stop)``: the positions of the keys in ``[lo, hi]`` are ``start..stop-1``.

    Empty (``start == stop``) when no key qualifies, including ``lo > hi``.
    """
    start = lower_bound(keys, lo)
    if start < keys.shape[0] and keys[start] <= hi:
        return start, upper_bound_from(keys, start, hi)
    return start, start
