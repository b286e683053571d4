"""A batch's query plan, made on the device in two kernel launches: the encoding of every
predicate (:data:`RANKS`, one thread per predicate side), then the sieve's vector choice, the
refine boxes of every column group and each box's work (its ray grid, or its slab of rows for
the direct refine) (:data:`PLAN`, one thread per query).

The same steps as the host reference functions, which the tests hold it against:

* encode (:func:`.encoding.rank_bounds`, :func:`.encoding.sorted_bounds`): the rank interval
  ``[x0, x1)`` of each predicate by two binary searches, in the column's mapping table
  (:data:`RANKS`, the paper's layout) or in its sorted sample and then through the order and
  the keys (:data:`SORTED_RANKS`, the compact layout), and the exact bounds in the space of
  ``lc`` (``plo``, ``phi``: ranks where ``lc`` holds codes, the bounds themselves else);
* choose (:func:`.sieve.choose`): the borders around ``x0`` and ``x1`` by binary search, the
  approximation ``[a0, a1)`` and the codes of its borders (the vectors to read) by the
  selection rule;
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

from indexzoo.native.search import bisect
from indexzoo.native.targets import Kernel

from .layout import PLAN_COLUMNS, RAYS, box_plan
from .sieve import SEL_COLUMNS, ZERO

__all__ = ["CLEAR", "DIRECT_COLUMNS", "D_COL", "D_COUNT", "D_MODE", "D_QUERY", "D_START",
           "NO_UNSET", "PLAN", "RANKS", "RK_COLUMNS", "SELECTION_CODES", "SEL_COLUMNS",
           "SKIP_COL", "SLOTS", "SORTED_RANKS", "Plan", "PlanArgs", "plan_args", "rank_launch"]

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
#: Columns of ``rk``: each predicate's rank interval, its approximation and the codes of the
#: approximation's borders (three columns each, :mod:`.sieve`; -1: no bound).
X0, X1, A0, A1, VLO, VHI = 0, 1, 2, 3, 4, 7
RK_COLUMNS = 10


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
def _lower(a, lo, hi, x):
    """The first index in ``[lo, hi)`` with ``a[i] >= x`` (``hi`` if none)."""
    return bisect(a, lo, hi, x, False)


@register_jitable
def _upper(a, lo, hi, x):
    """The first index in ``[lo, hi)`` with ``a[i] > x`` (``hi`` if none)."""
    return bisect(a, lo, hi, x, True)


@register_jitable
def _choose(borders, b0, b1, vbase, x0, x1, selection):
    """:func:`.sieve.choose` for one predicate over a one-level sieve: the column's borders are
    ``borders[b0:b1]`` (b_0 = 0 .. N), border ``i``'s vector is ``vbase + i``. Returns
    ``a0, a1`` and the vectors of their borders (-1: none, at 0 or N)."""
    last = b1 - b0 - 1
    # upper side: b[i] <= x1 < b[i+1], or x1 == N (i = last)
    i = _upper(borders, b0, b1, x1) - 1 - b0
    nxt = min(i + 1, last)
    bi = borders[b0 + i]
    bn = borders[b0 + nxt]
    pos = x1 - bi < bn - x1 if selection == 0 else selection == 1
    khi = i if (bi == x1 or pos) else nxt
    # lower side: b[i] <= x0 < b[i+1]
    i = _upper(borders, b0, b1, x0) - 1 - b0
    nxt = min(i + 1, last)
    bi = borders[b0 + i]
    bn = borders[b0 + nxt]
    pos = bn - x0 < x0 - bi if selection == 0 else selection == 1
    if bi == x0:
        klo = i
    elif pos:
        klo = nxt
    else:
        klo = i
    vlo = np.int64(-1) if (klo == 0 or klo == last) else klo + vbase
    vhi = np.int64(-1) if (khi == 0 or khi == last) else khi + vbase
    return borders[b0 + klo], borders[b0 + khi], vlo, vhi


@register_jitable
def _fine_around(coarse, c0, c1, fine, row0, f, x):
    """The borders around rank ``x`` of a two-level sieve's column (first-level borders
    ``coarse[c0:c1]``, fine table from ``fine[row0]``, ``f`` a row): the last one ``<= x`` and
    the first one ``> x``, each as ``(rank, c, t)`` (``t = 0``: the first-level border
    ``c``); the first of equal ones (the smallest ``t``, the first level before). ``x = N``:
    both are N."""
    c = _upper(coarse, c0, c1, x) - 1 - c0  # b_c <= x < b_{c+1}; c = m + 1 iff x = N
    if c == c1 - c0 - 1:
        return x, c, np.int64(0), x, c, np.int64(0)
    row = row0 + c * f
    tu = _upper(fine, row, row + f, x) - row  # >= 1: the row starts at b_c <= x
    low = np.int64(fine[row + tu - 1])
    tl = _lower(fine, row, row + tu, low) - row
    if tu < f:
        return low, c, tl, np.int64(fine[row + tu]), c, tu
    return low, c, tl, coarse[c0 + c + 1], c + 1, np.int64(0)


@register_jitable
def _fine_code(c, t, m, vbase, ids, j):
    """The code ``(p, q, g)`` of border ``(c, t)`` of column ``j`` (:mod:`.sieve`): F_c
    alone at the first level (none at 0 and N), else ``F_c | (F_{c+1} & G_t)``."""
    none = np.int64(-1)
    if t == 0:
        if c == 0 or c == m + 1:
            return none, none, none
        return vbase + c - 1, none, none
    p = vbase + c - 1 if c >= 1 else none
    q = vbase + c if c + 1 <= m else none
    return p, q, ids[j, t]


@register_jitable
def _choose_fine(coarse, c0, c1, fine, row0, f, vbase, ids, j, x0, x1, selection, rk, q):
    """:func:`_choose` over a two-level sieve: the same rule over all the column's borders
    (:func:`_fine_around`), the codes of the chosen ones written to ``rk[q, j]``. Returns
    ``a0, a1``."""
    m = c1 - c0 - 2
    lv, lc, lt, uv, uc, ut = _fine_around(coarse, c0, c1, fine, row0, f, x1)
    pos = x1 - lv < uv - x1 if selection == 0 else selection == 1
    if lv == x1 or pos:
        a1, hc, ht = lv, lc, lt
    else:
        a1, hc, ht = uv, uc, ut
    lv, lc, lt, uv, uc, ut = _fine_around(coarse, c0, c1, fine, row0, f, x0)
    pos = uv - x0 < x0 - lv if selection == 0 else selection == 1
    if lv == x0 or not pos:
        a0, oc, ot = lv, lc, lt
    else:
        a0, oc, ot = uv, uc, ut
    p, h, g = _fine_code(oc, ot, m, vbase, ids, j)
    rk[q, j, VLO] = p
    rk[q, j, VLO + 1] = h
    rk[q, j, VLO + 2] = g
    p, h, g = _fine_code(hc, ht, m, vbase, ids, j)
    rk[q, j, VHI] = p
    rk[q, j, VHI + 1] = h
    rk[q, j, VHI + 2] = g
    return a0, a1


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
def _side(rk, q, j, k, jj, s):
    """Box ``(jj, s)``'s interval on the group's ``k``-th column ``j``: ``C`` before column
    ``jj``, ``U``'s interval ``s`` at it, the hull after it."""
    u0, u1, v0, v1, c0, c1, h0, h1 = _parts(rk[q, j, X0], rk[q, j, X1], rk[q, j, A0],
                                            rk[q, j, A1])
    if k < jj:
        return c0, c1
    if k > jj:
        return h0, h1
    if s == 0:
        return u0, u1
    return v0, v1


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
def sorted_bound(sample, t0, t1, keys, order, j, stride, n, x, right):
    """The first rank of column ``j`` whose value is ``>= x`` (``> x`` with ``right``), ``n``
    if none, in the compact layout: a binary search in the column's sample ``sample[t0:t1]``
    (its values at ranks 0, S, 2S, ...) finds the first sample past ``x`` and so the ``S - 1``
    ranks the answer may lie in after the one before it; a binary search there reads
    ``keys[order[r, j], j]``, at most ``log2 S`` steps of two loads."""
    i = bisect(sample, t0, t1, x, right) - t0
    if i == 0:
        return np.int64(0)
    lo = (i - 1) * stride + 1
    hi = min(i * stride, n)
    while lo < hi:
        mid = (lo + hi) >> 1
        v = keys[order[mid, j], j]
        if (v > x) if right else (v >= x):
            hi = mid
        else:
            lo = mid + 1
    return np.int64(lo)


@register_jitable
def _coord(r, j, encoding, lc, order, shifts):
    """The scene coordinate of rank ``r`` of column ``j``: the rank, or the value of that rank
    (shifted right for wide columns)."""
    if encoding:
        return np.int64(r)
    v = lc[order[r, j], j]
    return np.int64(np.uint64(v) >> np.uint64(shifts[j]))


@register_jitable
def rank_item(i, lo, hi, values, starts, offsets, rk):
    """One side of one predicate, item ``i`` = (query, column, side): ``x0`` (side 0) or
    ``x1`` (side 1) of the predicate's rank interval, by one binary search in the column's
    mapping table. A thread each: the searches of a query run side by side, not one after
    another (each is a chain of dependent loads through a table of up to N values)."""
    d = lo.shape[1]
    q = i // (2 * d)
    r = i - q * 2 * d
    j = r >> 1
    t0 = offsets[j]
    t1 = offsets[j + 1]
    # column j's first ranks start at offsets[j] + j
    if r & 1 == 0:
        rk[q, j, X0] = np.int64(starts[_lower(values, t0, t1, lo[q, j]) + j])
    else:
        rk[q, j, X1] = np.int64(starts[_upper(values, t0, t1, hi[q, j]) + j])


@register_jitable
def sorted_rank_item(i, lo, hi, sample, offsets, keys, order, stride, rk):
    """:func:`rank_item` in the compact layout: one side of one predicate by
    :func:`sorted_bound` (the column's sample, then its keys through its order)."""
    d = lo.shape[1]
    n = np.int64(order.shape[0])
    q = i // (2 * d)
    r = i - q * 2 * d
    j = r >> 1
    t0 = offsets[j]
    t1 = offsets[j + 1]
    if r & 1 == 0:
        rk[q, j, X0] = sorted_bound(sample, t0, t1, keys, order, j, stride, n, lo[q, j], False)
    else:
        rk[q, j, X1] = sorted_bound(sample, t0, t1, keys, order, j, stride, n, hi[q, j], True)


@register_jitable
def plan_item(q, lo, hi, borders, border_offsets, vector_base, fine, fine_base, fine_ids,
              bins, lc, order, shifts, group_cols, geo, n, encoding, ranked, sieving,
              selection, rt, axis, plo, phi, rk, sel, boxes):
    """The plan of query ``q`` (see the module docstring), from its rank intervals
    (:data:`RANKS` or :data:`SORTED_RANKS` wrote ``rk[q, :, X0]`` and ``rk[q, :, X1]``).
    The sieve: one level (``bins = 0``: ``borders``, ``border_offsets``, ``vector_base`` of a
    :class:`.sieve.Sieve`) or two (``bins`` fine bins: ``borders`` and ``border_offsets`` are
    a :class:`.sieve.FineSieve`'s first level, ``fine``, ``fine_base``, ``fine_ids`` its
    second); ``encoding``: the scene's coordinates are ranks; ``ranked``: ``lc`` holds ranks
    (the paper's layout with encoding), so the exact bounds are ranks too."""
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
        if sieving and bins > 0:
            a0, a1 = _choose_fine(borders, border_offsets[j], border_offsets[j + 1], fine,
                                  fine_base[j], bins, vector_base[j], fine_ids, j, x0, x1,
                                  selection, rk, q)
        elif sieving:
            a0, a1, vlo, vhi = _choose(borders, border_offsets[j], border_offsets[j + 1],
                                       vector_base[j], x0, x1, selection)
            _no_bounds(rk, q, j)
            rk[q, j, VLO] = vlo
            rk[q, j, VHI] = vhi
        else:
            a0, a1 = np.int64(0), np.int64(0)
            _no_bounds(rk, q, j)
        rk[q, j, A0] = a0
        rk[q, j, A1] = a1
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
        for slot in range(SLOTS):
            b = q * SLOTS + slot
            jj = slot >> 1
            s = slot & 1
            ok = alive and jj < g
            if ok:
                for k in range(g):
                    j = group_cols[gi, k]
                    r0, r1 = _side(rk, q, j, k, jj, s)
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
                    r0, r1 = _side(rk, q, j, k, jj, s)
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
                col = np.int64(0)
                for k in range(g):
                    j = group_cols[gi, k]
                    r0, r1 = _side(rk, q, j, k, jj, s)
                    if best < 0 or r1 - r0 < best:
                        best = r1 - r0
                        start = r0
                        col = j
                boxes[gi, b, D_QUERY] = q
                boxes[gi, b, D_COL] = col
                boxes[gi, b, D_START] = start
                boxes[gi, b, D_COUNT] = best
                boxes[gi, b, D_MODE] = _slab_mode(start, start + best, rk[q, col, X0],
                                                  rk[q, col, X1], rk[q, col, A0],
                                                  rk[q, col, A1])


#: The rank intervals of a batch's predicates: ``2 d Q`` items (:func:`rank_item`).
RANKS = Kernel(rank_item, name="rtscan_ranks")
#: The same in the compact layout (:func:`sorted_rank_item`).
SORTED_RANKS = Kernel(sorted_rank_item, name="rtscan_sorted_ranks")


def rank_launch(tables: Any, lc: Any) -> tuple[Kernel, tuple[Any, ...]]:
    """The kernel that encodes a batch's bounds over ``tables`` and its arguments between
    ``lo, hi`` and ``rk``: :data:`RANKS` over the mapping tables (the paper's layout), or
    :data:`SORTED_RANKS` over the sorted samples, the keys ``lc`` and the orders."""
    if hasattr(tables, "sample"):
        return SORTED_RANKS, (tables.sample, tables.sample_offsets, lc, tables.order,
                              np.int64(tables.stride))
    return RANKS, (tables.values, tables.flat_starts, tables.offsets)
#: The rest of a batch's plan, after :data:`RANKS`: ``Q`` items (:func:`plan_item`).
PLAN = Kernel(plan_item, name="rtscan_plan")
