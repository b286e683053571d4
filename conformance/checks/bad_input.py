"""The ``bad_input`` conformance checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from indexzoo import (
    GpuIndex,
    InvalidInput,
    NotBuilt,
)

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges


# ====================================================================== bad input
def _bad_calls(ctx: Context, keys: np.ndarray
               ) -> list[tuple[str, Callable[[GpuIndex], Any], type[Exception]]]:
    q = np.array([1, 2], dtype=keys.dtype)
    d = ctx.caps.dims
    floats = np.float64 if ctx.wide else np.float32  # float64 keys need uint64 keys
    out = ctx.modes[0]  # an out mode the index offers (the default may be one it lacks)
    too_wide = ((f"keys of {d + 1} columns", lambda i: i.build(np.zeros((4, d + 1), keys.dtype)))
                if d > 1 else ("2-D keys", lambda i: i.build(np.zeros((4, 2), keys.dtype))))
    calls: list[tuple[str, Callable[[GpuIndex], Any], type[Exception]]] = [
        (*too_wide, InvalidInput),
        ("3-D keys", lambda i: i.build(np.zeros((4, 2, 2), keys.dtype)), InvalidInput),
        ("NaN keys", lambda i: i.build(np.array([1.0, np.nan], dtype=floats)), InvalidInput),
        ("object keys", lambda i: i.build(np.array([1, "x"], dtype=object)), InvalidInput),
        ("values of another length", lambda i: i.build(keys, np.arange(3)), InvalidInput),
        ("float values", lambda i: i.build(keys, np.ones(keys.shape[0])), InvalidInput),
    ]
    if ctx.caps.point:
        calls += [
            ("2-D lookups", lambda i: i.point(np.zeros((2, 2), keys.dtype), out=out),
             InvalidInput),
            ("scalar lookup", lambda i: i.point(np.uint32(3), out=out), InvalidInput),
            ("float lookups", lambda i: i.point(np.array([1.5]), out=out), InvalidInput),
            ("unknown out", lambda i: i.point(q, out=cast(Any, "bogus")), InvalidInput),
        ]
    if ctx.caps.range:
        calls += [
            ("lo and hi of other lengths", lambda i: i.range(q, q[:1], out=out), InvalidInput),
            ("NaN bounds", lambda i: i.range(np.array([np.nan]), np.array([1.0]), out=out),
             InvalidInput),
        ]
    return calls


@check("bad_input")
def check_bad_input_raises_and_leaves_the_index_correct(ctx: Context) -> None:
    """Each bad input raises its specific error, and the built index still answers right."""
    keys = make_keys("uniform32", 1500, 11, duplicates=ctx.caps.duplicates).keys
    q = lookups(keys, 300, 11)
    r = ranges(keys, 300, 11)
    index = ctx.new().build(keys)
    footprint = index.memory_footprint()
    for label, call, err in _bad_calls(ctx, keys):
        try:
            call(index)
        except err:
            pass
        except Exception as exc:
            raise AssertionError(f"{label}: raised {type(exc).__name__}: {exc}, "
                                 f"expected {err.__name__}") from exc
        else:
            raise AssertionError(f"{label}: no error, expected {err.__name__}")
        verify(ctx, index, keys, points=q, rng=r, label=f"after {label}")
        assert index.memory_footprint() == footprint, f"footprint changed after {label}"


@check("bad_input")
def check_lookups_before_build_raise_not_built(ctx: Context) -> None:
    """Lookups and footprints of an unbuilt index raise NotBuilt."""
    index = ctx.new()
    q = np.array([1], np.uint32)
    calls: list[Callable[[], Any]] = [index.memory_footprint]
    out = ctx.modes[0]  # an out mode the index offers
    if ctx.caps.point:
        calls.append(lambda: index.point(q, out=out))
    if ctx.caps.range:
        calls.append(lambda: index.range(q, q, out=out))
    for call in calls:
        try:
            call()
        except NotBuilt:
            continue
        raise AssertionError("a call on an unbuilt index did not raise NotBuilt")
