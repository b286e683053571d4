"""The saved form of a ``cgrx`` build, as its ``state_schema`` declares it.

A hit's triangle id picks a bucket whose keys the lookup then searches and scans, and the
runs it finds index ``rowids``; so the sorted keys must be in order, their rowIDs each of
``0 .. n - 1`` once, and the scene must be exactly the one those keys make: the triangles'
records, ids and flips follow from the keys and the bucket size alone (:func:`.scene.
scene_parts`, two kernels over the buckets, made again here), the GAS holds them in its BVH's
order (generated geometry: the records; stored: their vertex rows), and its BVH is a tree over
them (:mod:`indexzoo.native.rt.saved`). A scene saved from OptiX is not in the file: the load
builds it again from the keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt.layout import TRIANGLES
from indexzoo.native.rt.saved import bvh_problem, gas_specs
from indexzoo.persist import Array, Check, Scope, StateSchema, Value

from .coords import PATH_WIDTH, CgCoder

if TYPE_CHECKING:
    from . import scene as cg_scene
else:  # the checks of a saved scene run when one is loaded
    cg_scene = lazy_module("indexzoo.plugins.cgrx.scene")

__all__ = ["CGRX_SCHEMA"]


def _equal(a: Any, b: Any) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(xp_of(b).array_equal(a, b))


def _check(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    p = ctx.params
    coder = CgCoder.for_dtype(ctx.native)
    if root["coder"] != coder:
        raise scope.problem("coder", f"is {root['coder']}, not {coder} (keys of {ctx.native})")
    scene = root["scene"]
    if scene is None:  # no keys, or saved from OptiX: built again on load
        return None
    if ctx.n == 0:
        raise scope.problem("scene", "is held for no keys")
    parts = cg_scene.scene_parts(coder, root["keys"], 1 << p.bucket_log)
    if scene.n_buckets != parts.n_buckets or scene.counts != parts.counts:
        raise scope.problem("scene", f"says {scene.n_buckets} buckets {scene.counts}; the keys "
                                     f"make {parts.n_buckets} {parts.counts}")
    if not _equal(scene.ids, parts.ids):
        raise scope.problem("scene.ids", "are not the triangle ids the keys make")
    gas = scene.gas
    if gas.kind != TRIANGLES or gas.radius != 0.0:
        raise scope.problem("scene.gas", "is not a GAS of triangles")
    wrong = bvh_problem(gas.bvh, int(parts.ids.shape[0]))
    if wrong:
        raise scope.problem("scene.gas.bvh", wrong)
    order = gas.bvh.order.astype(np.int64)
    if p.geometry == "generated":
        want = parts.records[order]
    else:
        want = cg_scene.stored_triangles(coder, parts.records[order], parts.flip[order])
    if not _equal(gas.data, want):
        raise scope.problem("scene.gas.data", "is not the triangles the keys make")
    return None


#: The state of ``cgrx`` (see the module docstring).
CGRX_SCHEMA = StateSchema(
    Array("keys", dtype="native", shape=("n",), order="nondecreasing"),
    Array("rowids", dtype="rowid", shape=("n",), permutation=True),
    Value("coder", CgCoder),
    Array("no_path", dtype="int8", shape=(1, PATH_WIDTH)),
    Value("peak", int, at_least=0),
    Value("scene", "indexzoo.plugins.cgrx.scene:CgScene", optional=True),
    gas_specs("scene.gas", optional=True),
    Array("scene.gas.data", optional=True),
    Array("scene.ids", dtype=("int32", "int64"), shape=(None,), optional=True),
    Check(_check),
)
