"""RTCUDB §4: the encodings that put several attributes into one coordinate.

* :class:`BijectionEncoder` (§4.2, scan attributes -> Z): mixed radix over the attributes'
  code domains, the first attribute most significant: ``Z = sum_i A_i * prod_{j>i} k_j`` with
  ``A_i`` the attribute's code less its smallest code and ``k_i`` its domain size. It is
  order-preserving (lexicographic in the attribute order), so a box predicate is a union of
  Z-intervals (:meth:`BijectionEncoder.intervals`). :func:`attribute_order` is the paper's
  heuristic: attributes with smaller predicate ranges first, larger ones later.
* :class:`GroupDictionary` (§4.3, group-by tuple -> Y): the distinct tuples that occur, in
  lexicographic order, numbered 0..K-1.
* :class:`Packer` (§4.4, aggregate values -> X): each value (a precomputed expression, less
  its smallest value) gets the bits of its range, packed low to high while the total stays
  within the coordinate's exact integer bits; the rest are spilled to device memory (§4.5).

[AMBIG] resolved: OR / IN on an attribute are several intervals of that attribute; interval
decomposition enumerates the allowed values of every attribute before the last constrained
one and takes the runs of the last one (``prod(|allowed A_i|, i < t) * runs(A_t)`` intervals).
When that count passes a cap, the trailing constrained attributes are left to a re-check in
the any-hit program (as the split variant of §6.6 does for the attributes it does not encode)
instead of multiplying the intervals.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.devices import to_numpy, xp_of

__all__ = ["BijectionEncoder", "GroupDictionary", "Packer", "attribute_order"]

Intervals = list[tuple[int, int]]


def _allowed_count(ivs: Intervals) -> int:
    return sum(hi - lo + 1 for lo, hi in ivs)


def attribute_order(domains: dict[str, tuple[int, int]], workload: Sequence[dict[str, Intervals]]
                    ) -> list[str]:
    """The attributes of ``domains`` ordered by the mean fraction of their domain that the
    workload's predicates allow (1 where a query leaves one open), smallest first; ties by
    domain size."""

    def key(name: str) -> tuple[float, int]:
        lo, hi = domains[name]
        k = max(hi - lo + 1, 1)  # (an empty table's domain is empty)
        fr = [(_allowed_count(f[name]) / k) if name in f else 1.0 for f in workload] or [1.0]
        return (sum(fr) / len(fr), k)

    return sorted(domains, key=key)


@dataclass(frozen=True)
class BijectionEncoder:
    """Mixed-radix codes over ``names`` (most significant first) with ``domains``
    (smallest, largest code) each."""

    names: tuple[str, ...]
    domains: tuple[tuple[int, int], ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(hi - lo + 1 for lo, hi in self.domains)

    @property
    def strides(self) -> tuple[int, ...]:
        s = self.sizes
        return tuple(int(np.prod(s[i + 1:], dtype=object)) for i in range(len(s)))

    @property
    def span(self) -> int:
        """The number of codes: every Z lies in [0, span)."""
        return int(np.prod(self.sizes, dtype=object)) if self.names else 1

    @classmethod
    def fitting(cls, names: Sequence[str], domains: dict[str, tuple[int, int]], limit: int
                ) -> BijectionEncoder:
        """The longest prefix of ``names`` whose span stays within ``limit`` codes."""
        kept: list[str] = []
        span = 1
        for n in names:
            lo, hi = domains[n]
            if span * (hi - lo + 1) > limit:
                break
            span *= hi - lo + 1
            kept.append(n)
        return cls(tuple(kept), tuple(domains[n] for n in kept))

    def encode(self, columns: Sequence[Any]) -> Any:
        """Every row's Z code, on the device of ``columns`` (NumPy or CuPy arrays)."""
        xp = xp_of(columns[0]) if columns else np
        z = xp.zeros(len(columns[0]) if columns else 0, dtype=np.int64)
        for col, (lo, _), s in zip(columns, self.domains, self.strides, strict=True):
            z += (col.astype(np.int64) - lo) * s
        return z

    def decode(self, z: np.ndarray) -> list[np.ndarray]:
        return [(z // s) % k + lo for s, k, (lo, _) in zip(self.strides, self.sizes,
                                                           self.domains, strict=True)]

    def intervals(self, filters: dict[str, Intervals], max_intervals: int = 1 << 16
                  ) -> tuple[Intervals, list[str]]:
        """The Z-intervals of the box ``filters`` (per attribute, inclusive code intervals;
        attributes not named are open), and the encoded attributes left to a re-check."""
        allowed: list[Intervals] = []
        for n, (lo, hi) in zip(self.names, self.domains, strict=True):
            ivs = [(builtins_max(a, lo) - lo, builtins_min(b, hi) - lo) for a, b in
                   filters.get(n, [(lo, hi)])]
            allowed.append([(a, b) for a, b in ivs if a <= b])
        if any(not a for a in allowed):
            return [], []
        full = [a == [(0, k - 1)] for a, k in zip(allowed, self.sizes, strict=True)]
        t = max((i for i, f in enumerate(full) if not f), default=-1)
        if t < 0:
            return [(0, self.span - 1)], []
        recheck: list[str] = []
        while True:
            count = np.prod([_allowed_count(a) for a in allowed[:t]], dtype=object) * \
                len(allowed[t])
            if count <= max_intervals or t == 0:
                break
            if not full[t]:
                recheck.append(self.names[t])
            t -= 1
        while t > 0 and full[t]:
            t -= 1
        recheck += [self.names[i] for i in range(t + 1, len(self.names)) if not full[i]
                    and self.names[i] not in recheck]
        strides = self.strides
        out: Intervals = []
        prefixes = itertools.product(*[[v for a, b in ivs for v in range(a, b + 1)]
                                       for ivs in allowed[:t]])
        for pre in prefixes:
            base = sum(v * strides[i] for i, v in enumerate(pre))
            for a, b in allowed[t]:
                out.append((base + a * strides[t], base + (b + 1) * strides[t] - 1))
        merged: Intervals = []
        for lo, hi in out:
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], builtins_max(hi, merged[-1][1]))
            else:
                merged.append((lo, hi))
        return merged, recheck


builtins_max, builtins_min = max, min


@dataclass(frozen=True)
class GroupDictionary:
    """The distinct group tuples of a table in lexicographic order: ``tuples[j]`` (one array
    per attribute) is the tuple of code ``j``."""

    names: tuple[str, ...]
    tuples: tuple[np.ndarray, ...]

    @property
    def size(self) -> int:
        return len(self.tuples[0]) if self.tuples else 1

    @classmethod
    def build(cls, names: Sequence[str], columns: Sequence[Any], n: int, xp: Any = np
              ) -> tuple[GroupDictionary, Any]:
        """The dictionary and every row's code (Y) for a table of ``n`` rows. The work runs on
        ``xp``'s device (``columns`` are NumPy or CuPy arrays of it), and so do the codes; the
        dictionary's tuples are NumPy arrays."""
        if not names:
            return cls((), ()), xp.zeros(n, dtype=np.int64)
        cols = [c.astype(np.int64, copy=False) for c in columns]
        if n == 0:
            return cls(tuple(names), tuple(to_numpy(c[:0]) for c in cols)), \
                xp.zeros(0, dtype=np.int64)
        lows = [int(c.min()) for c in cols]
        spans = [int(c.max()) - lo + 1 for c, lo in zip(cols, lows, strict=True)]
        if math.prod(spans) < 1 << 62:
            # one integer key per row whose order is the tuples' lexicographic order (mixed
            # radix, the first attribute most significant): one sort of int64 keys, where
            # np.unique(axis=0) sorts rows as opaque bytes, some 30x slower
            key = xp.zeros(n, dtype=np.int64)
            for c, lo, span in zip(cols, lows, spans, strict=True):
                key = key * span + (c - lo)
            order = xp.argsort(key)
        else:  # the spans overflow one key: sort by every column (last key least significant)
            order = xp.lexsort(xp.stack(list(reversed(cols))))
        sorted_cols = [c[order] for c in cols]
        change = xp.zeros(n, dtype=bool)
        change[0] = True
        for c in sorted_cols:
            change[1:] |= c[1:] != c[:-1]
        starts = xp.flatnonzero(change)
        code = xp.empty(n, dtype=np.int64)
        code[order] = xp.cumsum(change) - 1
        return cls(tuple(names), tuple(to_numpy(c[starts]) for c in sorted_cols)), code


@dataclass(frozen=True)
class Packer:
    """Values packed into an integer coordinate: value ``i`` with ``slot[i] >= 0`` sits at bit
    ``shift[i]`` with ``width[i]`` bits as ``value - offset[i]``; ``slot[i] = -1``: spilled."""

    offset: tuple[int, ...]
    width: tuple[int, ...]
    shift: tuple[int, ...]
    packed: tuple[bool, ...]
    bits: int

    @classmethod
    def plan(cls, values: Sequence[np.ndarray], bits: int) -> Packer:
        offs, widths, shifts, packed = [], [], [], []
        used = 0
        for v in values:
            lo = int(v.min()) if v.size else 0
            hi = int(v.max()) if v.size else 0
            w = builtins_max(1, (hi - lo).bit_length())
            offs.append(lo)
            widths.append(w)
            if used + w <= bits:
                shifts.append(used)
                packed.append(True)
                used += w
            else:
                shifts.append(-1)
                packed.append(False)
        return cls(tuple(offs), tuple(widths), tuple(shifts), tuple(packed), bits)

    def mask(self, i: int) -> int:
        """The bit mask of value ``i`` in X (0 for a spilled value, which X does not hold)."""
        return (1 << self.width[i]) - 1 if self.packed[i] else 0

    def pack(self, values: Sequence[np.ndarray], n: int) -> np.ndarray:
        x = np.zeros(n, dtype=np.int64)
        for v, o, s, p in zip(values, self.offset, self.shift, self.packed, strict=True):
            if p:
                x |= (v.astype(np.int64) - o) << s
        return x

    def unpack(self, x: np.ndarray, i: int) -> np.ndarray:
        return ((x.astype(np.int64) >> self.shift[i]) & ((1 << self.width[i]) - 1)) + \
            self.offset[i]
