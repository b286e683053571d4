"""Uniform encoding (paper §4.2, Fig. 8): per column a stable argsort; a row's code is its
0-based rank, duplicates taking consecutive codes; the mapping table rewrites predicates.

For one column of N values:

* ``order``: ``order[r]`` is the row of rank ``r`` (a stable argsort: equal values keep their
  row order, so a value's rows are ascending within its run);
* ``ranks``: ``ranks[order[r]] = r`` (the code, only kept when encoding is on);
* the mapping table: ``uniq`` (the distinct values, ascending) and ``starts`` (the first rank of
  each, then N), so value ``uniq[k]`` owns the ranks ``starts[k] .. starts[k+1] - 1``.

A predicate ``lo <= x <= hi`` becomes the rank interval ``[x0, x1)``: ``x0`` is the first rank
of the first value ``>= lo``, ``x1 - 1`` the last rank of the last value ``<= hi`` (the paper's
``x < v -> x < lo_v``, ``x > v -> x > hi_v``, ``x = v -> lo_v <= x <= hi_v``); an absent value
takes the next value's first rank, past the end N. Empty when ``x0 >= x1``. The rank interval
holds exactly the rows that satisfy the predicate, whether or not the codes are kept: the
sieve and the direct refine work in ranks for every configuration.

The tables of all columns are stored flat (``values``, ``flat_starts``, ``offsets``), so that
one kernel (:mod:`.plan`) encodes every predicate of a batch; ``uniq[j]`` and ``starts[j]``
are views of them.

Everything here is NumPy/CuPy bulk primitives (argsort, comparisons, searchsorted, gathers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.devices import xp_of

__all__ = ["ColumnTables", "build_tables", "coordinate_shifts", "group_columns", "rank_bounds",
           "rank_dtype"]


def rank_dtype(n: int) -> np.dtype:
    """uint32 ranks (and rows) below 2^32 rows, else uint64."""
    return np.dtype(np.uint32 if n <= (1 << 32) else np.uint64)


@dataclass(frozen=True)
class ColumnTables:
    """The encoding of every column of one build."""

    order: Any          # (N, d) Fortran order: row of each rank, per column
    ranks: Any          # (N, d) Fortran order: rank of each row (codes), or None
    uniq: tuple[Any, ...]    # per column: distinct values, ascending (views of ``values``)
    starts: tuple[Any, ...]  # per column: first ranks, then N (views of ``flat_starts``)
    peak_bytes: int     # most bytes held at once while encoding (outputs included)
    values: Any         # every column's distinct values, concatenated
    flat_starts: Any    # every column's first ranks and N, concatenated (column j from
    #                     offsets[j] + j to offsets[j + 1] + j + 1)
    offsets: Any        # (d + 1,) int64: column j's values are values[offsets[j]:offsets[j+1]]

    @property
    def n(self) -> int:
        return int(self.order.shape[0])

    def nbytes(self) -> dict[str, int]:
        parts = {"order": int(self.order.nbytes),
                 "mapping_values": int(self.values.nbytes),
                 "mapping_starts": int(self.flat_starts.nbytes) + int(self.offsets.nbytes)}
        if self.ranks is not None:
            parts["codes"] = int(self.ranks.nbytes)
        return parts


def _argsort(xp: Any, col: Any) -> Any:
    return xp.argsort(col, kind="stable") if xp is np else xp.argsort(col)  # CUB radix: stable


def build_tables(keys: Any, keep_ranks: bool) -> ColumnTables:
    """The orders, mapping tables and (with ``keep_ranks``) codes of the (N, d) ``keys``."""
    xp = xp_of(keys)
    n, d = int(keys.shape[0]), int(keys.shape[1])
    rdt = rank_dtype(n)
    order = xp.empty((n, d), dtype=rdt, order="F")
    ranks = xp.empty((n, d), dtype=rdt, order="F") if keep_ranks else None
    uniq, starts = [], []
    isz = keys.dtype.itemsize
    held = int(order.nbytes) + (0 if ranks is None else int(ranks.nbytes))
    peak = held + n * (2 * (isz + 8))  # one column's sort: permutation and double buffers
    for j in range(d):
        col = keys[:, j]
        perm = _argsort(xp, col)
        srt = col[perm]
        order[:, j] = perm
        if ranks is not None:
            ranks[perm, j] = xp.arange(n, dtype=rdt)
        del perm
        new = xp.ones(n, dtype=bool)
        if n > 1:
            new[1:] = srt[1:] != srt[:-1]
        first = xp.flatnonzero(new)
        uniq.append(xp.ascontiguousarray(srt[first]))
        starts.append(xp.concatenate([first, xp.asarray([n], dtype=first.dtype)]).astype(rdt))
        held += int(uniq[-1].nbytes) + int(starts[-1].nbytes)
        peak = max(peak, held + n * (8 + isz + 1) + int(first.nbytes))
    # flat tables, the per-column ones as views (the concatenation held the tables twice)
    counts = [int(u.shape[0]) for u in uniq]
    offs = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    values = xp.concatenate(uniq) if d else xp.zeros(0, dtype=keys.dtype)
    flat_starts = xp.concatenate(starts) if d else xp.zeros(0, dtype=rdt)
    peak = max(peak, held + int(values.nbytes) + int(flat_starts.nbytes))
    views_u = tuple(values[offs[j]:offs[j + 1]] for j in range(d))
    views_s = tuple(flat_starts[offs[j] + j:offs[j + 1] + j + 1] for j in range(d))
    return ColumnTables(order, ranks, views_u, views_s, peak, values, flat_starts,
                        xp.asarray(offs))


def coordinate_shifts(tables: ColumnTables, encoding: bool) -> tuple[int, ...]:
    """Per column: the right shift that brings its scene coordinates below 2^32 (0 with
    encoding, whose coordinates are ranks, and for values that fit)."""
    shifts = []
    for u in tables.uniq:
        top = 0 if tables.n == 0 or encoding else int(u[-1])
        shifts.append(max(0, top.bit_length() - 32))
    return tuple(shifts)


def group_columns(d: int, size: int) -> list[tuple[int, ...]]:
    """The columns of each group: ``size`` at a time, the last group the rest."""
    return [tuple(range(s, min(s + size, d))) for s in range(0, d, size)]


def rank_bounds(uniq: Any, starts: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """The rank interval ``[x0, x1)`` (int64) of ``lo <= x <= hi`` for each pair of bounds."""
    xp = xp_of(uniq)
    lo = lo.astype(uniq.dtype, copy=False)
    hi = hi.astype(uniq.dtype, copy=False)
    x0 = starts[xp.searchsorted(uniq, lo, side="left")].astype(np.int64)
    x1 = starts[xp.searchsorted(uniq, hi, side="right")].astype(np.int64)
    return x0, x1
