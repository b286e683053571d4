"""Matrix RT Refine's geometry (paper §4.4, precision loss §4.4.4): the cube width, epsilon, the
cubes' float32 boxes, and the rays that cover a refine box: a grid of interval ``I`` across the
ray direction, short segments of length ``L`` separated by a spacing ``S`` along it.

Coordinates are integers below 2^32 (ranks, values, or values shifted right for 64-bit
columns without encoding); a group of fewer than three columns leaves the other axes at 0.

Cubes. Row ``r`` is the cube of half-width ``h = (w + eps) / 2`` (rounded up to a float32)
around its coordinates ``c``: float32 bounds ``f(f(c) -+ h)``, computed as OptiX users do (the
centre rounded to float32, then the half-width added in float32). ``eps = 2^(K-23)`` for
coordinates below ``2^K``, ``K > 23`` (0 below), the paper's §4.4.4 rule [AMBIG-1: "K =
2^{27}" read as K = 27]; ``K`` bounds every float of the scene (coordinates, cube bounds, ray
ends), so ``K = ceil(log2 N)`` with ranks (``eps = 16`` at N = 1e8, the paper's figure).

Rays of a box ``[lo_a, hi_a]`` (inclusive, per axis), direction axis ``d`` (the box's longest
side by default, as the artifact), the other two axes ``a``, ``b``:

* across: ``n_a = ceil(extent_a / I)`` grid lines at the integers ``lo_a + i I + (I-1)//2``
  (each within ``I/2`` of the cube centres of its cell), ``n_b`` likewise;
* along: ``n_z = ceil(extent_d / (L + S))`` segments; segment ``z`` answers for the centres
  ``s0 = lo_d + z (L+S) .. s1 = min(s0 + L + S - 1, hi_d)`` and spans ``(s0 - 1/2 + S'/2,
  s1 + 1/2 - S'/2)`` with ``S' = min(S, s1 - s0)``: length ``L``, gaps ``S`` (the artifact's
  ``p_lo + S/2 + z (L+S)``); with ``L = 0`` one segment spans the whole box (RTc3);
* origin 0 on the direction axis and ``t`` = the coordinate there, so the engine's slab test
  compares float32 bounds with ``tmin``/``tmax`` without arithmetic; both ends are widened by
  ``pad = 2^(K-23)`` (0 for ``K <= 23``).

Why no row in a box is missed (coverage; ``loss = 2^(K-25)`` bounds a rounding to float32):

* across (the ray's coordinate ``f(r)`` must lie in the cube's closed float32 slab): with
  ``|r - c| <= I/2 <= w/2``, ``f(c) - h <= c + loss - w/2 - eps/2 <= r`` because ``eps/2 >=
  loss``, and rounding is monotonic, so ``f(f(c) - h) <= f(r)``; the upper bound alike. With
  a smaller epsilon (the artifact's 0) and ``K > 24`` this can fail, which is why epsilon is
  always the rule's and no parameter.
* along (the cube's float32 slab must overlap the open ``(tmin, tmax)``): the upper cube bound
  is at least ``c + w/2 - 2 loss`` and ``tmin`` at most ``s0 - 1/2 + S'/2 - pad + loss``, and
  ``c >= s0``, ``w >= S'``: the gap is at least ``1/2 + pad - 3 loss > 0``; ``tmax`` alike.

Below ``2^23`` every quantity is exact and the margins are at least 1/2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo import ResourceError
from indexzoo.devices import xp_of
from indexzoo.native.rt import pick

__all__ = ["CELL_ASPECT", "MAX_RAYS_PER_QUERY_BATCH", "PLAN_COLUMNS", "RAY_CAP", "Geometry",
           "auto_width", "box_plan", "box_ray", "cube_boxes", "float_bits", "geometry",
           "paper_eps", "plan_rays", "too_many_rays"]

#: (L + S) / I of the paper's tuned configuration (L = 1.11e6, I = S = 8.3e4 at N = 1e8).
CELL_ASPECT = 14.4
#: A refine needing more rays than this for one batch is refused (a cube width far too small).
MAX_RAYS_PER_QUERY_BATCH = float(1 << 42)
AXES = {"x": 0, "y": 1, "z": 2}


def float_bits(m: float) -> int:
    """The least K with ``m < 2^K`` (m >= 0)."""
    return max(1, math.floor(m).bit_length())


def paper_eps(bits: int) -> float:
    """§4.4.4: ``2^(K-23)`` for coordinates below ``2^K``, ``K > 23``; else 0."""
    return float(2 ** (bits - 23)) if bits > 23 else 0.0


def auto_width(extent: int, n: int, g: int) -> int:
    """About one row per ray cell ``I^(g-1) (L+S)`` with ``L + S = 14.4 I``: ``w =
    ceil((R^g / (14.4 N))^(1/g))`` for ``g`` used axes spanning ``R`` coordinates (8.85e4 for
    ranks at N = 1e8, the paper's tuned 8.3e4)."""
    if n <= 0 or extent <= 1:
        return 1
    w = math.exp((g * math.log(extent) - math.log(CELL_ASPECT * n)) / g)
    return max(1, math.ceil(w))


@dataclass(frozen=True)
class Geometry:
    """The refine geometry of one column group (coordinate units)."""

    width: int      # w: the cube width before epsilon
    eps: float      # added to the width
    half: float     # float32 half-width (w + eps) / 2, rounded up
    bits: int       # K: every float of the scene is below 2^K
    interval: int   # I: ray grid spacing across the direction
    spacing: int    # S: gap between segments along the direction
    length: int     # L: segment length (0: one segment per grid line)
    pad: float      # segment ends widened by this much

    @property
    def period(self) -> int:
        """Coordinates along the direction each segment answers for (0: all)."""
        return self.length + self.spacing if self.length else 0


def geometry(max_coord: int, extent: int, n: int, g: int, *, width: int | None = None,
             interval: float = 1.0, spacing: float = 1.0, length: float = 13.4) -> Geometry:
    """The geometry of a group of ``g`` columns whose coordinates lie in ``[0, max_coord]``
    and span at most ``extent`` values on one axis, over ``n`` rows."""
    w = int(width) if width is not None else auto_width(extent, n, g)
    base = float(max_coord) + w + 2.0
    bits = float_bits(base)
    while True:  # K bounds the coordinates, the cube bounds (+eps) and the ray ends (+pad)
        e = paper_eps(bits)
        if float_bits(base + e + paper_eps(bits)) <= bits:
            break
        bits += 1
    half = np.float32((w + e) / 2)
    if float(half) < (w + e) / 2:
        half = np.nextafter(half, np.float32(np.inf))
    i = max(1, math.floor(interval * w))
    s = math.floor(spacing * w)
    length_units = 0 if length == 0 else max(1, round(length * w))
    return Geometry(w, e, float(half), bits, i, s, length_units, paper_eps(bits))


def cube_boxes(coords: list[Any | None], geom: Geometry, n: int) -> Any:
    """The (N, 6) float32 boxes (min xyz, max xyz) of the cubes at ``coords`` (one integer
    array per axis, None for an unused axis: 0)."""
    given = [c for c in coords if c is not None]
    xp = xp_of(given[0])
    half = np.float32(geom.half)
    boxes = xp.empty((n, 6), dtype=np.float32)
    for a, c in enumerate(coords):
        centre = xp.zeros(n, dtype=np.float32) if c is None else c.astype(np.float32)
        boxes[:, a] = centre - half
        boxes[:, a + 3] = centre + half
    return boxes


#: Columns of a ray plan (one row per box, int64): the bitmap row (query) of the box, its
#: inclusive coordinate bounds, the ray direction, the grid (lines across the two other axes,
#: segments along) and its ray count. A box's first ray is the running sum of the counts
#: before it (the refine's ``ends``: the inclusive running sum).
QUERY, LO, HI, AXIS, NA, NB, NZ, RAYS = 0, 1, 4, 7, 8, 9, 10, 11
PLAN_COLUMNS = 12
#: The ray count a box plan made on the device records when its grid holds more rays than
#: :data:`MAX_RAYS_PER_QUERY_BATCH` (the batch is refused then; clamped, sums stay in int64).
RAY_CAP = (1 << 42) + 1


def too_many_rays(total: float, geom: Geometry) -> None:
    """Refuse a refine of more than :data:`MAX_RAYS_PER_QUERY_BATCH` rays (ResourceError)."""
    if total > MAX_RAYS_PER_QUERY_BATCH:
        raise ResourceError(f"the refine would cast {total:.3g} rays or more; the cube width "
                            f"{geom.width} is far too small for these boxes (leave cube_width "
                            "unset to derive it from the data)")


def plan_rays(query: np.ndarray, lo: np.ndarray, hi: np.ndarray, geom: Geometry,
              axis: str) -> np.ndarray:
    """The ray plan (B, 12) int64 of boxes ``[lo, hi]`` (inclusive integer coordinates,
    (B, 3)) of bitmap rows ``query``, on the host (see the column constants): the reference
    of the device's :func:`box_plan`."""
    b = int(lo.shape[0])
    plan = np.zeros((b, PLAN_COLUMNS), dtype=np.int64)
    if b == 0:
        return plan
    ext = hi - lo + 1
    d = np.argmax(ext, axis=1) if axis == "longest" else np.full(b, AXES[axis])
    rows = np.arange(b)
    ea, eb, ed = ext[rows, (d + 1) % 3], ext[rows, (d + 2) % 3], ext[rows, d]
    step = geom.interval
    na, nb = -(-ea // step), -(-eb // step)
    nz = -(-ed // geom.period) if geom.period else np.ones(b, dtype=np.int64)
    too_many_rays(float((na.astype(np.float64) * nb * nz).sum()), geom)
    rays = na * nb * nz
    plan[:, QUERY] = query
    plan[:, LO:LO + 3] = lo
    plan[:, HI:HI + 3] = hi
    plan[:, AXIS] = d
    plan[:, NA], plan[:, NB], plan[:, NZ], plan[:, RAYS] = na, nb, nz, rays
    return plan


@register_jitable
def box_plan(plan, g, b, q, l0, l1, l2, h0, h1, h2, axis, interval, period):
    """Row ``b`` of the ray plan ``plan[g]``, in a kernel: the box ``[l, h]`` (inclusive
    coordinates) of bitmap row ``q``, rays along ``axis`` (-1: the longest side, the first of
    equals), as :func:`plan_rays`. Returns its ray count, :data:`RAY_CAP` when it exceeds
    :data:`MAX_RAYS_PER_QUERY_BATCH`."""
    e0 = h0 - l0 + 1
    e1 = h1 - l1 + 1
    e2 = h2 - l2 + 1
    d = axis
    if d < 0:
        d = 0
        if e1 > e0:
            d = 1
        if e2 > max(e0, e1):
            d = 2
    ea = pick((d + 1) % 3, e0, e1, e2)
    eb = pick((d + 2) % 3, e0, e1, e2)
    ed = pick(d, e0, e1, e2)
    na = (ea + interval - 1) // interval
    nb = (eb + interval - 1) // interval
    nz = (ed + period - 1) // period if period > 0 else np.int64(1)
    if np.float64(na) * np.float64(nb) * np.float64(nz) > MAX_RAYS_PER_QUERY_BATCH:
        rays = np.int64(RAY_CAP)
    else:
        rays = na * nb * nz
    plan[g, b, QUERY] = q
    plan[g, b, LO] = l0
    plan[g, b, LO + 1] = l1
    plan[g, b, LO + 2] = l2
    plan[g, b, HI] = h0
    plan[g, b, HI + 1] = h1
    plan[g, b, HI + 2] = h2
    plan[g, b, AXIS] = d
    plan[g, b, NA] = na
    plan[g, b, NB] = nb
    plan[g, b, NZ] = nz
    plan[g, b, RAYS] = rays
    return rays


@register_jitable
def box_ray(plan, b, k, interval, period, spacing, pad):
    """Ray ``k`` of box ``b`` (a row of the ray ``plan``): its index in the box picks a grid
    line and a segment (see the module docstring); ``interval``, ``period``, ``spacing`` and
    ``pad`` are the group's geometry. Returns ``ox, oy, oz, dx, dy, dz, tmin, tmax``."""
    d = plan[b, AXIS]
    nb = plan[b, NB]
    nz = plan[b, NZ]
    iz = k % nz
    rest = k // nz
    ib = rest % nb
    ia = rest // nb
    step = interval
    off = (step - 1) // 2
    a = (d + 1) % 3
    c = (d + 2) % 3
    ra = np.float32(plan[b, LO + a] + ia * step + off)
    rc = np.float32(plan[b, LO + c] + ib * step + off)
    d0 = plan[b, LO + d]
    d1 = plan[b, HI + d]
    if period > 0:
        s0 = d0 + iz * period
        s1 = min(s0 + period - 1, d1)
        sp = 0.5 * np.float64(min(spacing, s1 - s0))
    else:
        s0 = d0
        s1 = d1
        sp = 0.0
    t0 = np.float32(np.float64(s0) - 0.5 + sp - pad)
    t1 = np.float32(np.float64(s1) + 0.5 - sp + pad)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    if d == 0:
        return zero, ra, rc, one, zero, zero, t0, t1
    if d == 1:
        return rc, zero, ra, zero, one, zero, t0, t1
    return ra, rc, zero, zero, zero, one, t0, t1
