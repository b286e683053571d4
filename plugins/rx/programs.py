"""The RT programs of ``rx`` (paper §2.2, §3.5; the artifact's any-hit and intersection
programs), numba ``register_jitable`` functions compiled into the engine's trace kernel on the
CPU and the GPU alike, over the query layer of :mod:`indexzoo.native.rt.query`.

The layer's any-hit program counts, sums, collects or takes the first match (the ``out``
modes); rx contributes ``rx_match``, which says whether a hit is a match and which rowID it
stands for (the primitive index: primitives are in rowID order), and, for AABB scenes,
``rx_intersect``. Both read the fields of rx's launch-parameter record :class:`RxRecord`.

With ``confirm`` (sphere scenes), ``rx_match`` first checks
``ray_lo[ray] <= keys[prim] <= ray_hi[ray]`` and ignores other hits: the engine's float32
sphere test can report a sphere whose entry lies up to about 0.3 beyond the ray's end on rays
some 2^22 long (it derives the entry from ``c / q`` with ``c = |o - centre|^2 - r^2``, where
r^2 = 1/16 drowns in |o - centre|^2), while the gaps between keys are 0.25 wide; triangles and
AABBs need no such check.

``rx_intersect`` is the intersection program of AABB scenes, the RX family's
(:func:`indexzoo.native.rt.keyprims.exact_key_box`) over ``keys[prim]``: as in the artifact it
compares the stored integer key exactly (a point ray: equality; a range ray: lo <= key <= hi),
so float rounding can never admit a neighbour.

``programs.cu`` holds their twins for the OptiX engine (:data:`CUDA`): ``iz_match`` is
``rx_match``; the AABB intersection program there reads the ray's integer bounds from the
record (``ray_lo``, ``ray_hi``, which rx's plans fill for AABB scenes on OptiX) instead of
recovering them from the ray, since OptiX hands programs the launch index; ``iz_raygen``,
the twin of :func:`~indexzoo.native.rt.keyprims.perpendicular_raygen`, is the family's
(``keyprims.cu``, appended by :func:`~indexzoo.native.rt.keyprims.key_programs`).
"""

from __future__ import annotations

import importlib.resources
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.rt import NO_MATCH, exact_key_box
from indexzoo.native.rt.keyprims import key_programs

__all__ = ["CUDA", "PROGRAMS", "RxRecord", "rx_intersect", "rx_match"]


class RxRecord(NamedTuple):
    """rx's launch parameters (fields of ``params`` in its programs, after the query layer's)."""

    keys: Any       # the key column in rowID order (AABB and sphere scenes; else a stand-in)
    x_kind: Any     # int64: 0 naive/3d x coordinates, 1 extended (bit patterns of floats)
    x_bits: Any     # int64
    y_bits: Any     # int64
    ray_lo: Any     # uint64 per ray: the integer key bounds a sphere hit is confirmed against
    ray_hi: Any
    confirm: Any    # bool: confirm hits against ray_lo/ray_hi (sphere scenes)


@register_jitable
def rx_match(ray, inst, prim, t, front, params):
    if params.confirm:
        key = params.keys[prim]
        if key < params.ray_lo[ray] or key > params.ray_hi[ray]:
            return NO_MATCH
    return np.int64(prim)


@register_jitable
def _key_of(params, inst, prim):
    return params.keys[prim]


rx_intersect = exact_key_box(_key_of)


#: The same programs in CUDA C++ for the OptiX engine (``programs.cu``).
CUDA = importlib.resources.files(__package__).joinpath("programs.cu").read_text()

#: The programs of each primitive kind (with the family's ray generation for OptiX).
PROGRAMS = key_programs(rx_match, rx_intersect, CUDA)
