"""Helpers of cooperative-group GPU kernels: a group of ``size`` adjacent threads (a divisor
of the warp size) works on one item; they vote with ``ballot_sync`` and share with
``shfl_sync``. Item ``t`` of such a kernel is a thread: item ``t // size``, lane ``t % size``;
launch with ``items * size`` threads and a block size that is a multiple of 32. Imports
``numba.cuda``: only for the ``cuda`` device.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.extending import register_jitable

__all__ = ["group_of", "group_sum", "vote"]


@register_jitable
def group_of(t, group):
    """(key index, lane, group's mask in the warp, bit offset of the group in the warp)."""
    lane = t % group
    shift = (t % 32) - lane
    mask = np.uint32(0xFFFFFFFF) if group == 32 else np.uint32(((1 << group) - 1) << shift)
    return t // group, lane, mask, np.uint32(shift)


@register_jitable
def vote(mask, shift, pred):
    """The group's ballot as group-local bits (lane 0 = bit 0).

    ``ballot_sync`` may also report converged lanes outside ``mask`` (other groups of the
    warp executing the same instruction), so the result is masked before it is shifted.
    """
    return (cuda.ballot_sync(mask, pred) & mask) >> shift


@register_jitable
def group_sum(acc, mask, group):
    """Sum of ``acc`` over the group (every lane gets it), uint64 wrapping."""
    off = 1
    while off < group:
        acc += np.uint64(cuda.shfl_xor_sync(mask, np.int64(acc), off))
        off <<= 1
    return acc
