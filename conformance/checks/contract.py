"""The ``contract`` conformance checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from indexzoo import (
    OUT_MODES,
    Capabilities,
    GpuIndex,
    IndexParams,
)
from indexzoo.contract import check_plugin_class
from indexzoo.devices import to_device
from indexzoo.errors import PluginError
from indexzoo.hooks import declared_operations, resolve
from indexzoo.operations import OPERATIONS

from ..context import Context, check
from ..data import lookups, make_keys
from .common import host_arrays


# ====================================================================== contract
@check("contract")
def check_class_declares_the_contract(ctx: Context) -> None:
    """The class has a name, Params (an IndexParams with valid defaults), capabilities, a doc."""
    index = ctx.new()
    cls = type(index)
    assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
    assert issubclass(cls.Params, IndexParams), "Params must subclass indexzoo.IndexParams"
    cls.Params()  # defaults must validate
    assert isinstance(cls.capabilities, Capabilities)
    assert cls.__doc__ and cls.__doc__.strip(), "the class needs a docstring (indexzoo list shows it)"
    assert ctx.caps.point or ctx.caps.range, "an index must offer point or range lookups"
    assert set(ctx.caps.out_modes) <= set(OUT_MODES) and ctx.caps.out_modes
    assert index.device == ctx.device, f"index is on {index.device!r}, asked for {ctx.device!r}"
    assert not index.is_built


@check("contract")
def check_hooks_match_the_operation_table(ctx: Context) -> None:
    """Every hook is an operation of the table, with its signature, for an operation the
    capabilities declare; every declared operation is answered; the plugin API is one this
    indexzoo takes."""
    cls = ctx.cls if ctx.cls is not None else type(ctx.new())
    try:
        check_plugin_class(cls)
    except PluginError as exc:
        raise AssertionError(str(exc)) from None


@check("contract")
def check_a_subclass_hook_answers_on_every_path(ctx: Context) -> None:
    """A subclass that overrides the hook answering an operation is the one called, for a
    batch of the keys' own dtype (the prepared point path) and of another dtype (the general
    path), and answers as the class does."""
    plain = ctx.new()
    cls = type(plain)
    routes = resolve(cls, GpuIndex).routes
    # a subclass may define an operation's hook only for an operation it declares: a hook
    # its capabilities leave out (one of a class it narrows, whose answer it derives others
    # from) is not overridden, and not looked for
    undeclared = ({f"_{op.kind}_{op.out}" for op in OPERATIONS}
                  - {f"_{op.kind}_{op.out}" for op in declared_operations(cls.capabilities)})
    hooks = sorted({r.source.hook for r in routes.values()} - undeclared)
    called: list[str] = []

    def spy(name: str) -> Callable[..., Any]:
        def hook(self: Any, st: Any, *args: Any) -> Any:
            called.append(name)
            return getattr(super(spied, self), name)(st, *args)
        hook.__name__ = name
        return hook

    spied = type(f"Spied{cls.__name__}", (cls,), {h: spy(h) for h in hooks})
    index = spied(plain.params, device=ctx.device)
    keys = make_keys("dense", 2000, 11, duplicates=ctx.caps.duplicates).keys
    keys = keys if ctx.wide else keys.astype(np.uint32)
    index.build(keys)
    plain.build(keys)
    native = lookups(keys, 300, 11)
    top = native.dtype.type(np.iinfo(native.dtype).max)
    wide = np.where(native > top - 2, top, native + native.dtype.type(2))
    for dtype in (native.dtype, np.dtype(np.int64)):
        q = to_device(native.astype(dtype), ctx.device)
        hi = to_device(wide.astype(dtype), ctx.device)
        for op, route in sorted(routes.items(), key=lambda kv: (kv[0].kind, kv[0].out)):
            called.clear()
            if op.kind == "point":
                got, want = index.point(q, out=op.out), plain.point(q, out=op.out)
            else:
                got, want = index.range(q, hi, out=op.out), plain.range(q, hi, out=op.out)
            where = f"{op.kind} {op.out} of {dtype} lookups"
            assert route.source.hook in called or route.source.hook not in hooks, (
                f"{where}: the subclass overrides {route.source.hook} (which answers it), yet "
                f"it was not called (called: {sorted(set(called)) or 'nothing'})")
            for a, b in zip(host_arrays(got), host_arrays(want), strict=True):
                assert np.array_equal(a, b), f"{where}: the subclass answers otherwise"
