"""Where a B+-tree's keys and rowIDs lie and how one node is searched: the leaf layouts and the
in-node search, as scalar functions that the CPU twin and the one-thread GPU descent
(``kernels.py``) and the cooperative GPU kernels (``kernels_cuda.py``) all compile in. It imports
neither of them, so the GPU module never imports the CPU one.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.search import bisect

__all__ = ["LEAF_LAYOUTS", "first_slot", "first_slot_strided", "leaf_indexing"]

#: Leaf layouts: (record length in units of B elements, element step between a leaf's keys,
#: rowID offset in units of B, rowID offset in elements). The key of slot ``s`` of leaf ``j``
#: is element ``j*rec*B + step*s`` of ``leaf_keys``, its rowID element
#: ``j*rec*B + rowid_lines*B + rowid_off + step*s`` of ``leaf_rowids`` (the same array as
#: ``leaf_keys`` in the record layouts).
LEAF_LAYOUTS: dict[str, tuple[int, int, int, int]] = {
    "split": (1, 1, 0, 0),        # leaf_keys and leaf_rowids: two L x B arrays
    "interleaved": (2, 1, 1, 0),  # one L x 2B array: B keys, then their B rowIDs
    "paired": (2, 2, 0, 1),       # one L x B x 2 array: (key, rowID) side by side
}


@register_jitable
def first_slot(keys, base, count, x, strict):
    """The first slot ``i < count`` of the node at ``base`` whose key is ``>= x`` (``> x``
    if ``strict``), or ``count``: a binary search over the node's sorted slots."""
    return bisect(keys, base, base + count, x, strict) - base


@register_jitable
def first_slot_strided(keys, base, step, count, x, strict):
    """:func:`first_slot` over keys ``step`` elements apart (the ``paired`` leaf layout)."""
    lo = np.int64(0)
    hi = count
    while lo < hi:
        mid = (lo + hi) >> 1
        k = keys[base + step * mid]
        if k < x or (strict and k == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@functools.cache
def leaf_indexing(leaf_layout: str) -> tuple[Any, Any, Any]:
    """``(key_at, rowid_at, leaf_first)`` for a leaf layout, as jitable functions with the
    layout's constants compiled in: the element indices of slot ``slot`` of leaf ``leaf`` in
    ``t.leaf_keys`` and ``t.leaf_rowids``, and the leaf search (first slot ``>= x``, ``> x``
    if ``strict``, among the first ``count``)."""
    rec, step, rowid_lines, rowid_off = LEAF_LAYOUTS[leaf_layout]

    @register_jitable
    def key_at(t, leaf, slot):
        return leaf * (rec * t.width) + step * slot

    @register_jitable
    def rowid_at(t, leaf, slot):
        return leaf * (rec * t.width) + rowid_lines * t.width + rowid_off + step * slot

    @register_jitable
    def leaf_first(t, leaf, count, x, strict):
        if step == 1:
            return first_slot(t.leaf_keys, leaf * (rec * t.width), count, x, strict)
        return first_slot_strided(t.leaf_keys, leaf * (rec * t.width), step, count, x, strict)

    return key_at, rowid_at, leaf_first
