"""The compact layout's rank search on the GPU, a warp a predicate side (the GPU body of
:data:`.launches.SORTED_RANKS`; its CPU twin and reference is :func:`.ranks.sorted_rank_item`).

One thread's binary search is a chain of dependent loads: at N = 1e8 and a sample every 64
ranks, about 21 loads through the sample and 12 through the order and the keys, 25 us on an
H200 for a batch of one query (the plan's launches took 57 us of a 0.14 ms window query, the
sieve 75 us). Here the 32 lanes of a warp probe 32 points of the interval at once and vote
(a K-ary search with K = 33): about five rounds through the sample and two through the order
and the keys. The answer is the same first rank, so the lane that writes it (lane 0) also
makes the sieve's choice for that side (:func:`.ranks.sieve_side`). Imports ``numba.cuda``:
loaded on the first GPU launch only.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from indexzoo.native.coop import group_of, vote

from .plan import plan_item
from .ranks import RANK_GROUP, X0, predicate_side, sieve_side

__all__ = ["query_plan_group", "sorted_rank_group"]


@register_jitable
def _probe(sample, keys, order, j, through_order, p):
    """The value at ``p``: ``sample[p]``, or rank ``p`` of column ``j`` through its order."""
    if through_order:
        return keys[order[p, j], j]
    return sample[p]


@register_jitable
def _first(sample, keys, order, j, through_order, lo, hi, x, strict, lane, mask, shift):
    """The first position in ``[lo, hi)`` whose value is ``>= x`` (``> x`` if ``strict``), or
    ``hi``; the same in every lane. While more than 32 positions remain, lane ``l`` probes
    ``lo + (l + 1) * span // 33`` and the first lane whose value qualifies bounds the answer
    (the values are sorted, so the lanes that qualify are the upper ones); then one lane a
    position."""
    while hi - lo > RANK_GROUP:
        span = hi - lo
        v = _probe(sample, keys, order, j, through_order, lo + ((lane + 1) * span) // 33)
        hit = vote(mask, shift, (v > x) if strict else (v >= x))
        if hit == 0:
            lo = lo + (RANK_GROUP * span) // 33 + 1
        else:
            f = np.int64(cuda.ffs(hit)) - 1
            top = lo + ((f + 1) * span) // 33
            if f > 0:
                lo = lo + (f * span) // 33 + 1
            hi = top
    ok = True
    if lane < hi - lo:
        v = _probe(sample, keys, order, j, through_order, lo + lane)
        ok = (v > x) if strict else (v >= x)
    hit = vote(mask, shift, ok)
    if hit == 0:
        return hi
    return lo + np.int64(cuda.ffs(hit)) - 1


@register_jitable
def sorted_rank_group(t, lo, hi, sample, offsets, keys, order, stride, borders, border_offsets,
                      vector_base, fine, fine_base, fine_ids, bins, sieving, selection, rk):
    """Thread ``t`` of :func:`.ranks.sorted_rank_item`'s item ``t // 32``: the warp finds the
    first sample past the bound, then the rank among the ``stride - 1`` after the sample
    before it; lane 0 writes it and the side's sieve choice."""
    i, lane, mask, shift = group_of(t, RANK_GROUP)
    q, j, side, x = predicate_side(i, lo, hi)
    n = np.int64(order.shape[0])
    strict = side == 1
    t0 = offsets[j]
    s = _first(sample, keys, order, j, False, t0, offsets[j + 1], x, strict, lane, mask,
               shift) - t0
    rank = np.int64(0)
    if s > 0:
        rank = _first(sample, keys, order, j, True, (s - 1) * stride + 1, min(s * stride, n), x,
                      strict, lane, mask, shift)
    if lane == 0:
        rk[q, j, X0 + side] = rank
        sieve_side(rk, q, j, side, rank, borders, border_offsets, vector_base, fine, fine_base,
                   fine_ids, bins, sieving, selection)


@register_jitable
def query_plan_group(t, lo, hi, sample, offsets, keys, order, stride, borders, border_offsets,
                     vector_base, fine, fine_base, fine_ids, bins, sieving, selection, shifts,
                     group_cols, geo, n, encoding, ranked, rt, axis, plo, phi, rk, sel, boxes):
    """Thread ``t`` of :func:`.plan.query_plan_item`, a block a query (``2 d`` warps): warp
    ``k`` searches the query's side ``k``, the block waits for all of them (their lane 0 wrote
    ``rk``; the barrier makes those writes seen), and thread 0 makes the query's plan. The
    launch gives every query a block of its own, so every thread reaches the barrier."""
    sorted_rank_group(t, lo, hi, sample, offsets, keys, order, stride, borders, border_offsets,
                      vector_base, fine, fine_base, fine_ids, bins, sieving, selection, rk)
    cuda.syncthreads()
    per = 2 * lo.shape[1] * RANK_GROUP
    if t % per == 0:
        plan_item(t // per, lo, hi, keys, order, shifts, group_cols, geo, n, encoding, ranked,
                  rt, axis, plo, phi, rk, sel, boxes)
