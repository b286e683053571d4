"""The ``ownership`` conformance checks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from indexzoo.devices import to_device, to_numpy

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges
from .common import key_set


# ====================================================================== ownership
def _changed(before: Any, after: Any) -> str:
    now = to_numpy(after)
    bad = np.nonzero(now != before)[0]
    return f"{bad.size} of {before.size} entries changed, first at positions {bad[:5]}" \
        if bad.size else ""


@check("ownership")
def check_the_callers_arrays_are_left_untouched(ctx: Context) -> None:
    """build() and every lookup leave the arrays the caller passed exactly as they were."""
    rng = np.random.default_rng(21)
    host_keys = key_set(ctx, "duplicates", 2000, 21, unique="uniform32")
    host_values = rng.integers(0, 2**64 - 1, host_keys.shape[0], dtype=np.uint64, endpoint=True)
    keys = to_device(host_keys.copy(), ctx.device)  # the caller's arrays; the host_ ones are
    values = to_device(host_values.copy(), ctx.device)  # the reference copies
    index = ctx.new().build(keys, values)
    for what, before, arr in (("keys", host_keys, keys), ("values", host_values, values)):
        diff = _changed(before, arr)
        assert not diff, f"build() changed the caller's {what} array: {diff}"
    host_q = lookups(host_keys, 300, 21)
    host_lo, host_hi = ranges(host_keys, 300, 21)
    q, lo, hi = (to_device(a.copy(), ctx.device) for a in (host_q, host_lo, host_hi))
    for mode in ctx.modes:
        calls: list[tuple[str, Callable[[], Any], tuple[tuple[str, Any, Any], ...]]] = []
        if ctx.caps.point:
            calls.append((f"point(out={mode!r})", partial(index.point, q, out=mode),
                          (("queries", host_q, q),)))
        if ctx.caps.range:
            calls.append((f"range(out={mode!r})", partial(index.range, lo, hi, out=mode),
                          (("lo", host_lo, lo), ("hi", host_hi, hi))))
        for label, call, args in calls:
            call()
            for what, before, arr in args:
                diff = _changed(before, arr)
                assert not diff, f"{label} changed the caller's {what} array: {diff}"


@check("ownership")
def check_changing_the_callers_arrays_after_build_changes_no_answer(ctx: Context) -> None:
    """The index keeps its own copies: overwriting the keys and values the caller passed to
    build() afterwards changes no answer."""
    rng = np.random.default_rng(22)
    host_keys = make_keys("uniform32", 2000, 22, duplicates=ctx.caps.duplicates).keys
    host_values = rng.integers(0, 2**64 - 1, host_keys.shape[0], dtype=np.uint64, endpoint=True)
    for dtype in (host_keys.dtype, np.dtype(np.uint64)) if ctx.wide else (host_keys.dtype,):
        keys = to_device(host_keys.astype(dtype), ctx.device)  # the caller's own arrays
        values = to_device(host_values.copy(), ctx.device)
        index = ctx.new().build(keys, values)
        keys[:] = keys[::-1].copy()  # a different key column (unique keys stay unique)
        values[:] = 7
        try:
            verify(ctx, index, host_keys.astype(dtype), values=host_values,
                   points=lookups(host_keys, 300, 22).astype(dtype),
                   rng=tuple(a.astype(dtype) for a in ranges(host_keys, 300, 22)),  # type: ignore[arg-type]
                   label=f"{dtype} keys overwritten after build")
        except AssertionError as exc:
            raise AssertionError(
                "answers changed after the caller overwrote the keys and values it had passed "
                "to build(): the index must keep its own copies\n" + str(exc)) from None
