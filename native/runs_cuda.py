"""The collaborative scan of a run (cgRX's "x4": a tile of G threads per lookup): the GPU
bodies of :mod:`indexzoo.native.runs`'s group operations. Lane ``l`` of a group reads pairs
``first + l, first + l + G, ...`` (consecutive lanes, consecutive pairs: coalesced) and the
group adds its lanes' sums. Imports ``numba.cuda``: only for the ``cuda`` device."""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from .coop import group_of, group_sum

__all__ = ["run_sum_group"]


@register_jitable
def run_sum_group(th, rowids, first, count, values, use_values, out, group):
    g, lane, mask, _ = group_of(th, group)
    if g >= first.shape[0]:
        return
    acc = np.uint64(0)
    s = first[g]
    j = np.int64(lane)
    while j < count[g]:
        r = rowids[s + j]
        acc += values[np.int64(r)] if use_values else np.uint64(r)
        j += group
    acc = group_sum(acc, mask, group)
    if lane == 0:
        out[g] = acc
