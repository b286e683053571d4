"""The refine of a column group: every row of the refine boxes (:mod:`.regions`) gets its bit
set to the exact predicate, over the sieve's approximate bitmap.

* ``rt`` (Matrix RT Refine, paper §4.4, Alg. 1): one scene per group, a cube (custom AABB
  primitive) per row at its coordinates, in a BVH of indexzoo's ray tracer; the rays of
  :mod:`.layout` cross each box; the intersection program reports a cube whose float32 box
  overlaps the ray segment, and the match program checks the group's predicates on the row's
  exact (integer) codes: a row that satisfies them is set, any other cleared (the query
  layer's ``BITMAP`` operation: atomic OR / AND-NOT on the bitmap's words, idempotent).
* ``direct`` (ours, digest 003 §2 ``rtscan-direct``): with ranks, the rows of a box's slab
  ``[a, b)`` of column ``j`` are exactly ``order_j[a:b]``; for each box the narrowest of its
  columns is gathered, every row checked on all the query's columns and set or cleared with
  the same atomics. No BVH, no rays: the CUDA-core refine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.native.rt import query
from indexzoo.native.rt.bvh import slab_box
from indexzoo.native.rt.geometry import AABBS
from indexzoo.native.rt.trace import Gas, build_gas
from indexzoo.native.targets import Kernel

from .layout import QUERY, RAYS, Geometry, cube_boxes, geometry, plan_rays, refine_raygen

__all__ = ["PROGRAMS", "GroupScene", "RefineRecord", "build_group", "refine_direct",
           "refine_rt"]


class RefineRecord(NamedTuple):
    """The refine launch's parameters (the query layer's fields come first)."""

    lc: Any         # (N, d): every row's exact codes (ranks, or values without encoding)
    plo: Any        # (Q, d): the queries' inclusive bounds in the same space
    phi: Any
    cols: Any       # (3,) int64: the group's columns (-1: unused axis)
    n_cols: Any     # int64
    plan: Any       # (B, 13) int64: the ray plan, one row per box (layout.plan_rays)
    ray_base: Any   # int64: the launch chunk's first ray
    interval: Any   # int64: I
    period: Any     # int64: L + S (0: one segment)
    spacing: Any    # int64: S
    pad: Any        # float64


@register_jitable
def cube_intersection(data, i, inst, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params):
    """A cube is hit when its float32 box overlaps the ray on ``(tmin, tmax)`` (the BVH's own
    box test: a cube that contains the whole segment counts too)."""
    inf = np.float32(np.inf)
    ix = np.float32(1.0) / dx if dx != 0 else inf
    iy = np.float32(1.0) / dy if dy != 0 else inf
    iz = np.float32(1.0) / dz if dz != 0 else inf
    hit, tn = slab_box(data[i, 0], data[i, 1], data[i, 2], data[i, 3], data[i, 4], data[i, 5],
                       ox, oy, oz, ix, iy, iz, tmin, tmax)
    if hit:
        return tn, True
    return inf, False


@register_jitable
def refine_match(ray, inst, prim, t, front, params):
    """Alg. 1's check on the hit row's exact codes: set its bit if it satisfies the group's
    predicates, else clear it."""
    q = params.plan[params.ray_data[ray], QUERY]
    for k in range(params.n_cols):
        j = params.cols[k]
        v = params.lc[prim, j]
        if v < params.plo[q, j] or v > params.phi[q, j]:
            return query.clear_bit(prim)
    return np.int64(prim)


PROGRAMS = query.QueryPrograms(match=refine_match, intersection=cube_intersection)


@dataclass(frozen=True)
class GroupScene:
    """One column group: its columns, its geometry and (refine ``rt``) its scene."""

    cols: tuple[int, ...]
    geom: Geometry
    gas: Gas | None

    def nbytes(self) -> dict[str, int]:
        if self.gas is None:
            return {}
        fp = self.gas.footprint().breakdown
        return {"cubes": fp["primitives"], "bvh_nodes": fp["bvh_nodes"],
                "bvh_order": fp["bvh_order"]}

    @property
    def peak_bytes(self) -> int:
        return 0 if self.gas is None else self.gas.footprint().peak_build_bytes


def build_group(coords: list[Any], cols: tuple[int, ...], n: int, params: Any,
                with_scene: bool) -> GroupScene:
    """The group of ``cols`` whose rows sit at ``coords`` (one integer array per column)."""
    top = max(int(c.max()) for c in coords) if n else 0
    extent = max(int(c.max()) - int(c.min()) + 1 for c in coords) if n else 1
    geom = _geometry(top, extent, n, len(cols), params)
    gas = None
    if with_scene and n:
        padded: list[Any | None] = [*coords, *([None] * (3 - len(coords)))]
        boxes = cube_boxes(padded, geom, n)
        gas = build_gas(AABBS, boxes, leaf_size=params.leaf_size, compact=True)
    return GroupScene(tuple(cols), geom, gas)


def _geometry(top: int, extent: int, n: int, g: int, p: Any) -> Geometry:
    return geometry(top, extent, n, g, width=p.cube_width, interval=p.ray_interval,
                    spacing=p.ray_spacing, length=p.ray_length, eps=p.eps)


def refine_rt(scene: GroupScene, query_of: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              lc: Any, plo: Any, phi: Any, words: Any, params: Any,
              device: str | None = None) -> int:
    """Trace the rays of the boxes ``[lo, hi]`` (inclusive coordinates, (B, 3) int64 on the
    host; box ``b`` belongs to bitmap row ``query_of[b]``) through the group's scene, setting
    or clearing the bits of every row met. Returns the number of rays."""
    xp = xp_of(lc)
    assert scene.gas is not None
    geom = scene.geom
    host = plan_rays(query_of, lo, hi, geom, params.ray_axis)
    if host.shape[0] == 0:
        return 0
    plan = xp.asarray(host)
    cols = np.full(3, -1, dtype=np.int64)
    cols[:len(scene.cols)] = scene.cols
    fixed = (lc, plo, phi, xp.asarray(cols), np.int64(len(scene.cols)), plan)
    tail = (np.int64(geom.interval), np.int64(geom.period), np.int64(geom.spacing),
            np.float64(geom.pad))

    def record(s: int, e: int, owner: Any) -> RefineRecord:
        return RefineRecord(*fixed, np.int64(s), *tail)

    batch = query.FunctionBatch.of(
        plan[:, RAYS], lambda s, e, owner: query.Generated(refine_raygen, owner), record)
    query.mark_bits(scene.gas, batch, PROGRAMS, words, targets=plan[:, QUERY],
                    max_rays=params.max_rays, threads_per_block=params.threads_per_block,
                    device=device)
    return int(host[:, RAYS].sum())


#: Columns of a direct refine's plan (one row per box, then one closing row): the bitmap row,
#: the column whose slab is gathered, the slab's first rank, the box's first candidate.
D_QUERY, D_COL, D_START, D_FIRST = 0, 1, 2, 3


@functools.cache
def _direct_kernel(device: str) -> Kernel:
    set_bit, unset_bit = query.bit_writers(device)

    @register_jitable
    def direct_item(t, order, lc, plo, phi, plan, words, width):
        lo = np.int64(0)
        hi = np.int64(plan.shape[0] - 1)
        while hi - lo > 1:  # the box of candidate t: the last with first <= t
            mid = (lo + hi) // 2
            if plan[mid, D_FIRST] <= t:
                lo = mid
            else:
                hi = mid
        r = np.int64(order[plan[lo, D_START] + t - plan[lo, D_FIRST], plan[lo, D_COL]])
        q = plan[lo, D_QUERY]
        base = q * width
        for j in range(lc.shape[1]):
            v = lc[r, j]
            if v < plo[q, j] or v > phi[q, j]:
                unset_bit(words, base, r)
                return
        set_bit(words, base, r)

    return Kernel(direct_item, name="rtscan_direct")


def refine_direct(cols: tuple[int, ...], query_of: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray, order: Any, lc: Any, plo: Any, phi: Any, words: Any,
                  threads_per_block: int, device: str | None = None) -> int:
    """The direct refine of the boxes ``[lo, hi)`` (ranks, (B, g) int64 on the host, over the
    group's ``cols``): the rows of each box's narrowest column slab, checked on every column.
    Returns the number of rows checked."""
    xp = xp_of(lc)
    b = int(lo.shape[0])
    width = hi - lo
    k = np.argmin(width, axis=1)
    rows = np.arange(b)
    host = np.zeros((b + 1, 4), dtype=np.int64)
    host[:b, D_QUERY] = query_of
    host[:b, D_COL] = np.asarray(cols, dtype=np.int64)[k]
    host[:b, D_START] = lo[rows, k]
    host[1:, D_FIRST] = np.cumsum(width[rows, k])
    total = int(host[b, D_FIRST])
    dev = device or ("cpu" if xp is np else "cuda")
    _direct_kernel(dev)(dev, total, order, lc, plo, phi, xp.asarray(host), words.reshape(-1),
                        np.int64(words.shape[1]), threads_per_block=threads_per_block)
    return total
