"""Key sets and lookups for the conformance checks (NumPy, on the host).

Key-set families: dense, uniform 32-bit, uniform 64-bit, clustered, heavy duplicates
(multiplicity up to 2^10), all keys equal. Lookups mix hits, misses inside gaps, misses below
the minimum and above the maximum, and random values; ranges mix every width from empty and
single keys to the whole domain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EXTREME_KEYS_32", "EXTREME_KEYS_64", "FAMILIES", "KeySet", "lookups", "make_keys",
           "ranges"]

FAMILIES = ("dense", "uniform32", "uniform64", "clustered", "duplicates", "all_equal")

EXTREME_KEYS_64 = [0, 1, 2**23 - 1, 2**23, 2**24 + 1, 2**32 - 1, 2**32, 2**64 - 2, 2**64 - 1]
EXTREME_KEYS_32 = [0, 1, 2**23 - 1, 2**23, 2**24 + 1, 2**32 - 2, 2**32 - 1]


@dataclass(frozen=True)
class KeySet:
    family: str
    keys: np.ndarray  # uint32 or uint64

    @property
    def bits(self) -> int:
        return self.keys.dtype.itemsize * 8


def _top(bits: int) -> int:
    return (1 << bits) - 1


def make_keys(family: str, n: int, seed: int, *, duplicates: bool = True) -> KeySet:
    """About ``n`` keys of ``family`` (exactly ``n`` except where uniqueness trims a few)."""
    rng = np.random.default_rng(seed)
    bits = 32 if family in ("dense", "uniform32", "clustered") else 64
    top = _top(bits)
    if family == "dense":
        base = int(rng.choice([0, 1, max(2**23 - n // 2, 0), top - n + 1 if n else 0]))
        keys = np.arange(base, base + n, dtype=np.uint64)
    elif family in ("uniform32", "uniform64"):
        keys = rng.integers(0, top, n, dtype=np.uint64, endpoint=True)
        if not duplicates:
            keys = np.unique(keys)
    elif family == "clustered":
        out, total = [], 0
        while total < n:
            size = min(int(rng.integers(1, 65)), n - total)
            start = int(rng.integers(0, top - size + 1, dtype=np.uint64, endpoint=True))
            out.append(np.arange(start, start + size, dtype=np.uint64))
            total += size
        keys = np.concatenate(out) if out else np.zeros(0, np.uint64)
        if not duplicates:
            keys = np.unique(keys)
    elif family == "duplicates":
        if not duplicates:
            raise ValueError("the duplicates family needs an index with duplicates")
        parts, total = [], 0
        while total < n:
            m = int(min(1 << int(rng.integers(0, 11)), n - total))  # multiplicity up to 2^10
            parts.append(np.full(m, rng.integers(0, top, dtype=np.uint64, endpoint=True)))
            total += m
        keys = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    elif family == "all_equal":
        choices = [0, 1, 2**32 - 1, top, int(rng.integers(0, top, dtype=np.uint64))]
        value = choices[int(rng.integers(0, len(choices)))]
        keys = np.full(n if duplicates else min(n, 1), value, dtype=np.uint64)
    else:
        raise ValueError(f"unknown key family {family!r}")
    keys = keys[rng.permutation(keys.shape[0])]
    return KeySet(family, keys.astype(np.uint32 if bits == 32 else np.uint64))


def _gap_values(u: np.ndarray) -> np.ndarray:
    """Values strictly between consecutive distinct keys (one per gap)."""
    if u.shape[0] < 2:
        return np.zeros(0, dtype=u.dtype)
    gaps = np.nonzero(u[1:] > u[:-1] + 1)[0]
    return (u[gaps] + 1).astype(u.dtype)


def lookups(keys: np.ndarray, q: int, seed: int) -> np.ndarray:
    """``q`` point lookups: hits, gap misses, below the minimum, above the maximum, random."""
    rng = np.random.default_rng(seed)
    dtype = keys.dtype
    top = _top(dtype.itemsize * 8)
    u = np.unique(keys)
    pools = [rng.integers(0, top, max(q, 1), dtype=np.uint64, endpoint=True).astype(dtype)]
    if u.size:
        pools.append(u)
        pools.append(_gap_values(u))
        if int(u[0]) > 0:
            pools.append(np.array([int(u[0]) - 1, 0, int(u[0]) // 2], dtype=dtype))
        if int(u[-1]) < top:
            pools.append(np.array([int(u[-1]) + 1, top, int(u[-1]) + (top - int(u[-1])) // 2],
                                  dtype=dtype))
    pools = [p for p in pools if p.size]
    which = rng.integers(0, len(pools), q)
    out = np.empty(q, dtype=dtype)
    for k, pool in enumerate(pools):
        sel = which == k
        out[sel] = pool[rng.integers(0, pool.size, int(sel.sum()))]
    return out


def ranges(keys: np.ndarray, q: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``q`` inclusive ranges of every width: empty, single keys, a few keys, many, all."""
    rng = np.random.default_rng(seed)
    dtype = keys.dtype
    top = _top(dtype.itemsize * 8)
    lo = lookups(keys, q, seed + 1).astype(np.uint64)
    u = np.unique(keys).astype(np.uint64)
    kind = rng.integers(0, 6, q)
    width = np.zeros(q, dtype=np.uint64)
    width[kind == 1] = rng.integers(1, 4, int((kind == 1).sum()))
    wide = np.nonzero(kind == 3)[0][8:]  # at most 8 ranges of any width up to the whole domain
    kind[wide] = 2
    width[kind == 2] = rng.integers(0, 1 << 12, int((kind == 2).sum()))
    width[kind == 3] = rng.integers(0, top, int((kind == 3).sum()), dtype=np.uint64, endpoint=True)
    hi = np.where(lo > np.uint64(top) - width, np.uint64(top), lo + width)
    if u.size:  # ranges from one key to the k-th next key: exact hit counts
        j = rng.integers(0, u.size, q)
        k = np.minimum(j + rng.integers(0, 40, q), u.size - 1)
        sel = kind == 4
        lo[sel], hi[sel] = u[j[sel]], u[k[sel]]
    inv = kind == 5  # inverted (empty) ranges: [x + 1, x]
    x = rng.integers(0, top, int(inv.sum()), dtype=np.uint64)
    lo[inv], hi[inv] = x + np.uint64(1), x
    return lo.astype(dtype), hi.astype(dtype)
