"""The refine of a column group: every row of the refine boxes (:mod:`.regions`) gets its bit
set to the exact predicate, over the sieve's approximate bitmap.

Both refines read a plan with one row per box slot (:mod:`.plan`; empty slots have no work)
and ``ends``, the running sum of the slots' work: item ``t`` of a launch (a ray, or a row to
check) belongs to the first slot whose end exceeds ``t`` (a binary search), so the launch needs
only the total, and no per-ray or per-row array is written.

* ``rt`` (Matrix RT Refine, paper §4.4, Alg. 1): one scene per group, a cube (custom AABB
  primitive) per row at its coordinates, in a BVH of indexzoo's ray tracer; the ray-generation
  program makes ray ``k`` of its box (:func:`.layout.box_ray`); the intersection program
  reports a cube whose float32 box overlaps the ray segment, and the any-hit program (Alg. 1's
  shader) checks the group's predicates on the row's exact (integer) codes: a row that
  satisfies them is set, any other cleared (atomic OR / AND-NOT on the bitmap's words, the
  device's atomics of the query layer's ``BITMAP`` operation, :func:`query.bit_writers`;
  idempotent). The ray's slot is found on its first hit and kept in its payload.
* ``direct`` (ours, the ``rtscan-direct`` preset): with ranks, the rows of a box's slab
  ``[a, b)`` of column ``j`` are exactly ``order_j[a:b]``; for each box the narrowest of its
  columns is gathered, every row checked on all the query's columns and set or cleared with
  the same atomics. No BVH, no rays: the CUDA-core refine.

:func:`refine_rt` and :func:`refine_direct` take boxes made on the host (the reference plan,
:func:`.regions.refine_boxes`), :func:`trace_plan` and :func:`direct_plan` the device's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.native.rt import (
    AABBS,
    DISABLE_CLOSESTHIT,
    IGNORE,
    Engine,
    Programs,
    Scene,
    engine_named,
    query,
    slab_box,
)
from indexzoo.native.search import bisect
from indexzoo.native.targets import Kernel

from .layout import QUERY, RAYS, Geometry, box_ray, cube_boxes, geometry, plan_rays
from .plan import (
    CLEAR,
    D_COL,
    D_COUNT,
    D_MODE,
    D_QUERY,
    D_START,
    DIRECT_COLUMNS,
    NO_UNSET,
    SKIP_COL,
)
from .programs import CUDA

__all__ = ["GroupScene", "TraceRecord", "build_group", "cube_intersection", "direct_plan",
           "direct_strided", "group_geometry", "mark_plan", "plan_raygen", "refine_direct",
           "refine_rt", "strided_kernel", "trace_plan"]


class TraceRecord(NamedTuple):
    """The RT refine launch's parameters (read by name in the programs)."""

    lc: Any         # (N, d): every row's exact codes (ranks, or values without encoding)
    plo: Any        # (Q, d): the queries' inclusive bounds in the same space
    phi: Any
    col0: Any       # int64: the group's columns (-1: unused axis; a flat record, as numba's
    col1: Any       #   parallel CPU loops take no nested tuples)
    col2: Any
    n_cols: Any     # int64
    plan: Any       # (S, 12) int64: the ray plan, one row per slot (layout's columns)
    ends: Any       # (S,) int64: the running sum of the slots' rays
    words: Any      # (Q * W,) uint32: the bitmaps, flat
    width: Any      # int64: W, words per bitmap
    ray_base: Any   # int64: the launch's first ray
    interval: Any   # int64: I
    period: Any     # int64: L + S (0: one segment)
    spacing: Any    # int64: S
    pad: Any        # float64


@register_jitable
def slot_of(ends, t):
    """The slot of item ``t``: the first whose running end exceeds ``t``."""
    return bisect(ends, np.int64(0), np.int64(ends.shape[0]), t, True)


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
def plan_raygen(i, params):
    """Ray ``ray_base + i`` of the launch: ray ``k`` of its slot's box."""
    t = params.ray_base + np.int64(i)
    b = slot_of(params.ends, t)
    k = t - (params.ends[b] - params.plan[b, RAYS])
    return box_ray(params.plan, b, k, params.interval, params.period, params.spacing,
                   params.pad)


@functools.cache
def _programs(device: str) -> Programs:
    """The RT refine's programs on ``device`` (cached: the trace kernel is compiled per set)."""
    set_bit, unset_bit = query.bit_writers(device)

    @register_jitable
    def refine_anyhit(ray, inst, prim, t, front, payload, params):
        """Alg. 1's check on the hit row's exact codes: set its bit if it satisfies the
        group's predicates, else clear it; every hit ignored, so the ray meets every cube."""
        slot1 = payload[ray, 0]  # the ray's slot + 1, found on its first hit
        if slot1 == 0:
            b = slot_of(params.ends, params.ray_base + np.int64(ray))
            payload[ray, 0] = np.uint64(b + 1)
        else:
            b = np.int64(slot1) - 1
        q = params.plan[b, QUERY]
        base = q * params.width
        r = np.int64(prim)
        for k in range(params.n_cols):
            j = params.col0 if k == 0 else (params.col1 if k == 1 else params.col2)
            v = params.lc[r, j]
            if v < params.plo[q, j] or v > params.phi[q, j]:
                unset_bit(params.words, base, r)
                return IGNORE
        set_bit(params.words, base, r)
        return IGNORE

    return Programs(intersection=cube_intersection, anyhit=refine_anyhit, raygen=plan_raygen)


@dataclass(frozen=True)
class GroupScene:
    """One column group: its columns, its geometry and (refine ``rt``) its scene."""

    cols: tuple[int, ...]
    geom: Geometry
    gas: Scene | None  # on its engine (``gas.engine``)

    def nbytes(self) -> dict[str, int]:
        if self.gas is None:
            return {}
        fp = self.gas.footprint().breakdown
        if "primitives" not in fp:  # an engine's own parts (OptiX: the GAS and its boxes)
            return dict(fp)
        return {"cubes": fp["primitives"], "bvh_nodes": fp["bvh_nodes"],
                "bvh_order": fp["bvh_order"]}

    @property
    def peak_bytes(self) -> int:
        return 0 if self.gas is None else self.gas.footprint().peak_build_bytes


def build_group(coords: list[Any], cols: tuple[int, ...], n: int, params: Any,
                with_scene: bool, engine: Engine | None = None) -> GroupScene:
    """The group of ``cols`` whose rows sit at ``coords`` (one integer array per column), its
    scene built by ``engine`` (default: the software engine)."""
    geom = group_geometry(coords, n, params)
    gas = None
    if with_scene and n:
        padded: list[Any | None] = [*coords, *([None] * (3 - len(coords)))]
        boxes = cube_boxes(padded, geom, n)
        # kept boxes: OptiX's cube program tests them (the software GAS keeps its own)
        gas = (engine or engine_named("software")).build_gas(
            AABBS, boxes, leaf_size=params.leaf_size, compact=True, keep_boxes=True)
    return GroupScene(tuple(cols), geom, gas)


def group_geometry(coords: list[Any], n: int, p: Any) -> Geometry:
    """The refine geometry of a group whose rows sit at ``coords`` (one integer array per
    column) under params ``p``."""
    top = max(int(c.max()) for c in coords) if n else 0
    extent = max(int(c.max()) - int(c.min()) + 1 for c in coords) if n else 1
    return geometry(top, extent, n, len(coords), width=p.cube_width, interval=p.ray_interval,
                    spacing=p.ray_spacing, length=p.ray_length)


def trace_plan(scene: GroupScene, plan: Any, ends: Any, total: int, lc: Any, plo: Any,
               phi: Any, words: Any, params: Any, device: str | None = None) -> None:
    """Trace the ``total`` rays of a device ray plan (``plan`` (S, 12), ``ends`` (S,)) through
    the group's scene, setting or clearing the bits of every row met in ``words`` (Q, W),
    in launches of at most ``params.max_rays`` rays."""
    xp = xp_of(lc)
    assert scene.gas is not None
    if total <= 0:
        return
    geom = scene.geom
    dev = device or ("cpu" if xp is np else "cuda")
    c0, c1, c2 = (np.int64(scene.cols[k] if k < len(scene.cols) else -1) for k in range(3))
    if not scene.gas.engine.numba_programs:  # OptiX: the query layer's BITMAP launches
        mark_plan(scene, plan, ends, total, lc, plo, phi, words, params, device)
        return
    flat = words.reshape(-1)
    programs = _programs(dev)
    step = int(params.max_rays)
    for s in range(0, total, step):
        rec = TraceRecord(lc, plo, phi, c0, c1, c2, np.int64(len(scene.cols)), plan, ends, flat,
                          np.int64(words.shape[1]), np.int64(s), np.int64(geom.interval),
                          np.int64(geom.period), np.int64(geom.spacing), np.float64(geom.pad))
        scene.gas.engine.launch(scene.gas, min(step, total - s), programs,
                                flags=DISABLE_CLOSESTHIT, params=rec,
                                threads_per_block=params.threads_per_block, device=device)


class RefineRecord(NamedTuple):
    """The RT refine's parameters as a query-layer ``BITMAP`` launch (:func:`mark_plan`): the
    bitmaps are the layer's ``out``; 2-D arrays are also read through element strides
    (``lc_row``, ``lc_col``, ``q_row``, ``q_col``) by the CUDA programs."""

    lc: Any
    lc_row: Any     # int64 element strides of lc
    lc_col: Any
    plo: Any
    phi: Any
    q_row: Any      # int64 element strides of plo and phi
    q_col: Any
    col0: Any
    col1: Any
    col2: Any
    n_cols: Any
    plan: Any
    ends: Any
    n_slots: Any    # int64: the plan's slots
    ray_base: Any
    interval: Any
    period: Any
    spacing: Any
    pad: Any


@register_jitable
def refine_match(ray, inst, prim, t, front, params):
    """Alg. 1's check as a ``BITMAP`` match: the row (its bit set) if it satisfies the group's
    predicates of the ray's query, else ``clear_bit`` of it."""
    b = slot_of(params.ends, params.ray_base + np.int64(ray))
    q = params.plan[b, QUERY]
    r = np.int64(prim)
    for k in range(params.n_cols):
        j = params.col0 if k == 0 else (params.col1 if k == 1 else params.col2)
        v = params.lc[r, j]
        if v < params.plo[q, j] or v > params.phi[q, j]:
            return query.clear_bit(r)
    return r


#: The RT refine over the query layer: the match, the cube test, the rays (and their twins).
REFINE_PROGRAMS = query.QueryPrograms(match=refine_match, intersection=cube_intersection,
                                      cuda=CUDA)


def _strides(a: Any) -> tuple[Any, Any]:
    return np.int64(a.strides[0] // a.itemsize), np.int64(a.strides[1] // a.itemsize)


def mark_plan(scene: GroupScene, plan: Any, ends: Any, total: int, lc: Any, plo: Any,
              phi: Any, words: Any, params: Any, device: str | None = None) -> None:
    """:func:`trace_plan` as the query layer's ``BITMAP`` launches, for an engine whose
    programs are not numba functions (OptiX): each slot is a lookup casting its box's rays
    (``plan_raygen``), whose hits set or clear bits of its query's row of ``words``. The
    answers are the engine launch's; the layer writes each ray's row offset (8 bytes a ray
    of a launch) and the match finds a hit's slot by a binary search instead of keeping it in
    the payload."""
    xp = xp_of(lc)
    geom = scene.geom
    c0, c1, c2 = (np.int64(scene.cols[k] if k < len(scene.cols) else -1) for k in range(3))
    plan = xp.ascontiguousarray(plan)
    ends = xp.ascontiguousarray(ends)
    n_slots = int(plan.shape[0])
    starts = xp.zeros(n_slots + 1, dtype=np.int64)
    starts[1:] = ends
    lr, lcol = _strides(lc)
    qr, qc = _strides(plo)
    ray_data = xp.zeros(1, dtype=np.uint64)

    def rays(s: int, e: int, owner: Any) -> query.Generated:
        return query.Generated(plan_raygen, ray_data)

    def record(s: int, e: int, owner: Any) -> RefineRecord:
        return RefineRecord(lc, lr, lcol, plo, phi, qr, qc, c0, c1, c2,
                            np.int64(len(scene.cols)), plan, ends, np.int64(n_slots),
                            np.int64(s), np.int64(geom.interval), np.int64(geom.period),
                            np.int64(geom.spacing), np.float64(geom.pad))

    batch = query.FunctionBatch(n_slots, starts, False, rays, record)
    query.mark_bits(scene.gas, batch, REFINE_PROGRAMS, words,
                    targets=xp.ascontiguousarray(plan[:, QUERY]), max_rays=int(params.max_rays),
                    threads_per_block=params.threads_per_block, device=device)


def refine_rt(scene: GroupScene, query_of: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              lc: Any, plo: Any, phi: Any, words: Any, params: Any,
              device: str | None = None) -> int:
    """Trace the rays of the boxes ``[lo, hi]`` (inclusive coordinates, (B, 3) int64 on the
    host; box ``b`` belongs to bitmap row ``query_of[b]``) through the group's scene: the host
    plan (:func:`.layout.plan_rays`) through :func:`trace_plan`. Returns the number of rays."""
    xp = xp_of(lc)
    host = plan_rays(query_of, lo, hi, scene.geom, params.ray_axis)
    total = int(host[:, RAYS].sum())
    if total:
        trace_plan(scene, xp.asarray(host), xp.asarray(np.cumsum(host[:, RAYS])), total, lc,
                   plo, phi, words, params, device)
    return total


@functools.cache
def _refine_row(device: str) -> Any:
    """``refine_row(lc, plo, phi, q, r, words, base, col, mode)``: row ``r``'s bit of query
    ``q`` (the bitmap at ``base`` in ``words``) set when the row satisfies every column's
    bounds, else cleared, with the device's atomics: what both direct refines do to each row
    of the slab of column ``col`` that they meet. ``mode`` (the slot's ``D_MODE``) says what
    the slab's ranks already tell: a column known to pass is not read, a row known to fail
    is cleared unread, a failing row whose bit the sieve left 0 is not written."""
    set_bit, unset_bit = query.bit_writers(device)

    @register_jitable
    def refine_row(lc, plo, phi, q, r, words, base, col, mode):
        if mode & CLEAR:
            unset_bit(words, base, r)
            return
        skip = col if mode & SKIP_COL else -1
        for j in range(lc.shape[1]):
            if j == skip:
                continue
            v = lc[r, j]
            if v < plo[q, j] or v > phi[q, j]:
                if not (mode & NO_UNSET):
                    unset_bit(words, base, r)
                return
        set_bit(words, base, r)

    return refine_row


@functools.cache
def _direct_kernel(device: str) -> Kernel:
    refine_row = _refine_row(device)

    @register_jitable
    def direct_item(t, order, lc, plo, phi, plan, ends, words, width):
        b = slot_of(ends, t)  # the slot of candidate t
        col = plan[b, D_COL]
        r = np.int64(order[plan[b, D_START] + t - (ends[b] - plan[b, D_COUNT]), col])
        q = plan[b, D_QUERY]
        refine_row(lc, plo, phi, q, r, words, q * width, col, plan[b, D_MODE])

    return Kernel(direct_item, name="rtscan_direct")


def direct_plan(order: Any, lc: Any, plo: Any, phi: Any, plan: Any, ends: Any, total: int,
                words: Any, threads_per_block: int, device: str | None = None) -> None:
    """The direct refine of a device plan (``plan`` (S, 5), ``ends`` (S,), ``total`` rows):
    every row of each slot's slab checked on every column, its bit in ``words`` (Q, W) set or
    cleared."""
    if total <= 0:
        return
    xp = xp_of(lc)
    dev = device or ("cpu" if xp is np else "cuda")
    _direct_kernel(dev)(dev, total, order, lc, plo, phi, plan, ends, words.reshape(-1),
                        np.int64(words.shape[1]), threads_per_block=threads_per_block)


@functools.cache
def strided_kernel(device: str) -> Kernel:
    """The strided direct refine's kernel on ``device`` (see :func:`direct_strided`; the
    small GPU calls bind it, :mod:`.prepared`)."""
    refine_row = _refine_row(device)

    @register_jitable
    def direct_strided_item(i, order, lc, plo, phi, plan, words, width, per_slot):
        b = i // per_slot  # this thread's slot, and its place among the slot's threads
        k = i - b * per_slot
        count = plan[b, D_COUNT]
        if k >= count:
            return
        start, col, q = plan[b, D_START], plan[b, D_COL], plan[b, D_QUERY]
        mode = plan[b, D_MODE]
        base = q * width
        for t in range(k, count, per_slot):
            refine_row(lc, plo, phi, q, np.int64(order[start + t, col]), words, base, col,
                       mode)

    return Kernel(direct_strided_item, name="rtscan_direct_strided")


def direct_strided(order: Any, lc: Any, plo: Any, phi: Any, plan: Any, words: Any,
                   per_slot: int, threads_per_block: int, device: str | None = None) -> None:
    """The direct refine of a device plan (``plan`` (S, 5)) without its running sum:
    ``per_slot`` threads per slot, thread ``k`` of a slot checks the slab's rows ``k``,
    ``k + per_slot``, ... So the launch's size is known on the host from the batch alone: no
    running sum, no device-to-host copy of the total (what a small batch's call would
    otherwise wait for); a slot's rows are spread over at most ``per_slot`` threads."""
    s = int(plan.shape[0])
    if s == 0:
        return
    xp = xp_of(lc)
    dev = device or ("cpu" if xp is np else "cuda")
    strided_kernel(dev)(dev, s * per_slot, order, lc, plo, phi, plan, words.reshape(-1),
                         np.int64(words.shape[1]), np.int64(per_slot),
                         threads_per_block=threads_per_block)


def refine_direct(cols: tuple[int, ...], query_of: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray, order: Any, lc: Any, plo: Any, phi: Any, words: Any,
                  threads_per_block: int, device: str | None = None) -> int:
    """The direct refine of the boxes ``[lo, hi)`` (ranks, (B, g) int64 on the host, over the
    group's ``cols``): the rows of each box's narrowest column slab, checked on every column;
    the host plan through :func:`direct_plan`. Returns the number of rows checked."""
    xp = xp_of(lc)
    b = int(lo.shape[0])
    width = hi - lo
    k = np.argmin(width, axis=1)
    rows = np.arange(b)
    host = np.zeros((b, DIRECT_COLUMNS), dtype=np.int64)
    host[:, D_QUERY] = query_of
    host[:, D_COL] = np.asarray(cols, dtype=np.int64)[k]
    host[:, D_START] = lo[rows, k]
    host[:, D_COUNT] = width[rows, k]
    ends = np.cumsum(host[:, D_COUNT])
    total = int(ends[-1]) if b else 0
    direct_plan(order, lc, plo, phi, xp.asarray(host), xp.asarray(ends), total, words,
                threads_per_block, device)
    return total
