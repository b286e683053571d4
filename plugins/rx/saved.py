"""The saved form of an ``rx`` build, as its ``state_schema`` declares it.

A hit's primitive index is a rowID (primitives are in rowID order), so the GAS's BVH must be a
tree over ``n`` primitives whose ``order`` holds each rowID once (:mod:`indexzoo.native.rt.
saved`). The keys (``own_keys``, or, for generated triangles, the GAS's records in BVH order)
must be keys the params' key mode holds, and the primitives the GAS stores must be exactly those
of the keys (``data[i]`` the primitive of key ``order[i]``), so a file's scene cannot answer
for other keys than it holds. The distinct high parts (the rows a range casts rays along) must
be exactly the keys'. A GAS saved from OptiX is not in the file (``gas`` None): the load builds
it again from ``own_keys``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native import rt
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt.saved import WIDTH, gas_specs, primitives_match
from indexzoo.persist import Array, Check, Scope, StateSchema, Value

if TYPE_CHECKING:
    from . import rays
else:  # the checks of a saved scene run when one is loaded
    rays = lazy_module("indexzoo.plugins.rx.rays")

__all__ = ["RX_SCHEMA"]

def _check(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    p = ctx.params
    coder = rt.KeyCoder.for_params(p.key_mode, p.x_bits, p.y_bits, p.z_bits)
    gas, own, highs = root["gas"], root["own_keys"], root["high_parts"]
    generated = p.geometry == "generated"
    if (own is None) != (generated and p.primitive == "triangle"):
        raise scope.problem("own_keys", "is missing" if own is None else
                            "is held, which generated triangles do not keep")
    if own is not None and (own.dtype != ctx.native or tuple(own.shape) != (ctx.n,)):
        raise scope.problem("own_keys", f"is {own.dtype} {list(own.shape)}, not "
                                        f"{ctx.native} [{ctx.n}]")
    if gas is None:  # saved from OptiX: built again from own_keys on load
        return None if own is not None else "is missing, and no keys are held to build it"
    if gas.kind != rt.KIND[p.primitive] or gas.radius != (
            rt.SPHERE_RADIUS if p.primitive == "sphere" else 0.0):
        raise scope.problem("gas", f"holds primitives of kind {gas.kind}, radius {gas.radius}; "
                                   f"the params say {p.primitive}")
    data, order = gas.data, gas.bvh.order.astype(np.int64)
    want = (ctx.native, (ctx.n,)) if generated else (np.dtype(np.float32),
                                                    (ctx.n, WIDTH[gas.kind]))
    if data.dtype != want[0] or tuple(data.shape) != want[1]:
        raise scope.problem("gas.data", f"is {data.dtype} {list(data.shape)}, not "
                                        f"{want[0]} {list(want[1])}")
    xp = xp_of(data)
    keys = own
    if keys is None:  # generated triangles: the records are the keys in BVH order
        keys = xp.empty_like(data)
        keys[order] = data
    if ctx.n and not bool(coder.legal(keys).all()):
        raise scope.problem("own_keys" if own is not None else "gas.data",
                            f"holds a key the params' key mode does not hold "
                            f"({coder.limit_text()})")
    if generated and own is not None and not bool(xp.array_equal(data, own[order])):
        raise scope.problem("gas.data", "is not the keys in the BVH's order")
    if not generated and not primitives_match(coder, p.primitive, keys, order, data):
        raise scope.problem("gas.data", "is not the primitives of the keys")
    if generated:
        return None if highs is None else "high_parts: held, which generated geometry does not keep"
    rows = rays.distinct_highs(coder, keys)
    if highs is None or highs.shape != rows.shape or not bool(xp.array_equal(highs, rows)):
        raise scope.problem("high_parts", "is not the keys' distinct high parts")
    return None


#: The state of ``rx`` (see the module docstring).
RX_SCHEMA = StateSchema(
    Array("own_keys", shape=(None,), optional=True),
    Array("high_parts", dtype="uint64", shape=(None,), optional=True),
    Array("no_keys", dtype="uint64", shape=(1,)),
    Value("peak", int, at_least=0),
    # None: saved from OptiX, built again on load
    Value("gas", "indexzoo.native.rt.trace:Gas", optional=True),
    gas_specs("gas", optional=True),
    Array("gas.data", shape=None, optional=True),
    Check(_check),
)
