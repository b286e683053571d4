"""A bulk-loaded B+-tree over sorted (key, rowID) pairs: the layout, the parallel bottom-up
build (array operations only, so it runs on the GPU as it does on the CPU), and the CPU twin
of the cooperative GPU search (``btree_cuda.py``).

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
  leaf 0 when the whole tree is one leaf). That is the ``sorted`` inner layout; ``quarters``
  (:data:`INNER_LAYOUTS`, B = 16 only) stores each node's keys as 20: the four quarter maxima
  (slots 3, 7, 11, 15), then the 16 keys in order, so that a search reads the maxima and one
  quarter (two 32-byte sectors for uint64 keys) instead of binary-searching the 16 keys.

Search for the first entry ``>= x`` (``strict``: ``> x``): in every inner node take the first
child whose largest key is ``>= x``; none means ``x`` lies beyond every key. The bulk load packs
inner levels full, so the one-thread search computes children and counts (child ``i`` of node
``j`` is ``j*B + i``) and reads only keys; ``inner_child`` and the counts serve the cooperative
kernels and the leaf scans. In the leaf, take
the first slot ``>= x``. Because pivots are the children's largest keys, this finds the first of
a run of duplicates even when the run spans leaves. A found entry's position in the sorted order
is ``leaf * m + slot``. The ``scan`` descent (:data:`DESCENTS`) replaces the binary search in
inner nodes by a branch-free count over all B pivots; leaves are always binary-searched.
The ``quarters`` inner layout has its own search: count the quarter maxima below x, then the
keys below x in the first quarter whose maximum is not; both counts together are the slot.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of

from .search import bisect
from .targets import GroupKernel

__all__ = ["COUNT", "DESCENTS", "FILL", "FIND_ROWID", "INNER_LAYOUTS", "LEAF_LAYOUTS",
           "QUARTERS_STRIDE", "SUM", "BTree", "Operations", "TreeRecord", "build_btree",
           "leaf_indexing", "operations"]

#: Leaf layouts: (record length in units of B elements, element step between a leaf's keys,
#: rowID offset in units of B, rowID offset in elements). The key of slot ``s`` of leaf ``j``
#: is element ``j*rec*B + step*s`` of ``leaf_keys``, its rowID element
#: ``j*rec*B + rowid_lines*B + rowid_off + step*s`` of ``leaf_rowids`` (the same array as
#: ``leaf_keys`` in the record layouts).
LEAF_LAYOUTS: dict[str, tuple[int, int, int, int]] = {
    "split": (1, 1, 0, 0),        # leaf_keys and leaf_rowids: two L x B arrays
    "interleaved": (2, 1, 1, 0),  # one L x 2B array: B keys, then their B rowIDs
    "paired": (2, 2, 0, 1),       # one L x B x 2 array: (key, rowID) side by side
}
#: Inner-node searches of the one-thread descent: a binary search over the node's slots, or
#: a branch-free count of the pivots below x over all B slots (B independent loads).
DESCENTS = ("binary", "scan")
#: Inner-node layouts: ``sorted``, B keys per node; ``quarters`` (B = 16, the one-thread binary
#: descent only), :data:`QUARTERS_STRIDE` keys per node: the maxima of the four quarters of the
#: node (keys 3, 7, 11, 15), then the 16 keys in order (quarter q at 4 + 4q .. 4 + 4q + 3).
INNER_LAYOUTS = ("sorted", "quarters")
QUARTERS_STRIDE = 20


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
    inner_layout: str = "sorted"  # see INNER_LAYOUTS; quarters: 20 inner keys per node

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


def _blocks(values: Any, per: int, width: int, fill_value: Any) -> Any:
    """``values`` cut into rows of ``per`` entries, each padded to ``width`` slots."""
    xp = xp_of(values)
    rows = -(-int(values.shape[0]) // per)
    out = xp.full((rows, width), fill_value, dtype=values.dtype)
    padded = xp.full(rows * per, fill_value, dtype=values.dtype)
    padded[: values.shape[0]] = values
    out[:, :per] = padded.reshape(rows, per)
    return out


def _counts(total: int, per: int, xp: Any) -> Any:
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


def _quarters(block: Any) -> Any:
    """A level's ``N x 16`` key block in the ``quarters`` layout, ``N x 20``: each node's four
    quarter maxima (padding quarters: the key maximum, as their keys), then its 16 keys."""
    return xp_of(block).concatenate([block[:, 3::4], block], axis=1)


def build_btree(sorted_keys: Any, sorted_rowids: Any, width: int, leaf_fill: float,
                leaf_layout: str = "split", inner_layout: str = "sorted") -> BTree:
    """Bulk-load a B+-tree from sorted pairs, bottom-up, level by level (array operations)."""
    if leaf_layout not in LEAF_LAYOUTS:
        raise ValueError(f"unknown leaf layout {leaf_layout!r}; one of {sorted(LEAF_LAYOUTS)}")
    if inner_layout not in INNER_LAYOUTS or (inner_layout == "quarters" and width != 16):
        raise ValueError(f"unknown inner layout {inner_layout!r} for node width {width}; one of "
                         f"{INNER_LAYOUTS} ('quarters' needs width 16)")
    xp = xp_of(sorted_keys)
    n = int(sorted_keys.shape[0])
    m = width if leaf_fill >= 1.0 else max(width // 2, 1)
    top = sorted_keys.dtype.type(np.iinfo(sorted_keys.dtype).max)  # padding; counts rule
    leaf_keys = _blocks(sorted_keys, m, width, top)
    leaf_rowids = _blocks(sorted_rowids, m, width, sorted_rowids.dtype.type(0))
    n_leaves = int(leaf_keys.shape[0])
    leaf_count = _counts(n, m, xp)
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
        levels_keys.append(_blocks(maxima, width, width, top))
        levels_child.append(_blocks(xp.arange(below, dtype=np.int32), width, width, np.int32(-1)))
        counts = _counts(below, width, xp)
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
        if inner_layout == "quarters":
            levels_keys = [_quarters(k) for k in levels_keys]
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
                 inner_count, xp.asarray(starts), len(sizes), 0, leaf_layout, inner_layout)
    resident = sum(tree.breakdown().values())
    return BTree(**{**tree.__dict__, "peak_bytes": max(peak, resident)})


# ---------------------------------------------------------------------- CPU twin
@register_jitable
def _first(keys, base, count, x, strict):
    """The first slot ``i < count`` of the node at ``base`` whose key is ``>= x`` (``> x``
    if ``strict``), or ``count``: a binary search over the node's sorted slots."""
    return bisect(keys, base, base + count, x, strict) - base


@register_jitable
def _below(k, x, strict):
    """1 if key ``k`` lies before the first entry >= x (> x if ``strict``), else 0."""
    return np.int64((k <= x) if strict else (k < x))


@register_jitable
def _first_strided(keys, base, step, count, x, strict):
    """:func:`_first` over keys ``step`` elements apart (the ``paired`` leaf layout)."""
    lo = np.int64(0)
    hi = count
    while lo < hi:
        mid = (lo + hi) >> 1
        k = keys[base + step * mid]
        if k < x or (strict and k == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@functools.cache
def leaf_indexing(leaf_layout: str) -> tuple[Any, Any, Any]:
    """``(key_at, rowid_at, leaf_first)`` for a leaf layout, as jitable functions with the
    layout's constants compiled in: the element indices of slot ``slot`` of leaf ``leaf`` in
    ``t.leaf_keys`` and ``t.leaf_rowids``, and the leaf search (first slot ``>= x``, ``> x``
    if ``strict``, among the first ``count``)."""
    rec, step, rowid_lines, rowid_off = LEAF_LAYOUTS[leaf_layout]

    @register_jitable
    def key_at(t, leaf, slot):
        return leaf * (rec * t.width) + step * slot

    @register_jitable
    def rowid_at(t, leaf, slot):
        return leaf * (rec * t.width) + rowid_lines * t.width + rowid_off + step * slot

    @register_jitable
    def leaf_first(t, leaf, count, x, strict):
        if step == 1:
            return _first(t.leaf_keys, leaf * (rec * t.width), count, x, strict)
        return _first_strided(t.leaf_keys, leaf * (rec * t.width), step, count, x, strict)

    return key_at, rowid_at, leaf_first


class Operations(NamedTuple):
    """The tree's four operations for one leaf layout and descent."""

    FIND_ROWID: GroupKernel
    COUNT: GroupKernel
    SUM: GroupKernel
    FILL: GroupKernel


@functools.cache
def operations(leaf_layout: str = "split", descent: str = "binary", width: int = 16,
               inner_layout: str = "sorted") -> Operations:
    """The operations for ``leaf_layout`` (:data:`LEAF_LAYOUTS`), ``descent`` (:data:`DESCENTS`)
    and ``inner_layout`` (:data:`INNER_LAYOUTS`): one thread per lookup (the CPU, and the GPU
    with ``group=1``) or groups of B threads (the GPU; not for ``quarters``, which only the
    one-thread descent reads). ``width`` (B) is compiled into the ``scan`` descent only (its
    node loop is unrolled); the others read it from the tree (``quarters``: B = 16)."""
    if leaf_layout not in LEAF_LAYOUTS or descent not in DESCENTS or \
            inner_layout not in INNER_LAYOUTS:
        raise ValueError(f"unknown leaf layout {leaf_layout!r}, descent {descent!r} or inner "
                         f"layout {inner_layout!r}")
    quarters = inner_layout == "quarters"
    if quarters and (descent != "binary" or width != 16):
        raise ValueError("the quarters inner layout needs descent='binary' and width 16")
    scan = descent == "scan"
    width = int(width) if scan else 0
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
            if scan:
                # branch-free: count the pivots below x over all B slots (B independent loads
                # from one node, unrolled, instead of log2(B) dependent probes). Padding holds
                # the key maximum, which is never < x and is <= x only when every key is, so
                # the count needs no slot count; only the root can be overshot (x beyond every
                # key): below it the parent's pivot guarantees a qualifying slot.
                base = absolute * width
                i = np.int64(0)
                for s in range(width):
                    k = t.inner_keys[base + s]
                    if (k <= x) if strict else (k < x):
                        i += 1
                if level == 0 and i >= t.inner_count[0]:
                    return np.int64(-1), np.int64(0)
                node = node * width + i
            elif quarters:
                # Two sectors per node (uint64): the 4 quarter maxima, then the 4 keys of the
                # first quarter whose maximum is not below x. c quarters lie wholly below x and
                # none of the later keys does, so 4c + i counts the node's keys below x: the
                # scan descent's count, and its reasoning about padding (the key maximum, never
                # < x, <= x only when every key is) holds. c == 4 or a slot past the root's
                # count means x lies beyond every key; below the root the parent's pivot
                # guarantees a real slot. c == 4 is tested before the quarter is read, which
                # would otherwise lie past the node (past the array for the last node).
                base = absolute * QUARTERS_STRIDE
                c = (_below(t.inner_keys[base], x, strict)
                     + _below(t.inner_keys[base + 1], x, strict)
                     + _below(t.inner_keys[base + 2], x, strict)
                     + _below(t.inner_keys[base + 3], x, strict))
                if c == 4:
                    return np.int64(-1), np.int64(0)
                base += 4 + 4 * c
                i = (4 * c + _below(t.inner_keys[base], x, strict)
                     + _below(t.inner_keys[base + 1], x, strict)
                     + _below(t.inner_keys[base + 2], x, strict)
                     + _below(t.inner_keys[base + 3], x, strict))
                if level == 0 and i >= t.inner_count[0]:
                    return np.int64(-1), np.int64(0)
                node = node * 16 + i
            else:
                count = w
                if absolute + 1 == t.level_start[level + 1]:
                    count = np.int64(t.inner_count[absolute])
                i = _first(t.inner_keys, absolute * w, count, x, strict)
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
        if quarters:  # the cooperative kernels read sorted nodes: group=1 only (TypeError)
            return None
        return lambda: getattr(_cooperative().group_operations(leaf_layout), name)

    suffix = ("" if leaf_layout == "split" else f"_{leaf_layout}") + (
        f"_scan{width}" if scan else "") + ("_quarters" if quarters else "")
    return Operations(
        GroupKernel(find_rowid_item, coop("find_rowid_group"), f"find_rowid{suffix}"),
        GroupKernel(count_item, coop("count_group"), f"count{suffix}"),
        GroupKernel(sum_item, coop("sum_group"), f"sum{suffix}"),
        GroupKernel(fill_item, coop("fill_group"), f"fill{suffix}"))


def _cooperative() -> Any:
    from . import btree_cuda  # imports numba.cuda: only on the GPU path

    return btree_cuda


# One thread per lookup on the CPU, one group of B threads (the node width) on the GPU: the
# default layout and descent.
FIND_ROWID, COUNT, SUM, FILL = operations()
