"""A linear BVH over axis-aligned primitive bounds, built with array operations only.

Design
------
The build takes the primitives' bounds ``lo``, ``hi`` (float32, shape ``(N, 3)``) and runs the
same array code on NumPy (CPU) and CuPy (GPU):

1. **Morton codes.** Each primitive's centroid is quantised to 21 bits per axis with one cubic
   cell size for all axes (``2**21`` cells along the longest extent of the centroids' bounds,
   the maximum clamped into the last; a short axis uses only its low bits, so the top of the
   tree splits long axes first, as a surface-area heuristic would) and the three axes are
   bit-interleaved ("spread bits" with shifts and masks on uint64 arrays) into a 63-bit code:
   x owns bits ``3k+2``, y ``3k+1``, z ``3k``.
   An axis with zero (or non-finite) extent maps to 0, so flat and coincident scenes never
   divide by zero; anything that would be NaN is clamped to 0.
2. **Sort.** A stable argsort of the codes (NumPy's ``kind="stable"``; CuPy's argsort, a CUB
   radix sort) gives ``order``: the primitive at sorted position
   ``p`` is ``order[p]`` (int32 below 2**31 primitives, else int64).
3. **Leaves.** Consecutive runs of ``leaf_size`` sorted primitives form the ``L = ceil(N /
   leaf_size)`` leaves; the leaf count is padded up to a power of two ``P >= 1``.
4. **Implicit tree.** A complete binary tree in heap order over the ``P`` leaves: node 0 is
   the root, node ``j``'s children are ``2j+1`` and ``2j+2``, leaf ``i`` is node ``P-1+i``;
   ``2P-1`` nodes in all, ``depth = log2(P)``. Nothing but the node boxes is stored.
5. **Node boxes.** The sorted bounds are gathered into a buffer of ``P * leaf_size`` rows
   padded with the empty box (``lo = +inf``, ``hi = -inf``); reshaped to ``(P, leaf_size, 3)``
   a min/max over axis 1 gives the leaf boxes (a padding leaf gets the empty, inverted box).
   Inner nodes follow level by level, bottom-up, each level one min/max over its children's
   contiguous slice. min/max keep an inverted box inverted in unions.

Trade-off: the implicit balanced tree over Morton order needs no atomics, no pointers and no
per-node bookkeeping, so it is a handful of sorts, gathers and reductions on either device, and
:func:`refit` is the second half of the build. The price is traversal quality: the tree splits
the Morton order at fixed counts, not where the codes' highest differing bit changes (Karras'
LBVH) nor where the surface-area heuristic would (SAH), so very clustered scenes get siblings
whose boxes overlap more and rays visit more nodes. Balanced, uniform-ish scenes lose little.

:func:`refit` keeps ``order`` and the tree shape and recomputes every node box from new
bounds of the same primitives; it returns a new :class:`Bvh` sharing ``order`` and leaves the
old one untouched.

Byte accounting
---------------
``Bvh.nbytes`` counts what the structure keeps: ``node_lo``, ``node_hi`` and ``order``.
``peak_build_bytes`` is the most held at once during the build, excluding the caller's inputs
but including float32 / contiguous copies of them when the build had to make any. With ``N``
primitives, ``P`` leaves, ``S = P * leaf_size`` padded rows and ``b`` bytes per ``order``
entry, it is that copy plus the largest of three phases:

* Morton codes: the uint64 codes plus, per axis, a float64 centroid, its uint64 quantisation
  and one shift temporary: ``32 N``.
* Sort: as in :func:`indexzoo.native.sort.sort_pairs`, the codes, the int64 permutation and one
  extra copy of each (an out-of-place radix sort's double buffers; NumPy's stable sort needs
  less): ``32 N``; then the codes, the permutation and ``order`` at once: ``(16 + b) N``.
* Node boxes: ``order``, both node arrays (``24 (2P - 1)``), the padded buffer (``12 S``,
  reused for ``lo`` then ``hi``) and the gather's temporary (``12 N``).

A refit's Bvh reports the refit's own peak instead: the last phase (``order`` is still held)
plus any input copies.

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

__all__ = ["MAX_LEAF_SIZE", "MORTON_BITS", "Bvh", "build_bvh", "morton_codes", "refit", "slab"]

MORTON_BITS = 21  # per axis; three axes interleave into a 63-bit code
MAX_LEAF_SIZE = 32
_CELLS = float(1 << MORTON_BITS)  # cells per axis; the centroids' maximum lands in the last
_QMAX = _CELLS - 1
# (shift, mask) steps spreading the low 21 bits of a uint64 two zero bits apart
_SPREAD = tuple((np.uint64(s), np.uint64(m)) for s, m in (
    (32, 0x001F00000000FFFF),
    (16, 0x001F0000FF0000FF),
    (8, 0x100F00F00F00F00F),
    (4, 0x10C30C30C30C30C3),
    (2, 0x1249249249249249),
))


@dataclass(frozen=True)
class Bvh:
    """An implicit complete binary tree (heap order) over Morton-sorted leaves; see the module
    docstring. Leaf ``i`` is node ``n_leaves - 1 + i`` and holds sorted positions
    ``[i * leaf_size, min((i + 1) * leaf_size, n_prims))``."""

    node_lo: Any  # (2P-1, 3) float32
    node_hi: Any  # (2P-1, 3) float32
    order: Any  # (N,) int32/int64: sorted position -> primitive index
    n_prims: int
    leaf_size: int
    n_leaves: int  # P, a power of two
    depth: int  # log2(P)
    peak_build_bytes: int

    @property
    def nbytes(self) -> int:
        """Bytes kept: both node arrays and ``order``."""
        return int(self.node_lo.nbytes) + int(self.node_hi.nbytes) + int(self.order.nbytes)


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


def _spread(x: Any) -> Any:
    """The low 21 bits of each uint64 in ``x`` moved to bits 0, 3, 6, ... (in place)."""
    for shift, mask in _SPREAD:
        x |= x << shift
        x &= mask
    return x


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
        mins.append(cmin)
        extents.append(cmax - cmin if math.isfinite(cmax - cmin) else 0.0)
    extent = max(extents)
    scale = _CELLS / extent if extent > 0 and math.isfinite(extent) else 0.0
    for axis in range(3):
        c = lo[:, axis].astype(xp.float64)
        c += hi[:, axis]
        c *= 0.5
        c -= mins[axis]
        c *= scale if extents[axis] > 0 else 0.0
        xp.fmax(c, 0.0, out=c)  # fmax/fmin drop NaN (inf - inf, inf * 0): such axes map to 0
        xp.fmin(c, _QMAX, out=c)
        q = c.astype(xp.uint64)
        del c
        codes |= _spread(q) << np.uint64(2 - axis)
        del q
    return codes


def morton_codes(lo: Any, hi: Any) -> Any:
    """63-bit Morton codes (uint64, shape ``(N,)``) of the boxes' centroids, quantised to 2^21
    cubic cells along the longest axis of the centroids' bounds (a flat axis maps to 0)."""
    xp, lo, hi, _ = _as_bounds(lo, hi)
    return _morton(xp, lo, hi)


def _check_leaf_size(leaf_size: int) -> int:
    if isinstance(leaf_size, bool) or int(leaf_size) != leaf_size or not 1 <= leaf_size <= MAX_LEAF_SIZE:
        raise InvalidInput(f"leaf_size must be an integer in 1..{MAX_LEAF_SIZE}, got {leaf_size!r}")
    return int(leaf_size)


def _node_bounds(xp: Any, lo: Any, hi: Any, order: Any, n_leaves: int,
                 leaf_size: int) -> tuple[Any, Any, int]:
    """``(node_lo, node_hi, peak_bytes)`` of the implicit tree over ``order``."""
    n = int(order.shape[0])
    n_nodes = 2 * n_leaves - 1
    node_lo = xp.empty((n_nodes, 3), dtype=xp.float32)
    node_hi = xp.empty((n_nodes, 3), dtype=xp.float32)
    buf = xp.empty((n_leaves * leaf_size, 3), dtype=xp.float32)
    first = n_leaves - 1
    buf.fill(np.inf)
    buf[:n] = lo[order]
    node_lo[first:] = buf.reshape(n_leaves, leaf_size, 3).min(axis=1)  # no out=: breaks CuPy 14 CUB
    buf.fill(-np.inf)
    buf[:n] = hi[order]
    node_hi[first:] = buf.reshape(n_leaves, leaf_size, 3).max(axis=1)
    peak = int(order.nbytes) + 2 * int(node_lo.nbytes) + int(buf.nbytes) + 12 * n
    del buf
    width = n_leaves // 2  # nodes on the level being filled: [width - 1, 2 * width - 1)
    while width >= 1:
        start, stop = width - 1, 2 * width - 1
        kids = slice(stop, 2 * stop + 1)  # children 2j+1, 2j+2 of the whole level, pairwise
        node_lo[start:stop] = node_lo[kids].reshape(width, 2, 3).min(axis=1)
        node_hi[start:stop] = node_hi[kids].reshape(width, 2, 3).max(axis=1)
        width //= 2
    return node_lo, node_hi, peak


def build_bvh(lo: Any, hi: Any, leaf_size: int = 4) -> Bvh:
    """The BVH of the boxes ``[lo[k], hi[k]]`` (float32 ``(N, 3)`` arrays, NumPy or CuPy; the
    result lives on the same device). ``leaf_size`` primitives per leaf, 1..32."""
    leaf_size = _check_leaf_size(leaf_size)
    xp, lo, hi, copied = _as_bounds(lo, hi)
    n = int(lo.shape[0])
    codes = _morton(xp, lo, hi)
    perm = xp.argsort(codes, kind="stable") if xp is np else xp.argsort(codes)
    del codes
    order_dtype = np.int32 if n < 2**31 else np.int64
    order = perm.astype(order_dtype, copy=False)
    del perm
    used = -(-n // leaf_size)
    n_leaves = 1 << (used - 1).bit_length() if used > 1 else 1
    node_lo, node_hi, nodes_peak = _node_bounds(xp, lo, hi, order, n_leaves, leaf_size)
    b = np.dtype(order_dtype).itemsize
    peak = copied + max(32 * n, (16 + b) * n, nodes_peak)
    return Bvh(node_lo, node_hi, order, n, leaf_size, n_leaves, n_leaves.bit_length() - 1, peak)


def refit(bvh: Bvh, lo: Any, hi: Any) -> Bvh:
    """A new :class:`Bvh` with ``bvh``'s ``order`` and shape and every node box recomputed from
    new bounds of the same primitives (``bvh`` itself is unchanged). Its ``peak_build_bytes`` is
    the refit's own peak."""
    xp, lo, hi, copied = _as_bounds(lo, hi)
    if int(lo.shape[0]) != bvh.n_prims:
        raise InvalidInput(f"refit needs bounds of {bvh.n_prims} primitives, got {lo.shape[0]}")
    if xp_of(bvh.order) is not xp:
        raise InvalidInput("refit bounds must be on the BVH's device")
    node_lo, node_hi, peak = _node_bounds(xp, lo, hi, bvh.order, bvh.n_leaves, bvh.leaf_size)
    return dataclasses.replace(bvh, node_lo=node_lo, node_hi=node_hi, peak_build_bytes=copied + peak)


@register_jitable
def _slab_axis(lo, hi, o, inv, tn, tf):  # type: ignore[no-untyped-def]
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
def slab(node_lo, node_hi, j, ox, oy, oz, ix, iy, iz, tmin, tmax):  # type: ignore[no-untyped-def]
    """``(hit, tnear)``: whether node ``j``'s box overlaps the ray ``o + t d`` for some ``t`` in
    the open interval ``(tmin, tmax)``, with ``i = 1 / d`` (a zero direction component is an
    infinite inverse: the ray is then inside that slab iff ``lo <= o <= hi``).

    The box is closed (a ray grazing a face or edge overlaps it); an empty, inverted box never
    does. ``tnear`` (float32) is where the ray enters the box, at least ``tmin``; meaningful only
    on a hit. Arithmetic is in the arrays' float32.
    """
    inf = np.float32(np.inf)
    tn, tf = _slab_axis(node_lo[j, 0], node_hi[j, 0], ox, ix, -inf, inf)
    tn, tf = _slab_axis(node_lo[j, 1], node_hi[j, 1], oy, iy, tn, tf)
    tn, tf = _slab_axis(node_lo[j, 2], node_hi[j, 2], oz, iz, tn, tf)
    hit = tn <= tf and tn < tmax and tf > tmin
    return hit, np.float32(max(tn, tmin))
