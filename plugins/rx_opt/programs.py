"""The programs of ``rx-opt`` over the RT query layer: a hit names a *position* in the sorted
primitive keys (the distinct keys with compression, else every sorted key), found from the
instance (the partition, thesis Alg. 5) and the primitive index within it.

* ``optrx_match``: ``position = part_offsets[inst] + prim``; with ``confirm`` (sphere scenes) the
  primitive's key must lie within the ray's integer bounds, as in ``rx``: the engine's float32
  sphere test can report a sphere just beyond a long ray's end.
* ``optrx_intersect``: the RX family's exact integer comparison for AABB keys
  (:func:`indexzoo.native.rt.keyprims.exact_key_box`), reading the key at that position.

``programs.cu`` holds their twins for the OptiX engine (:data:`CUDA`): ``iz_match`` is
``optrx_match``; the AABB intersection program reads the ray's integer bounds from the record
(``ray_lo``, ``ray_hi``, filled for AABB scenes on an engine with conservative bounds) and
checks the ray's row, since OptiX may hand it boxes near the ray; ``iz_raygen``, the twin of
:func:`~indexzoo.native.rt.keyprims.perpendicular_raygen`, is the family's (``keyprims.cu``,
appended by :func:`~indexzoo.native.rt.keyprims.key_programs`).
"""

from __future__ import annotations

import importlib.resources
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.rt import NO_MATCH, exact_key_box
from indexzoo.native.rt.keyprims import key_programs

__all__ = ["CUDA", "PROGRAMS", "OptRxRecord", "optrx_intersect", "optrx_match"]


class OptRxRecord(NamedTuple):
    """rx-opt's launch parameters (fields of ``params`` in its programs)."""

    part_offsets: Any  # int64 per instance: the position of its slice's first primitive
    keys: Any          # the primitive keys in position order (AABB and sphere scenes)
    x_kind: Any        # int64: the key map's x coordinates (see keymap.X_LINEAR/X_BITCAST)
    x_bits: Any        # int64
    y_bits: Any        # int64
    ray_lo: Any        # uint64 per ray: the integer bounds a sphere hit is confirmed against
    ray_hi: Any
    confirm: Any       # bool


@register_jitable
def _position(params, inst, prim):
    return params.part_offsets[inst] + np.int64(prim)


@register_jitable
def optrx_match(ray, inst, prim, t, front, params):
    pos = _position(params, inst, prim)
    if params.confirm:
        key = params.keys[pos]
        if key < params.ray_lo[ray] or key > params.ray_hi[ray]:
            return NO_MATCH
    return pos


@register_jitable
def _key_of(params, inst, prim):
    return params.keys[_position(params, inst, prim)]


optrx_intersect = exact_key_box(_key_of)

#: The same programs in CUDA C++ for the OptiX engine (``programs.cu``).
CUDA = importlib.resources.files(__package__).joinpath("programs.cu").read_text()

#: The programs of each primitive kind (with the family's ray generation for OptiX).
PROGRAMS = key_programs(optrx_match, optrx_intersect, CUDA)
