"""The first launch of a batch's plan (:mod:`.plan`): per predicate side, its rank bound and
the sieve's choice of border on that side, written to ``rk``. The bodies here are the CPU's
(a thread an item) and the reference of the GPU's warp-wide search (:mod:`.plan_cuda`); the
launches are :data:`.launches.RANKS` and :data:`.launches.SORTED_RANKS`.

* encode (:func:`.encoding.rank_bounds`, :func:`.encoding.sorted_bounds`): the rank interval
  ``[x0, x1)`` of each predicate by binary search, in the column's mapping table
  (:func:`rank_item`, the paper's layout) or in its sorted sample and then through the order
  and the keys (:func:`sorted_rank_item`, the compact layout);
* choose (:func:`.sieve.choose`): the border around each bound by binary search and the one
  the selection rule takes, with the code of its vectors (:func:`sieve_side`). Each side's
  choice reads only its own rank, so the item that found the rank makes it.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.search import bisect

__all__ = ["A0", "A1", "RANK_GROUP", "RK_COLUMNS", "VHI", "VLO", "X0", "X1", "predicate_side",
           "rank_item", "sieve_side", "sorted_bound", "sorted_rank_item"]

#: Columns of ``rk``: each predicate's rank interval, its approximation and the codes of the
#: approximation's borders (three columns each, :mod:`.sieve`; -1: no bound).
X0, X1, A0, A1, VLO, VHI = 0, 1, 2, 3, 4, 7
RK_COLUMNS = 10
#: Threads a predicate side of the compact layout is searched by on the GPU: a warp
#: (:mod:`.plan_cuda`).
RANK_GROUP = 32


@register_jitable
def _lower(a, lo, hi, x):
    """The first index in ``[lo, hi)`` with ``a[i] >= x`` (``hi`` if none)."""
    return bisect(a, lo, hi, x, False)


@register_jitable
def _upper(a, lo, hi, x):
    """The first index in ``[lo, hi)`` with ``a[i] > x`` (``hi`` if none)."""
    return bisect(a, lo, hi, x, True)


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
def _choose_side(borders, b0, b1, vbase, x, side, selection):
    """One side of the sieve's selection rule (:func:`.sieve.choose`) over a one-level sieve
    (the column's borders are ``borders[b0:b1]``, b_0 = 0 .. N; border ``i``'s vector is
    ``vbase + i``), from that side's rank alone: the border chosen for the lower (``side`` 0,
    ``x = x0``) or upper (``side`` 1, ``x = x1``) bound and its vector (-1: none, at 0 or
    N)."""
    last = b1 - b0 - 1
    i = _upper(borders, b0, b1, x) - 1 - b0  # b[i] <= x < b[i+1], or x == N (i = last)
    nxt = min(i + 1, last)
    bi = borders[b0 + i]
    bn = borders[b0 + nxt]
    if side == 1:
        pos = x - bi < bn - x if selection == 0 else selection == 1
        k = i if (bi == x or pos) else nxt
    else:
        pos = bn - x < x - bi if selection == 0 else selection == 1
        k = i if (bi == x or not pos) else nxt
    v = np.int64(-1) if (k == 0 or k == last) else k + vbase
    return np.int64(borders[b0 + k]), v


@register_jitable
def _choose_fine_side(coarse, c0, c1, fine, row0, f, vbase, ids, j, x, side, selection):
    """:func:`_choose_side` over a two-level sieve: the same rule over all the column's borders
    (:func:`_fine_around`); returns the chosen border and its code ``(p, q, g)``."""
    m = c1 - c0 - 2
    lv, lc, lt, uv, uc, ut = _fine_around(coarse, c0, c1, fine, row0, f, x)
    if side == 1:
        pos = x - lv < uv - x if selection == 0 else selection == 1
        low = lv == x or pos
    else:
        pos = uv - x < x - lv if selection == 0 else selection == 1
        low = lv == x or not pos
    if low:
        a, c, t = lv, lc, lt
    else:
        a, c, t = uv, uc, ut
    p, h, g = _fine_code(c, t, m, vbase, ids, j)
    return np.int64(a), p, h, g


@register_jitable
def sieve_side(rk, q, j, side, x, borders, border_offsets, vector_base, fine, fine_base,
               fine_ids, bins, sieving, selection):
    """The sieve's choice on one side of query ``q``'s predicate on column ``j``, made by the
    item that found that side's rank ``x``: the approximation's bound (``rk[q, j, A0]`` for
    side 0, ``A1`` for side 1) and the code of its border (``VLO`` or ``VHI``; -1: none).
    Each side's choice reads only its own rank, so the sides of all columns are chosen side
    by side (they were one thread's, one after another: a chain of dependent loads through
    the sieve's tables). Without a sieve: 0 and no code."""
    col = A1 if side == 1 else A0
    code = VHI if side == 1 else VLO
    a = np.int64(0)
    p = np.int64(-1)
    h = np.int64(-1)
    g = np.int64(-1)
    if sieving and bins > 0:
        a, p, h, g = _choose_fine_side(borders, border_offsets[j], border_offsets[j + 1], fine,
                                       fine_base[j], bins, vector_base[j], fine_ids, j, x,
                                       side, selection)
    elif sieving:
        a, p = _choose_side(borders, border_offsets[j], border_offsets[j + 1], vector_base[j],
                            x, side, selection)
    rk[q, j, col] = a
    rk[q, j, code] = p
    rk[q, j, code + 1] = h
    rk[q, j, code + 2] = g


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
def predicate_side(i, lo, hi):
    """Item ``i`` of a rank launch over ``Q x d`` predicates: its query, column and side (0:
    the lower bound, 1: the upper) and that side's bound."""
    d = lo.shape[1]
    q = i // (2 * d)
    r = i - q * 2 * d
    j = r >> 1
    side = r & 1
    return q, j, side, (hi[q, j] if side == 1 else lo[q, j])


@register_jitable
def rank_item(i, lo, hi, values, starts, offsets, borders, border_offsets, vector_base, fine,
              fine_base, fine_ids, bins, sieving, selection, rk):
    """One side of one predicate, item ``i`` = (query, column, side): ``x0`` (side 0) or
    ``x1`` (side 1) of the predicate's rank interval, by one binary search in the column's
    mapping table, and the sieve's choice on that side (:func:`sieve_side`). A thread each:
    the searches of a query run side by side, not one after another (each is a chain of
    dependent loads through a table of up to N values)."""
    q, j, side, bound = predicate_side(i, lo, hi)
    t0 = offsets[j]
    t1 = offsets[j + 1]
    # column j's first ranks start at offsets[j] + j
    if side == 0:
        x = np.int64(starts[_lower(values, t0, t1, bound) + j])
    else:
        x = np.int64(starts[_upper(values, t0, t1, bound) + j])
    rk[q, j, X0 + side] = x
    sieve_side(rk, q, j, side, x, borders, border_offsets, vector_base, fine, fine_base,
               fine_ids, bins, sieving, selection)


@register_jitable
def sorted_rank_item(i, lo, hi, sample, offsets, keys, order, stride, borders, border_offsets,
                     vector_base, fine, fine_base, fine_ids, bins, sieving, selection, rk):
    """:func:`rank_item` in the compact layout: one side of one predicate by
    :func:`sorted_bound` (the column's sample, then its keys through its order). The GPU
    runs it a warp an item (:mod:`.plan_cuda`)."""
    q, j, side, bound = predicate_side(i, lo, hi)
    x = sorted_bound(sample, offsets[j], offsets[j + 1], keys, order, j, stride,
                     np.int64(order.shape[0]), bound, side == 1)
    rk[q, j, X0 + side] = x
    sieve_side(rk, q, j, side, x, borders, border_offsets, vector_base, fine, fine_base,
               fine_ids, bins, sieving, selection)
