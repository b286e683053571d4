"""A BVH over axis-aligned primitive bounds, built with array operations only: a binary radix
tree over Morton codes, split where the codes' highest bit changes (Karras' LBVH rule), built
top-down one level at a time and stored depth-first with escape indices (a "threaded" BVH).

Design
------
The build takes the primitives' bounds ``lo``, ``hi`` (float32, shape ``(N, 3)``) and runs the
same array code on NumPy (CPU) and CuPy (GPU):

1. **Morton codes.** Each primitive's centroid is quantised to 21 bits per axis with one cubic
   cell size for all axes (``2**21`` cells along the longest extent of the centroids' bounds,
   the maximum clamped into the last; a short axis uses only its low bits, so the top of the
   tree splits long axes first, as a surface-area heuristic would) and the three axes are
   bit-interleaved ("spread bits" with shifts and masks on uint64 arrays) into a 63-bit code:
   x owns bits ``3k+2``, y ``3k+1``, z ``3k``. An axis with zero (or non-finite) extent maps to
   0, so flat and coincident scenes never divide by zero; anything that would be NaN is
   clamped to 0.
2. **Sort.** A stable argsort of the codes (NumPy's ``kind="stable"``; CuPy's argsort, a CUB
   radix sort) gives ``order``: the primitive at sorted position ``p`` is ``order[p]`` (int32
   below 2**31 primitives, else int64). The GAS stores its primitives in this order.
3. **Topology, top-down.** The root covers sorted positions ``[0, N)``. A node over ``[f, l]``
   with at most ``leaf_size`` primitives is a leaf. Otherwise it splits where the highest bit
   in which ``code[f]`` and ``code[l]`` differ turns on: the split value is ``code[l]`` with
   every lower bit cleared and the split position a ``searchsorted`` for it, so the two
   children are two halves of a Morton cell and their boxes do not overlap (the balanced
   split at a fixed count, which this replaced, cut cells anywhere and gave siblings whose
   boxes overlapped: rays visited several times more nodes). Equal codes (coincident or
   nearly coincident primitives) split at the median. One level of the tree is one batch of
   array operations over all its nodes; the depth is at most 63 plus log2(N).
4. **Layout.** Nodes are numbered depth-first (pre-order): a node's left child follows it, its
   right child follows the left subtree, and its **escape index** is the node after its whole
   subtree (pre-order index + subtree size; subtree sizes come bottom-up, pre-order indices
   top-down, both one array operation per level). Each node is one 32-byte record (float32
   ``(M, 8)``): ``lo`` xyz, ``hi`` xyz, then two int32 words: an inner node keeps its escape
   index and 0; a leaf keeps ``-count`` and its first sorted position.
5. **Boxes.** Leaf boxes are the min/max over their (at most ``leaf_size``) primitives; inner
   boxes the union of their children's, level by level bottom-up.

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
N``), then the sorted codes, ``order``, the worst-case node buffer and the per-level
bookkeeping (five int64 arrays over the nodes) at once, plus the sorted bounds.

:func:`slab` is the register_jitable box test traversal kernels share on both devices.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo import InvalidInput
from indexzoo.devices import xp_of

from ..targets import Kernel

__all__ = ["MAX_LEAF_SIZE", "MORTON_BITS", "NODE_BYTES", "Bvh", "build_bvh", "morton_codes", "refit", "slab",
           "slab_box"]

MORTON_BITS = 21  # per axis; three axes interleave into a 63-bit code
MAX_LEAF_SIZE = 32
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


@register_jitable
def _split_item(i, sc, first, last, out):
    f = first[i]
    e = last[i]
    a = sc[f]
    b = sc[e]
    if a == b:
        out[i] = (f + e + 1) // 2
        return
    y = a ^ b
    for k in (1, 2, 4, 8, 16, 32):  # y = 2^(h+1) - 1 for the highest differing bit h
        y |= y >> np.uint64(k)
    cut = b & ~(y >> np.uint64(1))  # b's prefix with bit h set, lower bits clear
    lo = f + 1  # the first position in (f, e] whose code is >= cut
    hi = e
    while lo < hi:
        mid = (lo + hi) // 2
        if sc[mid] < cut:
            lo = mid + 1
        else:
            hi = mid
    out[i] = lo


_SPLIT = Kernel(_split_item, name="rt_split")


def _split_positions(xp: Any, sc: Any, first: Any, last: Any) -> Any:
    """Where each node over sorted positions ``[f, l]`` (inclusive, more than one primitive)
    splits: the first position whose code has the highest bit in which ``sc[f]`` and ``sc[l]``
    differ; the median when the codes are equal."""
    out = xp.empty(int(first.shape[0]), dtype=xp.int64)
    _SPLIT("cpu" if xp is np else "cuda", int(first.shape[0]), sc, first, last, out)
    return out


def _interleave(xp: Any, a: Any, b: Any) -> Any:
    return xp.stack([a, b], axis=1).ravel()


@dataclass
class _Levels:
    """Per level of the tree (root first): pre-order index, and for leaves first position
    and count; for inner nodes, the pre-order indices of their children."""

    pre: list[Any]
    leaf: list[Any]
    left: list[Any]
    right: list[Any]


def _topology(xp: Any, sc: Any, leaf_size: int) -> tuple[Any, _Levels, int]:
    """``(words, levels, n_nodes)``: the int32 words of every record, in pre-order, and the
    levels for the box pass."""
    n = int(sc.shape[0])
    first = xp.zeros(1, dtype=xp.int64)
    last = xp.full(1, n - 1, dtype=xp.int64)
    lf, ll, lleaf = [], [], []
    while True:  # top-down: ranges of every level
        leaf = (last - first + 1) <= leaf_size
        lf.append(first)
        ll.append(last)
        lleaf.append(leaf)
        inner = ~leaf
        fi, li = first[inner], last[inner]
        if int(fi.shape[0]) == 0:
            break
        split = _split_positions(xp, sc, fi, li)
        first, last = _interleave(xp, fi, split), _interleave(xp, split - 1, li)
    # bottom-up: subtree sizes (in records)
    sizes: list[Any] = [None] * len(lf)
    below = None
    for k in range(len(lf) - 1, -1, -1):
        size = xp.ones(int(lf[k].shape[0]), dtype=xp.int64)
        if below is not None:
            size[~lleaf[k]] += below[0::2] + below[1::2]
        sizes[k] = below = size
    n_nodes = int(sizes[0][0])
    words = xp.zeros((n_nodes, 2), dtype=xp.int32)
    levels = _Levels([], [], [], [])
    pre = xp.zeros(1, dtype=xp.int64)
    for k in range(len(lf)):  # top-down: pre-order indices
        leaf = lleaf[k]
        inner = ~leaf
        pi = pre[inner]
        lp = xp.empty(0, dtype=xp.int64)
        rp = lp
        if k + 1 < len(lf):
            lp = pi + 1
            rp = lp + sizes[k + 1][0::2]
        words[pi, 0] = (pi + sizes[k][inner]).astype(xp.int32)  # escape
        pl = pre[leaf]
        words[pl, 0] = -(ll[k][leaf] - lf[k][leaf] + 1).astype(xp.int32)
        words[pl, 1] = lf[k][leaf].astype(xp.int32)
        levels.pre.append(pi)
        levels.leaf.append(pl)
        levels.left.append(lp)
        levels.right.append(rp)
        if k + 1 < len(lf):
            pre = _interleave(xp, lp, rp)
    return words, levels, n_nodes


def _levels_of(xp: Any, words: Any) -> _Levels:
    """The levels of a built tree, recovered from its records (for a refit)."""
    levels = _Levels([], [], [], [])
    pre = xp.zeros(1, dtype=xp.int64)
    while int(pre.shape[0]):
        leaf = words[pre, 0] < 0
        pi = pre[~leaf]
        lp = pi + 1
        left_leaf = words[lp, 0] < 0
        rp = xp.where(left_leaf, lp + 1, words[lp, 0].astype(xp.int64))
        levels.pre.append(pi)
        levels.leaf.append(pre[leaf])
        levels.left.append(lp)
        levels.right.append(rp)
        pre = _interleave(xp, lp, rp)
    return levels


def _boxes(xp: Any, nodes: Any, words: Any, levels: _Levels, slo: Any, shi: Any,
           leaf_size: int) -> None:
    """Every record's box: leaves from the sorted bounds, inner nodes bottom-up."""
    n = int(slo.shape[0])
    leaves = xp.concatenate(levels.leaf) if levels.leaf else xp.empty(0, dtype=xp.int64)
    first = words[leaves, 1].astype(xp.int64)
    count = -words[leaves, 0].astype(xp.int64)
    blo = xp.full((int(leaves.shape[0]), 3), np.inf, dtype=xp.float32)
    bhi = xp.full((int(leaves.shape[0]), 3), -np.inf, dtype=xp.float32)
    for k in range(leaf_size):
        take = (count > k)[:, None]
        pos = xp.minimum(first + k, max(n - 1, 0))
        if n:
            blo = xp.where(take, xp.minimum(blo, slo[pos]), blo)
            bhi = xp.where(take, xp.maximum(bhi, shi[pos]), bhi)
    nodes[leaves, 0:3] = blo
    nodes[leaves, 3:6] = bhi
    for k in range(len(levels.pre) - 1, -1, -1):
        pi, lp, rp = levels.pre[k], levels.left[k], levels.right[k]
        if int(pi.shape[0]):
            nodes[pi, 0:3] = xp.minimum(nodes[lp, 0:3], nodes[rp, 0:3])
            nodes[pi, 3:6] = xp.maximum(nodes[lp, 3:6], nodes[rp, 3:6])


NODE_BYTES = 32


def build_bvh(lo: Any, hi: Any, leaf_size: int = 4, compact: bool = True) -> Bvh:
    """The BVH of the boxes ``[lo[k], hi[k]]`` (float32 ``(N, 3)`` arrays, NumPy or CuPy; the
    result lives on the same device). At most ``leaf_size`` primitives per leaf, 1..32.
    ``compact=False`` keeps the worst-case node buffer (see the module docstring)."""
    leaf_size = _check_leaf_size(leaf_size)
    xp, lo, hi, copied = _as_bounds(lo, hi)
    n = int(lo.shape[0])
    codes = _morton(xp, lo, hi)
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
    bookkeeping = 5 * 8 * n_nodes + int(sc.nbytes)
    del sc
    nodes = xp.empty((n_nodes if compact else capacity, 8), dtype=xp.float32)
    if not compact:
        nodes[n_nodes:] = 0
    nodes[:n_nodes, 6:8] = words.view(xp.float32)
    slo, shi = lo[order], hi[order]
    _boxes(xp, nodes, words, levels, slo, shi, leaf_size)
    peak = copied + max(32 * n, (16 + b) * n + bookkeeping + int(words.nbytes),
                        b * n + bookkeeping + int(nodes.nbytes) + 24 * n + 48 * n_nodes)
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
