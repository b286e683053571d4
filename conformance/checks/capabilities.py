"""The ``capabilities`` conformance checks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, cast

import numpy as np

from indexzoo import (
    OUT_MODES,
    Capabilities,
    GpuIndex,
    Out,
    Unsupported,
)

from ..context import Context, check, verify


def _lookup(index: GpuIndex, caps: Capabilities, q: Any, out: Out) -> Any:
    """A point lookup, or the range [q, q] for an index without point lookups."""
    return index.point(q, out=out) if caps.point else index.range(q, q, out=out)


# ====================================================================== capabilities
@check("capabilities")
def check_missing_capabilities_raise_unsupported(ctx: Context) -> None:
    """What the capabilities leave out raises Unsupported: ranges, out modes, duplicates,
    uint64 keys."""
    keys = ctx.keys([1, 5, 9], 32)
    index = ctx.new().build(keys)
    q = np.array([5], dtype=keys.dtype)
    attempts: list[tuple[str, Callable[[], Any]]] = []
    if not ctx.caps.range:
        attempts.append(("range lookups", lambda: index.range(q, q)))
    if not ctx.caps.point:
        attempts.append(("point lookups", lambda: index.point(q)))
    for mode in set(OUT_MODES) - set(ctx.modes):
        attempts.append((f"out={mode!r}", partial(_lookup, index, ctx.caps, q, cast(Any, mode))))
    if not ctx.caps.duplicates:
        attempts.append(("duplicate keys", lambda: ctx.new().build(ctx.keys([3, 3], 32))))
    if not ctx.wide:
        attempts.append(("uint64 keys",
                         lambda: ctx.new().build(np.array([2**40], dtype=np.uint64))))
    for label, call in attempts:
        try:
            call()
        except Unsupported:
            continue
        except Exception as exc:
            raise AssertionError(f"{label}: raised {type(exc).__name__}, expected Unsupported"
                                 ) from exc
        raise AssertionError(f"{label}: not declared in capabilities, yet no Unsupported")
    verify(ctx, index, keys, points=q, rng=(q, q), label="after unsupported calls")
