"""Primitive kinds, their bounds, and ray/primitive intersection as numba-jitable functions.

A ray is ``o + t d`` (``d`` need not be normalised, ``t`` is measured in units of ``d``) and, as
in NVIDIA OptiX's ``optixTrace``, a hit counts only when ``tmin < t < tmax`` (both ends open).
All intersection arithmetic is float32 and each function returns ``(t, front)``: ``t`` is the
hit distance, or ``float32(inf)`` for no hit in the interval; ``front`` is a bool.

OptiX -> here
-------------
* Built-in triangles (``OPTIX_BUILD_INPUT_TYPE_TRIANGLES``): :data:`TRIANGLES`, a float32
  (N, 9) array (v0 xyz, v1 xyz, v2 xyz), intersected by :func:`hit_triangle`.
  ``optixIsFrontFaceHit``: front when the vertices appear counter-clockwise seen from the
  ray, i.e. ``dot(d, cross(v1 - v0, v2 - v0)) < 0`` (OptiX's default winding).
* Built-in spheres (``OPTIX_BUILD_INPUT_TYPE_SPHERES``): :data:`SPHERES`, float32 centres
  (N, 3) with one radius for the set, intersected by :func:`hit_sphere`; front is the entry
  hit (ray from outside), back the exit hit (origin inside, or the entry cut off by ``tmin``).
* Custom primitives (``OPTIX_BUILD_INPUT_TYPE_CUSTOM_PRIMITIVES``): :data:`AABBS`, float32
  (N, 6) boxes (min xyz, max xyz). OptiX calls a user ``__intersection__`` program; our
  default one is :func:`hit_aabb_reference` (the ray's entry into the box, or its exit when
  the entry lies at or before ``tmin``).
* ``optixAccelBuild`` needs the primitives' bounds: :func:`prim_bounds`.

Decisions
---------
* Triangles use the watertight shear-and-project formulation of Woop, Benthin and Wald (2013):
  the axis where ``|d|`` is largest becomes z, the vertices are sheared so the ray runs along
  +z through (0, 0), and the three 2D edge functions decide the hit. Edge rule: a zero edge
  function counts as inside (edges and vertices belong to every triangle that shares them), so
  a ray through a shared edge or vertex hits all of them, never none. Each edge function is
  evaluated with its two endpoints in a canonical (lexicographic) order and negated when
  swapped, so neighbouring triangles compute bit-identical magnitudes of opposite sign even
  where a compiler fuses multiply-adds (FMA on the GPU); the hit test is therefore watertight
  for closed meshes, with no float64 fallback.
* A hit must lie in the triangle's bounding box, up to a tolerance far above rounding: a
  nearly edge-on ray far from a small triangle shears it into a sliver thinner than float32
  can resolve, and the edge functions can then agree in sign by rounding alone (seen: a ray
  3000 units away, 0.004 degrees from the plane of a unit triangle).
* Degenerate triangles (``cross(v1 - v0, v2 - v0)`` exactly zero in float32) and rays in the
  plane of a triangle (projected determinant zero) never hit. A triangle perpendicular to the
  dominant axis gets ``t = (v[k] - o[k]) / d[k]`` directly, so axis-aligned rays on
  float32-exact integer coordinates give exact ``t``.
* Spheres solve ``a t^2 + 2 b t + c = 0`` with the discriminant taken as
  ``a (r^2 - |f - (b/a) d|^2)`` (``f = o - centre``; no ``b^2 - ac`` cancellation far from the
  sphere) and the roots as ``-b/a -+ sqrt(disc)/a`` (closest approach minus and plus the half
  chord: exact for axis-parallel rays on integer coordinates at any length). A tangent ray
  (discriminant exactly 0) hits, as an entry. Radius <= 0 never hits.
* Boxes are closed: a ray running along a face, or through a zero-extent (point) box, hits.
  Slab distances are ``(bound - o) / d`` (one rounding); a zero direction component keeps the
  ray inside that slab iff ``min <= o <= max``.
* A zero direction vector never hits anything; NaN inputs never hit (every comparison fails).

These functions compile under numba ``njit`` and ``numba.cuda`` alike: scalar float32
arithmetic, ``math`` functions and array indexing only. :func:`brute_force` and
:func:`all_hits` are CPU oracles built on the very same functions, so they match the CPU engine
bit for bit. On the GPU, numba.cuda contracts multiply-adds into FMAs: hits, primitives and faces
agreed with the oracle on random scenes, but ``t`` can differ in its last bits (compare with a
tolerance there).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.errors import InvalidInput
from indexzoo.native.targets import call_parallel

from .layout import AABBS, SPHERES, TRIANGLES, WIDTH

__all__ = [
    "AABBS",
    "SPHERES",
    "TRIANGLES",
    "all_hits",
    "brute_force",
    "hit_aabb_reference",
    "hit_box",
    "hit_primitive",
    "hit_sphere",
    "hit_sphere_c",
    "hit_triangle",
    "hit_triangle_v",
    "pick",
    "prim_bounds",
]

_NAMES = {TRIANGLES: "TRIANGLES", SPHERES: "SPHERES", AABBS: "AABBS"}


# ---------------------------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------------------------


def _check_kind(kind: int) -> None:
    if kind not in WIDTH:
        raise InvalidInput(f"unknown primitive kind {kind!r}; use TRIANGLES, SPHERES or AABBS")


def prim_bounds(kind: int, data: Any, radius: float = 0.0) -> tuple[Any, Any]:
    """The bounds ``(lo, hi)`` of every primitive, two float32 (N, 3) arrays on ``data``'s device.

    Triangles: per-axis min/max of the three vertices; spheres: ``centre -+ radius``; AABBs: the
    boxes themselves, which must satisfy ``min <= max`` on every axis (NaN fails too).
    """
    _check_kind(kind)
    xp = xp_of(data)
    width = WIDTH[kind]
    if data.ndim != 2 or data.shape[1] != width:
        raise InvalidInput(f"{_NAMES[kind]} data must have shape (N, {width}), got {tuple(data.shape)}")
    data = data.astype(xp.float32, copy=False)
    n = data.shape[0]
    if kind == TRIANGLES:
        v = data.reshape(n, 3, 3)
        return xp.ascontiguousarray(v.min(axis=1)), xp.ascontiguousarray(v.max(axis=1))
    if kind == SPHERES:
        if not radius >= 0:
            raise InvalidInput(f"sphere radius must be >= 0, got {radius!r}")
        r = np.float32(radius)
        return data - r, data + r
    lo = xp.ascontiguousarray(data[:, :3])
    hi = xp.ascontiguousarray(data[:, 3:])
    bad = ~xp.all(lo <= hi, axis=1)
    if bool(bad.any()):
        first = int(xp.argmax(bad))
        raise InvalidInput(
            f"AABB {first} has min > max (or NaN): min={data[first, :3].tolist()}, "
            f"max={data[first, 3:].tolist()}"
        )
    return lo, hi


# ---------------------------------------------------------------------------------------------
# Intersection (jitable, float32)
# ---------------------------------------------------------------------------------------------


@register_jitable
def pick(k, x, y, z):
    """Component ``k`` (0, 1, 2) of ``(x, y, z)`` (a runtime index into three scalars, in
    registers on the GPU: the triangle test's axis permutation, RTScan's ray axis)."""
    if k == 0:
        return x
    if k == 1:
        return y
    return z


@register_jitable
def _edge(px, py, qx, qy):
    """``px * qy - py * qx`` evaluated with the endpoints in lexicographic order, so that
    ``_edge(q, p)`` is bit-for-bit ``-_edge(p, q)`` however the compiler contracts it."""
    if px == qx and py == qy:
        return px - qx  # coincident endpoints: exactly zero
    if px < qx or (px == qx and py < qy):
        return px * qy - py * qx
    return -(qx * py - qy * px)


@register_jitable
def hit_triangle(tri, p, ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Ray against triangle ``tri[p]`` (a row of 9 float32s): ``(t, front)``; see
    :func:`hit_triangle_v`."""
    return hit_triangle_v(tri[p, 0], tri[p, 1], tri[p, 2], tri[p, 3], tri[p, 4], tri[p, 5],
                          tri[p, 6], tri[p, 7], tri[p, 8], ox, oy, oz, dx, dy, dz, tmin, tmax)


@register_jitable
def hit_triangle_v(v0x, v0y, v0z, v1x, v1y, v1z, v2x, v2y, v2z,
                   ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Ray against the triangle ``(v0, v1, v2)``: ``(t, front)``.

    Watertight shear-and-project test with the inclusive edge rule (see the module docstring);
    ``front`` when ``dot(d, cross(v1 - v0, v2 - v0)) < 0``.
    """
    inf = np.float32(np.inf)
    zero = np.float32(0.0)
    ox = np.float32(ox)
    oy = np.float32(oy)
    oz = np.float32(oz)
    dx = np.float32(dx)
    dy = np.float32(dy)
    dz = np.float32(dz)
    tmin = np.float32(tmin)
    tmax = np.float32(tmax)
    # Vertices relative to the origin.
    ax = np.float32(v0x) - ox
    ay = np.float32(v0y) - oy
    az = np.float32(v0z) - oz
    bx = np.float32(v1x) - ox
    by = np.float32(v1y) - oy
    bz = np.float32(v1z) - oz
    cx = np.float32(v2x) - ox
    cy = np.float32(v2y) - oy
    cz = np.float32(v2z) - oz
    # Degenerate (zero-area) triangle: the float32 normal vanishes.
    e1x = bx - ax
    e1y = by - ay
    e1z = bz - az
    e2x = cx - ax
    e2y = cy - ay
    e2z = cz - az
    nx = e1y * e2z - e1z * e2y
    ny = e1z * e2x - e1x * e2z
    nz = e1x * e2y - e1y * e2x
    if nx == zero and ny == zero and nz == zero:
        return inf, False
    # Dominant axis of d becomes z; swapping x and y when d[z] < 0 keeps the winding.
    adx = abs(dx)
    ady = abs(dy)
    adz = abs(dz)
    kz = 2
    if adx > ady and adx > adz:
        kz = 0
    elif ady > adz:
        kz = 1
    kx = kz + 1
    if kx == 3:
        kx = 0
    ky = kx + 1
    if ky == 3:
        ky = 0
    dkz = pick(kz, dx, dy, dz)
    if dkz == zero:  # zero direction vector (NaN compares false and falls through to a miss)
        return inf, False
    if dkz < zero:
        kx, ky = ky, kx
    sx = pick(kx, dx, dy, dz) / dkz
    sy = pick(ky, dx, dy, dz) / dkz
    az_ = pick(kz, ax, ay, az)
    bz_ = pick(kz, bx, by, bz)
    cz_ = pick(kz, cx, cy, cz)
    # Sheared 2D vertices: the ray runs through (0, 0).
    pax = pick(kx, ax, ay, az) - sx * az_
    pay = pick(ky, ax, ay, az) - sy * az_
    pbx = pick(kx, bx, by, bz) - sx * bz_
    pby = pick(ky, bx, by, bz) - sy * bz_
    pcx = pick(kx, cx, cy, cz) - sx * cz_
    pcy = pick(ky, cx, cy, cz) - sy * cz_
    u = _edge(pbx, pby, pcx, pcy)  # edge v1 -> v2
    v = _edge(pcx, pcy, pax, pay)  # edge v2 -> v0
    w = _edge(pax, pay, pbx, pby)  # edge v0 -> v1
    if (u < zero or v < zero or w < zero) and (u > zero or v > zero or w > zero):
        return inf, False
    det = u + v + w
    if det == zero:  # edge-on ray (NaN falls through: t is NaN and fails the interval test)
        return inf, False
    # Perpendicular to the dominant axis: one rounding, so exact where the answer is representable.
    flat = az_ == bz_ and bz_ == cz_
    t = az_ / dkz if flat else (u * az_ + v * bz_ + w * cz_) / (det * dkz)
    if not (tmin < t and t < tmax):
        return inf, False
    # A nearly edge-on ray far from a small triangle shears it into a sliver thinner than the
    # float32 spacing of its coordinates, and the edge signs can agree by rounding alone: the
    # hit point must then lie in the triangle's box (up to a tolerance far above rounding).
    for k in range(3):
        a = pick(k, ax, ay, az)
        b = pick(k, bx, by, bz)
        c = pick(k, cx, cy, cz)
        q = t * pick(k, dx, dy, dz)  # the hit point, relative to the origin
        lo = min(a, b, c)
        hi = max(a, b, c)
        tol = np.float32(1e-3) * (hi - lo) + np.float32(1e-5) * (abs(q) + abs(a)) + np.float32(1e-30)
        if q < lo - tol or q > hi + tol:
            return inf, False
    return t, det < zero  # u, v, w as defined are negative for a front (CCW) face


@register_jitable
def hit_sphere(centres, p, radius, ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Ray against the sphere of ``centres[p]`` and ``radius``; see :func:`hit_sphere_c`."""
    return hit_sphere_c(centres[p, 0], centres[p, 1], centres[p, 2], radius, ox, oy, oz, dx, dy, dz,
                        tmin, tmax)


@register_jitable
def hit_sphere_c(cx, cy, cz, radius, ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Ray against the sphere of centre ``c`` and ``radius``: ``(t, front)``.

    The smaller root in ``(tmin, tmax)``; ``front`` for the entry root, not for the exit root.
    """
    inf = np.float32(np.inf)
    zero = np.float32(0.0)
    r = np.float32(radius)
    dx = np.float32(dx)
    dy = np.float32(dy)
    dz = np.float32(dz)
    tmin = np.float32(tmin)
    tmax = np.float32(tmax)
    if not (r > zero):
        return inf, False
    fx = np.float32(ox) - np.float32(cx)
    fy = np.float32(oy) - np.float32(cy)
    fz = np.float32(oz) - np.float32(cz)
    a = dx * dx + dy * dy + dz * dz
    if not (a > zero):
        return inf, False
    b = fx * dx + fy * dy + fz * dz  # half the usual b
    s = b / a
    lx = fx - s * dx
    ly = fy - s * dy
    lz = fz - s * dz
    disc = a * (r * r - (lx * lx + ly * ly + lz * lz))
    if not (disc >= zero):
        return inf, False
    # the roots as the closest approach -b/a minus and plus the half chord sqrt(disc)/a: an
    # axis-parallel ray on integer coordinates gets them exactly, however long it is (c/q
    # loses r^2 against |f|^2 there: a 2^22-long ray missed its entry by about 0.3)
    tc = -b / a
    h = np.float32(math.sqrt(disc)) / a
    t0 = tc - h
    t1 = tc + h
    if tmin < t0 and t0 < tmax:
        return t0, True
    if tmin < t1 and t1 < tmax:
        return t1, False
    return inf, False


@register_jitable
def hit_aabb_reference(boxes, p, ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Ray against the closed box ``boxes[p]`` (min xyz, max xyz); see :func:`hit_box`."""
    return hit_box(boxes[p, 0], boxes[p, 1], boxes[p, 2], boxes[p, 3], boxes[p, 4], boxes[p, 5],
                   ox, oy, oz, dx, dy, dz, tmin, tmax)


@register_jitable
def hit_box(lox, loy, loz, hix, hiy, hiz, ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Ray against the closed box ``[lo, hi]``: ``(t, front)``.

    The entry distance (``front``), or the exit distance (not ``front``) when the entry lies at
    or before ``tmin`` (the origin is inside); the default intersection program for AABBs.
    """
    inf = np.float32(np.inf)
    zero = np.float32(0.0)
    tmin = np.float32(tmin)
    tmax = np.float32(tmax)
    tnear = -inf
    tfar = inf
    moving = False
    for k in range(3):
        o = np.float32(pick(k, ox, oy, oz))
        d = np.float32(pick(k, dx, dy, dz))
        lo = np.float32(pick(k, lox, loy, loz))
        hi = np.float32(pick(k, hix, hiy, hiz))
        if d == zero:
            if not (lo <= o and o <= hi):
                return inf, False
        else:
            moving = True
            t0 = (lo - o) / d
            t1 = (hi - o) / d
            if t1 < t0:
                t0, t1 = t1, t0
            if t0 > tnear:
                tnear = t0
            if t1 < tfar:
                tfar = t1
    if not moving or not (tnear <= tfar):
        return inf, False
    if tmin < tnear and tnear < tmax:
        return tnear, True
    if tnear <= tmin and tmin < tfar and tfar < tmax:
        return tfar, False
    return inf, False


@register_jitable
def hit_primitive(kind, data, radius, p, ox, oy, oz, dx, dy, dz, tmin, tmax):
    """Dispatch on ``kind`` to the intersection function of that primitive kind."""
    if kind == TRIANGLES:
        return hit_triangle(data, p, ox, oy, oz, dx, dy, dz, tmin, tmax)
    if kind == SPHERES:
        return hit_sphere(data, p, radius, ox, oy, oz, dx, dy, dz, tmin, tmax)
    return hit_aabb_reference(data, p, ox, oy, oz, dx, dy, dz, tmin, tmax)


# ---------------------------------------------------------------------------------------------
# Brute-force oracles (CPU)
# ---------------------------------------------------------------------------------------------


@njit(parallel=True, cache=False)
def _brute_force(kind, data, radius, org, dirs, tmin, tmax):
    r = org.shape[0]
    best_t = np.full(r, np.inf, np.float32)
    best_p = np.full(r, -1, np.int64)
    best_f = np.zeros(r, np.bool_)
    for i in prange(r):
        bt = np.float32(np.inf)
        bp = -1
        bf = False
        for p in range(data.shape[0]):
            t, front = hit_primitive(
                kind,
                data,
                radius,
                p,
                org[i, 0],
                org[i, 1],
                org[i, 2],
                dirs[i, 0],
                dirs[i, 1],
                dirs[i, 2],
                tmin[i],
                tmax[i],
            )
            if t < bt:  # strict: equal t keeps the smaller index
                bt = t
                bp = p
                bf = front
        best_t[i] = bt
        best_p[i] = bp
        best_f[i] = bf
    return best_t, best_p, best_f


@register_jitable
def _hits(kind, data, radius, p, org, dirs, tmin, tmax, i):
    """Whether ray ``i`` hits primitive ``p`` (the oracle's test, shared by count and fill)."""
    t, _ = hit_primitive(kind, data, radius, p, org[i, 0], org[i, 1], org[i, 2], dirs[i, 0],
                         dirs[i, 1], dirs[i, 2], tmin[i], tmax[i])
    return t < np.inf


@njit(parallel=True, cache=False)
def _count_hits(kind, data, radius, org, dirs, tmin, tmax):
    counts = np.zeros(org.shape[0], np.int64)
    for i in prange(org.shape[0]):
        c = 0
        for p in range(data.shape[0]):
            if _hits(kind, data, radius, p, org, dirs, tmin, tmax, i):
                c += 1
        counts[i] = c
    return counts


@njit(parallel=True, cache=False)
def _fill_hits(kind, data, radius, org, dirs, tmin, tmax, offsets, out):
    for i in prange(org.shape[0]):
        j = offsets[i]
        for p in range(data.shape[0]):
            if _hits(kind, data, radius, p, org, dirs, tmin, tmax, i):
                out[j] = p
                j += 1


def _host(a: Any) -> np.ndarray:
    """A NumPy copy of a NumPy or CuPy array (the oracles run on the CPU)."""
    if not isinstance(a, np.ndarray) and hasattr(a, "get"):
        a = a.get()
    return np.asarray(a)


def _prepare(
    kind: int, data: Any, radius: float, origins: Any, dirs: Any, tmin: Any, tmax: Any
) -> tuple[np.ndarray, np.float32, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    _check_kind(kind)
    d = np.ascontiguousarray(_host(data), dtype=np.float32)
    width = WIDTH[kind]
    if d.ndim != 2 or d.shape[1] != width:
        raise InvalidInput(f"{_NAMES[kind]} data must have shape (N, {width}), got {d.shape}")
    o = np.ascontiguousarray(_host(origins), dtype=np.float32)
    v = np.ascontiguousarray(_host(dirs), dtype=np.float32)
    if o.ndim != 2 or o.shape[1] != 3 or v.shape != o.shape:
        raise InvalidInput(f"origins and dirs must both have shape (R, 3), got {o.shape} and {v.shape}")
    r = o.shape[0]
    lo = np.empty(r, np.float32)
    hi = np.empty(r, np.float32)
    lo[:] = _host(tmin)
    hi[:] = _host(tmax)
    return d, np.float32(radius), o, v, lo, hi


def brute_force(
    kind: int, data: Any, radius: float, origins: Any, dirs: Any, tmin: Any, tmax: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The closest hit of every ray over all primitives, by testing each one.

    ``origins`` and ``dirs`` are (R, 3); ``tmin`` and ``tmax`` scalars or (R,). Returns
    ``(t, prim, front)``: float32 (R,) with ``inf`` for a miss, int64 (R,) with ``-1`` for a
    miss, bool (R,). Equal ``t`` goes to the smaller primitive index. Uses the same jitable
    intersection functions as the engine, so the results agree bit for bit.
    """
    return call_parallel(_brute_force, kind, *_prepare(kind, data, radius, origins, dirs, tmin,
                                                       tmax))


def all_hits(
    kind: int, data: Any, radius: float, origins: Any, dirs: Any, tmin: Any, tmax: Any
) -> list[np.ndarray]:
    """For every ray, the sorted int64 indices of all primitives it hits in ``(tmin, tmax)``."""
    args = _prepare(kind, data, radius, origins, dirs, tmin, tmax)
    counts = call_parallel(_count_hits, kind, *args)
    offsets = np.zeros(counts.shape[0] + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.int64)
    call_parallel(_fill_hits, kind, *args, offsets, out)
    return np.split(out, offsets[1:-1])
