"""Which shard holds a row, and which shards answer a lookup (NumPy or CuPy, as the keys or
lookups are; run on the client and on the workers alike).

Three schemes:

* ``range``: a sorted sample of the keys is cut into ``S`` equal parts (the splitters are
  the keys at the cuts); a key lands in the shard whose part of the sample it falls in. A
  key that fills sample positions across a cut (a key so frequent that splitters fall on it)
  is dealt out by rowID over the shards those positions span, each taking the share of its
  rows that its part of the sample holds, so a key repeated a million times fills several
  shards instead of overloading one. After the build each shard reports the smallest and largest key it holds;
  lookups are routed by those bounds, so a point goes to every shard whose bounds contain it
  (one, or the run holding a split key) and a range to the shards it overlaps.
* ``hash``: a key's shard is a mixed hash of the key modulo ``S``. Keys the sample shows as
  heavy (more than half a shard's fair share) are dealt out over every shard by rowID, and a
  point lookup of a heavy key goes to every shard. Ranges go to every shard.
* ``rows``: contiguous blocks of rows (multi-column indexes); every lookup goes to every shard.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import xp_of

__all__ = ["SAMPLE_PER_SHARD", "hash_shard", "heavy_keys", "range_shard", "route_points",
           "route_ranges", "row_blocks", "sample_keys", "splitters"]

#: Keys sampled per shard to draw the splitters (and to find heavy keys); the sample's
#: quantiles miss the true ones by about 1/sqrt(sample) of a shard's share.
SAMPLE_PER_SHARD = 4096

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def sample_keys(keys: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """At most ``size`` keys drawn without replacement (all of them when there are fewer)."""
    n = int(keys.shape[0])
    if n <= size:
        return keys
    rng = np.random.default_rng(seed)
    return keys[rng.choice(n, size=size, replace=False)]


def splitters(sample: np.ndarray, shards: int) -> np.ndarray:
    """``shards - 1`` non-decreasing splitters: the sample's ``i / shards`` quantiles. Equal
    splitters are kept: they mark a key heavy enough to span several shards."""
    s = np.sort(np.asarray(sample))
    if s.shape[0] == 0:
        return np.zeros(0, dtype=s.dtype)
    at = (np.arange(1, shards) * s.shape[0]) // shards
    return s[at]


def range_shard(keys: np.ndarray, rowids: np.ndarray, sample: np.ndarray,
                shards: int) -> np.ndarray:
    """The shard (int64) of each row under range partitioning by the sorted ``sample``.

    Shard ``i`` takes the sample's positions ``[i*m/S, (i+1)*m/S)``. A key absent from the
    sample goes where it would be inserted. A key present at positions ``[a, b)`` takes, for
    each row, the position ``a + u*(b - a)`` with ``u`` in [0, 1) spread evenly by rowID: a
    run of equal keys is dealt out over the shards its sample positions span, each getting
    the share of the run that its part of the sample holds (so a key that is 30% of the rows
    fills its shards as much as any other key would)."""
    xp = xp_of(keys)
    m = int(sample.shape[0])
    sample = xp.asarray(sample)
    inner = (xp.arange(1, shards, dtype=np.int64) * m) // shards
    first = xp.searchsorted(sample, keys, side="left")
    last = xp.searchsorted(sample, keys, side="right")
    absent = xp.searchsorted(inner, first, side="left")
    u = (xp.asarray(rowids).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)
    pos = first + (u.astype(np.float64) / float(1 << 53)) * (last - first)
    present = xp.searchsorted(inner, pos, side="right")
    return xp.where(last > first, present, absent).astype(np.int64)


def _mix(keys: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: neighbouring keys get unrelated hashes."""
    z = keys.astype(np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def heavy_keys(sample: np.ndarray, shards: int) -> np.ndarray:
    """The keys (sorted) that make up more than half a shard's share of ``sample``."""
    if shards < 2 or sample.shape[0] == 0:
        return np.zeros(0, dtype=sample.dtype)
    uniq, counts = np.unique(sample, return_counts=True)
    return uniq[counts * 2 * shards > sample.shape[0]]


def _is_heavy(keys: np.ndarray, heavy: np.ndarray) -> np.ndarray:
    xp = xp_of(keys)
    if heavy.shape[0] == 0:
        return xp.zeros(keys.shape[0], dtype=bool)
    heavy = xp.asarray(heavy)
    at = xp.minimum(xp.searchsorted(heavy, keys), heavy.shape[0] - 1)
    return heavy[at] == keys


def hash_shard(keys: np.ndarray, rowids: np.ndarray, shards: int,
               heavy: np.ndarray) -> np.ndarray:
    """The shard (int64) of each row under hash partitioning; heavy keys by rowID."""
    xp = xp_of(keys)
    home = (_mix(keys) % np.uint64(shards)).astype(np.int64)
    spread = xp.asarray(rowids).astype(np.int64) % shards
    return xp.where(_is_heavy(keys, heavy), spread, home)


def row_blocks(n: int, shards: int) -> np.ndarray:
    """Row boundaries (length ``shards + 1``) of ``shards`` contiguous blocks of about equal
    size."""
    return (np.arange(shards + 1, dtype=np.int64) * n) // shards


def route_points(scheme: str, q: np.ndarray, shards: int, lo: np.ndarray, hi: np.ndarray,
                 heavy: np.ndarray) -> list[np.ndarray]:
    """For each shard, the positions (int64) in ``q`` of the point lookups it must answer.

    ``lo``/``hi``: each shard's smallest and largest key (range scheme; an empty shard has
    lo > hi)."""
    xp = xp_of(q)
    fused = xp is not np and q.dtype.kind in "iu"  # one GPU kernel for the arithmetic
    if scheme == "range":
        if fused:
            return [xp.flatnonzero(_gpu_kernels()["within"](q, q.dtype.type(lo[s]),
                                                            q.dtype.type(hi[s])))
                    for s in range(shards)]
        return [xp.flatnonzero((q >= lo[s]) & (q <= hi[s])) for s in range(shards)]
    if scheme == "hash":
        if fused and heavy.shape[0] == 0:
            home = _gpu_kernels()["home"](q, np.uint64(shards))
            return [xp.flatnonzero(home == s) for s in range(shards)]
        home = (_mix(q) % np.uint64(shards)).astype(np.int64)
        heavy_q = _is_heavy(q, heavy)
        return [xp.flatnonzero((home == s) | heavy_q) for s in range(shards)]
    every = xp.arange(q.shape[0], dtype=np.int64)
    return [every] * shards


#: :func:`_mix` in CUDA C++, on an ``unsigned long long z`` (the GPU routing kernels' hash).
MIX_CUDA = """
z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
z = z ^ (z >> 31);
"""

_kernels: dict[str, Any] = {}


def _gpu_kernels() -> dict[str, Any]:
    """The routing arithmetic as CuPy elementwise kernels (one pass over the lookups instead
    of one per NumPy-style operation): ``home``, a key's shard under hash partitioning
    (:func:`_mix` modulo the shards, as int32; integer keys widened to uint64 as NumPy's
    ``astype`` does), and ``within``, whether a key lies in ``[lo, hi]``."""
    if not _kernels:
        import cupy

        _kernels["home"] = cupy.ElementwiseKernel(
            "T q, uint64 shards", "int32 home",
            "unsigned long long z = (unsigned long long)q;\n" + MIX_CUDA
            + "home = (int)(z % shards);", "indexzoo_sharded_home")
        _kernels["within"] = cupy.ElementwiseKernel(
            "T q, T lo, T hi", "bool inside", "inside = q >= lo && q <= hi",
            "indexzoo_sharded_within")
    return _kernels


def route_ranges(scheme: str, qlo: np.ndarray, qhi: np.ndarray, shards: int, lo: np.ndarray,
                 hi: np.ndarray) -> list[np.ndarray]:
    """For each shard, the positions of the ranges ``[qlo, qhi]`` it must answer: under the
    range scheme the non-empty ranges that overlap its keys, else every range."""
    xp = xp_of(qlo)
    if scheme == "range":
        live = qlo <= qhi
        return [xp.flatnonzero(live & (qhi >= lo[s]) & (qlo <= hi[s])) for s in range(shards)]
    every = xp.arange(qlo.shape[0], dtype=np.int64)
    return [every] * shards


def shard_rows(assignment: np.ndarray, shards: int) -> list[np.ndarray]:
    """The rows (int64, ascending) of each shard from a per-row shard number."""
    xp = xp_of(assignment)
    order = xp.argsort(assignment, kind="stable")
    bounds = [int(b) for b in xp.searchsorted(assignment[order], xp.arange(shards + 1))]
    return [order[bounds[s]:bounds[s + 1]] for s in range(shards)]
