"""The numbers a scene's records are laid out by: the primitive kinds, the floats a stored
primitive of each kind takes, the most primitives a BVH leaf holds.

Plain constants, apart from the numba code that builds and walks scenes (:mod:`.geometry`,
:mod:`.bvh`, which re-export them), for what reads them without tracing: the schemas of saved
scenes (:mod:`.saved`), which an RT index declares when its class is made.
"""

from __future__ import annotations

__all__ = ["AABBS", "MAX_LEAF_SIZE", "SPHERES", "TRIANGLES", "WIDTH"]

TRIANGLES = 0
SPHERES = 1
AABBS = 2

#: Floats per stored primitive of each kind.
WIDTH = {TRIANGLES: 9, SPHERES: 3, AABBS: 6}

#: The most primitives a BVH leaf holds.
MAX_LEAF_SIZE = 32
