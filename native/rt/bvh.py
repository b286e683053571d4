"""A BVH over axis-aligned primitive bounds, built with a fixed number of passes: the binary
radix tree over Morton codes (Karras' LBVH: every internal node found at once), cut into leaves
of at most ``leaf_size`` primitives, and stored depth-first with escape indices (a "threaded"
BVH).

Design
------
The build takes the primitives' bounds ``lo``, ``hi`` (float32, shape ``(N, 3)``) and runs the
same code on NumPy (CPU) and CuPy (GPU), its per-item steps as one-source kernels:

1. **Morton codes.** Each primitive's centroid is quantised to 21 bits per axis with one cubic
   cell size for all axes (``2**21`` cells along the longest extent of the centroids' bounds,
   the maximum clamped into the last; a short axis uses only its low bits, so the top of the
   tree splits long axes first, as a surface-area heuristic would) and the three axes are
   bit-interleaved ("spread bits" with shifts and masks on uint64 arrays) into a 63-bit code:
   x owns bits ``3k+2``, y ``3k+1``, z ``3k``. An axis with zero (or non-finite) extent maps to
   0, so flat and coincident scenes never divide by zero; anything that would be NaN is
   clamped to 0. A caller that knows a better order for its rays hands its own codes instead
   (``codes=``): the RX family's key scenes use the keys themselves, i.e. rows (z, then y)
   before x, so that a ray along a row enters only the subtrees of that row (measured:
   ``docs/rt-engine.md``).
2. **Sort.** A stable argsort of the codes (NumPy's ``kind="stable"``; CuPy's argsort, a CUB
   radix sort) gives ``order``: the primitive at sorted position ``p`` is ``order[p]`` (int32
   below 2**31 primitives, else int64). The GAS stores its primitives in this order.
3. **Topology** (Karras 2012, "Maximizing parallelism in the construction of BVHs"). The
   binary radix tree over the sorted ``(code, position)`` keys has ``N - 1`` internal nodes;
   node ``k`` spans ``[k, j]`` or ``[j, k]`` and splits where the highest bit in which its
   ends differ turns on, so the two children are two halves of a Morton cell and their boxes
   do not overlap; equal codes split by their positions' highest differing bit (halves of the
   run). One pass finds every node's range and split by binary searches over the codes. The
   tree is then cut: a node whose range holds at most ``leaf_size`` primitives is a leaf (its
   subtree is dropped). The records are placed without walking the tree level by level: in
   pre-order, a node's index is ``2 * (leaves before it) + (left turns on its path from the
   root)`` (the nodes before it are its ancestors and the full subtrees left of its path), the
   leaves before it come from a prefix sum over the leaves' first positions, and the left
   turns from a climb to the root. One pass over the nodes writes every record. (An earlier
   builder split top-down one level at a time, with a batch of array operations and host
   synchronisations per level, which cost about as much for small scenes as for large ones;
   measured: ``docs/rt-engine.md``.)
4. **Layout.** Nodes are numbered depth-first (pre-order): a node's left child follows it, its
   right child follows the left subtree, and its **escape index** is the node after its whole
   subtree (pre-order index + subtree size; subtree sizes come bottom-up, pre-order indices
   top-down, both one array operation per level). Each node is one 32-byte record (float32
   ``(M, 8)``): ``lo`` xyz, ``hi`` xyz, then two int32 words: an inner node keeps its escape
   index and 0; a leaf keeps ``-count`` and its first sorted position.
5. **Boxes.** Leaf boxes are the min/max over their (at most ``leaf_size``) primitives, one
   pass; inner boxes the union of their children's, one pass per level bottom-up (the records
   grouped by depth with one sort).

Traversal (in :mod:`.trace`) is a loop over one index: test node ``j``'s box; on a hit go to
``j + 1`` (the first child, or the next node after a leaf), on a miss jump to the escape index.
No stack, one box per iteration, and the same code on both devices.

:func:`refit` keeps ``order`` and the topology and recomputes every box from new bounds of the
same primitives (the levels are recovered from the records by one top-down pass).

``compact=False`` keeps the node buffer at its worst-case size, ``2 N - 1`` records (what a
builder must reserve before it knows the tree's shape, as OptiX's
``optixAccelComputeMemoryUsage`` does); :meth:`Bvh.compact` copies the used records into a
buffer of their exact size (``optixAccelCompact``). A compact build does that copy itself.

Byte accounting
---------------
``Bvh.nbytes`` counts what the structure keeps: the node buffer and ``order``.
``peak_build_bytes`` is the most held at once during the build, excluding the caller's inputs
but including float32 / contiguous copies of them: Morton codes and the sort (as before: ``32
N``); the topology (sorted codes, ``order``, seven int32 arrays over the primitives: ranges,
splits, parents, leaf starts and their prefix sum; four over the records: words, right
children, depths and their order); then the boxes (``order``, the levels, the worst-case node
buffer, the sorted bounds and the per-level temporaries), whichever phase holds most.

:func:`slab` is the register_jitable box test traversal kernels share on both devices.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.errors import InvalidInput

from ..targets import Kernel
from .layout import MAX_LEAF_SIZE

__all__ = ["MAX_LEAF_SIZE", "MORTON_BITS", "NODE_BYTES", "Bvh", "build_bvh", "morton_codes", "refit", "slab",
           "slab_box"]

MORTON_BITS = 21  # per axis; three axes interleave into a 63-bit code
_CELLS = float(1 << MORTON_BITS)  # cells per axis; the centroids' maximum lands in the last
_QMAX = _CELLS - 1

@dataclass(frozen=True)
class Bvh:
    """Depth-first node records with escape indices over Morton-sorted primitives; see the
    module docstring."""

    nodes: Any  # (capacity, 8) float32 records; the first n_nodes are the tree
    order: Any  # (N,) int32/int64: sorted position -> primitive index
    n_prims: int
    leaf_size: int
    n_nodes: int
    depth: int  # levels, root = 1 (0 for no primitives)
    peak_build_bytes: int

    @property
    def nbytes(self) -> int:
        """Bytes kept: the node buffer (with any slack) and ``order``."""
        return int(self.nodes.nbytes) + int(self.order.nbytes)

    @property
    def compacted(self) -> bool:
        return int(self.nodes.shape[0]) == self.n_nodes

    @property
    def compacted_nbytes(self) -> int:
        """Bytes after :meth:`compact`."""
        return self.n_nodes * NODE_BYTES + int(self.order.nbytes)

    def compact(self) -> Bvh:
        """The same tree in a buffer of exactly ``n_nodes`` records (a copy unless compact)."""
        if self.compacted:
            return self
        xp = xp_of(self.nodes)
        return dataclasses.replace(self, nodes=xp.ascontiguousarray(self.nodes[: self.n_nodes]))

    def words(self) -> Any:
        """The records' int32 view: column 6 escape / -count, column 7 first position."""
        return self.nodes[: self.n_nodes].view(np.int32)


def _as_bounds(lo: Any, hi: Any) -> tuple[Any, Any, Any, int]:
    """``(xp, lo, hi, copied)``: C-contiguous float32 ``(N, 3)`` bounds on the inputs' device,
    and the bytes of the copies that took."""
    xp = xp_of(lo)
    if xp_of(hi) is not xp:
        raise InvalidInput("lo and hi must be on the same device")
    if lo.ndim != 2 or lo.shape[1] != 3 or tuple(hi.shape) != tuple(lo.shape):
        raise InvalidInput(f"lo and hi must both have shape (N, 3), got {lo.shape} and {hi.shape}")
    out = []
    copied = 0
    for a in (lo, hi):
        b = xp.ascontiguousarray(a, dtype=xp.float32)
        if b is not a:
            copied += int(b.nbytes)
        out.append(b)
    return xp, out[0], out[1], copied


def _morton(xp: Any, lo: Any, hi: Any) -> Any:
    """Cubic cells: every axis is quantised with the same cell size (the largest centroid extent
    over 2^21), so an axis with a small extent only varies in the low bits of its code and the
    top of the tree splits the long axes first. (Per-axis cells would split a short axis as
    often as a long one: for RX's 23/23/18-bit keys and z-perpendicular rays every z split near
    the root sends a ray into both children, some 2^8 leaves per ray at 2^26 keys.)"""
    n = int(lo.shape[0])
    codes = xp.zeros(n, dtype=xp.uint64)
    if n == 0:
        return codes
    mins, extents = [], []
    for axis in range(3):
        c = (lo[:, axis].astype(xp.float64) + hi[:, axis]) * 0.5
        cmin, cmax = float(c.min()), float(c.max())
        del c
        mins.append(cmin)
        extents.append(cmax - cmin if math.isfinite(cmax - cmin) else 0.0)
    extent = max(extents)
    scale = _CELLS / extent if extent > 0 and math.isfinite(extent) else 0.0
    scales = [scale if e > 0 else 0.0 for e in extents]
    _MORTON("cpu" if xp is np else "cuda", n, lo, hi, mins[0], mins[1], mins[2], scales[0], scales[1],
            scales[2], codes)
    return codes


@register_jitable
def _spread21(v):
    """The low 21 bits of ``v`` moved to bits 0, 3, 6, ..."""
    x = np.uint64(v)
    x = (x | (x << np.uint64(32))) & np.uint64(0x001F00000000FFFF)
    x = (x | (x << np.uint64(16))) & np.uint64(0x001F0000FF0000FF)
    x = (x | (x << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
    x = (x | (x << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
    x = (x | (x << np.uint64(2))) & np.uint64(0x1249249249249249)
    return x


@register_jitable
def _cell(lo, hi, cmin, scale):
    """A centroid coordinate quantised to 0 .. 2^21 - 1 (NaN and negatives to 0)."""
    c = ((np.float64(lo) + np.float64(hi)) * 0.5 - cmin) * scale
    if not (c > 0.0):  # also NaN (inf - inf, inf * 0)
        return np.uint64(0)
    if c > _QMAX:
        c = _QMAX
    return np.uint64(c)


@register_jitable
def _morton_item(i, lo, hi, mx, my, mz, sx, sy, sz, codes):
    x = _cell(lo[i, 0], hi[i, 0], mx, sx)
    y = _cell(lo[i, 1], hi[i, 1], my, sy)
    z = _cell(lo[i, 2], hi[i, 2], mz, sz)
    codes[i] = (_spread21(x) << np.uint64(2)) | (_spread21(y) << np.uint64(1)) | _spread21(z)


_MORTON = Kernel(_morton_item, name="rt_morton")


def morton_codes(lo: Any, hi: Any) -> Any:
    """63-bit Morton codes (uint64, shape ``(N,)``) of the boxes' centroids, quantised to 2^21
    cubic cells along the longest axis of the centroids' bounds (a flat axis maps to 0)."""
    xp, lo, hi, _ = _as_bounds(lo, hi)
    return _morton(xp, lo, hi)


def _check_leaf_size(leaf_size: int) -> int:
    if isinstance(leaf_size, bool) or int(leaf_size) != leaf_size or not 1 <= leaf_size <= MAX_LEAF_SIZE:
        raise InvalidInput(f"leaf_size must be an integer in 1..{MAX_LEAF_SIZE}, got {leaf_size!r}")
    return int(leaf_size)


def _interleave(xp: Any, a: Any, b: Any) -> Any:
    return xp.stack([a, b], axis=1).ravel()


@dataclass
class _Levels:
    """The records by depth (root first): per level the pre-order indices of its inner nodes
    and of its leaves; ``right``: per record, an inner node's right child (its left child is
    the next record)."""

    pre: list[Any]
    leaf: list[Any]
    right: Any


@register_jitable
def _high_bit(x):
    """The index of the highest set bit of ``x > 0`` (uint64)."""
    x = np.uint64(x)
    for k in (1, 2, 4, 8, 16, 32):
        x |= x >> np.uint64(k)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))  # popcount of 2^(h+1) - 1
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56)) - np.int64(1)


@register_jitable
def _prefix(sc, n, i, j):
    """Karras' delta: the common prefix length of the (code, position) keys at sorted positions
    ``i`` and ``j`` (-1 when ``j`` is outside ``[0, n)``); positions break ties of equal codes."""
    if j < 0 or j >= n:
        return np.int64(-1)
    a = sc[i]
    b = sc[j]
    if a != b:
        return np.int64(63) - _high_bit(a ^ b)
    return np.int64(127) - _high_bit(np.uint64(i ^ j))


@register_jitable
def _radix_item(k, sc, n, first, last, split, iparent, pparent):
    """Internal node ``k`` of the binary radix tree over the sorted codes (Karras 2012): its
    range ``[first, last]``, the first position of its right child (``split``), and its
    children's parent links (internal children in ``iparent``, single primitives in
    ``pparent``)."""
    i = np.int64(k)
    d = np.int64(1) if _prefix(sc, n, i, i + 1) > _prefix(sc, n, i, i - 1) else np.int64(-1)
    dmin = _prefix(sc, n, i, i - d)
    lmax = np.int64(2)
    while _prefix(sc, n, i, i + lmax * d) > dmin:
        lmax *= 2
    ln = np.int64(0)
    t = lmax // 2
    while t >= 1:
        if _prefix(sc, n, i, i + (ln + t) * d) > dmin:
            ln += t
        t //= 2
    j = i + ln * d
    dnode = _prefix(sc, n, i, j)
    s = np.int64(0)
    t = ln
    while True:
        t = (t + 1) // 2
        if _prefix(sc, n, i, i + (s + t) * d) > dnode:
            s += t
        if t <= 1:
            break
    gamma = i + s * d + min(d, np.int64(0))
    f = min(i, j)
    e = max(i, j)
    first[i] = f
    last[i] = e
    split[i] = gamma + 1
    if f == gamma:
        pparent[gamma] = i
    else:
        iparent[gamma] = i
    if e == gamma + 1:
        pparent[gamma + 1] = i
    else:
        iparent[gamma + 1] = i


@register_jitable
def _cut(k, n, leaf_size, first, last, iparent, pparent):
    """Item ``k`` of the tree cut at ``leaf_size`` (``k < n - 1``: internal node k; else
    primitive ``k - (n - 1)``): ``(kind, first position, primitives)``, kind 0 for an inner
    node, 1 for a leaf (a range that fits under a parent whose range does not, or the root),
    -1 for a node inside a leaf."""
    if k < n - 1:
        size = np.int64(last[k] - first[k] + 1)
        f = np.int64(first[k])
        if size > leaf_size:
            return 0, f, size
        q = iparent[k]
        fits = k == 0 or last[q] - first[q] + 1 > leaf_size
        return (1 if fits else -1), f, size
    f = np.int64(k - (n - 1))
    q = pparent[f]
    return (1 if last[q] - first[q] + 1 > leaf_size else -1), f, np.int64(1)


@register_jitable
def _leaf_start_item(k, n, leaf_size, first, last, iparent, pparent, start):
    """Marks the first position of every leaf of the cut tree (:func:`_cut`)."""
    kind, f, _ = _cut(k, n, leaf_size, first, last, iparent, pparent)
    if kind == 1:
        start[f] = 1


@register_jitable
def _climb(x, first, iparent):
    """(left turns, depth) on the path from the root to internal node ``x``."""
    lt = np.int64(0)
    depth = np.int64(0)
    while x != 0:
        q = iparent[x]
        if first[x] == first[q]:
            lt += 1
        depth += 1
        x = q
    return lt, depth


@register_jitable
def _record_item(k, n, leaf_size, first, last, split, iparent, pparent, before, words,
                 right, level):
    """The record of every node of the cut tree, at its pre-order index ``2 * (leaves before
    it) + (left turns above it)``: an inner node's escape index (pre-order index + 2 * its
    leaves - 1) and right child, a leaf's count and first position; ``level`` gets ``2 *
    depth`` (+1 for a leaf)."""
    kind, f, size = _cut(k, n, leaf_size, first, last, iparent, pparent)
    if kind < 0:
        return  # inside a leaf
    if k < n - 1:
        lt, depth = _climb(np.int64(k), first, iparent)
    else:  # a primitive: one step below its parent
        q = pparent[f]
        lt, depth = _climb(np.int64(q), first, iparent)
        lt += 1 if f == first[q] else 0
        depth += 1
    leaf = kind == 1
    pre = 2 * before[f] + lt
    if leaf:
        words[pre, 0] = np.int32(-size)
        words[pre, 1] = np.int32(f)
        level[pre] = 2 * depth + 1
    else:
        words[pre, 0] = np.int32(pre + 2 * (before[last[k] + 1] - before[f]) - 1)
        words[pre, 1] = np.int32(0)
        right[pre] = 2 * before[split[k]] + lt
        level[pre] = 2 * depth


_RADIX = Kernel(_radix_item, name="rt_radix")
_LEAF_START = Kernel(_leaf_start_item, name="rt_leaf_start")
_RECORD = Kernel(_record_item, name="rt_record")


def _topology(xp: Any, sc: Any, leaf_size: int) -> tuple[Any, _Levels, int]:
    """``(words, levels, n_nodes)``: the int32 words of every record, in pre-order, and the
    levels for the box pass, in a fixed number of passes whatever the depth: the binary radix
    tree of the sorted codes (one pass, every internal node at once), cut where ranges fit in
    a leaf, and every record placed by counting the leaves before it (a prefix sum) and the
    left turns above it (a climb to the root)."""
    n = int(sc.shape[0])
    dev = "cpu" if xp is np else "cuda"
    if n <= leaf_size:  # one leaf
        words = xp.asarray([[-n, 0]], dtype=xp.int32)
        zero = xp.zeros(1, dtype=xp.int64)
        none = xp.empty(0, dtype=xp.int64)
        return words, _Levels([none], [zero], xp.zeros(1, dtype=xp.int64)), 1
    m = n - 1
    idx = np.int32 if 2 * n < 2**31 else np.int64  # positions and record indices
    first = xp.empty(m, dtype=idx)
    last = xp.empty(m, dtype=idx)
    split = xp.empty(m, dtype=idx)
    iparent = xp.zeros(m, dtype=idx)
    pparent = xp.empty(n, dtype=idx)
    _RADIX(dev, m, sc, np.int64(n), first, last, split, iparent, pparent)
    start = xp.zeros(n, dtype=idx)
    ls = np.int64(leaf_size)
    _LEAF_START(dev, m + n, np.int64(n), ls, first, last, iparent, pparent, start)
    before = xp.zeros(n + 1, dtype=idx)
    xp.cumsum(start, out=before[1:])
    n_nodes = 2 * int(before[-1]) - 1
    words = xp.empty((n_nodes, 2), dtype=xp.int32)
    right = xp.zeros(n_nodes, dtype=idx)
    level = xp.empty(n_nodes, dtype=idx)
    _RECORD(dev, m + n, np.int64(n), ls, first, last, split, iparent, pparent, before, words,
            right, level)
    del first, last, split, iparent, pparent, start, before
    # group the records by depth (inner nodes, then leaves, of each level), one sort
    by_level = xp.argsort(level)
    counts = xp.bincount(level)
    counts = counts if xp is np else counts.get()
    counts = np.concatenate([counts, np.zeros(len(counts) % 2, dtype=counts.dtype)])
    ends = np.cumsum(counts)
    levels = _Levels([], [], right)
    for d in range(len(counts) // 2):
        a, b, c = int(ends[2 * d] - counts[2 * d]), int(ends[2 * d]), int(ends[2 * d + 1])
        levels.pre.append(by_level[a:b])
        levels.leaf.append(by_level[b:c])
    return words, levels, n_nodes


def _levels_of(xp: Any, words: Any) -> _Levels:
    """The levels of a built tree, recovered from its records (for a refit)."""
    levels = _Levels([], [], xp.zeros(int(words.shape[0]), dtype=xp.int64))
    pre = xp.zeros(1, dtype=xp.int64)
    while int(pre.shape[0]):
        leaf = words[pre, 0] < 0
        pi = pre[~leaf]
        lp = pi + 1
        left_leaf = words[lp, 0] < 0
        rp = xp.where(left_leaf, lp + 1, words[lp, 0].astype(xp.int64))
        levels.pre.append(pi)
        levels.leaf.append(pre[leaf])
        levels.right[pi] = rp
        pre = _interleave(xp, lp, rp)
    return levels


@register_jitable
def _leaf_box_item(k, leaves, words, slo, shi, nodes):
    """Leaf ``leaves[k]``'s box: the bounds of its primitives."""
    j = leaves[k]
    f = np.int64(words[j, 1])
    c = -np.int64(words[j, 0])
    for a in range(3):
        lo = np.float32(np.inf)
        hi = np.float32(-np.inf)
        for p in range(f, f + c):
            lo = min(lo, slo[p, a])
            hi = max(hi, shi[p, a])
        nodes[j, a] = lo
        nodes[j, a + 3] = hi


@register_jitable
def _inner_box_item(k, pre, right, nodes):
    """Inner node ``pre[k]``'s box: the union of its children's (the next record and
    ``right``)."""
    j = pre[k]
    lft = j + 1
    r = right[j]
    for a in range(3):
        nodes[j, a] = min(nodes[lft, a], nodes[r, a])
        nodes[j, a + 3] = max(nodes[lft, a + 3], nodes[r, a + 3])


_LEAF_BOX = Kernel(_leaf_box_item, name="rt_leaf_box")
_INNER_BOX = Kernel(_inner_box_item, name="rt_inner_box")


def _boxes(xp: Any, nodes: Any, words: Any, levels: _Levels, slo: Any, shi: Any,
           leaf_size: int) -> None:
    """Every record's box: leaves from the sorted bounds (one pass), inner nodes bottom-up
    (one pass per level)."""
    dev = "cpu" if xp is np else "cuda"
    leaves = xp.concatenate(levels.leaf) if levels.leaf else xp.empty(0, dtype=xp.int64)
    if int(slo.shape[0]):
        _LEAF_BOX(dev, int(leaves.shape[0]), leaves, words, slo, shi, nodes)
    for k in range(len(levels.pre) - 1, -1, -1):
        pi = levels.pre[k]
        if int(pi.shape[0]):
            _INNER_BOX(dev, int(pi.shape[0]), pi, levels.right, nodes)


NODE_BYTES = 32


def build_bvh(lo: Any, hi: Any, leaf_size: int = 4, compact: bool = True, *,
              codes: Any = None) -> Bvh:
    """The BVH of the boxes ``[lo[k], hi[k]]`` (float32 ``(N, 3)`` arrays, NumPy or CuPy; the
    result lives on the same device). At most ``leaf_size`` primitives per leaf, 1..32.
    ``compact=False`` keeps the worst-case node buffer (see the module docstring). ``codes``:
    the primitives' sort codes (uint64 ``(N,)`` on the same device), where the caller knows an
    order that suits its rays better than the Morton codes of the centroids (the default):
    the tree splits where the sorted codes' highest bits differ, whatever the codes mean."""
    leaf_size = _check_leaf_size(leaf_size)
    xp, lo, hi, copied = _as_bounds(lo, hi)
    n = int(lo.shape[0])
    if codes is None:
        codes = _morton(xp, lo, hi)
    elif tuple(codes.shape) != (n,) or codes.dtype != np.uint64:
        raise InvalidInput(f"codes must be uint64 of shape ({n},), got {codes.dtype} "
                           f"{tuple(codes.shape)}")
    perm = xp.argsort(codes, kind="stable") if xp is np else xp.argsort(codes)
    order_dtype = np.int32 if n < 2**31 else np.int64
    order = perm.astype(order_dtype, copy=False)
    sc = codes[perm]
    del codes, perm
    capacity = max(2 * n - 1, 1)
    if n == 0:  # one record with an empty box whose escape index ends the walk at once
        nodes = xp.zeros((1, 8), dtype=xp.float32)
        nodes[0, 0:3] = np.inf
        nodes[0, 3:6] = -np.inf
        nodes[0:1, 6:8] = xp.asarray([[1, 0]], dtype=xp.int32).view(xp.float32)
        return Bvh(nodes, order, 0, leaf_size, 1, 0, copied + NODE_BYTES)
    words, levels, n_nodes = _topology(xp, sc, leaf_size)
    b = np.dtype(order_dtype).itemsize
    # the topology's phase: sorted codes, order, seven int32 arrays over the primitives
    # (ranges, splits, parents, leaf starts, their prefix sum) and four over the records
    # (words, right children, depths, their order)
    topology = int(sc.nbytes) + b * n + 28 * n + 24 * n_nodes
    del sc
    nodes = xp.empty((n_nodes if compact else capacity, 8), dtype=xp.float32)
    if not compact:
        nodes[n_nodes:] = 0
    nodes[:n_nodes, 6:8] = words.view(xp.float32)
    slo, shi = lo[order], hi[order]
    _boxes(xp, nodes, words, levels, slo, shi, leaf_size)
    # the boxes' phase: order, the levels (the records' order, children), words, the node
    # buffer, the sorted bounds and the per-level temporaries
    boxes = b * n + 24 * n_nodes + int(nodes.nbytes) + 24 * n + 48 * n_nodes
    peak = copied + max(32 * n, topology, boxes)
    return Bvh(nodes, order, n, leaf_size, n_nodes, len(levels.pre), peak)


def refit(bvh: Bvh, lo: Any, hi: Any) -> Bvh:
    """A new :class:`Bvh` with ``bvh``'s ``order`` and topology and every box recomputed from
    new bounds of the same primitives (``bvh`` itself is unchanged). Its ``peak_build_bytes`` is
    the refit's own peak."""
    xp, lo, hi, copied = _as_bounds(lo, hi)
    if int(lo.shape[0]) != bvh.n_prims:
        raise InvalidInput(f"refit needs bounds of {bvh.n_prims} primitives, got {lo.shape[0]}")
    if xp_of(bvh.order) is not xp:
        raise InvalidInput("refit bounds must be on the BVH's device")
    nodes = bvh.nodes.copy()
    if bvh.n_prims == 0:
        return dataclasses.replace(bvh, nodes=nodes, peak_build_bytes=copied + int(nodes.nbytes))
    words = nodes[: bvh.n_nodes].view(xp.int32)[:, 6:8]
    levels = _levels_of(xp, words)
    _boxes(xp, nodes, words, levels, lo[bvh.order], hi[bvh.order], bvh.leaf_size)
    peak = copied + int(nodes.nbytes) + 24 * bvh.n_prims + 48 * bvh.n_nodes
    return dataclasses.replace(bvh, nodes=nodes, peak_build_bytes=peak)


@register_jitable
def _slab_axis(lo, hi, o, inv, tn, tf):
    """``(tn, tf)`` narrowed by one axis' slab (an empty interval when it misses)."""
    inf = np.float32(np.inf)
    if not (lo <= hi):  # empty (inverted) box
        return inf, -inf
    if inv == inf or inv == -inf:  # zero direction: inside the slab for every t, or never
        if lo <= o and o <= hi:
            return tn, tf
        return inf, -inf
    t0 = (lo - o) * inv
    t1 = (hi - o) * inv
    if t0 > t1:
        t0, t1 = t1, t0
    return max(tn, t0), min(tf, t1)


@register_jitable
def slab_box(lox, loy, loz, hix, hiy, hiz, ox, oy, oz, ix, iy, iz, tmin, tmax):
    """``(hit, tnear)``: whether the box ``[lo, hi]`` overlaps the ray ``o + t d`` for some
    ``t`` in the open interval ``(tmin, tmax)``, with ``i = 1 / d`` (a zero direction component
    is an infinite inverse: the ray is then inside that slab iff ``lo <= o <= hi``).

    The box is closed (a ray grazing a face or edge overlaps it); an empty, inverted box never
    does. ``tnear`` (float32) is where the ray enters the box, at least ``tmin``; meaningful only
    on a hit. Arithmetic is in the arrays' float32.
    """
    inf = np.float32(np.inf)
    tn, tf = _slab_axis(lox, hix, ox, ix, -inf, inf)
    tn, tf = _slab_axis(loy, hiy, oy, iy, tn, tf)
    tn, tf = _slab_axis(loz, hiz, oz, iz, tn, tf)
    hit = tn <= tf and tn < tmax and tf > tmin
    return hit, np.float32(max(tn, tmin))


@register_jitable
def slab_walk(nodes, j, ox, oy, oz, ix, iy, iz, tmin, tmax):
    """:func:`slab` without the empty-box test, for traversal: an inverted box (only the
    record of an empty scene, whose escape index ends the walk anyway) may report a hit."""
    tn = np.float32(tmin)
    tf = np.float32(tmax)
    for a in range(3):
        o = ox if a == 0 else (oy if a == 1 else oz)
        inv = ix if a == 0 else (iy if a == 1 else iz)
        lo = nodes[j, a]
        hi = nodes[j, a + 3]
        if inv == np.float32(np.inf) or inv == np.float32(-np.inf):  # zero direction: in the slab or not
            if not (lo <= o and o <= hi):
                return False
        else:
            t0 = (lo - o) * inv
            t1 = (hi - o) * inv
            tn = max(tn, min(t0, t1))
            tf = min(tf, max(t0, t1))
    return tn <= tf and tn < tmax and tf > tmin


@register_jitable
def slab(nodes, j, ox, oy, oz, ix, iy, iz, tmin, tmax):
    """:func:`slab_box` on record ``j`` of a node buffer."""
    return slab_box(nodes[j, 0], nodes[j, 1], nodes[j, 2], nodes[j, 3], nodes[j, 4], nodes[j, 5],
                    ox, oy, oz, ix, iy, iz, tmin, tmax)
