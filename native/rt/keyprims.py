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
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of

from . import geometry as geo
from .keymap import EXTENDED_OFFSET, KeyCoder, bits_float

__all__ = ["KIND", "SPHERE_RADIUS", "geometry_function", "perpendicular_raygen", "point_function",
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
