"""A bulk-loaded B+-tree over sorted (key, rowID) pairs: the layout, the parallel bottom-up
build (array operations only, so it runs on the GPU as it does on the CPU), and the CPU twin
of the cooperative GPU search (``kernels_cuda.py``). The leaf layouts' indexing and the in-node
search, which both share, are in ``nodes.py``.

Layout (node width B):

* **Leaves**: ``leaf_keys``/``leaf_rowids`` are ``L x B`` (flattened), leaf ``j`` holding the
  sorted entries ``j*m .. j*m+m-1`` in its first ``leaf_count[j]`` slots (``m`` = B at 100% fill,
  B/2 at 50%); ``leaf_next[j]`` links to the next leaf (-1 after the last). That is the
  ``split`` leaf layout; the record layouts (:data:`LEAF_LAYOUTS`) put a leaf's rowIDs next to
  its keys in one array, ``leaf_keys`` and ``leaf_rowids`` both naming it: ``interleaved``
  (per leaf B keys, then their B rowIDs) and ``paired`` (per slot the key, then its rowID),
  keys and rowIDs both widened to the wider of the two dtypes.
* **Inner nodes**, top level first: ``inner_keys``/``inner_child`` are ``N x B`` (flattened);
  slot ``i`` of a node holds the largest key under child ``i`` and the child's index in the level
  below (a leaf index below the last inner level); ``inner_count`` says how many slots are used.
  ``level_start[l]`` is the index of level ``l``'s first node; the root is node 0 of level 0 (or
  leaf 0 when the whole tree is one leaf).

Search for the first entry ``>= x`` (``strict``: ``> x``): in every inner node take the first
child whose largest key is ``>= x``; none means ``x`` lies beyond every key. The bulk load packs
inner levels full, so the one-thread search computes children and counts (child ``i`` of node
``j`` is ``j*B + i``) and reads only keys; ``inner_child`` and the counts serve the cooperative
kernels and the leaf scans. In the leaf, take
the first slot ``>= x``. Because pivots are the children's largest keys, this finds the first of
a run of duplicates even when the run spans leaves. A found entry's position in the sorted order
is ``leaf * m + slot``. Inner nodes and leaves are both binary-searched.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.native.targets import GroupKernel

from .nodes import LEAF_LAYOUTS, first_slot, leaf_indexing

__all__ = ["COUNT", "FILL", "FIND_ROWID", "LEAF_LAYOUTS", "SUM", "BTree", "Operations",
           "TreeRecord", "block_counts", "build_btree", "leaf_fill_count", "leaf_indexing",
           "operations", "padded_blocks"]


class TreeRecord(NamedTuple):
    """The tree as the kernels read it (one kernel argument; see the module docstring)."""

    inner_keys: Any
    inner_child: Any
    inner_count: Any
    level_start: Any
    n_levels: Any  # int64
    leaf_keys: Any
    leaf_rowids: Any
    leaf_count: Any
    leaf_next: Any
    width: Any  # int64: B
    fill: Any  # int64: m, entries per leaf
    n: Any  # int64: entries


@dataclass(frozen=True)
class BTree:
    """The arrays of a bulk-loaded B+-tree (see the module docstring)."""

    width: int  # B
    fill: int  # m: entries per leaf
    n: int
    leaf_keys: Any
    leaf_rowids: Any
    leaf_count: Any
    leaf_next: Any
    inner_keys: Any
    inner_child: Any
    inner_count: Any
    level_start: Any  # int64, one entry per inner level plus the end
    n_levels: int
    peak_bytes: int
    leaf_layout: str = "split"  # see LEAF_LAYOUTS; records: leaf_keys is leaf_rowids

    def record(self) -> TreeRecord:
        """The kernels' view of the tree."""
        return TreeRecord(self.inner_keys, self.inner_child, self.inner_count, self.level_start,
                          np.int64(self.n_levels), self.leaf_keys, self.leaf_rowids,
                          self.leaf_count, self.leaf_next, np.int64(self.width),
                          np.int64(self.fill), np.int64(self.n))

    def breakdown(self) -> dict[str, int]:
        leaves = ({"leaf_keys": int(self.leaf_keys.nbytes),
                   "leaf_rowids": int(self.leaf_rowids.nbytes)} if self.leaf_layout == "split"
                  else {"leaf_records": int(self.leaf_keys.nbytes)})  # one array, counted once
        return {
            **leaves,
            "leaf_links": int(self.leaf_next.nbytes + self.leaf_count.nbytes),
            "inner_keys": int(self.inner_keys.nbytes),
            "inner_children": int(self.inner_child.nbytes + self.inner_count.nbytes),
            "levels": int(self.level_start.nbytes),
        }


def padded_blocks(values: Any, per: int, width: int, fill_value: Any) -> Any:
    """``values`` cut into rows of ``per`` entries, each padded to ``width`` slots."""
    xp = xp_of(values)
    rows = -(-int(values.shape[0]) // per)
    out = xp.full((rows, width), fill_value, dtype=values.dtype)
    padded = xp.full(rows * per, fill_value, dtype=values.dtype)
    padded[: values.shape[0]] = values
    out[:, :per] = padded.reshape(rows, per)
    return out


def block_counts(total: int, per: int, xp: Any) -> Any:
    rows = -(-total // per)
    c = xp.full(rows, per, dtype=np.int32)
    if rows:
        c[-1] = total - (rows - 1) * per
    return c


def _records(leaf_keys: Any, leaf_rowids: Any, leaf_layout: str) -> Any:
    """The ``L x B`` key and rowID blocks as one flat record array (``interleaved``: each
    leaf's B keys, then its B rowIDs; ``paired``: (key, rowID) per slot), in the wider of the
    two unsigned dtypes, so a record is a power of two bytes and keys stay aligned."""
    xp = xp_of(leaf_keys)
    item = max(leaf_keys.dtype.itemsize, leaf_rowids.dtype.itemsize)
    dtype = np.dtype(f"u{item}")
    rows, width = (int(d) for d in leaf_keys.shape)
    if leaf_layout == "interleaved":
        out = xp.empty((rows, 2 * width), dtype=dtype)
        out[:, :width] = leaf_keys
        out[:, width:] = leaf_rowids
    else:
        out = xp.empty((rows, width, 2), dtype=dtype)
        out[:, :, 0] = leaf_keys
        out[:, :, 1] = leaf_rowids
    return out.ravel()


def leaf_fill_count(width: int, leaf_fill: float) -> int:
    """Entries per leaf (``m``): ``width`` at 100% fill, half of it at 50%."""
    return width if leaf_fill >= 1.0 else max(width // 2, 1)


def build_btree(sorted_keys: Any, sorted_rowids: Any, width: int, leaf_fill: float,
                leaf_layout: str = "split") -> BTree:
    """Bulk-load a B+-tree from sorted pairs, bottom-up, level by level (array operations)."""
    if leaf_layout not in LEAF_LAYOUTS:
        raise ValueError(f"unknown leaf layout {leaf_layout!r}; one of {sorted(LEAF_LAYOUTS)}")
    xp = xp_of(sorted_keys)
    n = int(sorted_keys.shape[0])
    m = leaf_fill_count(width, leaf_fill)
    top = sorted_keys.dtype.type(np.iinfo(sorted_keys.dtype).max)  # padding; counts rule
    leaf_keys = padded_blocks(sorted_keys, m, width, top)
    leaf_rowids = padded_blocks(sorted_rowids, m, width, sorted_rowids.dtype.type(0))
    n_leaves = int(leaf_keys.shape[0])
    leaf_count = block_counts(n, m, xp)
    leaf_next = xp.arange(1, n_leaves + 1, dtype=np.int32)
    if n_leaves:
        leaf_next[-1] = -1
    peak = int(leaf_keys.nbytes + leaf_rowids.nbytes) * 2  # padded copies while reshaping
    # inner levels, bottom-up: pivots = largest key under each child
    levels_keys, levels_child, levels_count = [], [], []
    maxima = (leaf_keys[xp.arange(n_leaves), leaf_count.astype(np.int64) - 1] if n_leaves
              else leaf_keys[:0, 0])
    below = n_leaves
    while below > 1:
        levels_keys.append(padded_blocks(maxima, width, width, top))
        levels_child.append(padded_blocks(xp.arange(below, dtype=np.int32), width, width, np.int32(-1)))
        counts = block_counts(below, width, xp)
        levels_count.append(counts)
        keys_l = levels_keys[-1]
        maxima = keys_l[xp.arange(keys_l.shape[0]), counts.astype(np.int64) - 1]
        below = int(keys_l.shape[0])
    levels_keys.reverse()
    levels_child.reverse()
    levels_count.reverse()
    sizes = [int(k.shape[0]) for k in levels_keys]
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    if levels_keys:
        inner_keys = xp.concatenate([k.ravel() for k in levels_keys])
        inner_child = xp.concatenate([c.ravel() for c in levels_child])
        inner_count = xp.concatenate(levels_count)
    else:
        inner_keys = xp.zeros(0, dtype=sorted_keys.dtype)
        inner_child = xp.zeros(0, dtype=np.int32)
        inner_count = xp.zeros(0, dtype=np.int32)
    if leaf_layout == "split":
        lk, lr = leaf_keys.ravel(), leaf_rowids.ravel()
    else:
        lk = lr = _records(leaf_keys, leaf_rowids, leaf_layout)
        peak += int(lk.nbytes)
    tree = BTree(width, m, n, lk, lr, leaf_count, leaf_next, inner_keys, inner_child,
                 inner_count, xp.asarray(starts), len(sizes), 0, leaf_layout)
    resident = sum(tree.breakdown().values())
    return BTree(**{**tree.__dict__, "peak_bytes": max(peak, resident)})


# ---------------------------------------------------------------------- CPU twin
class Operations(NamedTuple):
    """The tree's four operations for one leaf layout."""

    FIND_ROWID: GroupKernel
    COUNT: GroupKernel
    SUM: GroupKernel
    FILL: GroupKernel


@functools.cache
def operations(leaf_layout: str = "split") -> Operations:
    """The operations for ``leaf_layout`` (:data:`LEAF_LAYOUTS`): one thread per lookup (the
    CPU, and the GPU with ``group=1``) or groups of B threads (the GPU)."""
    if leaf_layout not in LEAF_LAYOUTS:
        raise ValueError(f"unknown leaf layout {leaf_layout!r}; one of {sorted(LEAF_LAYOUTS)}")
    key_at, rowid_at, leaf_first = leaf_indexing(leaf_layout)

    @register_jitable
    def descend(t, x, strict):
        """(leaf, slot) of the first entry >= x (> x if ``strict``) in tree ``t`` (a
        :class:`TreeRecord`), or (-1, 0) if none."""
        # Inner levels are packed full, so a thread reads only keys: every node but a level's
        # last holds B children, child i of node j is node j*B + i of the level below, and
        # every leaf but the last holds m entries (no reads of inner_child or leaf_count,
        # which would each be another dependent memory access per level).
        node = np.int64(0)
        w = t.width
        for level in range(t.n_levels):
            absolute = t.level_start[level] + node
            count = w
            if absolute + 1 == t.level_start[level + 1]:
                count = np.int64(t.inner_count[absolute])
            i = first_slot(t.inner_keys, absolute * w, count, x, strict)
            if i == count:
                return np.int64(-1), np.int64(0)
            node = node * w + i
        count = min(t.fill, t.n - node * t.fill)
        i = leaf_first(t, node, count, x, strict)
        if i == count:
            return np.int64(-1), np.int64(0)
        return node, i

    @register_jitable
    def find_rowid_item(i, t, lo, hi, out, miss):
        leaf, slot = descend(t, lo[i], False)
        out[i] = miss
        if leaf >= 0 and t.leaf_keys[key_at(t, leaf, slot)] <= hi[i]:
            out[i] = t.leaf_rowids[rowid_at(t, leaf, slot)]

    @register_jitable
    def count_item(i, t, lo, hi, out):
        """Two descents: the positions of the first entry >= lo and of the first > hi."""
        a, sa = descend(t, lo[i], False)
        start = t.n if a < 0 else a * t.fill + sa
        b, sb = descend(t, hi[i], True)
        stop = t.n if b < 0 else b * t.fill + sb
        out[i] = stop - start if stop > start else 0

    @register_jitable
    def sum_item(i, t, values, use_values, lo, hi, out):
        """Descend to the lower bound, then scan the linked leaves while keys are <= hi."""
        leaf, slot = descend(t, lo[i], False)
        acc = np.uint64(0)
        x = hi[i]
        while leaf >= 0:
            c = t.leaf_count[leaf]
            for s in range(slot, c):
                if t.leaf_keys[key_at(t, leaf, s)] > x:
                    out[i] = acc
                    return
                r = t.leaf_rowids[rowid_at(t, leaf, s)]
                acc += values[np.int64(r)] if use_values else np.uint64(r)
            leaf = t.leaf_next[leaf]
            slot = 0
        out[i] = acc

    @register_jitable
    def fill_item(i, t, lo, hi, offsets, out):
        pos = offsets[i]
        end = offsets[i + 1]
        if pos == end:
            return
        leaf, slot = descend(t, lo[i], False)
        while pos < end:
            for s in range(slot, t.leaf_count[leaf]):
                if pos >= end:
                    return
                out[pos] = t.leaf_rowids[rowid_at(t, leaf, s)]
                pos += 1
            leaf = t.leaf_next[leaf]
            slot = 0

    def coop(name: str) -> Any:
        return lambda: getattr(_cooperative().group_operations(leaf_layout), name)

    suffix = "" if leaf_layout == "split" else f"_{leaf_layout}"
    return Operations(
        GroupKernel(find_rowid_item, coop("find_rowid_group"), f"find_rowid{suffix}"),
        GroupKernel(count_item, coop("count_group"), f"count{suffix}"),
        GroupKernel(sum_item, coop("sum_group"), f"sum{suffix}"),
        GroupKernel(fill_item, coop("fill_group"), f"fill{suffix}"))


def _cooperative() -> Any:
    from . import kernels_cuda  # imports numba.cuda: only on the GPU path

    return kernels_cuda


# One thread per lookup on the CPU, one group of B threads (the node width) on the GPU: the
# default leaf layout.
FIND_ROWID, COUNT, SUM, FILL = operations()
