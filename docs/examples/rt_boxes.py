"""``rt-boxes``: a minimal ray-tracing index over indexzoo's RT query layer.

Each key becomes a small box at a 3-D point (x, y, z = the key's bits 0-20, 21-41, 42-63, each
exact in float32); a point lookup casts one ray along z through its key's point, and every box
it crosses is a match (duplicates are coincident boxes: the ray finds them all).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex
from indexzoo.devices import xp_of
from indexzoo.native.rt import query
from indexzoo.native.rt.geometry import AABBS
from indexzoo.native.rt.saved import gas_specs
from indexzoo.native.rt.trace import Gas, build_gas
from indexzoo.persist import Array, StateSchema, Value


def points(keys: Any) -> Any:
    """(N, 3) float32: the key's bits 0-20, 21-41 and 42-63 as x, y and z."""
    xp, k = xp_of(keys), keys.astype(np.uint64)
    x = k & np.uint64((1 << 21) - 1)
    y = (k >> np.uint64(21)) & np.uint64((1 << 21) - 1)
    return xp.stack([x, y, k >> np.uint64(42)], axis=1).astype(np.float32)


class NoFields(NamedTuple):
    """This index's programs read no launch parameters of their own."""


class PointRays(query.RayBatch):
    """One ray per lookup, along z from just below its key's point to just above it."""

    def __init__(self, q: Any) -> None:
        self.q, self.n_queries, self.one_each = q, int(q.shape[0]), True
        self.starts = xp_of(q).arange(self.n_queries + 1, dtype=np.int64)

    def rays(self, s: int, e: int) -> query.Rays:
        xp, origins = xp_of(self.q), points(self.q[s:e])
        origins[:, 2] -= np.float32(0.5)
        directions = xp.zeros_like(origins)
        directions[:, 2] = 1
        return query.Rays(origins, directions, np.float32(0), np.float32(1))

    def record(self, s: int, e: int) -> NoFields:
        return NoFields()


@register_jitable
def every_box_matches(ray, inst, prim, t, front, params):  # primitive index = rowID
    return np.int64(prim)


PROGRAMS = query.QueryPrograms(match=every_box_matches)


class BoxState(BuildState):
    gas: Gas


class RtBoxIndex(GpuIndex[BoxState]):
    """Keys as boxes of a ray-traced scene, point lookups as rays (a minimal RT index)."""

    name: ClassVar[str] = "rt-boxes"
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=False)
    plugin_api: ClassVar[str] = "2.4"
    # a saved GAS: a BVH over n boxes whose order holds each rowID once (section 1)
    state_schema: ClassVar[StateSchema] = StateSchema(
        gas_specs("gas"),
        Array("gas.data", dtype="float32", shape=("n", 6)),
        Value("gas.bvh.n_prims", int, equals="n"))

    def _build(self, st: BoxState, keys: Any) -> None:
        c = points(keys)
        st.gas = build_gas(AABBS, st.xp.concatenate([c - 0.25, c + 0.25], axis=1))

    def _footprint(self, st: BoxState) -> Footprint:
        return st.gas.footprint()

    def _point_count(self, st: BoxState, q: Any) -> Any:
        counts = query.count(st.gas, PointRays(q), PROGRAMS, max_rays=1 << 20)
        return counts.astype(st.rowid_dtype)

    def _point_rowids(self, st: BoxState, q: Any) -> tuple[Any, Any]:
        return query.collect(st.gas, PointRays(q), PROGRAMS, rowid_dtype=st.rowid_dtype,
                             max_rays=1 << 20)
