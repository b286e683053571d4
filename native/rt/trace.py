"""Geometry acceleration structures and ``trace``: the software ray-tracing pipeline, one numba
source for the CPU (``njit`` + ``prange``) and the GPU (``cuda.jit``), with OptiX's semantics.

OptiX -> here
-------------
* ``optixAccelBuild`` of a GAS over triangles, spheres or custom primitives (AABBs):
  :func:`build_gas` (a BVH over the primitives' bounds, :mod:`.bvh`); ``optixAccelRelocate`` /
  update builds: :meth:`Gas.refit`. Compaction: the BVH is built compact (no slack to remove).
* ``optixTrace(handle, origin, direction, tmin, tmax, ..., rayFlags, ...)``: :func:`trace` with
  per-ray ``origins``, ``directions``, ``tmin``, ``tmax``; a hit counts only when
  ``tmin < t < tmax``. Ray flags (:data:`TERMINATE_ON_FIRST_HIT`, :data:`DISABLE_ANYHIT`,
  :data:`DISABLE_CLOSESTHIT`, :data:`CULL_BACK_FACING`, :data:`CULL_FRONT_FACING`) apply to the
  whole launch.
* Programs (``__intersection__``, ``__anyhit__``, ``__closesthit__``, ``__miss__``):
  :class:`Programs`, numba device functions (``register_jitable``), called with the ray index
  and the per-ray ``payload`` slots (a (rays, slots) uint64 array: OptiX's payload registers)::

      intersection(data, i, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params) -> (t float32, front bool)
      anyhit(ray, inst, prim, t, front, payload, params) -> ACCEPT | IGNORE | TERMINATE
      closesthit(ray, inst, prim, t, front, payload, params)
      miss(ray, payload, params)

  ``data[i]`` is the primitive's stored row, ``prim`` its index in the build input, ``inst``
  the instance id (0 for a GAS traced directly), ``params`` the tuple passed to :func:`trace`
  (OptiX's launch parameters: arrays and scalars the programs read or write).

  Custom primitives (AABBs) use ``intersection`` (default: the ray's entry into the box).
  ``trace`` also returns the closest hit's ``t``, primitive and face for every ray.
* A primitive reaches any-hit at most once per ray (each sits in one BVH leaf and is tested
  once); any-hit runs only for hits closer than the closest accepted so far, as in OptiX; equal
  distances go to the smaller primitive index (the closest hit is then deterministic).
* Kernels are specialised per program set (the programs are compile-time constants of the
  generated kernel) and cached.

Traversal is stackless: the BVH is an implicit complete binary tree (heap order), so after a
subtree the walk climbs while it stands on a right child and steps to the sibling. No per-ray
stack array is needed, which keeps one source for both devices.

Not yet (issue 5, open): instance acceleration structures (IAS), geometry generated on the fly
from compact records, GPU measurements.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo import Footprint, InvalidInput
from indexzoo.devices import xp_of

from ..targets import Kernel
from .bvh import Bvh, build_bvh, refit, slab
from .geometry import AABBS, SPHERES, TRIANGLES, hit_aabb_reference, hit_sphere, hit_triangle, prim_bounds

__all__ = [
    "ACCEPT", "CULL_BACK_FACING", "CULL_FRONT_FACING", "DISABLE_ANYHIT", "DISABLE_CLOSESTHIT",
    "IGNORE", "TERMINATE", "TERMINATE_ON_FIRST_HIT", "Gas", "Hits", "Programs", "build_gas",
    "trace",
]

TERMINATE_ON_FIRST_HIT = 1
DISABLE_ANYHIT = 2
DISABLE_CLOSESTHIT = 4
CULL_BACK_FACING = 8
CULL_FRONT_FACING = 16
_ALL_FLAGS = 31

ACCEPT, IGNORE, TERMINATE = 0, 1, 2


@dataclass(frozen=True)
class Gas:
    """A geometry acceleration structure: the primitives and the BVH over them."""

    kind: int
    data: Any  # triangles (N, 9), sphere centres (N, 3) or boxes (N, 6), float32
    radius: float
    bvh: Bvh

    @property
    def n_prims(self) -> int:
        return self.bvh.n_prims

    def footprint(self) -> Footprint:
        """Bytes held (primitives and BVH) and the build's peak."""
        parts = {"primitives": int(self.data.nbytes), "bvh": int(self.bvh.nbytes)}
        return Footprint(breakdown=parts,
                         peak_build_bytes=int(self.data.nbytes) + self.bvh.peak_build_bytes)

    def refit(self, data: Any) -> Gas:
        """The same structure over moved primitives (same count): bounds recomputed, the tree
        kept (OptiX's update build)."""
        data = _check_data(self.kind, data, self.radius)
        if data.shape[0] != self.n_prims:
            raise InvalidInput(f"refit needs {self.n_prims} primitives, got {data.shape[0]}")
        lo, hi = prim_bounds(self.kind, data, self.radius)
        return Gas(self.kind, data, self.radius, refit(self.bvh, lo, hi))


_WIDTH = {TRIANGLES: 9, SPHERES: 3, AABBS: 6}


def _check_data(kind: int, data: Any, radius: float) -> Any:
    if kind not in _WIDTH:
        raise InvalidInput(f"unknown primitive kind {kind!r}; use TRIANGLES, SPHERES or AABBS")
    xp = xp_of(data)
    arr = xp.ascontiguousarray(data, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != _WIDTH[kind]:
        raise InvalidInput(f"primitives of kind {kind} need shape (N, {_WIDTH[kind]}), "
                           f"got {tuple(arr.shape)}")
    if arr.shape[0] and not bool(xp.isfinite(arr).all()):
        raise InvalidInput("primitive coordinates must be finite")
    if kind == SPHERES and not (np.isfinite(radius) and radius >= 0):
        raise InvalidInput(f"sphere radius must be finite and >= 0, got {radius}")
    return arr


def build_gas(kind: int, data: Any, radius: float = 0.0, leaf_size: int = 4) -> Gas:
    """Build a GAS over ``data`` (NumPy: on the CPU, CuPy: on the GPU)."""
    data = _check_data(kind, data, radius)
    lo, hi = prim_bounds(kind, data, radius)
    return Gas(kind, data, float(radius), build_bvh(lo, hi, leaf_size=leaf_size))


@dataclass(frozen=True)
class Programs:
    """The programs of a launch; ``None`` = OptiX's default (accept, record, nothing)."""

    intersection: Any = None
    anyhit: Any = None
    closesthit: Any = None
    miss: Any = None


@dataclass(frozen=True)
class Hits:
    """Per ray: the closest accepted hit (``prim`` -1 and ``t`` inf on a miss)."""

    t: Any
    prim: Any
    front: Any
    payload: Any


@register_jitable
def _no_anyhit(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    return 0


@register_jitable
def _no_closesthit(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    return


@register_jitable
def _no_miss(ray, payload, params):  # type: ignore[no-untyped-def]
    return


@register_jitable
def _box_entry(boxes, i, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params):  # type: ignore[no-untyped-def]
    return hit_aabb_reference(boxes, i, ox, oy, oz, dx, dy, dz, tmin, tmax)


@functools.cache
def _trace_kernel(intersection: Any, anyhit: Any, closesthit: Any, miss: Any) -> Kernel:
    """The trace kernel for one program set (compiled on first use, per device)."""
    has_anyhit = anyhit is not None
    anyhit = anyhit or _no_anyhit
    closesthit = closesthit or _no_closesthit
    miss = miss or _no_miss
    intersection = intersection or _box_entry

    @register_jitable
    def trace_item(i, kind, data, radius, node_lo, node_hi, order, n, leaf_size, leaves,  # type: ignore[no-untyped-def]
                   origins, dirs, tmins, tmaxs, flags, payload, params, out_t, out_p, out_f):
        inf = np.float32(np.inf)
        ox, oy, oz = origins[i, 0], origins[i, 1], origins[i, 2]
        dx, dy, dz = dirs[i, 0], dirs[i, 1], dirs[i, 2]
        ix = np.float32(1.0) / dx if dx != 0 else inf
        iy = np.float32(1.0) / dy if dy != 0 else inf
        iz = np.float32(1.0) / dz if dz != 0 else inf
        tmin = tmins[i]
        tmax = tmaxs[i]
        best_t = inf
        best_p = np.int64(-1)
        best_f = False
        done = n == 0 or not (tmin < tmax)
        first_leaf = leaves - 1
        j = np.int64(0)
        while not done:
            # cull with the closest hit so far, widened a little so that ties (same t, smaller
            # primitive index) are still visited
            cull = tmax if best_p < 0 else min(tmax, best_t + abs(best_t) * np.float32(1e-6)
                                                + np.float32(1e-30))
            hit, _ = slab(node_lo, node_hi, j, ox, oy, oz, ix, iy, iz, tmin, cull)
            if hit and j < first_leaf:
                j = 2 * j + 1
                continue
            if hit:
                start = (j - first_leaf) * leaf_size
                stop = min(start + leaf_size, n)
                for pos in range(start, stop):
                    p = np.int64(order[pos])
                    if kind == 0:
                        t, front = hit_triangle(data, p, ox, oy, oz, dx, dy, dz, tmin, tmax)
                    elif kind == 1:
                        t, front = hit_sphere(data, p, radius, ox, oy, oz, dx, dy, dz, tmin, tmax)
                    else:
                        t, front = intersection(data, p, p, ox, oy, oz, dx, dy, dz, tmin, tmax, params)
                    if not (t < tmax):  # miss (inf) or outside the interval
                        continue
                    if kind == 0 and ((front and (flags & 16) != 0) or
                                      (not front and (flags & 8) != 0)):
                        continue
                    if not (t < best_t or (t == best_t and p < best_p)):
                        continue
                    verdict = 0
                    if has_anyhit and (flags & 2) == 0:
                        verdict = anyhit(i, 0, p, t, front, payload, params)
                    if verdict == 1:
                        continue
                    best_t, best_p, best_f = t, p, front
                    if verdict == 2 or (flags & 1) != 0:
                        done = True
                        break
                if done:
                    break
            # next node: climb while on a right child, then step to the sibling
            while j > 0 and (j & 1) == 0:
                j = (j - 1) >> 1
            if j == 0:
                break
            j += 1
        out_t[i] = best_t
        out_p[i] = best_p
        out_f[i] = best_f
        if best_p >= 0:
            if (flags & 4) == 0:
                closesthit(i, 0, best_p, best_t, best_f, payload, params)
        else:
            miss(i, payload, params)

    return Kernel(trace_item, name="rt_trace")


def trace(gas: Gas, origins: Any, directions: Any, tmin: Any, tmax: Any,
          programs: Programs | None = None, flags: int = 0, payload: Any = None,
          params: tuple[Any, ...] = (), threads_per_block: int = 128) -> Hits:
    """Trace one ray per row of ``origins``/``directions`` (float32, (R, 3)) with per-ray
    ``tmin``/``tmax`` (float32, (R,)) against ``gas``; arrays on the GPU trace on the GPU.

    ``payload``: a (R, S) uint64 array the programs read and write (default: (R, 1) zeros).
    ``params``: a tuple of arrays (on the scene's device) and scalars handed to every program.
    """
    programs = programs or Programs()
    xp = xp_of(gas.data)
    device = "cpu" if xp is np else "cuda"
    o = xp.ascontiguousarray(origins, dtype=np.float32)
    d = xp.ascontiguousarray(directions, dtype=np.float32)
    r = int(o.shape[0]) if o.ndim == 2 else -1
    if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
        raise InvalidInput(f"origins and directions must both be (R, 3); got {tuple(o.shape)} and "
                           f"{tuple(d.shape)}")
    t0 = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(tmin, dtype=np.float32), (r,)))
    t1 = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(tmax, dtype=np.float32), (r,)))
    if not 0 <= flags <= _ALL_FLAGS:
        raise InvalidInput(f"unknown ray flags {flags}")
    if payload is None:
        payload = xp.zeros((r, 1), dtype=np.uint64)
    elif payload.ndim != 2 or payload.shape[0] != r or payload.dtype != np.uint64:
        raise InvalidInput("payload must be a (R, S) uint64 array")
    out_t = xp.empty(r, dtype=np.float32)
    out_p = xp.empty(r, dtype=np.int64)
    out_f = xp.empty(r, dtype=np.bool_)
    kernel = _trace_kernel(programs.intersection, programs.anyhit, programs.closesthit,
                           programs.miss)
    b = gas.bvh
    kernel(device, r, np.int64(gas.kind), gas.data, np.float32(gas.radius), b.node_lo, b.node_hi,
           b.order, np.int64(b.n_prims), np.int64(b.leaf_size), np.int64(b.n_leaves), o, d, t0, t1,
           np.int64(flags), payload, tuple(params), out_t, out_p, out_f, threads_per_block=threads_per_block)
    return Hits(out_t, out_p, out_f, payload)
