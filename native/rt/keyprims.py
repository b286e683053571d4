"""Keys as primitives (RX, paper §2.1, §3.5), shared by the RT indexes of the RX family: one
primitive per key, in the order of the key array given (RX: rowID order, so primitive index =
rowID, as OptiX's vertex buffer position is in the paper; sorted indexes: sorted order).

* **triangle** (default): the authors' artifact triangle around the key's point c with
  e = 0.5 (in x: the gap floats of extended mode): ``(x-e, y+e, z-e), (x-e, y-e, z-e),
  (x+e, y, z+e)``. Its plane is ``z - c_z = x - c_x`` and c sits inside it at barycentric
  (1/4, 1/4, 1/2), so a ray along x through (c_y, c_z) hits it at x = c_x and a ray along z
  through (c_x, c_y) at z = c_z, both strictly inside. (The paper's example triangle
  ``(k,-.5,-.5), (k+.5,-.5,.5), (k-.5,.5,.5)`` does not contain (k, 0, 0): not used.)
* **sphere**: centre c, one radius 0.25 for all [§3.5].
* **aabb**: the box ``[x-e, x+e] x [y-.5, y+.5] x [z-.5, z+.5]``; its intersection program
  (``programs.rx_intersect``) compares the stored integer key exactly.

``geometry="stored"`` (the paper's: OptiX's GAS keeps its own copy of the primitives) builds
the rows with array operations (:func:`primitives`); ``geometry="generated"`` keeps only the
keys as the engine's records and makes each primitive from its key during traversal
(:func:`geometry_function`, the same float32 values, so the same answers).
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of

from . import geometry as geo
from .keymap import (
    EXTENDED_OFFSET,
    KeyCoder,
    bits_float,
    point_of_x,
    x_of_gap_above,
    x_of_gap_below,
    x_of_point,
)
from .query import QueryPrograms

__all__ = ["KIND", "PERPENDICULAR_RAYGEN_CUDA", "SPHERE_RADIUS", "exact_key_box",
           "geometry_function", "key_programs", "perpendicular_raygen", "point_function",
           "primitives"]

SPHERE_RADIUS = 0.25
KIND = {"triangle": geo.TRIANGLES, "sphere": geo.SPHERES, "aabb": geo.AABBS}


def primitives(coder: KeyCoder, primitive: str, keys: Any) -> Any:
    """The primitive rows of ``keys`` (held by the mode): float32 (N, 9), (N, 3) or (N, 6)."""
    xp = xp_of(keys)
    x, high = coder.parts(keys)
    y, z = coder.yz(high)
    h = np.float32(0.5)
    if primitive == "sphere":
        return xp.ascontiguousarray(xp.stack([coder.x_coord(x), y, z], axis=1))
    below, above = coder.x_gaps(x)
    if primitive == "triangle":
        cols = [below, y + h, z - h, below, y - h, z - h, above, y, z + h]
    else:
        cols = [below, y - h, z - h, above, y + h, z + h]
    return xp.ascontiguousarray(xp.stack(cols, axis=1))



@functools.cache
def point_function(coder: KeyCoder) -> Any:
    """``f(keys, i)``: ``(X, gap below, gap above, y, z)`` of key ``keys[i]`` (float32)."""
    extended = coder.mode == "extended"
    x_mask = np.uint64(coder.x_max)
    x_shift = np.uint64(coder.x_bits)
    y_mask = np.uint64((1 << coder.y_bits) - 1)
    y_shift = np.uint64(coder.y_bits)
    c = np.uint64(EXTENDED_OFFSET)
    half = np.float32(0.5)

    @register_jitable
    def point(keys, i):
        k = np.uint64(keys[i])
        x = k & x_mask
        h = k >> x_shift
        y = np.float32(h & y_mask)
        z = np.float32(h >> y_shift)
        if extended:
            bits = x * np.uint64(2) + c
            return (bits_float(bits), bits_float(bits - np.uint64(1)),
                    bits_float(bits + np.uint64(1)), y, z)
        xf = np.float32(x)
        return xf, xf - half, xf + half, y, z

    return point


@functools.cache
def perpendicular_raygen(coder: KeyCoder) -> Any:
    """The ray-generation program of perpendicular point rays (Table 2): ray ``i`` starts at
    lookup ``params.ray_data[i]``'s point minus 0.5 in z and runs along z for t in (0, 1)."""
    point = point_function(coder)
    half = np.float32(0.5)
    zero = np.float32(0)
    one = np.float32(1)

    @register_jitable
    def raygen(i, params):
        x, _, _, y, z = point(params.ray_data, i)
        return x, y, z - half, zero, zero, one, zero, one

    return raygen


#: :func:`perpendicular_raygen`'s twin for the OptiX engine, ``iz_raygen`` (``keyprims.cu``):
#: :func:`key_programs` appends it to an RX-family index's own CUDA programs.
PERPENDICULAR_RAYGEN_CUDA = importlib.resources.files(__package__).joinpath("keyprims.cu").read_text()


def key_programs(match: Any, intersection: Any, cuda: str) -> dict[str, QueryPrograms]:
    """The programs of an RX-family index per primitive kind: ``match`` for every kind, the
    exact-key ``intersection`` (:func:`exact_key_box`) for AABBs, and for the OptiX engine the
    index's CUDA C++ twins ``cuda`` followed by :data:`PERPENDICULAR_RAYGEN_CUDA`."""
    cuda = cuda + "\n" + PERPENDICULAR_RAYGEN_CUDA
    return {"triangle": QueryPrograms(match=match, cuda=cuda),
            "sphere": QueryPrograms(match=match, cuda=cuda),
            "aabb": QueryPrograms(match=match, intersection=intersection, cuda=cuda)}


@functools.cache
def geometry_function(coder: KeyCoder, primitive: str) -> Any:
    """``f(keys, i)``: the primitive of key ``keys[i]``, for the engine's generated geometry
    (one function per key mode, split and primitive: the engine compiles a kernel per function)."""
    point = point_function(coder)
    half = np.float32(0.5)

    if primitive == "sphere":
        @register_jitable
        def sphere(keys, i):
            xf, _, _, y, z = point(keys, i)
            return xf, y, z
        return sphere
    if primitive == "triangle":
        @register_jitable
        def triangle(keys, i):
            _, below, above, y, z = point(keys, i)
            return below, y + half, z - half, below, y - half, z - half, above, y, z + half
        return triangle

    @register_jitable
    def box(keys, i):
        _, below, above, y, z = point(keys, i)
        return below, y - half, z - half, above, y + half, z + half
    return box


@functools.cache
def exact_key_box(key_of: Any) -> Any:
    """The intersection program of AABB keys that compares the stored integer key exactly (the
    RX artifact's): ``key_of(params, inst, prim)`` reads the primitive's key from the launch
    record (which also holds ``x_kind``, ``x_bits`` and ``y_bits``). A perpendicular point ray
    hits the box of exactly its key; a ray along x over the x parts ``[lo, hi]`` of one row hits
    the boxes of the keys in that row and interval, at the key's point. The engine hands
    intersection programs the ray but not its launch index, so the integer bounds are recovered
    from the ray itself: every ray starts and ends in a gap, at coordinates that are exact
    functions of the bounds (:mod:`.keyrays`), so the inverse is exact too."""

    @register_jitable
    def intersect(data, i, inst, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params):
        inf = np.float32(np.inf)
        key = np.uint64(key_of(params, inst, prim))
        x_kind = params.x_kind
        xb = np.uint64(params.x_bits)
        yb = np.uint64(params.y_bits)
        if dz != np.float32(0.0):  # perpendicular point ray from (X(x), y, z - 0.5)
            zq = np.uint64(oz + np.float32(0.5))
            h = np.uint64(oy) | (zq << yb)
            q = (h << xb) | x_of_point(ox, x_kind)
            if key == q:
                return np.float32(0.5), True
            return inf, False
        # a ray along x over the integer x parts [lo, hi] of the high part (y, z)
        h = np.uint64(oy) | (np.uint64(oz) << yb)
        if (key >> xb) != h:
            return inf, False
        kx = key & ((np.uint64(1) << xb) - np.uint64(1))
        lo = x_of_gap_above(ox + tmin, x_kind)
        hi = x_of_gap_below(ox + tmax, x_kind)
        if kx < lo or kx > hi:
            return inf, False
        return point_of_x(kx, x_kind) - ox, True

    return intersect
