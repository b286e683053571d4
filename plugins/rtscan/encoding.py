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

Two layouts hold this (the ``layout`` parameter):

* ``paper`` (:class:`ColumnTables`): the order, the mapping table and, with encoding, the
  codes: four times the table for uint32 columns of distinct values;
* ``compact`` (:class:`SortedTables`, ours): the order and a sample of each sorted column,
  every :data:`SAMPLE_STRIDE`-th value (ranks 0, 64, 128, ...); the index keeps the keys. The
  sorted column is ``keys[order[r]]``, so a bound's side of the rank interval is a binary
  search in the sample, then one among the at most 63 ranks between two samples, reading
  ``keys[order[r]]``. No codes and no mapping table: twice the table. The interval is the
  same rank interval: the first rank of the first value ``>= lo`` is the first rank whose
  sorted value is ``>= lo``, and so on. A rank is computed where it is used (the RT scene's
  coordinates, the sieve's vectors: at build, from the order).

Everything here is NumPy/CuPy bulk primitives (argsort, comparisons, searchsorted, gathers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.devices import xp_of

__all__ = ["SAMPLE_STRIDE", "ColumnTables", "SortedTables", "build_sorted_tables",
           "build_tables", "coordinate_shifts", "group_columns", "rank_bounds", "rank_dtype",
           "ranks_of", "run_starts", "sorted_bounds", "sorted_column"]

#: Ranks between two samples of a sorted column in the compact layout (a power of two): the
#: sample holds 1/64 of the column, and a bound's search ends in 6 steps through the order.
SAMPLE_STRIDE = 64


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


@dataclass(frozen=True)
class SortedTables:
    """The compact layout's encoding of every column of one build: the orders and a sample of
    each sorted column (the index keeps the keys, ``keys[order[r, j], j]`` is column j's
    value of rank r)."""

    order: Any          # (N, d) Fortran order: row of each rank, per column
    sample: Any         # every column's sorted values at ranks 0, S, 2S, ..., concatenated
    sample_offsets: Any  # (d + 1,) int64: column j's samples are sample[offsets[j]:...[j+1]]
    stride: int         # S (SAMPLE_STRIDE)
    peak_bytes: int     # most bytes held at once while encoding (outputs included)

    @property
    def n(self) -> int:
        return int(self.order.shape[0])

    @property
    def ranks(self) -> None:
        """No codes are kept (ranks are computed where they are used)."""
        return None

    def nbytes(self) -> dict[str, int]:
        return {"order": int(self.order.nbytes),
                "sorted_sample": int(self.sample.nbytes) + int(self.sample_offsets.nbytes)}


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


def run_starts(srt: Any) -> Any:
    """The first rank of each run of equal values of a sorted column, then N (rank dtype):
    the mapping table's ``starts``."""
    xp = xp_of(srt)
    n = int(srt.shape[0])
    new = xp.ones(n, dtype=bool)
    if n > 1:
        new[1:] = srt[1:] != srt[:-1]
    first = xp.flatnonzero(new)
    return xp.concatenate([first, xp.asarray([n], dtype=first.dtype)]).astype(rank_dtype(n))


def build_sorted_tables(keys: Any) -> tuple[SortedTables, tuple[Any, ...]]:
    """The compact layout's tables of the (N, d) ``keys`` (Fortran order), and each column's
    run starts (:func:`run_starts`, for the sieve's borders; not kept)."""
    xp = xp_of(keys)
    n, d = int(keys.shape[0]), int(keys.shape[1])
    rdt = rank_dtype(n)
    s = SAMPLE_STRIDE
    m = -(-n // s)
    order = xp.empty((n, d), dtype=rdt, order="F")
    sample = xp.empty(m * d, dtype=keys.dtype)
    starts = []
    isz = keys.dtype.itemsize
    held = int(order.nbytes) + int(sample.nbytes)
    peak = held + n * (2 * (isz + 8))  # one column's sort: permutation and double buffers
    for j in range(d):
        col = keys[:, j]
        perm = _argsort(xp, col)
        order[:, j] = perm
        srt = col[perm]
        del perm
        sample[j * m:(j + 1) * m] = srt[::s]
        starts.append(run_starts(srt))
        held += int(starts[-1].nbytes)
        peak = max(peak, held + n * (8 + isz + 1) + int(starts[-1].nbytes))
    offs = xp.asarray(np.arange(d + 1, dtype=np.int64) * m)
    return SortedTables(order, sample, offs, s, peak), tuple(starts)


def sorted_column(keys: Any, order: Any, j: int) -> Any:
    """Column ``j`` sorted: ``keys[order[:, j], j]`` (a temporary of N values)."""
    return keys[order[:, j].astype(np.int64), j]


def ranks_of(order: Any, j: int) -> Any:
    """Column ``j``'s rank of each row (the inverse of ``order[:, j]``; a temporary)."""
    xp = xp_of(order)
    n = int(order.shape[0])
    ranks = xp.empty(n, dtype=order.dtype)
    ranks[order[:, j]] = xp.arange(n, dtype=order.dtype)
    return ranks


def coordinate_shifts(tops: list[int], encoding: bool) -> tuple[int, ...]:
    """Per column: the right shift that brings its scene coordinates below 2^32 (0 with
    encoding, whose coordinates are ranks, and for values that fit); ``tops``: each column's
    largest value (0 when empty)."""
    return tuple(0 if encoding else max(0, int(t).bit_length() - 32) for t in tops)


def group_columns(d: int, size: int) -> list[tuple[int, ...]]:
    """The columns of each group: ``size`` at a time, the last group the rest."""
    return [tuple(range(s, min(s + size, d))) for s in range(0, d, size)]


def sorted_bounds(srt: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """The rank interval ``[x0, x1)`` (int64) of ``lo <= x <= hi`` for each pair of bounds, by
    binary search in the whole sorted column ``srt``: the reference of the compact layout's
    two-step search (:mod:`.plan`)."""
    xp = xp_of(srt)
    lo = lo.astype(srt.dtype, copy=False)
    hi = hi.astype(srt.dtype, copy=False)
    return (xp.searchsorted(srt, lo, side="left").astype(np.int64),
            xp.searchsorted(srt, hi, side="right").astype(np.int64))


def rank_bounds(uniq: Any, starts: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """The rank interval ``[x0, x1)`` (int64) of ``lo <= x <= hi`` for each pair of bounds
    (the paper's mapping table)."""
    xp = xp_of(uniq)
    lo = lo.astype(uniq.dtype, copy=False)
    hi = hi.astype(uniq.dtype, copy=False)
    x0 = starts[xp.searchsorted(uniq, lo, side="left")].astype(np.int64)
    x1 = starts[xp.searchsorted(uniq, hi, side="right")].astype(np.int64)
    return x0, x1
