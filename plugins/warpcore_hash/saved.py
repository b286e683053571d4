"""The saved form of ``warpcore-hash``'s table, as its ``state_schema`` declares it.

A lookup probes windows ``w, w + s, w + 2s, ...`` (mod the window count) until one holds its
key or an empty slot, then reads the slot's value word: a rowID, or a flagged offset of a run
in the overflow array, whose count says how many rowIDs follow. So a file's table is checked
for what makes every such step stay inside its arrays and end:

* the layout of the params (``aos``: one array of (key, value) pairs, ``tvals`` a view of it
  from its second word; ``soa``: two arrays), ``n_windows * group`` slots, the key and value
  word dtypes the build uses for ``n`` rows, ``empty`` the key dtype's maximum and ``flag``
  the value word's top bit;
* a prime window count (so every probe sequence visits every window) and at least one empty
  slot (so every probe ends);
* each occupied slot's value word a rowID below ``n`` or the offset of a run that lies inside
  the overflow array, runs apart from each other;
* every rowID held once: the single-row words, the runs' rows and the out-of-band rows
  (``oob``, the keys equal to the empty sentinel, in increasing order) together are each of
  ``0 .. n - 1`` once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.lazy import lazy_module
from indexzoo.persist import Array, Check, Nested, Scope, StateSchema, Value, view_at

if TYPE_CHECKING:
    from . import kernels
else:  # the checks of a saved table run when one is loaded
    kernels = lazy_module("indexzoo.plugins.warpcore_hash.kernels")

__all__ = ["hash_schema"]

_MAX_WINDOWS = (1 << 32) - 64


def _layout(scope: Scope, word_dtype: Callable[[int, Any], np.dtype]) -> str | None:
    """Arrays, dtypes and scalars of the table as the params and ``n`` make them."""
    ht, ctx = scope.here, scope.ctx
    p = ctx.params
    if ht.group != p.group_size:
        return f"has windows of {ht.group} slots; the params say {p.group_size}"
    key_dt = np.dtype(np.uint64 if ctx.native == np.uint64 else np.uint32)
    word_dt = word_dtype(ctx.n, ctx.rowid)
    if p.layout == "aos":
        key_dt = word_dt = max(key_dt, word_dt, key=lambda d: d.itemsize)
    cap = ht.n_windows * ht.group
    if p.layout == "aos":
        if ht.table is None or ht.stride != 2 or ht.tkeys is not ht.table:
            return "is not the aos layout the params say"
        want = {"table": (key_dt, (2 * cap,)), "tvals": (word_dt, (2 * cap - 1,))}
        if not view_at(ht.tvals, ht.table, 1):
            raise scope.problem("tvals", "is not the table's view from its second word")
    else:
        if ht.table is not None or ht.stride != 1:
            return "is not the soa layout the params say"
        want = {"tkeys": (key_dt, (cap,)), "tvals": (word_dt, (cap,))}
    for name, (dt, shape) in want.items():
        arr = getattr(ht, name)
        if arr.dtype != dt or tuple(arr.shape) != shape:
            raise scope.problem(name, f"is {arr.dtype} {list(arr.shape)}, not {dt} {list(shape)}")
    if ht.overflow.dtype != ctx.rowid:
        raise scope.problem("overflow", f"has dtype {ht.overflow.dtype}, not {ctx.rowid}")
    empty = key_dt.type(np.iinfo(key_dt).max)
    if type(ht.empty) is not key_dt.type or ht.empty != empty:
        raise scope.problem("empty", f"is {ht.empty!r}, not the key dtype's maximum {empty}")
    if type(ht.flag) is not word_dt.type or ht.flag != kernels.value_flag(word_dt):
        raise scope.problem("flag", f"is {ht.flag!r}, not {kernels.value_flag(word_dt)}")
    if kernels.next_prime(ht.n_windows) != ht.n_windows:
        raise scope.problem("n_windows", f"is {ht.n_windows}, not a prime: a probe sequence "
                                         "would not visit every window")
    return None


def _slots(scope: Scope) -> str | None:
    """Every probe ends; every value word leads inside the arrays; every row held once."""
    ht, ctx = scope.here, scope.ctx
    xp = xp_of(ht.tkeys)
    keys = ht.tkeys[0::ht.stride]
    words = ht.tvals[0::ht.stride][: keys.shape[0]]
    occupied = keys != ht.empty
    if bool(occupied.all()):
        return "has no empty slot: a lookup of a missing key would probe forever"
    used = words[occupied]
    multi = used >= ht.flag
    single = used[~multi].astype(np.int64)
    offs = xp.sort((used[multi] - ht.flag).astype(np.int64))
    size = int(ht.overflow.shape[0])
    rows = xp.zeros(0, dtype=np.int64)
    if offs.shape[0]:
        if int(offs[-1]) + kernels.RUN_ROWS > size:
            raise scope.problem("overflow", f"is {size} words; a value word points to a run at "
                                            f"{int(offs[-1])}")
        counts = ht.overflow[offs + kernels.RUN_COUNT].astype(np.int64)
        ends = offs + kernels.RUN_ROWS + counts
        if bool((counts < 1).any()) or int(ends.max()) > size or bool(
                (ends[:-1] > offs[1:]).any()):
            raise scope.problem("overflow", "holds a run that is empty, overlaps the next one "
                                            "or reaches past its end")
        starts = offs + kernels.RUN_ROWS
        first = xp.cumsum(counts) - counts
        total = int(counts.sum())
        at = xp.repeat(starts - first, counts) + xp.arange(total, dtype=np.int64)
        rows = ht.overflow[at].astype(np.int64)
    oob = scope.root["oob"]
    held = xp.concatenate([single, rows, oob.astype(np.int64)])
    n = ctx.n
    if int(held.shape[0]) != n:
        return f"holds {int(held.shape[0])} rows (with the out-of-band ones), not n = {n}"
    if n and (int(held.min()) < 0 or int(held.max()) >= n):
        return f"holds a rowID outside 0 .. {n - 1}"
    seen = xp.zeros(n, dtype=bool)
    seen[held] = True
    if not bool(seen.all()):
        return "holds a rowID twice"
    return None


def hash_schema(word_dtype: Callable[[int, Any], np.dtype]) -> StateSchema:
    """``warpcore-hash``'s state schema; ``word_dtype(n, rowid_dtype)`` is the value word
    dtype its build uses (see the module docstring)."""
    return StateSchema(
        Array("oob", dtype="rowid", shape=(None,), order="increasing"),
        Nested("ht",
               Array("tkeys", dtype=("uint32", "uint64"), shape=(None,)),
               Array("tvals", dtype=("uint32", "uint64"), shape=(None,)),
               Array("table", dtype=("uint32", "uint64"), shape=(None,), optional=True),
               Value("stride", int, choices=(1, 2)),
               Value("n_windows", int, at_least=2, below=_MAX_WINDOWS),
               Value("group", int, at_least=1, below=33),
               Value("empty", int),
               Value("flag", int),
               Array("overflow", shape=(None,)),
               Value("n_distinct", int, at_least=0, below="n + 1"),
               Value("probes", int, at_least=0, optional=True),
               Value("peak", int, at_least=0),
               Check(lambda scope: _layout(scope, word_dtype)),
               Check(_slots)),
        Value("build_probes", int, at_least=0, optional=True),
        Value("peak", int, at_least=0),
    )
