"""The saved form of the software engine's scenes, checked before a ray walks them: the parts
an RT index's ``state_schema`` declares for its GAS (:func:`gas_specs`) or IAS
(:func:`ias_problem`).

A walk follows the BVH's int32 words: an inner record's escape index, a leaf's first sorted
position and count (:mod:`.bvh`), and reports ``order[q]`` of each primitive it tests. So a
file's BVH must be a tree in the layout the builder writes (:func:`bvh_problem`): the root's
subtree is every record; an inner record ``j`` has its left child at ``j + 1`` and its right
child where the left subtree ends, both subtrees ending where ``j``'s does (so every walk
index increases and stays inside the records, and a refit's level pass meets each record
once); leaves hold 1 to ``leaf_size`` primitives and together cover the sorted positions
``0 .. n_prims - 1`` once; the tree is at most :data:`MAX_DEPTH` levels deep; ``order`` holds
each primitive index once. The primitives' coordinates and boxes are floats a walk only
compares: a wrong one changes which keys a ray meets, never where it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.lazy import lazy_module
from indexzoo.persist import Array, Check, Nested, Scope, Spec, Value

from .layout import MAX_LEAF_SIZE, WIDTH

if TYPE_CHECKING:
    from . import bvh as bvh_module
    from . import keyprims, trace
    from .bvh import Bvh
    from .keymap import KeyCoder
    from .trace import Ias
else:  # the checks run when a file is loaded; an index declares its schema without them
    bvh_module = lazy_module("indexzoo.native.rt.bvh")
    keyprims = lazy_module("indexzoo.native.rt.keyprims")
    trace = lazy_module("indexzoo.native.rt.trace")

__all__ = ["CHUNK", "MAX_DEPTH", "WIDTH", "bvh_problem", "bvh_specs", "gas_specs", "ias_problem",
           "primitives_match"]

#: The deepest BVH a file may hold (the builder's trees over 63-bit codes and positions stay
#: far below; a deeper one would make a refit's level pass run as long as the file wants).
MAX_DEPTH = 512
#: Primitives made again and compared at once (bounds :func:`primitives_match`'s memory).
CHUNK = 1 << 20


def bvh_problem(bvh: Bvh, n_prims: int) -> str | None:
    """What is wrong with ``bvh`` as the BVH of ``n_prims`` primitives (see the module
    docstring), or None."""
    nodes, order = bvh.nodes, bvh.order
    if bvh.n_prims != n_prims:
        return f"is a BVH of {bvh.n_prims} primitives, over {n_prims}"
    if not 1 <= bvh.leaf_size <= MAX_LEAF_SIZE:
        return f"has leaves of {bvh.leaf_size} primitives (1 .. {MAX_LEAF_SIZE})"
    if not 1 <= bvh.n_nodes <= int(nodes.shape[0]):
        return f"says {bvh.n_nodes} records in a buffer of {int(nodes.shape[0])}"
    if int(order.shape[0]) != n_prims:
        return f"orders {int(order.shape[0])} primitives, not {n_prims}"
    xp = xp_of(nodes)
    words = nodes[:bvh.n_nodes].view(np.int32)[:, 6:8].astype(np.int64)
    if n_prims == 0:  # one record whose escape index ends every walk
        ok = bvh.n_nodes == 1 and int(words[0, 0]) == 1 and int(words[0, 1]) == 0
        return None if ok else "is not the one record of an empty scene"
    wrong = _topology(xp, words, bvh.n_nodes, bvh.leaf_size, n_prims)
    if wrong:
        return wrong
    if int(order.min()) < 0 or int(order.max()) >= n_prims:
        return "orders a primitive index outside 0 .. n_prims - 1"
    seen = xp.zeros(n_prims, dtype=bool)
    seen[order.astype(np.int64)] = True
    if not bool(seen.all()):
        return "orders a primitive twice"
    return None


def _topology(xp: Any, words: Any, n_nodes: int, leaf_size: int, n_prims: int) -> str | None:
    c, first = words[:, 0], words[:, 1]
    j = xp.arange(n_nodes, dtype=np.int64)
    inner = c >= 0
    end = xp.where(inner, c, j + 1)  # where each record's subtree ends
    if int(end[0]) != n_nodes:
        return "has a root whose subtree is not every record"
    bad = inner & ((c <= j + 1) | (c > n_nodes))
    if bool(bad.any()):
        return f"has an escape index out of order at record {int(xp.argmax(bad))}"
    pi = j[inner]
    right = end[pi + 1]  # the left child's subtree ends where the right child starts
    bad_r = (right >= end[pi]) | (end[xp.minimum(right, n_nodes - 1)] != end[pi])
    if bool(bad_r.any()):
        return f"is not a tree at record {int(pi[xp.argmax(bad_r)])}"
    leaves = j[~inner]
    count, start = -c[leaves], first[leaves]
    if bool(((count < 1) | (count > leaf_size) | (start < 0)).any()):
        return f"has a leaf of a count outside 1 .. {leaf_size} or a negative start"
    ordered = xp.argsort(start)
    start, count = start[ordered], count[ordered]
    if int(start[0]) != 0 or int(start[-1] + count[-1]) != n_prims or bool(
            (start[1:] != start[:-1] + count[:-1]).any()):
        return f"has leaves that do not cover the primitives 0 .. {n_prims - 1} once"
    level = xp.zeros(1, dtype=np.int64)
    for _ in range(MAX_DEPTH):  # a tree of well-formed records is this deep at most
        pi = level[inner[level]]
        if not pi.shape[0]:
            return None
        level = xp.concatenate([pi + 1, end[pi + 1]])
    return f"is deeper than {MAX_DEPTH} levels"


def _check_bvh(scope: Scope) -> str | None:
    bvh = scope.here
    return bvh_problem(bvh, bvh.n_prims)


def bvh_specs() -> tuple[Spec, ...]:
    """The specs of a :class:`~.bvh.Bvh` record (relative to it): its arrays and the tree."""
    return (Array("nodes", dtype="float32", shape=(None, 8)),
            Array("order", dtype=("int32", "int64"), shape=(None,)),
            Value("n_prims", int, at_least=0),
            Value("leaf_size", int, at_least=1, below=MAX_LEAF_SIZE + 1),
            Value("n_nodes", int, at_least=1),
            Value("depth", int, at_least=0),
            Value("peak_build_bytes", int, at_least=0),
            Check(_check_bvh))


def _check_gas(scope: Scope) -> str | None:
    gas = scope.here
    if not isinstance(gas, trace.Gas) or isinstance(gas, trace.Ias):
        return f"is a {type(gas).__name__}, not a GAS"
    if gas.geometry is not None:
        return "holds a geometry function (a file never does)"
    if gas.kind not in WIDTH:
        return f"has primitive kind {gas.kind}"
    if not (np.isfinite(gas.radius) and gas.radius >= 0):
        return f"has sphere radius {gas.radius}"
    if int(gas.data.shape[0]) != gas.bvh.n_prims:
        return f"holds {int(gas.data.shape[0])} primitives for a BVH over {gas.bvh.n_prims}"
    return None


def gas_specs(prefix: str, *, optional: bool = False) -> Nested:
    """The specs of a software GAS at ``prefix`` (the dtype and shape of the primitives
    ``data`` are the plugin's to check: they depend on its geometry)."""
    return Nested(prefix,
                  Array("data"),
                  Value("kind", int, choices=tuple(WIDTH)),
                  Value("radius", float),
                  Nested("bvh", *bvh_specs()),
                  Check(_check_gas),
                  optional=optional)


def ias_problem(ias: Ias, slices: list[tuple[int, int]]) -> str | None:
    """What is wrong with ``ias`` as an IAS of one GAS per slice ``(start, count)`` of its
    pooled primitives, instance ``i`` (identity transform, id ``i``) over slice ``i``, each
    GAS's records pooled after the one before (as ``build_sliced_ias`` makes it), or None.
    The top-level BVH must be compact: the IAS walk runs over every record of its buffer."""
    if ias.geometry is not None or ias.kind not in WIDTH:
        return "is not an IAS a file holds (a geometry function, or no primitive kind)"
    n_inst = len(slices)
    if ias.n_instances != n_inst or tuple(ias.inst.shape) != (n_inst, 16) \
            or ias.inst.dtype != np.float32:
        return f"holds {ias.n_instances} instances ({list(ias.inst.shape)}), not {n_inst}"
    wrong = bvh_problem(ias.top, n_inst)
    if wrong:
        return f"top-level BVH: {wrong}"
    if int(ias.top.nodes.shape[0]) != ias.top.n_nodes:  # its walk runs over every record
        return (f"top-level BVH: a buffer of {int(ias.top.nodes.shape[0])} records for "
                f"{ias.top.n_nodes}")
    total = sum(c for _, c in slices)
    if int(ias.data.shape[0]) != total or tuple(ias.order.shape) != (total,) \
            or ias.order.dtype != np.int64 or ias.nodes.ndim != 2 or ias.nodes.shape[1] != 8 \
            or ias.nodes.dtype != np.float32:
        return "holds pooled buffers of other shapes than its slices make"
    words = np.asarray(ias.inst.view(np.int32)[:, 12:16].get() if hasattr(ias.inst, "get")
                       else ias.inst.view(np.int32)[:, 12:16]).astype(np.int64)
    node_base = 0
    for i, (start, count) in enumerate(slices):
        nbase, dbase, n_nodes, tag = (int(w) for w in words[i])
        if (dbase, tag >> 8) != (start, i) or nbase != node_base:
            return f"instance {i} is not over slice {i} of the pooled primitives"
        if count == 0 and n_nodes == 0:
            continue
        if nbase + n_nodes > int(ias.nodes.shape[0]):
            return f"instance {i}'s records reach past the pool"
        sub = bvh_module.Bvh(ias.nodes[nbase:nbase + n_nodes], ias.order[dbase:dbase + count], count,
                             MAX_LEAF_SIZE, n_nodes, 0, 0)
        wrong = bvh_problem(sub, count)
        if wrong:
            return f"instance {i}'s GAS {wrong}"
        node_base += n_nodes
    if node_base != int(ias.nodes.shape[0]):
        return f"pools {int(ias.nodes.shape[0])} records; its instances use {node_base}"
    return None


def primitives_match(coder: KeyCoder, primitive: str, keys: Any, positions: Any,
                     data: Any) -> bool:
    """Whether ``data[i]`` (stored geometry) is the primitive of ``keys[positions[i]]`` for
    every ``i``: the scene holds the keys it says, made again a chunk at a time. (The
    primitives of keys the coder holds are exact in float32, so both devices make the same.)"""
    xp = xp_of(data)
    for s in range(0, int(positions.shape[0]), CHUNK):
        want = keyprims.primitives(coder, primitive, keys[positions[s:s + CHUNK].astype(np.int64)])
        if not bool(xp.array_equal(data[s:s + CHUNK], want)):
            return False
    return True
