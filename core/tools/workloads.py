"""Workloads: the dimensions the papers vary, as a pydantic model, and a generator that runs on
the index's device.

The generator uses counter-based hashing (a bijective mixer of ``(seed, stream, i)``) instead
of a stateful random generator, so the same workload gives the same keys and lookups on the
CPU and on the GPU, deterministically per seed, and unique keys come out of one pass: a
bijection of ``0..n-1`` onto the key domain cannot repeat itself. A shuffle orders its items
by their stream's random values: the stream is sorted (``xp.sort``) and mix64 inverted on it,
which gives the argsort at the cost of a sort. The per-item steps run as kernels
(:mod:`indexzoo.tools.workload_kernels`, the same bodies on both devices), each fusing what
used to take several array passes and temporaries.

Lookups are made to measure: exactly ``round(hit_rate * n_lookups)`` of them hit; of the
misses, ``round(out_of_range_share * misses)`` fall outside ``[min key, max key]`` and the
rest inside gaps between keys.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from indexzoo.devices import array_module
from indexzoo.display import count_text, printable
from indexzoo.errors import ConfigError
from indexzoo.native.lazy import lazy_module

if TYPE_CHECKING:
    from . import workload_kernels as kernels
else:  # numba is imported when data are generated, not when a workload is read
    kernels = lazy_module(f"{__package__}.workload_kernels")

__all__ = ["Dataset", "KeySpace", "Workload", "fit_misses", "generate", "generate_keys",
           "generate_lookups", "key_space", "mix64", "permute_bits"]

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


def _permute_constants(bits: int, seed: int) -> tuple[Any, ...]:
    """``(mask, half, c0, k1, k2, k3)`` of :func:`permute_bits`, as uint64."""
    mask = (1 << bits) - 1
    k1, k2 = _mix_scalar(seed) | 1, _mix_scalar(seed ^ _GOLDEN) | 1
    return tuple(_U64(c) for c in (mask, max(1, bits // 2), _mix_scalar(seed + 1) & mask,
                                   k1, k2, (k1 ^ k2) | 1))


def permute_bits(x: Any, bits: int, seed: int) -> Any:
    """A seeded bijection of ``[0, 2^bits)`` (uint64 in, uint64 out), for 1 <= bits <= 64."""
    mask, half, c0, *ks = _permute_constants(bits, seed)
    x = (x ^ c0) & mask
    for k in ks:
        x = (x * k) & mask  # odd multiplier: a bijection mod 2^bits
        x = x ^ (x >> half)  # xor-shift: a bijection
    return x


def _stream_base(seed: int, stream: int) -> int:
    return _mix_scalar((seed * 0x100000001B3 + stream * 0x9E37) & _MASK64)


def _base(seed: int, stream: int) -> Any:
    return _U64(_stream_base(seed, stream))


def _device(xp: Any) -> str:
    return "cpu" if xp is np else "cuda"


def _random_u64(xp: Any, n: int, seed: int, stream: int) -> Any:
    """The stream's first ``n`` random values: ``mix64(base + i)``."""
    out = xp.empty(n, dtype=_U64)
    kernels.STREAM(_device(xp), n, out, _base(seed, stream))
    return out


def _uniform01(xp: Any, n: int, seed: int, stream: int) -> Any:
    """The stream's first ``n`` values as float64 in ``[0, 1)`` (their top 53 bits)."""
    out = xp.empty(n, dtype=np.float64)
    kernels.STREAM_UNIFORM01(_device(xp), n, out, _base(seed, stream))
    return out


def _sorted_stream(xp: Any, n: int, seed: int, stream: int) -> Any:
    """The stream's first ``n`` random values, sorted (all distinct: mix64 is a bijection);
    inverting mix64 on them gives their counters in that order, the argsort of the stream."""
    ordered = _random_u64(xp, n, seed, stream)
    ordered.sort()
    return ordered


def _shuffle(xp: Any, arr: Any, seed: int, stream: int, repeat: int = 1) -> Any:
    """``arr`` (each element ``repeat`` times) in the order of its stream's random values:
    the stream sorted, mix64 inverted on it (the argsort of the stream, in place), then the
    gather."""
    n = int(arr.shape[0]) * repeat
    dev = _device(xp)
    ordered = _sorted_stream(xp, n, seed, stream)
    kernels.UNSHUFFLED_INDEX(dev, n, ordered, ordered, _base(seed, stream))
    out = ordered if arr.dtype == _U64 else xp.empty(n, dtype=arr.dtype)
    kernels.GATHER(dev, n, out, arr, ordered, _U64(repeat))
    return out


# ---------------------------------------------------------------------- keys
def _distinct_keys(w: Workload, xp: Any) -> tuple[Any, Any]:
    """The distinct keys, in random order, uint64; and the same sorted where that comes for
    free (dense and zipf keys), else None."""
    d, bits, seed = w.distinct_keys, w.key_bits, w.seed
    dev = _device(xp)
    if w.distribution == "dense":
        ordered = _sorted_stream(xp, d, seed, 1)
        kernels.UNSHUFFLED_INDEX(dev, d, ordered, ordered, _base(seed, 1))
        return ordered, xp.arange(d, dtype=_U64)
    if w.distribution in ("uniform", "clustered"):
        cs, span_bits = 1, 0
        if w.distribution == "clustered":
            cs = w.cluster_size
            span_bits = max(1, (cs - 1).bit_length() + 1)  # clusters 2*cs apart at least
            if ((d + cs - 1) // cs) > (1 << (bits - span_bits)):
                raise ConfigError(f"{d} keys in clusters of {cs} do not fit in {bits} bits")
        out = xp.empty(d, dtype=_U64)
        kernels.KEYS_PERMUTED(dev, d, out, *_permute_constants(bits - span_bits, seed),
                              _U64(cs), _U64(span_bits))
        return out, None
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
    return _shuffle(xp, keys, seed, 3), keys


def _build_keys(w: Workload, distinct: Any, sorted_distinct: Any, xp: Any) -> Any:
    """The build's keys: each distinct key ``multiplicity`` times, shuffled or sorted."""
    m = w.multiplicity
    if w.sorted_build:
        ordered = sorted_distinct if sorted_distinct is not None else xp.sort(distinct)
        keys = ordered if m == 1 else xp.repeat(ordered, m)
    elif m > 1:
        keys = _shuffle(xp, distinct, w.seed, 4, repeat=m)
    else:
        keys = distinct
    return keys.astype(w.key_dtype, copy=False)


def generate_keys(w: Workload, device: str = "cpu") -> tuple[Any, KeySpace]:
    """The build's keys of ``w`` on ``device`` (those of :func:`generate`) and their
    :class:`KeySpace`, for :func:`generate_lookups`."""
    xp = array_module(device)
    distinct, ordered = _distinct_keys(w, xp)
    if ordered is None:  # a sort of the distinct keys is their key space
        ordered = xp.sort(distinct)
    return _build_keys(w, distinct, ordered, xp), KeySpace(ordered, w.key_bits)


# ---------------------------------------------------------------------- lookups
@dataclass(frozen=True)
class KeySpace:
    """Where lookups can fall for a set of keys: their distinct keys, sorted (uint64), the key
    width, and the values a lookup may take (``bounds``, inclusive; default the whole width:
    keys of a narrower dtype held wider, e.g. uint16 keys as uint32 or text as its ranks,
    allow fewer)."""

    distinct: Any
    bits: int
    bounds: tuple[int, int] | None = None

    @property
    def domain(self) -> tuple[int, int]:
        """The smallest and the largest value a lookup may take."""
        return self.bounds if self.bounds is not None else (0, (1 << self.bits) - 1)

    @property
    def has_gaps(self) -> bool:
        """Some two neighbouring distinct keys are more than one apart: a miss can fall
        between them."""
        d = self.distinct
        return int(d.shape[0]) > 1 and int(d[-1]) - int(d[0]) + 1 > int(d.shape[0])

    @property
    def room_outside(self) -> bool:
        """Some value of the domain lies below the smallest or above the largest key."""
        d, (lo, hi) = self.distinct, self.domain
        return not d.shape[0] or int(d[0]) > lo or int(d[-1]) < hi


def key_space(keys: Any, xp: Any, bounds: tuple[int, int] | None = None) -> KeySpace:
    """The :class:`KeySpace` of ``keys`` (any 1-D unsigned array), by a sort (NumPy's
    hash-based unique is several times slower here)."""
    ordered = xp.sort(keys)
    n = int(ordered.shape[0])
    if n > 1:
        keep = xp.empty(n, dtype=bool)
        keep[0] = True
        xp.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
        ordered = ordered[keep]
    return KeySpace(ordered.astype(_U64, copy=False), keys.dtype.itemsize * 8, bounds)


def fit_misses(w: Workload, space: KeySpace, keys: str,
               explicit: Collection[str] = ()) -> tuple[Workload, str | None]:
    """``w`` with its misses where ``space`` has room for them, and a note saying what was
    changed and why (None: nothing was). Keys without gaps between them (dense IDs) take
    every miss outside ``[min, max]`` (``out_of_range_share`` 1), keys that fill the domain up
    to both ends every miss between them (0). A field in ``explicit`` (those the user set)
    is never changed: ConfigError naming it and what is possible, as where the keys leave
    no room for any miss. ``keys`` names the keys in the messages."""
    d = int(space.distinct.shape[0])
    _, n_gap, n_out = _miss_counts(w, d)
    if n_gap + n_out == 0:
        return w, None
    gaps, outside = space.has_gaps, space.room_outside
    if not gaps and not outside:
        raise ConfigError(f"workload.hit_rate {w.hit_rate:g} cannot be met: {keys} leave no "
                          "value for a lookup to miss with (no gaps between them and none "
                          "outside [min, max]); only hit_rate 1 is possible")
    if (not n_gap or gaps) and (not n_out or outside):
        return w, None
    share = 0.0 if gaps else 1.0
    why = ("have no gaps between them" if not gaps else
           "reach both ends of their domain")
    if "out_of_range_share" in explicit:
        raise ConfigError(f"workload.out_of_range_share {w.out_of_range_share:g} cannot be met: "
                          f"{keys} {why}; only out_of_range_share {share:g} is possible")
    where = "outside [min, max]" if share else "into gaps between them"
    return (w.model_copy(update={"out_of_range_share": share}),
            f"{keys} {why}, so the {n_gap + n_out:,} misses fall {where}: "
            f"workload.out_of_range_share {share:g} instead of {w.out_of_range_share:g}")


def _miss_counts(w: Workload, d: int) -> tuple[int, int, int]:
    """(hits, misses in gaps, misses outside [min, max]) of ``w`` over ``d`` distinct keys."""
    q = w.n_lookups
    n_hit = round(w.hit_rate * q) if d else 0
    n_miss = q - n_hit
    n_out = round(w.out_of_range_share * n_miss)
    return n_hit, n_miss - n_out, n_out


def _miss_args(xp: Any, space: KeySpace, n_gap: int, n_out: int, seed: int) -> tuple[Any, ...]:
    """The arguments of :func:`~indexzoo.tools.workload_kernels.miss_value` for ``n_gap``
    misses in gaps between the keys and ``n_out`` outside ``[min, max]``; ConfigError where
    the keys leave no room for them."""
    sd = space.distinct
    d = int(sd.shape[0])
    gap_at = xp.zeros(1, dtype=np.int64)  # (unread without gap misses)
    if n_gap:
        gap_at = xp.nonzero(sd[1:] - sd[:-1] > _U64(1))[0].astype(np.int64, copy=False)
        if gap_at.shape[0] == 0:
            raise ConfigError(
                "the keys have no gaps, so misses inside [min, max] are impossible; "
                "set out_of_range_share=1 or use a distribution with gaps"
            )
    lo, hi = space.domain
    if d:
        below, above, hi_next = int(sd[0]) - lo, hi - int(sd[-1]), (int(sd[-1]) + 1) & _MASK64
    else:
        below, above, hi_next = 0, hi - lo + 1, lo
    if n_out and below + above == 0:
        raise ConfigError("the keys cover the whole key domain: no lookup can miss outside it")
    modulus = below + above
    return (sd, gap_at, np.int64(n_gap), _base(seed, 6), _base(seed, 7), _base(seed, 8),
            _U64(lo), _U64(below), _U64(hi_next),
            _U64(modulus if modulus < (1 << 64) else 1), modulus < (1 << 64))


def _point_lookups(xp: Any, w: Workload, space: KeySpace, dtype: Any) -> tuple[Any, int]:
    """Point lookups and how many hit. Hits come first by counter, their ranks (stream 5)
    uniform or Zipf over a fixed random order of the distinct keys (stream 9); then the
    misses; all in the order of stream 10 (or sorted)."""
    q, seed, s = w.n_lookups, w.seed, w.lookup_zipf
    sd = space.distinct
    d = int(sd.shape[0])
    n_hit, n_gap, n_out = _miss_counts(w, d)
    misses = _miss_args(xp, space, n_gap, n_out, seed)
    cdf = xp.zeros(1, dtype=np.float64)  # (unread for uniform ranks)
    if n_hit and s != 0.0:
        cdf = xp.cumsum(xp.arange(1, d + 1, dtype=np.float64) ** (-s))
        cdf /= cdf[-1]
    order = _shuffle(xp, sd, seed, 9) if n_hit else sd
    hits = (np.int64(n_hit), np.int64(d), _base(seed, 5), cdf, s != 0.0)
    dev = _device(xp)
    rank = xp.empty(q, dtype=np.int32 if d < (1 << 31) else np.int64)  # -1: a miss
    if w.sorted_lookups:
        out = xp.empty(q, dtype=dtype)
        unread = xp.zeros(1, dtype=_U64)  # (no stream: the lookups in counter order)
        kernels.PLAN_LOOKUPS(dev, q, out, rank, unread, _U64(0), False, *hits, *misses)
    else:
        ordered = _sorted_stream(xp, q, seed, 10)
        out = ordered if dtype == _U64 else xp.empty(q, dtype=dtype)
        kernels.PLAN_LOOKUPS(dev, q, out, rank, ordered, _base(seed, 10), True, *hits, *misses)
    if n_hit:
        kernels.GATHER_HITS(dev, q, out, order, rank)
    if w.sorted_lookups:
        out.sort()
    return out, n_hit


def generate_lookups(w: Workload, keys: Any, xp: Any,
                     space: KeySpace | None = None) -> tuple[Any, Any, Any, int]:
    """Lookups for ``keys`` (any 1-D unsigned array): ``(queries, lo, hi, n_hits)``;
    ``space``: the keys' :class:`KeySpace` where the caller has it already."""
    return _lookups(w, key_space(keys, xp) if space is None else space, keys.dtype, xp)


def _lookups(w: Workload, space: KeySpace, dtype: Any, xp: Any) -> tuple[Any, Any, Any, int]:
    if w.range_hits is None:
        queries, n_hit = _point_lookups(xp, w, space, dtype)
        return queries, None, None, n_hit
    q, seed = w.n_lookups, w.seed
    sd = space.distinct
    d = int(sd.shape[0])
    n_hit, n_gap, n_out = _miss_counts(w, d)
    misses = _miss_args(xp, space, n_gap, n_out, seed)
    lo, hi = xp.empty(q, dtype=dtype), xp.empty(q, dtype=dtype)
    dev = _device(xp)
    if n_hit:
        kernels.RANGE_HITS(dev, n_hit, lo, hi, sd, _base(seed, 11),
                           _U64(max(d - w.range_hits + 1, 1)), np.int64(w.range_hits))
    kernels.MISSES(dev, q - n_hit, lo, np.int64(n_hit), *misses)
    hi[n_hit:] = lo[n_hit:]  # a miss is an empty range [x, x]
    if w.sorted_lookups:
        perm = xp.argsort(lo)
    else:
        perm = _sorted_stream(xp, q, seed, 12)
        kernels.UNSHUFFLED_INDEX(dev, q, perm, perm, _base(seed, 12))
        perm = perm.view(np.int64)
    return None, lo[perm], hi[perm], n_hit


def generate(w: Workload, device: str = "cpu") -> Dataset:
    """Keys and lookups of ``w`` on ``device`` ("cpu" or "cuda")."""
    keys, space = generate_keys(w, device)
    queries, lo, hi, n_hit = _lookups(w, space, keys.dtype, array_module(device))
    return Dataset(w, keys, queries, lo, hi, n_hit)
