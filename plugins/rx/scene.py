"""The scene: one primitive per key (paper §2.1, §3.5), in rowID order (primitive index =
rowID, as OptiX's vertex buffer position is in the paper).

* **triangle** (default): the authors' artifact triangle around the key's point c with
  e = 0.5 (in x: the gap floats of extended mode): ``(x-e, y+e, z-e), (x-e, y-e, z-e),
  (x+e, y, z+e)``. Its plane is ``z - c_z = x - c_x`` and c sits inside it at barycentric
  (1/4, 1/4, 1/2), so a ray along x through (c_y, c_z) hits it at x = c_x and a ray along z
  through (c_x, c_y) at z = c_z, both strictly inside. (The paper's example triangle
  ``(k,-.5,-.5), (k+.5,-.5,.5), (k-.5,.5,.5)`` does not contain (k, 0, 0): not used.)
* **sphere**: centre c, one radius 0.25 for all [§3.5].
* **aabb**: the box ``[x-e, x+e] x [y-.5, y+.5] x [z-.5, z+.5]``; its intersection program
  (``programs.rx_intersect``) compares the stored integer key exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.rt import geometry as geo

from .keys import KeyCoder

__all__ = ["KIND", "SPHERE_RADIUS", "primitives"]

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

