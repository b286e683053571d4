"""``crystal``'s GPU kernels: one per query, generated from its plan, as Crystal writes one
kernel per SSB query.

The query's constants are literals of the source: the filter intervals, the group columns'
minimum codes and strides, the expressions' coefficients and the result rows. A qualifying
row therefore reads nothing but its columns; no interval or term table sits between its loads.
(A generic kernel reads those tables per row. On the H100 they were the difference between
the queries whose rows rarely qualify, near their read floor, and those whose rows qualify
most, 2-3x above it.)

Crystal's tile: each thread takes ``ITEMS`` rows of its block's tile, ``blockDim`` apart (so
a warp's loads are coalesced), and the block walks tiles grid-stride. Per filter column, the
thread loads the column for its rows that still qualify (predicated loads, independent across
its rows) and tests them; then it loads the group and value columns of its qualifying rows,
all before any atomic, and adds them into the result:

* ``global``: into ``res`` with device-memory atomics;
* ``shared``: into the block's copy of the COUNT and SUM rows in shared memory, added into
  ``res`` when the block is done (Crystal's block-level pre-aggregation). A query without
  GROUP BY (one slot) sums in registers, one shared add a thread. Each int64 word is a pair
  of uint32 words there: the GPU has no 64-bit atomic add in shared memory (ptxas makes one a
  compare-and-swap loop, ``ATOMS.CAST.SPIN.64``), so a row adds into the low word with a
  native 32-bit atomic and into the high word only where it changes (the value's high half
  plus the low word's carry). On an H100 at SF 10, ``GROUP BY d_year`` summing every row's
  revenue into 7 slots took 0.208 ms instead of 1.69 ms; SSB's queries did not change.

Either way no add waits for its old value, so every atomic is a reduction the memory system
completes on its own (``RED``, not ``ATOM``) and a thread's next tile starts as soon as its adds
are issued. (A slot's first add used to list the slot as touched, which needs the COUNT's old
value: a round trip per qualifying row. Without it SSB Q3.1's kernel, whose 2 M qualifying
rows go to 150 slots, took 0.428 ms instead of 0.468 ms on an H100 at SF 10.) The slots a query
filled are found after the kernel, by :func:`.kernels.compact_kernel`, from the COUNT row.
The layout of ``res`` is :mod:`.kernels`'.

Three departures from that shape:

* The first ``eager_filters`` filter columns are instead loaded for every row of the tile,
  all loads before any test (no load waits on another's predicate; the whole columns are
  read).
* A group or value column that is also a filter column takes the filter's load.
* Rows are indexed by unsigned integers. numba wraps a negative signed index around, which
  costs every load a few 64-bit instructions and keeps the compiler from issuing a thread's
  loads together. SSB Q1.1's kernel went from 464 to 376 instructions (ptxas of CUDA 13.0,
  sm_90) and, with the filter loads shared, from 0.266 to 0.219 ms on an H100. A row past
  the end of the table reads the last row, its predicate false.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from indexzoo.native.targets import BlockKernel

__all__ = ["ITEMS", "QueryKernel", "kernel"]

#: Rows a thread takes per tile by default (Crystal's ITEMS_PER_THREAD).
ITEMS = 4


@dataclass(frozen=True)
class QueryKernel:
    """What a query's kernel is generated from (hashable: kernels are kept per value)."""

    filters: tuple[tuple[tuple[int, int], ...], ...]  # per filter column, its intervals
    gmin: tuple[int, ...]  # per group column
    gstride: tuple[int, ...]
    terms: tuple[tuple[tuple[int, int, int], ...], ...]  # per expression: (coef, a, b)
    row_of: tuple[int, ...]  # 3 per expression: SUM, MIN, MAX row or -1
    n_values: int  # value columns
    n_slots: int
    shared: bool
    items: int = ITEMS  # rows a thread takes per tile
    eager_filters: int = 0  # leading filter columns loaded for every row of a tile at once
    copies: int = 1  # device-memory result copies: block b adds into copy b % copies
    copy_at: int = 0  # word where copy 1 starts (copy 0 is at word 0), copies after it
    copy_words: int = 0  # words of one copy
    group_filter: tuple[int, ...] = ()  # per group column: the filter column it is, or -1
    value_filter: tuple[int, ...] = ()  # per value column: the filter column it is, or -1

    @property
    def n_add(self) -> int:
        """COUNT and SUM rows (the rows a row adds into)."""
        return 1 + sum(1 for e in range(len(self.terms)) if self.row_of[3 * e] >= 0)


def _test(x: str, ivs: Sequence[tuple[int, int]]) -> str:
    return " or ".join(f"({lo} <= {x} and {x} <= {hi})" for lo, hi in ivs) or "False"


def _expr(k: int, terms: Sequence[tuple[int, int, int]]) -> str:
    parts = []
    for coef, a, b in terms:
        factors = [f"np.int64({coef})"] + [f"w{k}_{c}" for c in (a, b) if c >= 0]
        parts.append(" * ".join(factors))
    return " + ".join(parts) or "np.int64(0)"


def source(q: QueryKernel) -> str:
    """The kernel's Python source: ``crystal_q(n, f0.., g0.., v0.., res)``."""
    nf, ng, nv = len(q.filters), len(q.gmin), q.n_values
    params = ["n", *(f"f{j}" for j in range(nf)), *(f"g{j}" for j in range(ng)),
              *(f"v{j}" for j in range(nv)), "res"]
    one_slot = q.shared and q.n_slots == 1
    n_add = q.n_add
    items = q.items
    src: list[str] = [f"def crystal_q({', '.join(params)}):"]

    def put(depth: int, line: str) -> None:
        src.append("    " * depth + line)

    def add64(depth: int, word: str, value: str) -> None:
        """Add int64 ``value`` into the shared (low, high) uint32 pair from ``word``: a native
        32-bit atomic on the low half, the high half only where it changes (the value's high
        half plus the low half's carry, both modulo 2^32)."""
        put(depth, f"lo = np.uint32({value} & 0xFFFFFFFF)")
        put(depth, f"old = cuda.atomic.add(sh, {word}, lo)")
        put(depth, f"hi = np.uint64(({value} >> 32) & 0xFFFFFFFF) "
                   f"+ ((np.uint64(old) + np.uint64(lo)) >> np.uint64(32))")
        put(depth, "if hi & np.uint64(0xFFFFFFFF) != 0:")
        put(depth + 1, f"cuda.atomic.add(sh, {word} + 1, np.uint32(hi & np.uint64(0xFFFFFFFF)))")

    def read64(word: str) -> str:
        """The int64 a shared (low, high) uint32 pair holds."""
        return f"((np.int64(sh[{word} + 1]) << 32) | np.int64(sh[{word}]))"

    if q.shared:
        put(1, "sh = cuda.shared.array(0, U32)")
        put(1, "w = cuda.threadIdx.x")
        put(1, f"while w < {2 * n_add * q.n_slots}:")
        put(2, "sh[w] = 0")
        put(2, "w += cuda.blockDim.x")
        put(1, "cuda.syncthreads()")
    if one_slot:
        for r in range(n_add):
            put(1, f"acc{r} = np.int64(0)")
    at = ""  # the offset of this block's result copy in res
    if q.copies > 1 and not q.shared:
        put(1, f"c = cuda.blockIdx.x % {q.copies}")
        put(1, f"cb = np.int64(0) if c == 0 else np.int64({q.copy_at} + (c - 1) * {q.copy_words})")
        at = "cb + "
    put(1, "tpb = cuda.blockDim.x")
    put(1, "tile = cuda.blockIdx.x")
    put(1, f"while tile * tpb * {items} < n:")
    put(2, f"base = tile * tpb * {items} + cuda.threadIdx.x")
    for k in range(items):
        put(2, f"r{k} = base + {k} * tpb")
        put(2, f"p{k} = r{k} < n")
        put(2, f"u{k} = np.uint64(r{k} if p{k} else n - 1)")  # (unsigned: no wraparound)
    eager = min(q.eager_filters, nf)

    def column(kind: str, j: int, k: int) -> str:
        """A group or value column's read for row ``k``: a filter column's value is reused
        (a qualifying row has read every filter column)."""
        same = q.group_filter if kind == "g" else q.value_filter
        f = same[j] if j < len(same) else -1
        if f >= 0:
            return f"x{k}_{f}"
        return f"np.int64({kind}{j}[u{k}])"

    for j in range(nf):  # a filter value a row does not read stays 0
        for k in range(items):
            put(2, f"x{k}_{j} = np.int64(0)")
    for j in range(eager):  # the eager columns: every row's loads at once, tests after
        for k in range(items):
            put(2, f"x{k}_{j} = np.int64(f{j}[u{k}])")
    for k in range(items):
        if eager:
            tests = " and ".join(f"({_test(f'x{k}_{j}', q.filters[j])})"
                                 for j in range(eager))
            put(2, f"p{k} = p{k} and {tests}")
    for j in range(eager, nf):  # the others column by column, for the rows still in
        for k in range(items):
            put(2, f"if p{k}:")
            put(3, f"x{k}_{j} = np.int64(f{j}[u{k}])")
            put(3, f"p{k} = {_test(f'x{k}_{j}', q.filters[j])}")
    for k in range(items):  # the qualifying rows' group and value loads, before any atomic
        for j in range(ng):
            put(2, f"h{k}_{j} = np.int64(0)")
        for j in range(nv):
            put(2, f"w{k}_{j} = np.int64(0)")
        if ng or nv:
            put(2, f"if p{k}:")
            for j in range(ng):
                put(3, f"h{k}_{j} = {column('g', j, k)}")
            for j in range(nv):
                put(3, f"w{k}_{j} = {column('v', j, k)}")
    for k in range(items):
        put(2, f"if p{k}:")
        slot = " + ".join(f"(h{k}_{j} - {q.gmin[j]}) * {q.gstride[j]}"
                          for j in range(ng)) or "0"
        put(3, f"s = np.int64({slot})")
        for e, terms in enumerate(q.terms):
            put(3, f"e = {_expr(k, terms)}")
            r_sum, r_min, r_max = q.row_of[3 * e:3 * e + 3]
            if r_sum >= 0:
                if one_slot:
                    put(3, f"acc{r_sum} += e")
                elif q.shared:
                    add64(3, f"2 * ({r_sum * q.n_slots} + s)", "e")
                else:
                    put(3, f"cuda.atomic.add(res, {at}{r_sum * q.n_slots} + s, e)")
            if r_min >= 0:
                put(3, f"cuda.atomic.min(res, {at}{r_min * q.n_slots} + s, e)")
            if r_max >= 0:
                put(3, f"cuda.atomic.max(res, {at}{r_max * q.n_slots} + s, e)")
        if one_slot:
            put(3, "acc0 += 1")
        elif q.shared:
            add64(3, "2 * s", "np.int64(1)")
        else:
            put(3, f"cuda.atomic.add(res, {at}s, np.int64(1))")
    put(2, "tile += cuda.gridDim.x")
    if not q.shared:
        return "\n".join(src) + "\n"
    if one_slot:
        for r in range(n_add):
            put(1, f"if acc{r} != 0:")
            add64(2, str(2 * r), f"acc{r}")
    put(1, "cuda.syncthreads()")
    put(1, "t = cuda.threadIdx.x")
    put(1, f"while t < {q.n_slots}:")
    put(2, f"c = {read64('2 * t')}")
    put(2, "if c != 0:")
    for r in range(1, n_add):
        put(3, f"cuda.atomic.add(res, {r * q.n_slots} + t, {read64(f'2 * ({r * q.n_slots} + t)')})")
    put(3, "cuda.atomic.add(res, t, c)")
    put(2, "t += cuda.blockDim.x")
    return "\n".join(src) + "\n"


@functools.lru_cache(maxsize=256)
def kernel(q: QueryKernel) -> BlockKernel:
    """The query's kernel (compiled on first launch; kept for the last 256 queries)."""
    from numba import types

    return BlockKernel("crystal_q", source(q), {"np": np, "U32": types.uint32})


def shared_bytes(q: QueryKernel) -> int:
    """Dynamic shared memory a block of ``q``'s kernel takes."""
    return 8 * q.n_add * q.n_slots if q.shared else 0
