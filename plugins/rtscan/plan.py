"""A batch's query plan, made on the device in two kernel launches (:mod:`.launches`): the
encoding of every predicate and the sieve's vector choice on each of its sides
(:data:`.launches.RANKS`, an item per predicate side: a thread, or a warp on the GPU in the
compact layout; the bodies are :mod:`.ranks`'), then the refine boxes of every column group
and each box's work (its ray grid, or its slab of rows for the direct refine) (:data:`PLAN`,
one thread per query). A small call of the compact layout on the GPU makes both in one launch,
a block a query (:data:`.launches.QUERY_PLAN`).

The same steps as the host reference functions, which the tests hold it against:

* encode (:func:`.encoding.rank_bounds`, :func:`.encoding.sorted_bounds`): the rank interval
  ``[x0, x1)`` of each predicate by two binary searches, in the column's mapping table
  (the paper's layout) or in its sorted sample and then through the order and the keys (the
  compact layout), and the exact bounds in the space of
  ``lc`` (``plo``, ``phi``: ranks where ``lc`` holds codes, the bounds themselves else);
* choose (:func:`.sieve.choose`): the borders around ``x0`` and ``x1`` by binary search, the
  approximation ``[a0, a1)`` and the codes of its borders (the vectors to read) by the
  selection rule, each side from its own rank alone, by the item that found that rank
  (:func:`.ranks.sieve_side`);
* boxes (:func:`.regions.refine_boxes`): per group ``U_j x prod_{k<j} C_k x prod_{k>j} H_k``,
  each of ``U_j``'s two intervals a box, so at most ``2 g <= 6`` boxes per query and group: a
  fixed slot each (:data:`SLOTS` per query), an empty box a slot with no work. The arrays are
  sized from the batch alone, with no round trip to the host;
* work: the RT refine's ray grid (:func:`.layout.box_plan`, the device's
  :func:`.layout.plan_rays`; without encoding the box's coordinates are the values at its first
  and last ranks, ``lc[order[rank]] >> shift``), or the direct refine's slab (the narrowest
  column of the box, as :func:`.refine.refine_direct`).

Two per-query rules of the old host plan, kept: a query with an empty predicate on any column
is dead (approximation 0 in every group, no boxes), and a group without a predicate for the
query passes every row (approximation = all rows, no boxes; the host plan skipped such a group
when no query of the chunk had a predicate on it, and refined all rows otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.targets import Kernel

from .layout import PLAN_COLUMNS, RAYS, box_plan
from .ranks import A0, A1, RK_COLUMNS, VHI, VLO, X0, X1, sorted_rank_item
from .sieve import SEL_COLUMNS, ZERO

__all__ = [
    "CLEAR",
    "DIRECT_COLUMNS",
    "D_COL",
    "D_COUNT",
    "D_MODE",
    "D_QUERY",
    "D_START",
    "NO_UNSET",
    "PLAN",
    "RK_COLUMNS",
    "SELECTION_CODES",
    "SEL_COLUMNS",
    "SKIP_COL",
    "SLOTS",
    "X0",
    "X1",
    "Plan",
    "PlanArgs",
    "plan_args",
    "plan_item",
    "query_plan_item",
]

#: Box slots per query and group: two per column of a group of at most three.
SLOTS = 6
#: Columns of a direct refine's plan (one row per slot): the bitmap row, the column whose
#: slab is gathered, the slab's first rank, its number of rows (0: an empty slot), and what
#: the slab's ranks on that column already tell about its rows (``D_MODE``).
D_QUERY, D_COL, D_START, D_COUNT, D_MODE = 0, 1, 2, 3, 4
DIRECT_COLUMNS = 5
#: ``D_MODE`` bits. 0: check every column, set the row's bit or clear it.
#: ``SKIP_COL``: the slab lies inside the predicate on its column: that column is not read.
#: ``NO_UNSET``: the slab lies outside the approximation on its column, so the sieve left
#: its rows' bits 0: a row that fails is left alone (no atomic).
#: ``CLEAR``: the slab lies outside the predicate on its column: every row fails; its bit is
#: cleared without reading any column.
SKIP_COL, NO_UNSET, CLEAR = 1, 2, 4
#: The ``selection`` parameter as the kernel's code.
SELECTION_CODES = {"auto": 0, "positive": 1, "negative": 2}


@dataclass(frozen=True)
class PlanArgs:
    """What the plan kernel reads besides the tables and the sieve (built once, on the
    device): the groups' columns (-1: an unused axis), their ray geometry, the shift of each
    column's scene coordinates, and stand-ins for the sieve's arrays when there is none."""

    group_cols: Any  # (G, 3) int64
    geo: Any         # (G, 2) int64: ray interval I, period L + S (0: one segment)
    shifts: Any      # (d,) int64
    no_borders: Any  # (1,) int64 stand-in (no sieve)
    no_vectors: Any  # (1, 1) uint32 stand-in (no sieve)

    def nbytes(self) -> dict[str, int]:
        return {"plan_args": sum(int(a.nbytes) for a in (self.group_cols, self.geo,
                                                         self.shifts, self.no_borders,
                                                         self.no_vectors))}


def plan_args(xp: Any, groups: Sequence[Any], shifts: Sequence[int]) -> PlanArgs:
    """The plan kernel's inputs for ``groups`` (each with ``cols`` and ``geom``) and the
    columns' coordinate ``shifts``, on the device of ``xp``."""
    cols = np.full((len(groups), 3), -1, dtype=np.int64)
    geo = np.zeros((len(groups), 2), dtype=np.int64)
    for gi, g in enumerate(groups):
        cols[gi, :len(g.cols)] = g.cols
        geo[gi] = (g.geom.interval, g.geom.period)
    return PlanArgs(xp.asarray(cols), xp.asarray(geo),
                    xp.asarray(np.asarray(shifts, dtype=np.int64)),
                    xp.zeros(1, dtype=np.int64), xp.zeros((1, 1), dtype=np.uint32))


@dataclass(frozen=True)
class Plan:
    """One batch's plan (device arrays; ``G`` groups, ``Q`` queries, ``S = 6 Q`` slots)."""

    plo: Any    # (Q, d) exact inclusive bounds in code space (lc's dtype)
    phi: Any
    rk: Any     # (Q, d, 10) int64: x0, x1, a0, a1, the codes of a0 and a1
    sel: Any    # (G, Q, 19) int64: per column the codes of both borders, the zero flag
    boxes: Any  # (G, S, 12) RT ray plan (layout's columns) or (G, S, 5) direct plan
    ends: Any   # (G, S) int64: the running sum of the slots' work (rays or rows)

    @property
    def count_column(self) -> int:
        return RAYS if int(self.boxes.shape[2]) == PLAN_COLUMNS else D_COUNT


@register_jitable
def _no_bounds(rk, q, j):
    """No bound on either side of column ``j``'s approximation (codes -1)."""
    for c in range(3):
        rk[q, j, VLO + c] = -1
        rk[q, j, VHI + c] = -1


@register_jitable
def _parts(x0, x1, a0, a1):
    """:mod:`.regions`' intervals of one column: ``U = P xor A`` as ``(u0, u1)`` and
    ``(v0, v1)``, ``C = P and A`` as ``(c0, c1)``, the hull ``(h0, h1)``."""
    a_empty = a0 >= a1
    apart = a_empty or a1 <= x0 or x1 <= a0
    if apart:
        u0, u1 = x0, x1
        if a_empty:
            v0, v1 = np.int64(0), np.int64(0)
        else:
            v0, v1 = a0, a1
        c0, c1 = np.int64(0), np.int64(0)
    else:
        u0, u1 = min(x0, a0), max(x0, a0)
        v0, v1 = min(x1, a1), max(x1, a1)
        c0, c1 = max(x0, a0), min(x1, a1)
    if a_empty:
        h0, h1 = x0, x1
    else:
        h0, h1 = min(x0, a0), max(x1, a1)
    return u0, u1, v0, v1, c0, c1, h0, h1


@register_jitable
def _column(rk, q, j):
    """Column ``j``'s intervals for query ``q``, read once per group: :func:`_parts`, then the
    predicate's ``x0, x1`` and the approximation's ``a0, a1`` (zeros for ``j < 0``, an unused
    axis of the group)."""
    z = np.int64(0)
    if j < 0:
        return (z, z, z, z, z, z, z, z, z, z, z, z)
    x0, x1, a0, a1 = rk[q, j, X0], rk[q, j, X1], rk[q, j, A0], rk[q, j, A1]
    u0, u1, v0, v1, c0, c1, h0, h1 = _parts(x0, x1, a0, a1)
    return (np.int64(u0), np.int64(u1), np.int64(v0), np.int64(v1), np.int64(c0),
            np.int64(c1), np.int64(h0), np.int64(h1), np.int64(x0), np.int64(x1),
            np.int64(a0), np.int64(a1))


@register_jitable
def _side(c, k, jj, s):
    """Box ``(jj, s)``'s interval on the group's ``k``-th column, whose :func:`_column` is
    ``c``: ``C`` before column ``jj``, ``U``'s interval ``s`` at it, the hull after it."""
    if k < jj:
        return c[4], c[5]
    if k > jj:
        return c[6], c[7]
    if s == 0:
        return c[0], c[1]
    return c[2], c[3]


@register_jitable
def _slab_mode(r0, r1, x0, x1, a0, a1):
    """``D_MODE`` of a slab of ranks ``[r0, r1)`` on a column whose predicate is ``[x0, x1)``
    and approximation ``[a0, a1)`` (ranks): :data:`CLEAR` when the slab misses the predicate,
    else :data:`SKIP_COL` when it lies inside it, plus :data:`NO_UNSET` when it misses the
    approximation."""
    if r1 <= x0 or r0 >= x1:
        return np.int64(CLEAR)
    mode = np.int64(0)
    if x0 <= r0 and r1 <= x1:
        mode |= SKIP_COL
    if a0 >= a1 or r1 <= a0 or r0 >= a1:
        mode |= NO_UNSET
    return mode


@register_jitable
def _coord(r, j, encoding, lc, order, shifts):
    """The scene coordinate of rank ``r`` of column ``j``: the rank, or the value of that rank
    (shifted right for wide columns)."""
    if encoding:
        return np.int64(r)
    v = lc[order[r, j], j]
    return np.int64(np.uint64(v) >> np.uint64(shifts[j]))


@register_jitable
def plan_item(q, lo, hi, lc, order, shifts, group_cols, geo, n, encoding, ranked, rt, axis,
              plo, phi, rk, sel, boxes):
    """The plan of query ``q`` (see the module docstring), from its rank intervals and the
    sieve's choice on each side (:data:`RANKS` or :data:`SORTED_RANKS` wrote ``rk[q, :]``);
    ``encoding``: the scene's coordinates are ranks; ``ranked``: ``lc`` holds ranks (the
    paper's layout with encoding), so the exact bounds are ranks too."""
    d = lo.shape[1]
    alive = True
    for j in range(d):
        x0 = rk[q, j, X0]
        x1 = rk[q, j, X1]
        if x0 >= x1:
            alive = False
        if ranked:
            if x0 >= x1:
                plo[q, j] = 1
                phi[q, j] = 0
            else:
                plo[q, j] = x0
                phi[q, j] = min(x1 - 1, max(n - 1, 0))
        else:
            plo[q, j] = lo[q, j]
            phi[q, j] = hi[q, j]
    cnt = RAYS if rt else D_COUNT
    for gi in range(group_cols.shape[0]):
        g = np.int64(0)
        free = True  # no predicate of this query on this group
        for k in range(3):
            j = group_cols[gi, k]
            if j >= 0:
                g += 1
                if rk[q, j, X0] != 0 or rk[q, j, X1] != n:
                    free = False
        if free:  # every row passes: the approximation is exact (and all rows)
            for k in range(g):
                j = group_cols[gi, k]
                rk[q, j, A0] = rk[q, j, X0]
                rk[q, j, A1] = rk[q, j, X1]
                _no_bounds(rk, q, j)
        zero = not alive
        for k in range(3):
            j = group_cols[gi, k]
            for c in range(3):
                sel[gi, q, 6 * k + c] = rk[q, j, VLO + c] if j >= 0 else np.int64(-1)
                sel[gi, q, 6 * k + 3 + c] = rk[q, j, VHI + c] if j >= 0 else np.int64(-1)
            if j >= 0 and rk[q, j, A0] >= rk[q, j, A1]:
                zero = True
        sel[gi, q, ZERO] = 1 if zero else 0
        # the group's columns, read once: the boxes below take each of them six times, and
        # their stores could overwrite rk as far as the compiler knows (one buffer), so
        # reading rk there would go to memory every time
        c0 = _column(rk, q, group_cols[gi, 0])
        c1 = _column(rk, q, group_cols[gi, 1])
        c2 = _column(rk, q, group_cols[gi, 2])
        for slot in range(SLOTS):
            b = q * SLOTS + slot
            jj = slot >> 1
            s = slot & 1
            ok = alive and jj < g
            if ok:
                for k in range(g):
                    r0, r1 = _side(c0 if k == 0 else (c1 if k == 1 else c2), k, jj, s)
                    if r0 >= r1:
                        ok = False
            if not ok:
                boxes[gi, b, cnt] = 0
                continue
            if rt:
                l0 = np.int64(0)
                l1 = np.int64(0)
                l2 = np.int64(0)
                h0 = np.int64(0)
                h1 = np.int64(0)
                h2 = np.int64(0)
                for k in range(g):
                    j = group_cols[gi, k]
                    r0, r1 = _side(c0 if k == 0 else (c1 if k == 1 else c2), k, jj, s)
                    cl = _coord(r0, j, encoding, lc, order, shifts)
                    ch = _coord(r1 - 1, j, encoding, lc, order, shifts)
                    if k == 0:
                        l0, h0 = cl, ch
                    elif k == 1:
                        l1, h1 = cl, ch
                    else:
                        l2, h2 = cl, ch
                box_plan(boxes, gi, b, q, l0, l1, l2, h0, h1, h2, axis, geo[gi, 0],
                         geo[gi, 1])
            else:  # the direct refine: the narrowest column's slab (the first of equals)
                best = np.int64(-1)
                start = np.int64(0)
                kb = 0
                for k in range(g):
                    r0, r1 = _side(c0 if k == 0 else (c1 if k == 1 else c2), k, jj, s)
                    if best < 0 or r1 - r0 < best:
                        best = r1 - r0
                        start = r0
                        kb = k
                c = c0 if kb == 0 else (c1 if kb == 1 else c2)
                boxes[gi, b, D_QUERY] = q
                boxes[gi, b, D_COL] = group_cols[gi, kb]
                boxes[gi, b, D_START] = start
                boxes[gi, b, D_COUNT] = best
                boxes[gi, b, D_MODE] = _slab_mode(start, start + best, c[8], c[9], c[10],
                                                  c[11])


@register_jitable
def query_plan_item(q, lo, hi, sample, offsets, keys, order, stride, borders, border_offsets,
                    vector_base, fine, fine_base, fine_ids, bins, sieving, selection, shifts,
                    group_cols, geo, n, encoding, ranked, rt, axis, plo, phi, rk, sel, boxes):
    """Query ``q``'s whole plan in the compact layout: its ``2 d`` rank items
    (:func:`.ranks.sorted_rank_item`), then :func:`plan_item` (the keys are ``lc``). The CPU
    twin of :func:`.plan_cuda.query_plan_group`, a block a query: the launch of a small
    call's plan (:data:`.launches.QUERY_PLAN`)."""
    sides = 2 * lo.shape[1]
    for k in range(sides):
        sorted_rank_item(q * sides + k, lo, hi, sample, offsets, keys, order, stride, borders,
                         border_offsets, vector_base, fine, fine_base, fine_ids, bins, sieving,
                         selection, rk)
    plan_item(q, lo, hi, keys, order, shifts, group_cols, geo, n, encoding, ranked, rt, axis,
              plo, phi, rk, sel, boxes)


#: The rest of a batch's plan, after :data:`.launches.RANKS`: ``Q`` items (:func:`plan_item`).
PLAN = Kernel(plan_item, name="rtscan_plan")
