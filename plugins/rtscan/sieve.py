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

Two levels (ours, ``sieve_fine = F > 0``; :class:`FineSieve`): each bin ``c`` (ranks
``[b_c, b_{c+1})``) is split again into F equi-depth fine bins, the fine border ``f_{c,t} =
b_c + t (b_{c+1} - b_c) // F`` moved down to the start of its run (never below ``b_c``), and
one vector per ``t = 1 .. F-1`` is shared by all bins: ``G_t = [rank < f_{c(r),t}]``, with
``c(r)`` the row's own bin. Then ``[rank < f_{c,t}] = F_c | (F_{c+1} & G_t)`` exactly (the rows
of bins below ``c`` are in ``F_c``, those of bin ``c`` are in ``F_{c+1}`` and not in ``F_c``,
those above in neither), so every fine border is a border of the sieve, read as three vectors
instead of one. ``K = F = 32`` gives 1024 bins from 62 vectors per column (half the memory of
the paper's 127 vectors, one eighth of the refine's rows); a ``G_t`` that adds no border in any
bin (bins narrower than F rows) is not stored.

Per column a two-level sieve keeps its first-level borders ``0, b_1 .. b_m, N`` and its fine
table (``(m + 1, F)`` ranks, ``[c, 0] = b_c``): a bound finds its bin among the first, then its
fine borders in the bin's row (:func:`.plan.sieve_side`), so no list of every border is
stored. Every border (both levels; on the host, :meth:`FineSieve.column_borders` lists them
ascending, a border met twice taken at its first level and smallest ``t``) has a **code**, the
vectors that make ``[rank < border]``: ``(p, q, g)``, global vector indices, -1 for none:

* ``g < 0`` (a border of the first level): the set is ``F[p]``; ``p = -1`` only at 0 and N
  (the side sets no bound: an empty approximation is the plan's zero flag);
* ``g >= 0`` (a fine border): the set is ``(F[p] or 0) | ((F[q] or all rows) & G[g])``.

Selection, for the rank interval ``P = [x0, x1)`` of a predicate, side by side, over all the
column's borders:

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
from .encoding import rank_dtype

__all__ = ["SEL_COLUMNS", "SIEVE", "SIEVE_WORDS", "Choice", "FineSieve", "Sieve", "approximate_sel",
           "border_codes", "build_fine_sieve", "build_sieve", "choose", "fine_borders",
           "fine_layout", "run_borders", "sieve_borders", "sieve_items"]

#: Columns of a group's sieve choice per query: per column of the group (3) the codes of its
#: lower side and of its upper side (3 each), then the zero flag.
SEL_COLUMNS = 19
ZERO = 18

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


@dataclass(frozen=True)
class FineSieve:
    """The two-level sieve of every column (see the module docstring)."""

    vectors: Any         # (M, W) uint32: per column its F_1 .. F_m, then its kept G_t
    coarse: Any          # every column's first-level borders 0, b_1 .. b_m, N (int64, device)
    coarse_offsets: Any  # (d + 1,) int64: column j's are coarse[coarse_offsets[j]:...[j+1]]
    fine: Any            # every column's fine table (m_j + 1 rows of F ranks), flat (device)
    fine_base: Any       # (d,) int64: where column j's fine table starts in ``fine``
    fine_ids: Any        # (d, F) int64: the vector of G_t (-1: t = 0, or not kept)
    vector_base: Any     # (d,) int64: the vector of column j's F_1
    bins: int            # F: fine bins per first-level bin

    def nbytes(self) -> dict[str, int]:
        """Device bytes: the vectors, the borders of both levels and the vector ids."""
        small = (self.coarse, self.coarse_offsets, self.fine, self.fine_base, self.fine_ids,
                 self.vector_base)
        return {"sieve_vectors": int(self.vectors.nbytes),
                "sieve_borders": sum(int(a.nbytes) for a in small)}

    @property
    def n_vectors(self) -> tuple[int, ...]:
        ids = to_numpy(self.fine_ids)
        offs = to_numpy(self.coarse_offsets)
        return tuple(int(offs[j + 1] - offs[j]) - 2 + int((ids[j] >= 0).sum())
                     for j in range(ids.shape[0]))

    def column_borders(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Column ``j``'s borders, ascending and distinct, and their codes (B, 3) int64, on the
        host: a border of both levels is taken at the first, a fine border met at several
        ``t`` at the smallest (the sets are equal, see the module docstring)."""
        offs = to_numpy(self.coarse_offsets)
        b = to_numpy(self.coarse)[offs[j]:offs[j + 1]].astype(np.int64)
        m = int(b.shape[0]) - 2
        f = self.bins
        at = int(to_numpy(self.fine_base)[j])
        tab = to_numpy(self.fine)[at:at + (m + 1) * f].astype(np.int64).reshape(m + 1, f)
        ids = to_numpy(self.fine_ids)[j]
        vb = int(to_numpy(self.vector_base)[j])
        pos = [b]
        code = [np.full((m + 2, 3), -1, dtype=np.int64)]
        code[0][1:m + 1, 0] = vb + np.arange(m, dtype=np.int64)
        for c in range(m + 1):
            t = np.flatnonzero(tab[c] > b[c])
            if not t.size:
                continue
            cc = np.empty((t.size, 3), dtype=np.int64)
            cc[:, 0] = vb + c - 1 if c >= 1 else -1
            cc[:, 1] = vb + c if c + 1 <= m else -1
            cc[:, 2] = ids[t]
            pos.append(tab[c, t])
            code.append(cc)
        allpos, allcode = np.concatenate(pos), np.concatenate(code)
        srt = np.argsort(allpos, kind="stable")  # the first level first, then t ascending
        allpos, allcode = allpos[srt], allcode[srt]
        keep = np.ones(allpos.shape[0], dtype=bool)
        keep[1:] = allpos[1:] != allpos[:-1]
        return allpos[keep], allcode[keep]

    @property
    def bounds(self) -> tuple[np.ndarray, ...]:
        """Every column's borders (:meth:`column_borders`), on the host."""
        return tuple(self.column_borders(j)[0] for j in range(int(self.vector_base.shape[0])))


def border_codes(sieve: Sieve | FineSieve, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Column ``j``'s borders and their codes (B, 3) on the host (see the module docstring):
    a :class:`FineSieve`'s :meth:`~FineSieve.column_borders`, or a one-level :class:`Sieve`'s
    ``bounds[j]`` with border ``i``'s code ``(vector_base[j] + i, -1, -1)``, none at 0 and
    N."""
    if isinstance(sieve, FineSieve):
        return sieve.column_borders(j)
    b = sieve.bounds[j]
    k = int(b.shape[0])
    c = np.full((k, 3), -1, dtype=np.int64)
    c[1:k - 1, 0] = np.arange(1, k - 1, dtype=np.int64) + (sieve.base[j] - 1)
    return np.asarray(b), c


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


def fine_borders(starts: tuple[Any, ...], n: int, k: int, f: int
                 ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """The two-level sieve's borders of every column of ``n > 0`` rows (host int64 arrays),
    from each column's run starts: the first-level borders ``0, b_1 .. b_m, N``; the fine
    table ``(m + 1, F)`` (``[c, t]`` = ``f_{c,t}``, ``[c, 0] = b_c``); and the ``t`` whose
    vector ``G_t`` is kept (those that move a border in some bin)."""
    coarse, tables, kept = [], [], []
    for st in starts:
        xp = xp_of(st)
        inner = to_numpy(run_borders(st, n, k))
        b = np.concatenate([[0], inner, [n]]).astype(np.int64)
        m = int(inner.shape[0])
        width = np.diff(b)  # (m + 1,) every bin's rows, at least 1
        pos = b[:-1, None] + (np.arange(f, dtype=np.int64)[None, :] * width[:, None]) // f
        s64 = st.astype(np.int64)
        first = s64[xp.searchsorted(s64, xp.asarray(pos.reshape(-1)), side="right") - 1]
        tab = np.maximum(to_numpy(first).reshape(m + 1, f), b[:-1, None])
        coarse.append(b)
        tables.append(tab)
        kept.append(np.asarray([t for t in range(1, f)
                                if bool((tab[:, t] != tab[:, t - 1]).any())], dtype=np.int64))
    return coarse, tables, kept


def fine_layout(coarse: list[np.ndarray], tables: list[np.ndarray], kept: list[np.ndarray],
                n: int, f: int) -> dict[str, np.ndarray]:
    """The host arrays of a :class:`FineSieve` but its vectors (``coarse``, ``coarse_offsets``,
    ``fine``, ``fine_base``, ``fine_ids``, ``vector_base``): per column its ``m`` first-level
    vectors, then its kept fine ones."""
    d = len(coarse)
    ms = [int(b.shape[0]) - 2 for b in coarse]
    vb = np.cumsum([0] + [m + int(t.shape[0]) for m, t in zip(ms, kept, strict=True)])[:-1]
    ids = np.full((d, f), -1, dtype=np.int64)
    for j in range(d):
        ids[j, kept[j]] = vb[j] + ms[j] + np.arange(kept[j].shape[0], dtype=np.int64)
    rows = [int(t.size) for t in tables]
    return {"coarse": np.concatenate(coarse).astype(np.int64),
            "coarse_offsets": np.cumsum([0] + [m + 2 for m in ms]).astype(np.int64),
            "fine": np.concatenate([t.reshape(-1) for t in tables]).astype(rank_dtype(n)),
            "fine_base": np.cumsum([0, *rows])[:-1].astype(np.int64),
            "fine_ids": ids, "vector_base": vb.astype(np.int64)}


def build_fine_sieve(ranks: list[Any], starts: tuple[Any, ...], n: int, k: int,
                     f: int) -> tuple[FineSieve, int]:
    """The two-level sieve of every column (``ranks[j]``: the rank of each row, ``starts[j]``
    its run starts) and the build's peak extra bytes (one row's bin, threshold and mask at a
    time, and a vector's packing)."""
    xp = xp_of(starts[0])
    words = (n + 31) // 32
    coarse, tables, kept = fine_borders(starts, n, k, f)
    host = fine_layout(coarse, tables, kept, n, f)
    total = sum(int(b.shape[0]) - 2 + int(t.shape[0]) for b, t in zip(coarse, kept,
                                                                      strict=True))
    vectors = xp.empty((total, words), dtype=np.uint32)
    for j, rk in enumerate(ranks):
        b, base = coarse[j], int(host["vector_base"][j])
        m = int(b.shape[0]) - 2
        for i in range(1, m + 1):
            vectors[base + i - 1] = pack_rows((rk < int(b[i]))[None, :])[0]
        if kept[j].shape[0]:
            bins = xp.searchsorted(xp.asarray(b[1:m + 1]), rk, side="right").astype(np.int32)
            tab = xp.asarray(tables[j])
            for t in kept[j].tolist():
                vectors[int(host["fine_ids"][j, t])] = pack_rows((rk < tab[bins, t])[None, :])[0]
            del bins
    peak = total * words * 4 + n * (4 + 8 + 1) + 2 * words * 4
    dev = {name: xp.asarray(a) for name, a in host.items()}
    return FineSieve(vectors, dev["coarse"], dev["coarse_offsets"], dev["fine"],
                     dev["fine_base"], dev["fine_ids"], dev["vector_base"], f), peak


@dataclass(frozen=True)
class Choice:
    """The approximation of one column for a batch of queries (int64 arrays over queries):
    ``A = [a0, a1)`` in ranks, and the codes (Q, 3) of the borders ``a0`` (its rows excluded)
    and ``a1`` (only its rows kept); ``(-1, -1, -1)``: no bound on that side (``a0 = 0`` or
    ``a1 = N``; or ``a0 = N``, ``a1 = 0``, an empty approximation)."""

    a0: Any
    a1: Any
    lo_code: Any
    hi_code: Any


def choose(sieve: Sieve | FineSieve, j: int, x0: np.ndarray, x1: np.ndarray,
           selection: Selection) -> Choice:
    """The borders approximating ``[x0, x1)`` (rank bounds of column ``j``, non-empty
    predicates; host arrays) by the selection rule (see the module docstring). The host
    reference of the plan kernel's choice (:mod:`.plan`)."""
    xp = np
    b, codes = border_codes(sieve, j)
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
    return Choice(b[klo], b[khi], codes[klo], codes[khi])


#: Words of one query's approximation a sieve item writes, the launch's block width apart (so a
#: warp's loads of each vector stay coalesced); :func:`sieve_item` is written for four. On an
#: H200 at 1e8 rows, a window on three columns (18 vectors, 225 MB) took 0.12 ms with one word
#: an item (one 4-byte load a thread per vector) and 0.083 ms with four; eight were slower and
#: took too many registers to launch 1,024 threads a block.
SIEVE_WORDS = 4


@register_jitable
def _side4(vectors, p, h, g, x0, x1, x2, x3):
    """Words ``x0..x3`` of the set of the border whose code is ``(p, h, g)`` (see the module
    docstring; never called with a code of no bound)."""
    if g < 0:
        return vectors[p, x0], vectors[p, x1], vectors[p, x2], vectors[p, x3]
    s0, s1, s2, s3 = vectors[g, x0], vectors[g, x1], vectors[g, x2], vectors[g, x3]
    if h >= 0:
        s0, s1 = s0 & vectors[h, x0], s1 & vectors[h, x1]
        s2, s3 = s2 & vectors[h, x2], s3 & vectors[h, x3]
    if p >= 0:
        s0, s1 = s0 | vectors[p, x0], s1 | vectors[p, x1]
        s2, s3 = s2 | vectors[p, x2], s3 | vectors[p, x3]
    return s0, s1, s2, s3


@register_jitable
def _put(out, q, w, words, tail, value):
    if w < words:
        out[q, w] = np.uint32(value & tail) if w == words - 1 else np.uint32(value)


@register_jitable
def sieve_item(i, vectors, sel, words, tail, out, width, tiles):
    """The :data:`SIEVE_WORDS` words ``w0 + k * width`` of query ``q``'s approximation: the AND of
    its columns' chosen sets (``sel[q]``: per column the codes of its lower and upper border,
    then the zero flag). Items ``q * tiles * width ..`` are query ``q``'s: tile ``t`` of it
    holds the words ``t * SIEVE_WORDS * width ..``, item ``k`` of a tile starts at word ``k``."""
    per_q = tiles * width
    q = i // per_q
    j = i - q * per_q
    t = j // width
    w0 = t * (SIEVE_WORDS * width) + (j - t * width)
    if w0 >= words:
        return
    last = words - 1
    x0 = w0
    x1 = min(w0 + width, last)  # (loads past the end read the last word; nothing is written)
    x2 = min(w0 + 2 * width, last)
    x3 = min(w0 + 3 * width, last)
    full = np.uint32(0xFFFFFFFF)
    a0, a1, a2, a3 = full, full, full, full
    if sel[q, ZERO]:
        a0, a1, a2, a3 = np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0)
    else:
        for k in range(3):
            at = 6 * k
            p, h, g = sel[q, at + 3], sel[q, at + 4], sel[q, at + 5]
            if p >= 0 or g >= 0:  # the upper side: the rows below its border
                s0, s1, s2, s3 = _side4(vectors, p, h, g, x0, x1, x2, x3)
                a0, a1, a2, a3 = a0 & s0, a1 & s1, a2 & s2, a3 & s3
            p, h, g = sel[q, at], sel[q, at + 1], sel[q, at + 2]
            if p >= 0 or g >= 0:  # the lower side: the rows not below its border
                s0, s1, s2, s3 = _side4(vectors, p, h, g, x0, x1, x2, x3)
                a0, a1, a2, a3 = a0 & ~s0, a1 & ~s1, a2 & ~s2, a3 & ~s3
    _put(out, q, w0, words, tail, a0)
    _put(out, q, w0 + width, words, tail, a1)
    _put(out, q, w0 + 2 * width, words, tail, a2)
    _put(out, q, w0 + 3 * width, words, tail, a3)


SIEVE = Kernel(sieve_item, name="rtscan_sieve")


def sieve_items(q: int, words: int, width: int) -> tuple[int, int]:
    """(items, tiles a query) of a sieve launch over ``q`` queries' ``words`` words with
    blocks of ``width`` threads."""
    tiles = -(-words // (SIEVE_WORDS * width))
    return q * tiles * width, tiles


def approximate_sel(device: str, vectors: Any, sel: Any, n: int, out: Any,
                    threads_per_block: int) -> None:
    """``out`` (Q, W): a column group's approximate bitmaps from its choice ``sel`` (Q, 19)
    int64 (per column the codes of the lower and the upper border, then the zero flag) over
    the stacked ``vectors`` (any (M, W) array when every code is -1: no sieve); the padding
    bits clear. One launch."""
    q, words = int(out.shape[0]), int(out.shape[1])
    if q == 0 or words == 0:
        return
    rem = n % 32
    tail = np.uint32(0xFFFFFFFF if rem == 0 else (1 << rem) - 1)
    items, tiles = sieve_items(q, words, threads_per_block)
    SIEVE(device, items, vectors, sel, np.int64(words), tail, out, np.int64(threads_per_block),
          np.int64(tiles), threads_per_block=threads_per_block)
