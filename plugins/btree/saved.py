"""The saved form of a :class:`~indexzoo.plugins.btree.kernels.BTree`, as a plugin's ``state_schema``
declares it (:func:`tree_schema`).

A bulk-loaded tree's links are fixed by ``n``, the node width and the leaf fill: every leaf
but the last holds ``m`` entries, every inner node but a level's last holds ``B`` children,
and the one-thread descent computes children from that instead of reading them. So the links
of a file (leaf counts and next links, inner children and counts, level starts) must equal the
ones made again from ``n``, ``B`` and ``m`` here, exactly; the inner keys must be the largest
key under each child (the descent's pivots); the leaves' keys must be in order and their
rowIDs each of ``0 .. n - 1`` once. Then every index a kernel computes or reads lies inside
its array.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.lazy import lazy_module
from indexzoo.persist import Array, Check, Nested, Scope, Value

from .params import BTreeParams

if TYPE_CHECKING:
    from . import kernels
else:  # the checks of a saved tree run when one is loaded
    kernels = lazy_module("indexzoo.plugins.btree.kernels")

__all__ = ["tree_schema"]

#: The leaf layouts a saved tree may have: those of the params (the kernels' LEAF_LAYOUTS).
_LEAF_LAYOUTS = typing.get_args(BTreeParams.model_fields["leaf_layout"].annotation)


def _links(xp: Any, n: int, width: int, m: int) -> dict[str, Any]:
    """The link arrays of a bulk-loaded tree of ``n`` entries (as ``build_btree`` makes them)."""
    n_leaves = -(-n // m)
    leaf_next = xp.arange(1, n_leaves + 1, dtype=np.int32)
    if n_leaves:
        leaf_next[-1] = -1
    children, counts, sizes = [], [], []
    below = n_leaves
    while below > 1:
        children.append(kernels.padded_blocks(xp.arange(below, dtype=np.int32), width, width,
                                              np.int32(-1)).ravel())
        counts.append(kernels.block_counts(below, width, xp))
        below = -(-below // width)
        sizes.append(below)
    children.reverse()
    counts.reverse()
    sizes.reverse()
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    empty = xp.zeros(0, dtype=np.int32)
    return {"leaf_count": kernels.block_counts(n, m, xp), "leaf_next": leaf_next,
            "inner_child": xp.concatenate(children) if children else empty,
            "inner_count": xp.concatenate(counts) if counts else empty,
            "level_start": xp.asarray(starts), "n_levels": len(sizes)}


def _leaves(t: Any, n_leaves: int) -> tuple[Any, Any]:
    """The (L, B) views of the leaves' keys and rowIDs, whatever the layout."""
    b = t.width
    if t.leaf_layout == "split":
        return t.leaf_keys.reshape(n_leaves, b), t.leaf_rowids.reshape(n_leaves, b)
    if t.leaf_layout == "interleaved":
        rec = t.leaf_keys.reshape(n_leaves, 2, b)
        return rec[:, 0, :], rec[:, 1, :]
    rec = t.leaf_keys.reshape(n_leaves, b, 2)
    return rec[:, :, 0], rec[:, :, 1]


def _check_tree(scope: Scope) -> str | None:
    t, ctx = scope.here, scope.ctx
    p = ctx.params
    if (t.width, t.leaf_layout) != (p.node_width, p.leaf_layout):
        return (f"is a tree of width {t.width}, layout {t.leaf_layout!r}; the params say "
                f"{p.node_width}, {p.leaf_layout!r}")
    m = kernels.leaf_fill_count(t.width, p.leaf_fill)
    if t.fill != m or t.n != ctx.n:
        return f"holds {t.n} entries, {t.fill} a leaf; the index holds {ctx.n}, {m} a leaf"
    n_leaves = -(-ctx.n // m)
    split = t.leaf_layout == "split"
    key_dt = ctx.native if split else np.dtype(f"u{max(ctx.native.itemsize, ctx.rowid.itemsize)}")
    rowid_dt = ctx.rowid if split else key_dt
    for name, dt, size in (("leaf_keys", key_dt, n_leaves * t.width * (1 if split else 2)),
                           ("leaf_rowids", rowid_dt, n_leaves * t.width * (1 if split else 2))):
        arr = getattr(t, name)
        if arr.dtype != dt or arr.ndim != 1 or int(arr.shape[0]) != size:
            raise scope.problem(name, f"is {arr.dtype} {list(arr.shape)}, not {dt} [{size}]")
    if not split and t.leaf_keys is not t.leaf_rowids:
        raise scope.problem("leaf_rowids", "is not the record array leaf_keys is")
    xp = xp_of(t.leaf_keys)
    want = _links(xp, ctx.n, t.width, m)
    if t.n_levels != want["n_levels"]:
        raise scope.problem("n_levels", f"is {t.n_levels}, not {want['n_levels']}")
    for name in ("leaf_count", "leaf_next", "inner_child", "inner_count", "level_start"):
        got = getattr(t, name)
        if got.shape != want[name].shape or not bool(xp.array_equal(got, want[name])):
            raise scope.problem(name, f"differs from the links of a tree of {ctx.n} entries, "
                                      f"{t.width} slots a node, {m} a leaf")
    if n_leaves:
        keys, rowids = _leaves(t, n_leaves)
        used_keys = keys[:, :m].reshape(-1)[:ctx.n]
        used_rowids = rowids[:, :m].reshape(-1)[:ctx.n]
        return _check_entries(scope, t, used_keys, used_rowids, keys, want)
    return None


def _check_entries(scope: Scope, t: Any, keys: Any, rowids: Any, leaf_keys: Any,
                   links: dict[str, Any]) -> str | None:
    """The entries in order, their rowIDs a permutation, the pivots the children's maxima."""
    xp = xp_of(keys)
    if keys.shape[0] > 1 and bool((keys[1:] < keys[:-1]).any()):
        raise scope.problem("leaf_keys", "holds keys out of order")
    n = int(rowids.shape[0])
    if int(rowids.max()) >= n:
        raise scope.problem("leaf_rowids", f"holds a rowID past n = {n}")
    seen = xp.zeros(n, dtype=bool)
    seen[rowids.astype(np.int64)] = True
    if not bool(seen.all()):
        raise scope.problem("leaf_rowids", "holds a rowID twice")
    count = links["leaf_count"].astype(np.int64)
    maxima = leaf_keys[xp.arange(leaf_keys.shape[0]), count - 1].astype(t.inner_keys.dtype)
    pivots = []
    width = t.width
    top = t.inner_keys.dtype.type(np.iinfo(t.inner_keys.dtype).max)
    while maxima.shape[0] > 1:
        level = kernels.padded_blocks(maxima, width, width, top)
        pivots.append(level.ravel())
        counts = kernels.block_counts(int(maxima.shape[0]), width, xp).astype(np.int64)
        maxima = level[xp.arange(level.shape[0]), counts - 1]
    pivots.reverse()
    want = xp.concatenate(pivots) if pivots else t.inner_keys[:0]
    if t.inner_keys.shape != want.shape or not bool(xp.array_equal(t.inner_keys, want)):
        raise scope.problem("inner_keys", "are not the largest keys under their children")
    return None


def tree_schema(prefix: str) -> Nested:
    """The saved :class:`~indexzoo.plugins.btree.kernels.BTree` at ``prefix`` of a state (see the module
    docstring); the params are the ``btree`` plugin's (``node_width``, ``leaf_fill``,
    ``leaf_layout``)."""
    return Nested(
        prefix,
        Value("width", int, at_least=1, below=1 << 16),
        Value("fill", int, at_least=1),
        Value("n", int, equals="n"),
        Value("leaf_layout", str, choices=_LEAF_LAYOUTS),
        Value("n_levels", int, at_least=0, below=64),
        Value("peak_bytes", int, at_least=0),
        Array("leaf_keys", shape=(None,)),
        Array("leaf_rowids", shape=(None,)),
        Array("leaf_count", dtype="int32", shape=(None,)),
        Array("leaf_next", dtype="int32", shape=(None,)),
        Array("inner_keys", dtype="native", shape=(None,)),
        Array("inner_child", dtype="int32", shape=(None,)),
        Array("inner_count", dtype="int32", shape=(None,)),
        Array("level_start", dtype="int64", shape=(None,)),
        Check(_check_tree),
    )
