"""The saved form of a lightweight build, as its ``state_schema`` declares it.

Every scalar of the layout the kernels index with (stride, padding, EO levels, AO+BS's first
step, the pivot buffer's levels, arity and chunk) follows from the options the build used
(``config``) and ``n``, so a file's layout must be exactly :func:`.layout.layout_shape` of
them: the key and rowID arrays of its dtypes and lengths (in AoS the rowIDs the pair table's
view from its second word), the pivot buffer the one the sorted keys give (made again here)
with its level offsets. The keys must be in order (the AO array, or the EO array read in its
in-order sequence) and their rowIDs each of ``0 .. n - 1`` once. The GPU driver's plan and
pinning depend on the device, not on the file: the load makes them again (``_drive``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pydantic

from indexzoo.devices import xp_of
from indexzoo.native.lazy import lazy_module
from indexzoo.persist import Array, Check, Nested, Scope, StateSchema, Value, view_at

from .params import LightweightParams

if TYPE_CHECKING:
    from . import eytzinger, layout
    from .layout import LayoutShape
else:  # the checks of a saved layout run when one is loaded
    eytzinger = lazy_module("indexzoo.plugins.lightweight.eytzinger")
    layout = lazy_module("indexzoo.plugins.lightweight.layout")

__all__ = ["LIGHTWEIGHT_SCHEMA"]

_SCALARS = ("stride", "n", "levels", "k", "chunk", "pad", "step0", "h", "b")


def _options(scope: Scope) -> LightweightParams:
    try:
        return LightweightParams.model_validate_json(scope.root["config"])
    except (pydantic.ValidationError, ValueError) as exc:
        raise scope.problem("config", f"is not the options of a build "
                                      f"({' '.join(str(exc).split())[:160]})") from None


def _check(scope: Scope) -> str | None:
    ctx, lay = scope.ctx, scope.root["layout"]
    options = _options(scope)
    shape = layout.layout_shape(options, ctx.n, ctx.native, ctx.rowid)
    want = {"stride": shape.stride, "n": ctx.n, "k": shape.k, "chunk": shape.chunk,
            "pad": shape.pad, "step0": shape.step0, "h": shape.h, "b": shape.b,
            "levels": shape.pivots.levels if shape.pivots else 0}
    for name in _SCALARS:
        got = getattr(lay, name)
        if type(got) is not np.int64 or int(got) != want[name]:
            raise scope.problem(f"layout.{name}", f"is {got!r}, not {want[name]} (what "
                                                  f"{ctx.n} keys with its options make)")
    for name, dt, size in (("keys", shape.keys_dtype, shape.keys_length),
                           ("rowids", shape.rowids_dtype, shape.rowids_length)):
        arr = getattr(lay, name)
        if arr.dtype != dt or arr.ndim != 1 or int(arr.shape[0]) != size:
            raise scope.problem(f"layout.{name}", f"is {arr.dtype} {list(arr.shape)}, not "
                                                  f"{dt} [{size}]")
    if shape.stride == 2 and shape.keys_length and not view_at(lay.rowids, lay.keys, 1):
        raise scope.problem("layout.rowids", "is not the pair table's view from its second word")
    if scope.root["pivot_plan"] != shape.pivots:
        raise scope.problem("pivot_plan", f"is not the plan of {ctx.n} keys with its options "
                                          f"({shape.pivots})")
    keys, rowids = _in_order(scope, lay, shape)
    _check_pairs(scope, keys, rowids)
    pb, pbo = layout.pivot_buffer(ctx.device, shape, keys, options.threads_per_block)
    for name, arr in (("pb", pb), ("pbo", pbo)):
        got = getattr(lay, name)
        if got.dtype != arr.dtype or got.shape != arr.shape or not bool(
                xp_of(arr).array_equal(got, arr)):
            raise scope.problem(f"layout.{name}", "is not the pivot buffer of the sorted keys")
    return None


def _in_order(scope: Scope, lay: Any, shape: LayoutShape) -> tuple[Any, Any]:
    """The keys and rowIDs in sorted order (the EO array read in its in-order sequence)."""
    n, stride, pad = shape.n, shape.stride, shape.pad
    keys = lay.keys[0::stride][pad:pad + n]
    rowids = lay.rowids[0::stride][pad:pad + n]
    if not shape.eo or n == 0:
        return keys, rowids
    xp = xp_of(keys)
    src = xp.arange(n, dtype=np.int64)
    pos = xp.empty(n, dtype=np.int64)  # pos[t]: the sorted position of EO slot t
    eytzinger.EO_GATHER(scope.ctx.device, n, src, src, pos, pos, 1, 0, n, shape.k, shape.h, shape.b)
    sorted_keys = xp.empty(n, dtype=keys.dtype)
    sorted_rowids = xp.empty(n, dtype=rowids.dtype)
    sorted_keys[pos] = keys
    sorted_rowids[pos] = rowids
    return sorted_keys, sorted_rowids


def _check_pairs(scope: Scope, keys: Any, rowids: Any) -> None:
    xp = xp_of(keys)
    n = int(keys.shape[0])
    if n > 1 and bool((keys[1:] < keys[:-1]).any()):
        raise scope.problem("layout.keys", "holds keys out of order")
    if n and int(rowids.max()) >= n:
        raise scope.problem("layout.rowids", f"holds a rowID past n = {n}")
    seen = xp.zeros(n, dtype=bool)
    seen[rowids.astype(np.int64)] = True
    if not bool(seen.all()):
        raise scope.problem("layout.rowids", "holds a rowID twice")


#: The state of every lightweight scheme (see the module docstring).
LIGHTWEIGHT_SCHEMA = StateSchema(
    Value("config", str),
    Value("peak", int, at_least=0),
    # the records' classes by name: their modules are imported when a file is checked
    Value("plan", "indexzoo.plugins.lightweight.kernels:DriverPlan"),  # made again on load
    Value("pins", "indexzoo.plugins.lightweight.kernels:PinRecord"),   # for the device
    Value("pivot_plan", "indexzoo.plugins.lightweight.pivots:PivotPlan", optional=True),
    Nested("layout",
           Array("keys", shape=(None,)),
           Array("rowids", shape=(None,)),
           Array("pb", shape=(None,)),
           Array("pbo", dtype="int64", shape=(None,)),
           *(Value(name, int) for name in _SCALARS)),
    Check(_check),
)
