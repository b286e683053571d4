"""Certification at scale: key sets and lookup batches whose sizes are drawn from the run's
seed, up to what a real workload reaches, with every answer of every lookup compared with the
NumPy oracle.

Two kinds of cases, one per ``sizes`` check:

* **batch cases** (:func:`batch_cases`): a key set of moderate size asked batches of sizes
  drawn log-uniformly up to the reach's largest batch, plus one batch above it; a bug at a
  position of a large batch (every k-th lookup, lookups past some offset) shows there.
* **key cases** (:func:`key_cases`): key sets of sizes drawn log-uniformly up to the reach's
  largest, plus two above it (uniform and skewed keys); every distinct key is looked up at
  least once (a sweep over a permutation of the keys), as a point and as a range's lower
  bound, so a bug that breaks a few keys of a large build shows there.

Every case is drawn from ``(seed, what)`` alone, so ``--seed`` replays a run. Keys reach the
ends of their dtype (uint64 near 2^64, int64 negatives, 0); duplicates where the index takes
them; ranges whose bounds are keys, neighbours of keys and misses; points at hits (three in
four), neighbours of keys, random values and the domain's ends.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo import GpuIndex, Out

from .context import Context
from .oracle import Oracle, compare

__all__ = ["HIT", "BatchCase", "KeyCase", "Reach", "batch_cases", "batch_plan", "key_cases",
           "key_set", "reach", "run_case", "sorted_key_set", "sweep_plan"]

#: Share of a batch's point lookups (and of its ranges) that start on a key of the sweep.
HIT = 0.75
#: Out modes compared at scale: one answer or a list per lookup. ``bitmap`` holds N bits per
#: lookup, so it is checked on small batches only (the ``out_modes`` group).
SCALE_MODES: tuple[Out, ...] = ("rowid", "count", "sum", "rowids")
#: Most copies of one key in the ``duplicates`` family at scale (bounded matches per range).
MOST_COPIES = 40


@dataclass(frozen=True)
class Reach:
    """How far the scale checks go at one suite size on one device: key counts and batch
    sizes are drawn log-uniformly in ``keys`` and ``batches``; the largest cases lie above
    their upper ends (by up to a quarter, drawn too, so they are no power of two)."""

    keys: tuple[int, int]
    batches: tuple[int, int]
    drawn: int  # batch sizes drawn besides the largest
    batch_keys: tuple[int, int]  # key counts of the batch cases


#: Fewest lookups of a full-scan index's batch, whatever the key count.
SCAN_BATCH = 64
#: The key counts of a full-scan index's batch cases (large batches over a few keys).
SCAN_BATCH_KEYS = (1 << 8, 1 << 10)


def reach(size: str, device: str) -> Reach:
    """The :class:`Reach` of suite ``size`` on ``device``: ``small`` stays within 2,560 keys
    and lookups (the path is run; full scans stay quick); ``large`` reaches past 2^21
    distinct keys and 2^19-lookup batches on the CPU, 2^26 keys and 2^24 lookups on a GPU."""
    if size == "small":
        return Reach((1 << 8, 1 << 11), (1 << 8, 1 << 11), 1, (1 << 8, 1 << 11))
    if device == "cuda":
        return Reach((1 << 16, 1 << 26), (1 << 14, 1 << 24), 3, (1 << 14, 1 << 20))
    return Reach((1 << 14, 1 << 21), (1 << 12, 1 << 19), 3, (1 << 12, 1 << 16))


@dataclass(frozen=True)
class KeyCase:
    """One key set: ``distinct`` keys of ``family`` as ``dtype`` (copies added where the
    index takes duplicates), asked batches of ``batch`` lookups."""

    family: str  # uniform, skewed, dense, duplicates
    distinct: int
    batch: int
    dtype: str  # uint32, uint64, int64
    wrapping_values: bool  # values near 2^64: sums wrap
    seed: int

    def __str__(self) -> str:
        vals = ", values near 2^64" if self.wrapping_values else ""
        return f"{self.family} keys ({self.distinct:,} distinct {self.dtype}{vals})"


@dataclass(frozen=True)
class BatchCase:
    """Batches of ``batches`` lookups over one key set."""

    keys: KeyCase
    batches: tuple[int, ...]


def _above(rng: np.random.Generator, floor: int) -> int:
    """A size above ``floor`` by 1 to a quarter of it (never a power of two for floor 2^k)."""
    return floor + int(rng.integers(1, max(floor // 4, 1), endpoint=True))


def _log_uniform(rng: np.random.Generator, lo: int, hi: int, k: int) -> list[int]:
    return [int(math.exp(x)) for x in rng.uniform(math.log(lo), math.log(hi), k)]


def _dtypes(ctx: Context) -> list[str]:
    return ["uint64", "int64", "uint32"] if ctx.wide else ["uint32"]


def _families(ctx: Context) -> list[str]:
    return ["skewed", "dense", "uniform"] + (["duplicates"] if ctx.caps.duplicates else [])


def key_cases(ctx: Context) -> list[KeyCase]:
    """The key sets of this run: one of each family (skewed, dense, uniform, and duplicates
    where the index takes them) of a size drawn log-uniformly in ``reach.keys``, the dtypes
    the index takes in a drawn order, the first with values near 2^64; then the two largest,
    uniform and skewed (on a GPU one of the two, drawn), above ``reach.keys[1]`` distinct
    keys."""
    r = reach(ctx.size, ctx.device)
    rng = np.random.default_rng([ctx.seed, 1])
    fams = list(rng.permutation(_families(ctx)))
    dts = list(rng.permutation(_dtypes(ctx)))
    sizes = _log_uniform(rng, *r.keys, len(fams))
    batches = _log_uniform(rng, *r.batches, len(fams))
    top = "uint64" if ctx.wide else "uint32"
    cases = [KeyCase(str(fam), n, b, str(dts[i % len(dts)]), i == 0, int(rng.integers(2**32)))
             for i, (fam, n, b) in enumerate(zip(fams, sizes, batches, strict=True))]
    # past the top: a uniform and a skewed set on the CPU; on a GPU one of them, drawn (each
    # takes minutes of the oracle's host time there)
    tops = ["uniform", "skewed"] if ctx.device == "cpu" else [str(rng.choice(["uniform",
                                                                                "skewed"]))]
    cases += [KeyCase(fam, _above(rng, r.keys[1]), _above(rng, r.batches[1]), top, False,
                      int(rng.integers(2**32))) for fam in tops]
    if ctx.full_scan and ctx.size != "small":  # every lookup reads every key
        work = ctx.scan_work
        cases = [dataclasses.replace(c, batch=max(SCAN_BATCH, min(c.batch, work // c.distinct)))
                 for c in cases]
    return cases


def batch_cases(ctx: Context) -> list[BatchCase]:
    """The batches of this run: ``reach.drawn`` sizes drawn log-uniformly and one above
    ``reach.batches[1]``, over one key set of a drawn size and family."""
    r = reach(ctx.size, ctx.device)
    rng = np.random.default_rng([ctx.seed, 2])
    fam = str(rng.choice(_families(ctx)))
    span = SCAN_BATCH_KEYS if ctx.full_scan and ctx.size != "small" else r.batch_keys
    keys = KeyCase(fam, _log_uniform(rng, *span, 1)[0], 0,
                   "uint64" if ctx.wide else "uint32", False, int(rng.integers(2**32)))
    sizes = [*sorted(_log_uniform(rng, *r.batches, r.drawn)), _above(rng, r.batches[1])]
    return [BatchCase(keys, tuple(sizes))]


# ---------------------------------------------------------------------------- key sets
def _bits(dtype: str) -> int:
    return 32 if dtype == "uint32" else 64


def _ends(bits: int) -> np.ndarray:
    top = (1 << bits) - 1
    vals = {0, 1, top - 1, top, (1 << 31) - 1, 1 << 31, (1 << 32) - 1}
    if bits == 64:
        vals |= {(1 << 63) - 1, 1 << 63, 1 << 32}
    return np.array(sorted(v for v in vals if v <= top), dtype=np.uint64)


def _distinct(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, ascending (a sort: many times faster than ``np.unique``
    on millions of 64-bit values)."""
    return _distinct_sorted(np.sort(x))


def _distinct_sorted(s: np.ndarray) -> np.ndarray:
    """The distinct values of the ascending ``s``."""
    keep = np.ones(s.shape[0], dtype=bool)
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def _distinct_uniform(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """``n`` distinct values uniform over the whole domain, the domain's ends among them."""
    top = (1 << bits) - 1
    ends = _ends(bits)[: max(n, 0)]
    want = n - ends.shape[0]
    u = _distinct(rng.integers(0, top, want + want // 8 + 64, dtype=np.uint64, endpoint=True))
    at = np.minimum(np.searchsorted(u, ends), max(u.shape[0] - 1, 0))
    if u.shape[0]:
        u = np.delete(u, at[u[at] == ends])  # the ends drawn by chance, added back below
    if u.shape[0] < want:  # a narrow domain: top up from what is left
        pool = np.arange(0, min(top + 1, 4 * n + 64), dtype=np.uint64)
        rest = pool[~np.isin(pool, np.concatenate([u, ends]), kind="sort")]
        u = np.concatenate([u, rest[: want - u.shape[0]]])
    if u.shape[0] > want:
        drop = rng.choice(u.shape[0], u.shape[0] - want, replace=False)
        u = np.delete(u, drop)
    return np.sort(np.concatenate([u, ends]))


def _distinct_skewed(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """``n`` distinct keys with heavy-tailed gaps (dense clusters, a few huge jumps: a CDF
    far from a line), starting low and ending near the top of the domain."""
    top = (1 << bits) - 1
    span = top - n - (1 << (bits - 8))
    g = rng.pareto(1.1, n)
    gaps = np.floor(g / g.sum() * span).astype(np.uint64) + np.uint64(1)
    keys = np.cumsum(gaps, dtype=np.uint64)
    base = np.uint64(int(rng.integers(0, 1 << (bits - 9))))
    return keys + base


def _distinct_dense(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """``n`` consecutive keys ending at or just below the top of the domain."""
    top = (1 << bits) - 1
    end = top - int(rng.integers(0, 16))
    return np.arange(end - n + 1, end + 1, dtype=np.uint64)


def key_set(case: KeyCase, duplicates: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The keys of ``case`` in a shuffled build order, as ``case.dtype`` (and its values, or
    None): ``case.distinct`` distinct keys; where ``duplicates``, the ``duplicates`` family
    repeats every key 1 to MOST_COPIES times (most few) and the others one key in eight 1 to
    3 times more."""
    keys, values, _ = sorted_key_set(case, duplicates)
    return keys, values


def sorted_key_set(case: KeyCase, duplicates: bool
                   ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`key_set` and a permutation that sorts its keys (known from the shuffle, for the
    oracle to check rather than sort 10^8 keys again)."""
    rng = np.random.default_rng(case.seed)
    bits = _bits(case.dtype)
    if case.family == "skewed":
        u = _distinct_skewed(rng, case.distinct, bits)
    elif case.family == "dense":
        u = _distinct_dense(rng, case.distinct, bits)
    else:
        u = _distinct_uniform(rng, case.distinct, bits)
    if duplicates:
        if case.family == "duplicates":
            copies = np.minimum(rng.geometric(0.4, u.shape[0]), MOST_COPIES)
        else:
            copies = np.where(rng.random(u.shape[0]) < 1 / 8, rng.integers(2, 5, u.shape[0]), 1)
        u = np.repeat(u, copies)
    perm = rng.permutation(u.shape[0])
    keys = _as_dtype(u[perm], case.dtype)
    order = np.empty_like(perm)
    order[perm] = np.arange(perm.shape[0], dtype=perm.dtype)  # keys[order] = u, ascending
    values: np.ndarray | None = None
    if case.wrapping_values:
        values = np.asarray(rng.integers(2**62, 2**64 - 1, keys.shape[0], dtype=np.uint64,
                                         endpoint=True))
    return keys, values, order


def _as_dtype(u: np.ndarray, dtype: str) -> np.ndarray:
    """Values of the order-preserving unsigned domain as ``dtype`` (int64: flip the top bit)."""
    if dtype == "int64":
        return (u ^ np.uint64(1 << 63)).view(np.int64)
    return u.astype(dtype)


def _as_unsigned(keys: np.ndarray) -> np.ndarray:
    if keys.dtype == np.int64:
        return keys.view(np.uint64) ^ np.uint64(1 << 63)
    return keys


# ---------------------------------------------------------------------------- lookups
def _step(a: np.ndarray, by: int, top: int) -> np.ndarray:
    """``a + by`` held within [0, top] (a value at the end stays there)."""
    one = a.dtype.type(abs(by))
    if by > 0:
        return np.where(a < a.dtype.type(top), a + one, a)
    return np.where(a > 0, a - one, a)


def _points(u: np.ndarray, hits: np.ndarray, q: int, rng: np.random.Generator,
            top: int) -> np.ndarray:
    """``q`` point lookups: the keys ``u[hits]``, neighbours of keys (mostly misses), random
    values and the domain's ends, in a random order."""
    rest = q - hits.shape[0]
    n_near, n_rand = rest * 2 // 5, rest * 2 // 5
    j = rng.integers(0, u.shape[0], n_near)
    near = np.where(rng.random(n_near) < 0.5, _step(u[j], 1, top), _step(u[j], -1, top))
    rand = rng.integers(0, top, n_rand, dtype=np.uint64, endpoint=True).astype(u.dtype)
    ends = np.concatenate([_ends(u.dtype.itemsize * 8).astype(u.dtype),
                           _step(u[[0, -1]], -1, top), _step(u[[0, -1]], 1, top)])
    edge = ends[rng.integers(0, ends.shape[0], rest - n_near - n_rand)]
    out = np.concatenate([u[hits], near, rand, edge])
    return out[rng.permutation(q)]


def _ranges(u: np.ndarray, starts: np.ndarray, q: int, rng: np.random.Generator,
            top: int) -> tuple[np.ndarray, np.ndarray]:
    """``q`` ranges of at most 4 distinct keys each: from the keys ``u[starts]`` to the 0th
    to 3rd next key, or to a neighbour of it (often a miss), or inverted (``hi = lo - 1``:
    empty); then ranges from random values and from neighbours of keys to a key or just
    below one, and ranges at the domain's ends (to its top, from 0), in a random order."""
    d, h = u.shape[0], starts.shape[0]
    lo = u[starts]
    last = u[np.minimum(starts + rng.integers(0, 4, h), d - 1)]
    kind = rng.integers(0, 8, h)  # 0 and 5-7: the upper bound on a key
    hi = np.select([kind == 1, kind == 2, kind == 3, kind == 4],
                   [_step(last, -1, top), _step(last, 1, top), lo, _step(lo, -1, top)], last)
    rest = q - h
    n_rand = rest * 3 // 4
    rlo = rng.integers(0, top, n_rand, dtype=np.uint64, endpoint=True).astype(u.dtype)
    near = rng.random(n_rand) < 0.5  # half of them next to a key (below or above it)
    j = rng.integers(0, d, n_rand)
    # in ascending order (the batch is shuffled at the end): searching the keys for them is
    # then many times faster
    rlo = np.sort(np.where(near, np.where(rng.random(n_rand) < 0.5, _step(u[j], -1, top),
                                          _step(u[j], 1, top)), rlo))
    at = np.minimum(np.searchsorted(u, rlo) + rng.integers(0, 3, n_rand), d - 1)
    rhi = np.where(rng.random(n_rand) < 0.5, u[at], _step(u[at], -1, top))
    k = min(4, d)
    below, above = int(_step(u[:1], -1, top)[0]), int(_step(u[-1:], 1, top)[0])
    edges = [(int(x), top) for x in u[d - k:]] + [
        (0, int(u[min(3, d - 1)])), (0, below), (top, top), (above, top), (0, 0)]
    pick = rng.integers(0, len(edges), rest - n_rand)
    elo = np.array([a for a, _ in edges], dtype=u.dtype)[pick]
    ehi = np.array([b for _, b in edges], dtype=u.dtype)[pick]
    order = rng.permutation(q)
    return (np.concatenate([lo, rlo, elo])[order].astype(u.dtype),
            np.concatenate([hi, rhi, ehi])[order].astype(u.dtype))


class _Sweep:
    """Indices of the distinct keys in a random order, handed out in turn (wrapping round):
    lookups drawn from it reach every key once there have been as many as keys."""

    def __init__(self, d: int, rng: np.random.Generator):
        self.order = rng.permutation(d)
        self.at = 0

    def take(self, k: int) -> np.ndarray:
        d = self.order.shape[0]
        idx = (self.at + np.arange(k, dtype=np.int64)) % d
        self.at = (self.at + k) % d
        return self.order[idx]


# ---------------------------------------------------------------------------- running
def _modes(ctx: Context) -> list[Out]:
    return [m for m in SCALE_MODES if m in ctx.caps.out_modes]


def _kinds(ctx: Context) -> list[str]:
    return [k for k in ("point", "range") if getattr(ctx.caps, k)]


def _ask(index: GpuIndex, kind: str, mode: Out, lookups: tuple[np.ndarray, ...]) -> Any:
    if kind == "point":
        return index.point(lookups[0], out=mode)
    return index.range(lookups[0], lookups[1], out=mode)


def sweep_plan(ctx: Context, distinct: int, batch: int) -> list[tuple[str, Out, int]]:
    """(kind, mode, batch size) of the calls that look up each of ``distinct`` keys at least
    once as a point and once as a range's lower bound: every kind asks every mode, each call
    a batch of ``batch`` lookups or more (at most two rounds of the modes sweep the keys)."""
    modes = _modes(ctx)
    if not modes:
        return []
    if ctx.full_scan and ctx.size != "small":  # one batch per kind and mode: no sweep
        return [(kind, mode, batch) for kind in _kinds(ctx) for mode in modes]
    q = max(batch, math.ceil(distinct / (HIT * 2 * len(modes))))
    rounds = max(len(modes), math.ceil(distinct / int(q * HIT)))
    return [(kind, modes[i % len(modes)], q) for kind in _kinds(ctx) for i in range(rounds)]


def batch_plan(ctx: Context, sizes: tuple[int, ...]) -> list[tuple[str, Out, int]]:
    """(kind, mode, batch size): every kind and mode asked a batch of each size."""
    return [(kind, mode, q) for q in sizes for kind in _kinds(ctx) for mode in _modes(ctx)]


def run_case(ctx: Context, case: KeyCase, calls: list[tuple[str, Out, int]],
             what: str = "") -> None:
    """Build ``case``'s keys and make ``calls`` (kind, mode, batch size), each call with its
    own batch; the batches' hits come from one sweep of the distinct keys per kind. Every
    answer is compared with the oracle: AssertionError on the first batch with a wrong
    answer, saying which lookups, whether they answer right when asked alone, and how to
    replay the run."""
    if not calls:
        return
    keys, values, order = sorted_key_set(case, ctx.caps.duplicates)
    index = ctx.new().build(keys, values)
    oracle = Oracle(keys, values, order)
    u = _as_unsigned(_distinct_sorted(oracle.sorted))
    top = (1 << _bits(case.dtype)) - 1
    rng = np.random.default_rng([case.seed, 3])
    sweeps = {kind: _Sweep(u.shape[0], rng) for kind in ("point", "range")}
    for kind, mode, q in calls:
        hits = sweeps[kind].take(int(q * HIT))
        if kind == "point":
            lookups: tuple[np.ndarray, ...] = (_as_dtype(_points(u, hits, q, rng, top),
                                                         case.dtype),)
        else:
            lo, hi = _ranges(u, hits, q, rng, top)
            if ctx.full_scan and q:  # a scan that skips a row shows in a range over all
                lo[0], hi[0] = 0, top
            lookups = (_as_dtype(lo, case.dtype), _as_dtype(hi, case.dtype))
        exp = oracle.range(lookups[0], lookups[-1])
        where = f"{what}{case}, {keys.shape[0]:,} rows; a batch of {q:,} {kind} lookups"
        bad: list[np.ndarray] = []
        problems = compare(_ask(index, kind, mode, lookups), exp, oracle, mode, index, where,
                           positions=bad)
        if problems:
            raise AssertionError(_report(ctx, index, oracle, kind, mode, lookups, bad, problems))


def _report(ctx: Context, index: GpuIndex, oracle: Oracle, kind: str, mode: Out,
            lookups: tuple[np.ndarray, ...], bad: list[np.ndarray], problems: list[str]) -> str:
    """The failure: the oracle's problems, then the first wrong lookups asked again alone
    (right alone: the answer depends on the batch, its size or the lookup's position)."""
    lines = [f"{ctx.name}: " + "\n".join(problems)]
    wrong = np.unique(np.concatenate(bad))[:8] if bad else np.zeros(0, np.int64)
    if wrong.size:
        alone = tuple(a[wrong] for a in lookups)
        again = compare(_ask(index, kind, mode, alone), oracle.range(alone[0], alone[-1]),
                        oracle, mode, index, f"the {wrong.size} first wrong lookups alone")
        if again:
            lines.append(f"asked alone (positions {wrong.tolist()}), they are wrong too: "
                         "the answer depends on the keys, not on the batch")
        else:
            lines.append(f"asked alone (positions {wrong.tolist()}), they answer right: the "
                         "answer depends on the batch (its size or the lookup's position)")
    lines.append(f"replay: indexzoo check {ctx.name} --size {ctx.size} --device {ctx.device} "
                 f"--seed {ctx.seed} --group sizes")
    return "\n".join(lines)
