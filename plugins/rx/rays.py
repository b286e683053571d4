"""Lookups as rays (paper §2.2, §3.3, Table 2; §3.2 for 3D-mode ranges).

A :class:`Plan` is rx's :class:`~indexzoo.native.rt.query.RayBatch`: it gives every lookup of a
batch its rays, as a flat ray list grouped by lookup: lookup ``q`` owns rays ``starts[q] ..
starts[q+1]-1`` (possibly none: it then misses). Rays are generated for any slice of that list
on demand, so a batch is traced in launches of at most ``max_rays`` rays whatever its ranges
span, with array operations only (NumPy or CuPy); one perpendicular ray per point lookup is
made inside the kernel from the lookup key.

The rays themselves (perpendicular, offset, zero) are :mod:`indexzoo.native.rt.keyrays`'s.

A range ``[lo, hi]`` casts one ray along x per high part ``h`` between ``lo``'s and ``hi``'s
[§3.2]: from ``lo``'s x part (or 0) to ``hi``'s x part (or the last x) on the line
``(y(h), z(h))``. Rays are cast only for the high parts that occur among the keys (kept sorted at
build): a ray on any other line cannot hit anything, so the answers are the paper's, and the
number of rays per range is bounded by the number of distinct high parts, not by the range's
span of up to 2^41 lines. (For naive and extended mode every held key has high part 0: one ray,
clipped to the mode's last key.) A point lookup with a parallel ray is the range ``[k, k]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.rt import (
    Generated,
    KeyCoder,
    RayBatch,
    Rays,
    occupied_row_rays,
    occupied_rows,
    perpendicular_raygen,
    perpendicular_rays,
)

from .programs import RxRecord

__all__ = ["Plan", "distinct_highs", "perpendicular_plan", "range_plan"]

_U64 = np.uint64


@dataclass(frozen=True)
class Plan(RayBatch):
    """The rays of a batch of ``n_queries`` lookups (see the module docstring)."""

    n_queries: int
    starts: Any  # int64 (Q + 1): lookup q owns rays starts[q] .. starts[q + 1] - 1
    coder: KeyCoder
    kind: str  # "perpendicular" or "range"
    zero: bool  # range rays from x = 0 (else from an offset origin)
    # perpendicular: a = the lookups; range: a = lo, b = hi, first = the index in highs of
    # each range's first high part
    a: Any
    b: Any = None
    first: Any = None
    highs: Any = None
    one_each: bool = False  # every lookup owns exactly one ray (ray i belongs to lookup i)
    # what rx's programs read (RxRecord): the key column (or a stand-in) and whether sphere
    # hits are confirmed against the ray's integer bounds
    keys: Any = field(default=None, repr=False)
    confirm: bool = False
    bounds: bool = False  # fill ray_lo/ray_hi even without confirm (AABBs on OptiX)

    def with_record(self, keys: Any, confirm: bool, bounds: bool = False) -> Plan:
        """The plan with what its launch records need: ``confirm`` sphere hits against the
        rays' integer bounds, or only fill the ``bounds`` (OptiX's AABB program reads them)."""
        return Plan(self.n_queries, self.starts, self.coder, self.kind, self.zero, self.a, self.b,
                    self.first, self.highs, self.one_each, keys, confirm, confirm or bounds)

    def rays(self, s: int, e: int) -> Rays | Generated:
        """Rays ``s .. e-1`` of the flat list (one perpendicular ray per lookup: generated in
        the kernel from the lookup keys, OptiX's ``__raygen__``)."""
        if self.kind == "perpendicular":
            if self.one_each:
                return Generated(perpendicular_raygen(self.coder), self.a[s:e])
            return self._perpendicular(self.owners(s, e))
        return self._ranges(self.owners(s, e), s)

    def record(self, s: int, e: int) -> RxRecord:
        c = self.coder
        if self.bounds:
            owner = self.owners(s, e)
            ray_lo = self.a[owner].astype(_U64, copy=False)
            ray_hi = ray_lo if self.b is None else self.b[owner].astype(_U64, copy=False)
        else:
            ray_lo = ray_hi = self.keys
        return RxRecord(self.keys, np.int64(c.x_kind), np.int64(c.x_bits), np.int64(c.y_bits),
                        ray_lo, ray_hi, np.bool_(self.confirm))

    def _perpendicular(self, owner: Any) -> Rays:
        return perpendicular_rays(self.coder, self.a[owner])

    def _ranges(self, owner: Any, s: int) -> Rays:
        return occupied_row_rays(self.coder, self.a, self.b, self.highs, self.first, self.starts,
                                 owner, s, self.zero)


def _starts(counts: Any) -> Any:
    xp = xp_of(counts)
    starts = xp.zeros(counts.shape[0] + 1, dtype=np.int64)
    xp.cumsum(counts, out=starts[1:])
    return starts


def perpendicular_plan(coder: KeyCoder, q: Any) -> Plan:
    """One perpendicular ray per point lookup the mode can hold (the others miss)."""
    counts = coder.legal(q).astype(np.int64)
    starts = _starts(counts)
    n = int(q.shape[0])
    return Plan(n, starts, coder, "perpendicular", False, q, one_each=int(starts[-1]) == n)


def range_plan(coder: KeyCoder, lo: Any, hi: Any, highs: Any, zero: bool) -> Plan:
    """Rays of the ranges ``[lo, hi]`` (``lo > hi``: none) over the sorted distinct high parts
    ``highs`` of the keys: one per occupied row."""
    casts, first = occupied_rows(coder, lo, hi, highs)
    starts = _starts(casts)
    n = int(lo.shape[0])
    one_each = int(starts[-1]) == n and bool((casts <= 1).all())
    return Plan(n, starts, coder, "range", zero, lo, hi, first, highs, one_each)


def distinct_highs(coder: KeyCoder, keys: Any) -> Any:
    """The sorted distinct high parts of ``keys``: the rows a range casts its rays along (in
    naive and extended mode every key's high part is 0: one row)."""
    xp = xp_of(keys)
    if coder.mode == "3d":
        _, high = coder.parts(keys)
        return xp.unique(high)  # sorts a copy of the high parts
    return xp.zeros(min(int(keys.shape[0]), 1), dtype=np.uint64)
