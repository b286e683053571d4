"""Data sieving (paper §4.3): per column K equi-depth bins whose borders are moved to the start
of their value's run, K-1 stored bit vectors ``F_i = [rank < border_i]``, the choice of vectors
per predicate (positive or negative selection), and the approximate result of a column group:
the AND of the chosen vectors, one pass on CUDA cores.

Borders, in ranks: ``i * N // K`` for ``i = 1 .. K-1``, each moved down to the first rank of the
value it falls in (the artifact's ``init_bindex_in_GPU``: all codes of one value stay on one
side of every border), duplicates and 0 dropped (a value spanning several bins leaves fewer
vectors). With the implicit borders 0 (``F = 0``) and N (``F`` = all rows), a column has the
borders ``b_0 = 0 < b_1 < ... < b_m < b_{m+1} = N``. Vectors are packed like the contract's
bitmaps (row ``r`` = bit ``r % 32`` of word ``r // 32``, padding zero), stacked for all columns.

Selection, for the rank interval ``P = [x0, x1)`` of a predicate, side by side:

* upper side ``x < x1``, ``b_i < x1 < b_{i+1}``: positive selection takes ``F_i`` (a subset of
  the rows below x1; the refine sets the bits of ``[b_i, x1)``), negative ``F_{i+1}`` (a
  superset; the refine clears the bits of ``[x1, b_{i+1})``); auto: positive iff
  ``x1 - b_i < b_{i+1} - x1`` (a tie is negative), the paper's rule [§4.3.3];
* lower side ``x >= x0``: the complement of ``[x < x0]``; positive = the subset ``~F_{i+1}``,
  negative = the superset ``~F_i``, auto by the same distances (tie negative) [AMBIG-ours: the
  paper states the rule for ``x < C`` only];
* a bound on a border is exact (no refine on that side).

The approximation of the column is ``A = [a0, a1)`` = ``F_{a1} & ~F_{a0}``; with sieving off
it is empty (approximate result 0: the whole query box is refined).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import to_numpy, xp_of
from indexzoo.native.targets import Kernel

from .bits import pack_rows

__all__ = ["SIEVE", "Choice", "Sieve", "approximate", "approximate_sel", "build_sieve",
           "choose", "run_borders", "sieve_borders"]

Selection = Literal["auto", "positive", "negative"]


@dataclass(frozen=True)
class Sieve:
    """The stored vectors of every column and their borders."""

    vectors: Any              # (M, W) uint32: every column's vectors, stacked (device)
    bounds: tuple[np.ndarray, ...]  # per column, on the host: int64 borders b_0 = 0 .. N
    base: tuple[int, ...]     # per column: index of its F_1 in ``vectors``
    borders: Any              # every column's ``bounds`` concatenated (int64, device)
    border_offsets: Any       # (d + 1,) int64: column j's bounds start at border_offsets[j]
    vector_base: Any          # (d,) int64: ``base[j] - 1`` (the vector of border index i is
    #                           vector_base[j] + i), device

    def nbytes(self) -> dict[str, int]:
        """Device bytes: the vectors and the flat borders (on the CPU the host ``bounds`` are
        views of the flat ones)."""
        return {"sieve_vectors": int(self.vectors.nbytes),
                "sieve_borders": int(self.borders.nbytes) + int(self.border_offsets.nbytes)
                + int(self.vector_base.nbytes)}

    @property
    def n_vectors(self) -> tuple[int, ...]:
        return tuple(int(b.shape[0]) - 2 for b in self.bounds)


def run_borders(starts: Any, n: int, k: int) -> Any:
    """The stored borders of one column (int64, ascending, in (0, n)): ``i * n // k`` moved to
    the first rank of its value's run (``starts``: the mapping table's first ranks), distinct."""
    xp = xp_of(starts)
    if k < 2 or n == 0:
        return xp.zeros(0, dtype=np.int64)
    pos = (xp.arange(1, k, dtype=np.int64) * n) // k
    s = starts.astype(np.int64)
    first = s[xp.searchsorted(s, pos, side="right") - 1]
    b = xp.unique(first)
    return b[(b > 0) & (b < n)]


def sieve_borders(starts: tuple[Any, ...], n: int,
                  k: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, tuple[int, ...]]:
    """The stored borders of every column (host int64), and on the host the flat bounds
    (each column's ``0, borders, n``), their offsets and each column's first vector index."""
    borders = [to_numpy(run_borders(s, n, k)) if k else np.zeros(0, dtype=np.int64)
               for s in starts]
    flat = np.concatenate([np.concatenate([[0], b, [n]]) for b in borders]).astype(np.int64)
    offs = np.cumsum([0] + [int(b.shape[0]) + 2 for b in borders]).astype(np.int64)
    base = tuple(int(x) for x in np.cumsum([0] + [int(b.shape[0]) for b in borders])[:-1])
    return borders, flat, offs, base


def build_sieve(ranks: list[Any], starts: tuple[Any, ...], n: int, k: int) -> tuple[Sieve, int]:
    """The vectors of every column (``ranks[j]``: the rank of each row) and the build's peak
    extra bytes (one boolean mask and its packing at a time). ``k = 0``: no vectors."""
    xp = xp_of(starts[0])
    words = (n + 31) // 32
    borders, flat, offs, base = sieve_borders(starts, n, k)
    dflat = xp.asarray(flat)  # on the CPU the same array: ``bounds`` are views of it
    bounds = tuple(flat[offs[j]:offs[j + 1]] for j in range(len(borders)))
    total = sum(int(b.shape[0]) for b in borders)
    vectors = xp.empty((total, words), dtype=np.uint32)
    for j, rk in enumerate(ranks):
        for i, border in enumerate(borders[j].tolist()):
            vectors[base[j] + i] = pack_rows((rk < border)[None, :])[0]
    peak = total * words * 4 + n + 2 * words * 4
    vbase = xp.asarray(np.asarray(base, dtype=np.int64) - 1)
    return Sieve(vectors, bounds, base, dflat, xp.asarray(offs), vbase), peak


@dataclass(frozen=True)
class Choice:
    """The approximation of one column for a batch of queries (int64 arrays over queries):
    ``A = [a0, a1)`` in ranks, and the vectors to read (global index in ``vectors``; -1: none,
    i.e. ``a0 = 0`` or ``a1 = N``)."""

    a0: Any
    a1: Any
    vlo: Any  # exclude the rows of [rank < a0]
    vhi: Any  # keep only the rows of [rank < a1]


def choose(sieve: Sieve, j: int, x0: np.ndarray, x1: np.ndarray,
           selection: Selection) -> Choice:
    """The vectors approximating ``[x0, x1)`` (rank bounds of column ``j``, non-empty
    predicates; host arrays) by the selection rule (see the module docstring). The host
    reference of the plan kernel's choice (:mod:`.plan`)."""
    xp = np
    b = sieve.bounds[j]
    last = int(b.shape[0]) - 1  # index of b_{m+1} = N
    # upper side: b[i] <= x1 < b[i+1], or x1 == N (i = last)
    i = xp.searchsorted(b, x1, side="right") - 1
    nxt = xp.minimum(i + 1, last)
    exact = b[i] == x1
    pos = x1 - b[i] < b[nxt] - x1 if selection == "auto" else selection == "positive"
    khi = xp.where(exact | pos, i, nxt)
    # lower side: b[i] <= x0 < b[i+1]
    i = xp.searchsorted(b, x0, side="right") - 1
    nxt = xp.minimum(i + 1, last)
    exact = b[i] == x0
    pos = b[nxt] - x0 < x0 - b[i] if selection == "auto" else selection == "positive"
    klo = xp.where(exact, i, xp.where(pos, nxt, i))
    a0, a1 = b[klo], b[khi]
    vbase = sieve.base[j] - 1
    vlo = xp.where((klo == 0) | (klo == last), -1, klo + vbase)
    vhi = xp.where((khi == 0) | (khi == last), -1, khi + vbase)
    return Choice(a0, a1, vlo, vhi)


@register_jitable
def sieve_item(i, vectors, sel, words, tail, out):
    """Word ``i % words`` of query ``q = i // words``: the AND of its columns' chosen vectors
    (``sel[q]``: the vectors excluded (3, -1: none), kept (3, -1: none), the zero flag)."""
    q = i // words
    w = i - q * words
    if sel[q, 6]:
        out[q, w] = np.uint32(0)
        return
    full = np.uint32(0xFFFFFFFF)
    acc = full
    for k in range(3):
        h = sel[q, 3 + k]
        if h >= 0:
            acc &= vectors[h, w]
        lo = sel[q, k]
        if lo >= 0:
            acc &= full ^ vectors[lo, w]
    if w == words - 1:
        acc &= tail
    out[q, w] = np.uint32(acc)


SIEVE = Kernel(sieve_item, name="rtscan_sieve")


def approximate(device: str, sieve: Sieve, vlo: Any, vhi: Any, zero: Any, n: int, out: Any,
                threads_per_block: int) -> None:
    """``out`` (Q, W): the AND over columns ``k`` of ``F[vhi[:, k]] & ~F[vlo[:, k]]`` (a -1
    reads as all rows; at most three columns), zero for the queries flagged in ``zero``; the
    padding bits clear. (The range path's plan holds these as :func:`approximate_sel`'s
    ``sel``.)"""
    xp = xp_of(out)
    q, g = int(vlo.shape[0]), int(vlo.shape[1])
    sel = xp.full((q, 7), -1, dtype=np.int64)
    sel[:, :g] = vlo
    sel[:, 3:3 + g] = vhi
    sel[:, 6] = zero
    approximate_sel(device, sieve.vectors, sel, n, out, threads_per_block)


def approximate_sel(device: str, vectors: Any, sel: Any, n: int, out: Any,
                    threads_per_block: int) -> None:
    """:func:`approximate` of a column group's choice ``sel`` (Q, 7) int64 (``vlo`` (3),
    ``vhi`` (3), zero flag) over the stacked ``vectors`` (any (M, W) array when every index is
    -1: no sieve). One launch."""
    q, words = int(out.shape[0]), int(out.shape[1])
    if q == 0 or words == 0:
        return
    rem = n % 32
    tail = np.uint32(0xFFFFFFFF if rem == 0 else (1 << rem) - 1)
    SIEVE(device, q * words, vectors, sel, np.int64(words), tail, out,
          threads_per_block=threads_per_block)
