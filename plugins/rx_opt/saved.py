"""The saved form of an ``rx-opt`` build, as its ``state_schema`` declares it.

A hit's position (``part_offsets[inst] + prim``) indexes the primitive keys and, with
duplicate compression, ``first``, whose entries start runs of the sorted keys; a range's rays
follow the occupied rows (``highs``). Everything but the sorted pairs follows from the keys and
the params (:mod:`.layout`), so a file must hold exactly what they make: ``first`` the run
starts then ``n``, ``pkeys`` the distinct keys (or all of them), ``highs`` their distinct high
parts, ``part_offsets`` the partitions' first positions, and a scene of one GAS over every
primitive key or an IAS of one GAS per partition's slice (:func:`~indexzoo.native.rt.saved.
ias_problem`) whose primitives are exactly those of the keys. A scene the file does not hold
(built by OptiX, or of generated geometry) is built again on load from ``pkeys``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native import rt
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt.saved import WIDTH, bvh_problem, ias_problem, primitives_match
from indexzoo.persist import Array, Check, Nested, Scope, StateSchema, Value

if TYPE_CHECKING:
    from indexzoo.native.rt import trace
else:  # the checks of a saved scene run when one is loaded
    trace = lazy_module("indexzoo.native.rt.trace")

from .layout import run_starts, slice_cuts

__all__ = ["RX_OPT_SCHEMA"]


def _equal(a: Any, b: Any) -> bool:
    return a is not None and a.dtype == b.dtype and a.shape == b.shape and bool(
        xp_of(b).array_equal(a, b))


def _check_keys(scope: Scope) -> str | None:
    """first, pkeys and highs: exactly what the sorted keys make."""
    ctx, root = scope.ctx, scope.root
    p = ctx.params
    coder = rt.KeyCoder.for_params(p.key_mode, p.x_bits, p.y_bits, p.z_bits)
    keys = root["keys"]
    xp = xp_of(keys)
    if ctx.n and not bool(coder.legal(keys).all()):
        raise scope.problem("keys", f"holds a key the params' key mode does not hold "
                                    f"({coder.limit_text()})")
    if p.compress_duplicates:
        starts = run_starts(xp, keys)
        first = xp.concatenate([starts, xp.asarray([ctx.n], dtype=np.int64)])
        if not _equal(root["first"], first):
            raise scope.problem("first", "is not where the runs of the sorted keys start")
        pkeys = keys[starts]
    elif root["first"] is not None:
        raise scope.problem("first", "is held, which an index without compression has not")
    else:
        pkeys = keys
    if not _equal(root["pkeys"], pkeys):
        raise scope.problem("pkeys", "are not the primitive keys of the sorted keys")
    _, high = coder.parts(pkeys)
    highs = high[run_starts(xp, high)] if ctx.n else high
    if not _equal(root["highs"], highs):
        raise scope.problem("highs", "are not the sorted distinct high parts of the keys")
    return None


def _check_scene(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    p, scene, pkeys = ctx.params, root["scene"], root["pkeys"]
    if scene is None:  # built again on load from pkeys
        return None
    coder = rt.KeyCoder.for_params(p.key_mode, p.x_bits, p.y_bits, p.z_bits)
    if p.geometry != "stored" or scene.geometry is not None or scene.kind != rt.KIND[p.primitive] \
            or scene.radius != (rt.SPHERE_RADIUS if p.primitive == "sphere" else 0.0):
        raise scope.problem("scene", f"is not a scene of stored {p.primitive}s")
    cuts = slice_cuts(pkeys, p.partitions, p.compress_duplicates)
    m = int(pkeys.shape[0])
    xp = xp_of(pkeys)
    if len(cuts) <= 2:
        if not isinstance(scene, trace.Gas) or isinstance(scene, trace.Ias):
            raise scope.problem("scene", f"is a {type(scene).__name__}; {m} keys in "
                                         f"{p.partitions} partitions make one GAS")
        wrong = bvh_problem(scene.bvh, m)
        offsets, positions = xp.zeros(1, dtype=np.int64), scene.bvh.order
    else:
        if not isinstance(scene, trace.Ias):
            raise scope.problem("scene", f"is a {type(scene).__name__}, not an IAS of "
                                         f"{len(cuts) - 1} partitions")
        slices = [(a, b - a) for a, b in itertools.pairwise(cuts)]
        wrong = ias_problem(scene, slices)
        offsets = xp.asarray(cuts[:-1], dtype=np.int64)
        sizes = xp.asarray([c for _, c in slices], dtype=np.int64)
        positions = scene.order + xp.repeat(offsets, sizes) if not wrong else None
    if wrong:
        raise scope.problem("scene", wrong)
    data = scene.data
    if data.dtype != np.float32 or tuple(data.shape) != (m, WIDTH[scene.kind]):
        raise scope.problem("scene.data", f"is {data.dtype} {list(data.shape)}, not float32 "
                                          f"[{m}, {WIDTH[scene.kind]}]")
    if not primitives_match(coder, p.primitive, pkeys, positions, data):
        raise scope.problem("scene.data", "is not the primitives of the keys")
    if not _equal(root["part_offsets"], offsets):
        raise scope.problem("part_offsets", "are not the partitions' first positions")
    return None


#: The state of ``rx-opt`` (see the module docstring).
RX_OPT_SCHEMA = StateSchema(
    Array("keys", dtype="native", shape=("n",), order="nondecreasing"),
    Array("rowids", dtype="rowid", shape=("n",), permutation=True),
    Array("first", dtype="int64", shape=(None,), optional=True),
    Array("pkeys", dtype="native", shape=(None,)),
    Array("highs", dtype="uint64", shape=(None,)),
    Array("part_offsets", dtype="int64", shape=(None,)),
    Array("no_keys", dtype="uint64", shape=(1,)),
    Array("no_rays", dtype="int8", shape=(1,)),
    Value("peak", int, at_least=0),
    Check(_check_keys),
    Value("scene", ("indexzoo.native.rt.trace:Gas", "indexzoo.native.rt.trace:Ias"),
          optional=True),  # None: built again on load
    # a GAS (bvh) or an IAS (top, inst, pooled nodes): _check_scene says which it must be
    Nested("scene",
           *(Array(path, dtype=dtype, shape=shape, optional=True) for path, dtype, shape in (
               ("data", "float32", (None, None)), ("order", ("int32", "int64"), (None,)),
               ("inst", "float32", (None, 16)), ("nodes", "float32", (None, 8)),
               ("bvh.nodes", "float32", (None, 8)), ("bvh.order", ("int32", "int64"), (None,)),
               ("top.nodes", "float32", (None, 8)), ("top.order", ("int32", "int64"), (None,)))),
           optional=True),
    Check(_check_scene),
)
