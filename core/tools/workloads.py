"""Workloads: the dimensions the papers vary, as a pydantic model, and a generator that runs on
the index's device.

The generator uses counter-based hashing (a bijective mixer of ``(seed, stream, i)``) instead
of a stateful random generator, so the same workload gives the same keys and lookups on the
CPU and on the GPU, deterministically per seed, and unique keys come out of one pass: a
bijection of ``0..n-1`` onto the key domain cannot repeat itself.

Lookups are made to measure: exactly ``round(hit_rate * n_lookups)`` of them hit; of the
misses, ``round(out_of_range_share * misses)`` fall outside ``[min key, max key]`` and the
rest inside gaps between keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from indexzoo.devices import array_module
from indexzoo.display import count_text, printable
from indexzoo.errors import ConfigError

__all__ = ["Dataset", "Workload", "generate", "generate_lookups", "mix64", "permute_bits"]

_U64 = np.uint64
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


class Workload(BaseModel):
    """One workload of the papers' experiments (defaults: RX paper's §4 setup, scaled down)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("custom", description="A label for tables and plots.")
    n_keys: int = Field(1 << 20, ge=0, le=1 << 33, description="Keys in the build, duplicates included.")
    key_bits: Literal[32, 64] = Field(64, description="Key width: uint32 or uint64 keys.")
    distribution: Literal["dense", "uniform", "clustered", "zipf"] = Field(
        "uniform",
        description="dense: 0..d-1; uniform: unique keys spread over the whole key domain; "
        "clustered: runs of cluster_size consecutive keys at random places; zipf: keys whose "
        "gaps follow a heavy-tailed (Zipf-like) law with exponent key_zipf.",
    )
    multiplicity: int = Field(1, ge=1, le=1 << 20, description="Copies of each distinct key.")
    cluster_size: int = Field(1024, ge=1, le=1 << 24, description="Keys per cluster (clustered).")
    key_zipf: float = Field(1.5, gt=0.0, le=8.0, description="Gap-law exponent (zipf keys).")
    n_lookups: int = Field(1 << 20, ge=0, le=1 << 34, description="Lookups in the workload.")
    hit_rate: float = Field(1.0, ge=0.0, le=1.0, description="Share of lookups that match.")
    out_of_range_share: float = Field(
        0.0, ge=0.0, le=1.0,
        description="Share of the misses below the smallest or above the largest key; the "
        "rest fall into gaps between keys.",
    )
    lookup_zipf: float = Field(
        0.0, ge=0.0, le=4.0, description="Zipf exponent of hit lookups over the distinct keys (0: uniform)."
    )
    sorted_build: bool = Field(False, description="Build keys in ascending order.")
    sorted_lookups: bool = Field(False, description="Lookups in ascending order.")
    batches: int = Field(
        1, ge=1, le=1 << 24,
        description="Number of equal batches the lookups are fired in; at most n_lookups (one "
        "lookup a batch at least).",
    )
    range_hits: int | None = Field(
        None, ge=1, description="None: point lookups. k: range lookups each covering k distinct keys."
    )
    seed: int = Field(42, ge=0, le=_MASK64, description="Seed; equal seeds give equal data on every device.")

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.n_keys % self.multiplicity:
            raise ValueError(
                f"n_keys={self.n_keys} is not a multiple of multiplicity={self.multiplicity}"
            )
        if self.distinct_keys > (1 << self.key_bits):
            raise ValueError(f"{self.distinct_keys} distinct keys do not fit in {self.key_bits} bits")
        if self.range_hits is not None and self.distinct_keys and self.range_hits > self.distinct_keys:
            raise ValueError(f"range_hits={self.range_hits} exceeds the {self.distinct_keys} distinct keys")
        if self.batches > max(self.n_lookups, 1):
            raise ValueError(f"batches={self.batches} exceeds n_lookups={self.n_lookups}: every "
                             "batch needs at least one lookup")
        if self.n_lookups and self.hit_rate > 0 and self.n_keys == 0:
            raise ValueError("hit_rate > 0 needs at least one key")
        return self

    @property
    def distinct_keys(self) -> int:
        return self.n_keys // self.multiplicity

    @property
    def key_dtype(self) -> np.dtype:
        return np.dtype(np.uint32 if self.key_bits == 32 else np.uint64)

    def describe(self) -> str:
        what = "point" if self.range_hits is None else f"range({self.range_hits} hits)"
        return (f"{printable(self.name)}: {count_text(self.n_keys)} {self.distribution} "
                f"u{self.key_bits} keys x{self.multiplicity}, {count_text(self.n_lookups)} {what} lookups, "
                f"hit rate {self.hit_rate:g}, zipf {self.lookup_zipf:g}, {self.batches} batch(es)")


@dataclass(frozen=True)
class Dataset:
    """Generated keys and lookups, on one device."""

    workload: Workload
    keys: Any
    queries: Any = None  # point lookups
    lo: Any = None  # range lookups
    hi: Any = None
    n_hits: int = 0  # lookups that match at least one key, by construction

    @property
    def n_lookups(self) -> int:
        arr = self.queries if self.queries is not None else self.lo
        if isinstance(arr, list):  # columns of a multi-column index: the first is given
            arr = arr[0]
        return 0 if arr is None else int(arr.shape[0])

    def batches(self) -> list[tuple[Any, ...]]:
        """The lookups cut into ``workload.batches`` nearly equal consecutive batches (each
        column cut alike where the lookups are lists of columns; None columns stay None)."""
        arrays = (self.queries,) if self.queries is not None else (self.lo, self.hi)
        q, b = self.n_lookups, self.workload.batches
        cuts = [q * i // b for i in range(b + 1)]

        def cut(a: Any, i: int) -> Any:
            if isinstance(a, list):
                return [None if c is None else c[cuts[i]:cuts[i + 1]] for c in a]
            return a[cuts[i]:cuts[i + 1]]

        return [tuple(cut(a, i) for a in arrays) for i in range(b)]


# ---------------------------------------------------------------------- hashing
def _mix_scalar(x: int) -> int:
    x = (x + _GOLDEN) & _MASK64
    x = ((x ^ (x >> 30)) * _M1) & _MASK64
    x = ((x ^ (x >> 27)) * _M2) & _MASK64
    return x ^ (x >> 31)


def mix64(x: Any) -> Any:
    """splitmix64's finaliser on a uint64 array: a bijection of the 64-bit integers."""
    x = x + _U64(_GOLDEN)  # a new array: the steps below work in place
    x ^= x >> _U64(30)
    x *= _U64(_M1)
    x ^= x >> _U64(27)
    x *= _U64(_M2)
    x ^= x >> _U64(31)
    return x


def _unshift(x: Any, s: int) -> Any:
    """The inverse of ``x ^ (x >> s)`` on uint64."""
    out = x.copy()
    for k in range(s, 64, s):
        out ^= x >> _U64(k)
    return out


def unmix64(y: Any) -> Any:
    """The inverse of :func:`mix64`: ``unmix64(mix64(x)) == x``."""
    y = _unshift(y, 31)
    y *= _U64(pow(_M2, -1, 1 << 64))
    y = _unshift(y, 27)
    y *= _U64(pow(_M1, -1, 1 << 64))
    y = _unshift(y, 30)
    y -= _U64(_GOLDEN)
    return y


def permute_bits(x: Any, bits: int, seed: int) -> Any:
    """A seeded bijection of ``[0, 2^bits)`` (uint64 in, uint64 out), for 1 <= bits <= 64."""
    mask = _U64((1 << bits) - 1)
    half = _U64(max(1, bits // 2))
    k1, k2 = _mix_scalar(seed) | 1, _mix_scalar(seed ^ _GOLDEN) | 1
    x = (x ^ _U64(_mix_scalar(seed + 1) & int(mask))) & mask
    for k in (k1, k2, k1 ^ k2 | 1):
        x = (x * _U64(k | 1)) & mask  # odd multiplier: a bijection mod 2^bits
        x = x ^ (x >> half)  # xor-shift: a bijection
    return x


def _stream_base(seed: int, stream: int) -> int:
    return _mix_scalar((seed * 0x100000001B3 + stream * 0x9E37) & _MASK64)


def _random_u64(xp: Any, n: int, seed: int, stream: int) -> Any:
    return mix64(xp.arange(n, dtype=_U64) + _U64(_stream_base(seed, stream)))


def _uniform01(xp: Any, n: int, seed: int, stream: int) -> Any:
    return (_random_u64(xp, n, seed, stream) >> _U64(11)).astype(np.float64) * (2.0**-53)


def _shuffle(xp: Any, arr: Any, seed: int, stream: int) -> Any:
    """``arr`` in the order of its stream's random values (all distinct: mix64 is a
    bijection), found by sorting the values and inverting mix64 on them, which is the argsort
    of the values at the cost of a sort."""
    n = int(arr.shape[0])
    order = unmix64(xp.sort(_random_u64(xp, n, seed, stream)))
    order -= _U64(_stream_base(seed, stream))
    return arr[order.view(np.int64)]


# ---------------------------------------------------------------------- keys
def _distinct_keys(w: Workload, xp: Any) -> Any:
    """The distinct keys, in random order, uint64."""
    d, bits, seed = w.distinct_keys, w.key_bits, w.seed
    i = xp.arange(d, dtype=_U64)
    if w.distribution == "dense":
        return _shuffle(xp, i, seed, 1)
    if w.distribution == "uniform":
        return permute_bits(i, bits, seed)
    if w.distribution == "clustered":
        cs = w.cluster_size
        span_bits = max(1, (cs - 1).bit_length() + 1)  # clusters 2*cs apart at least
        if ((d + cs - 1) // cs) > (1 << (bits - span_bits)):
            raise ConfigError(f"{d} keys in clusters of {cs} do not fit in {bits} bits")
        bases = permute_bits(i // _U64(cs), bits - span_bits, seed) << _U64(span_bits)
        return bases + i % _U64(cs)
    # zipf: heavy-tailed gaps g = floor(u^(-1/a)) >= 1, scaled to the key domain if needed.
    # A gap is at most 2^64 (the domain): below u = 2^(-64 a) it is 2^64. A small exponent
    # (1e-3) made u^(-1/a) overflow to inf, the scaling NaN and the "unique" keys collapse (to
    # one key at 1e-300); exponents from 53/64 up reach the cap only at u = 0.
    u = _uniform01(xp, d, seed, 2)
    a, cap = w.key_zipf, 2.0**64
    lo = 2.0 ** (-64.0 * a)  # 1.0 for an exponent too small to tell: every gap is the cap
    gaps = xp.where(u < lo, cap, xp.floor(xp.maximum(u, lo) ** (-1.0 / a)))
    room = float((1 << bits) - 1 - d) * 0.999  # margin for float rounding
    total = float(gaps.sum()) - d
    if total > room:
        gaps = 1.0 + xp.floor((gaps - 1.0) * (room / total))
    keys = xp.cumsum(gaps.astype(_U64)) - _U64(1)
    return _shuffle(xp, keys, seed, 3)


def _build_keys(w: Workload, distinct: Any, xp: Any) -> Any:
    keys = distinct
    if w.multiplicity > 1:
        keys = xp.repeat(distinct, w.multiplicity)
        if not w.sorted_build:
            keys = _shuffle(xp, keys, w.seed, 4)
    if w.sorted_build:
        keys = xp.sort(keys)
    return keys.astype(w.key_dtype)


# ---------------------------------------------------------------------- lookups
def _zipf_ranks(xp: Any, n: int, d: int, s: float, seed: int) -> Any:
    u = _uniform01(xp, n, seed, 5)
    if s == 0.0:
        return xp.minimum((u * d).astype(np.int64), d - 1)
    cdf = xp.cumsum(xp.arange(1, d + 1, dtype=np.float64) ** (-s))
    cdf /= cdf[-1]
    return xp.minimum(xp.searchsorted(cdf, u, side="right"), d - 1)


def _gap_misses(xp: Any, sorted_distinct: Any, n: int, seed: int, bits: int) -> Any:
    if n == 0:
        return xp.zeros(0, dtype=_U64)
    gaps = sorted_distinct[1:] - sorted_distinct[:-1]
    where = xp.nonzero(gaps > _U64(1))[0]
    if where.shape[0] == 0:
        raise ConfigError(
            "the keys have no gaps, so misses inside [min, max] are impossible; "
            "set out_of_range_share=1 or use a distribution with gaps"
        )
    pick = where[(_random_u64(xp, n, seed, 6) % _U64(where.shape[0])).astype(np.int64)]
    width = gaps[pick] - _U64(1)
    return sorted_distinct[pick] + _U64(1) + _random_u64(xp, n, seed, 7) % width


def _outside_misses(xp: Any, lo_key: int, hi_key: int, n: int, seed: int, bits: int) -> Any:
    if n == 0:
        return xp.zeros(0, dtype=_U64)
    below, above = lo_key, (1 << bits) - 1 - hi_key
    if below + above == 0:
        raise ConfigError("the keys cover the whole key domain: no lookup can miss outside it")
    r = _random_u64(xp, n, seed, 8)
    if below + above < (1 << 64):
        r = r % _U64(below + above)
    inside_below = r < _U64(below)
    return xp.where(inside_below, r, _U64((hi_key + 1) & _MASK64) + (r - _U64(below)))


def generate_lookups(w: Workload, keys: Any, xp: Any) -> tuple[Any, Any, Any, int]:
    """Lookups for ``keys`` (any 1-D unsigned array): ``(queries, lo, hi, n_hits)``."""
    q = w.n_lookups
    dtype = keys.dtype
    bits = dtype.itemsize * 8
    # the distinct keys by a sort (NumPy's hash-based unique is several times slower here)
    ordered = xp.sort(keys)
    sorted_distinct = ordered[xp.concatenate([xp.ones(min(ordered.shape[0], 1), dtype=bool),
                                              ordered[1:] != ordered[:-1]])].astype(_U64)
    d = int(sorted_distinct.shape[0])
    n_hit = round(w.hit_rate * q) if d else 0
    n_miss = q - n_hit
    n_out = round(w.out_of_range_share * n_miss)
    n_gap = n_miss - n_out
    parts = []
    if w.range_hits is None:
        if n_hit:
            order = _shuffle(xp, sorted_distinct, w.seed, 9)  # rank r -> a random key
            parts.append(order[_zipf_ranks(xp, n_hit, d, w.lookup_zipf, w.seed)])
        parts.append(_gap_misses(xp, sorted_distinct, n_gap, w.seed, bits))
        lo_key = int(sorted_distinct[0]) if d else 0
        hi_key = int(sorted_distinct[-1]) if d else -1
        parts.append(_outside_misses(xp, lo_key, hi_key, n_out, w.seed, bits))
        queries = xp.concatenate(parts).astype(dtype)
        queries = xp.sort(queries) if w.sorted_lookups else _shuffle(xp, queries, w.seed, 10)
        return queries, None, None, n_hit
    k = w.range_hits
    if n_hit:
        span = max(d - k + 1, 1)
        j = (_random_u64(xp, n_hit, w.seed, 11) % _U64(span)).astype(np.int64)
        los, his = [sorted_distinct[j]], [sorted_distinct[xp.minimum(j + k - 1, d - 1)]]
    else:
        los, his = [], []
    lo_key = int(sorted_distinct[0]) if d else 0
    hi_key = int(sorted_distinct[-1]) if d else -1
    empty = xp.concatenate([_gap_misses(xp, sorted_distinct, n_gap, w.seed, bits),
                            _outside_misses(xp, lo_key, hi_key, n_out, w.seed, bits)])
    lo = xp.concatenate([*los, empty]).astype(dtype)
    hi = xp.concatenate([*his, empty]).astype(dtype)
    perm = xp.argsort(lo) if w.sorted_lookups else xp.argsort(_random_u64(xp, q, w.seed, 12))
    return None, lo[perm], hi[perm], n_hit


def generate(w: Workload, device: str = "cpu") -> Dataset:
    """Keys and lookups of ``w`` on ``device`` ("cpu" or "cuda")."""
    xp = array_module(device)
    distinct = _distinct_keys(w, xp)
    keys = _build_keys(w, distinct, xp)
    queries, lo, hi, n_hit = generate_lookups(w, keys, xp)
    return Dataset(w, keys, queries, lo, hi, n_hit)
