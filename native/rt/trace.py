"""Geometry acceleration structures and ``trace``: the software ray-tracing pipeline, one numba
source for the CPU (``njit`` + ``prange``) and the GPU (``cuda.jit``), with OptiX's semantics.

OptiX -> here
-------------
* ``optixAccelBuild`` of a GAS over triangles, spheres or custom primitives (AABBs):
  :func:`build_gas` (a BVH over the primitives' bounds, :mod:`.bvh`); update builds:
  :meth:`Gas.refit`; ``optixAccelCompact``: ``compact=True`` (default) or :meth:`Gas.compact`.
  The GAS keeps its own copy of the primitives, in BVH order, as OptiX's does.
* Geometry generated on the fly: ``build_gas(kind, records, geometry=f)`` keeps compact
  per-primitive records (any numeric array, one row per primitive) and a numba function
  ``f(records, i)`` that returns row ``i``'s primitive (9 floats for a triangle, 3 for a
  sphere's centre, 6 for a box); traversal calls it where it would read a stored primitive, so
  answers are identical and memory is the records' instead of the primitives'.
* ``optixAccelBuild`` of an IAS (``OptixInstance``: transform, instanceId, visibilityMask,
  traversableHandle): :func:`build_ias` over :class:`Instance` objects; a ray is tested against
  an instance only when ``instance.mask & ray mask`` is non-zero, in the instance's object
  space (the inverse of its 3x4 transform applied to origin and direction, so ``t`` is the
  same along both). All GASes of an IAS share one primitive kind and geometry function.
* ``optixLaunch`` with a ``__raygen__`` program: :func:`launch` (``Programs(raygen=f)``,
  ``f(i, params)`` makes ray ``i`` inside the kernel: no ray arrays).
* ``optixTrace(handle, origin, direction, tmin, tmax, ..., rayFlags, ...)``: :func:`trace` with
  per-ray ``origins``, ``directions``, ``tmin``, ``tmax``; a hit counts only when
  ``tmin < t < tmax``. Ray flags (:data:`TERMINATE_ON_FIRST_HIT`, :data:`DISABLE_ANYHIT`,
  :data:`DISABLE_CLOSESTHIT`, :data:`CULL_BACK_FACING`, :data:`CULL_FRONT_FACING`) apply to the
  whole launch.
* Programs (``__intersection__``, ``__anyhit__``, ``__closesthit__``, ``__miss__``):
  :class:`Programs`, numba device functions (``register_jitable``), called with the ray index
  and the per-ray ``payload`` slots (a (rays, slots) uint64 array: OptiX's payload registers)::

      intersection(data, i, inst, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params)
          -> (t float32, front bool)
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

The stages live in their own modules: the scenes (build, refit, compaction) in :mod:`.scene`,
the walk of one ray and the in-kernel queries in :mod:`.traversal`, and here ray generation
(arrays or a ray-generation program), the launch and the per-ray results (:class:`Hits`).
This module exports the names of all three.

Traversal is stackless: the BVH's nodes are stored depth-first with escape indices, so a walk
is one increasing index (on a hit, the next record; on a miss, the escape index). No per-ray
stack array is needed, which keeps one source for both devices, and each record is visited at
most once, so each primitive reaches any-hit at most once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.envvars import CPU_SERIAL_BELOW_RAYS
from indexzoo.errors import InvalidInput

from ..targets import Kernel, Slot
from .geometry import AABBS
from .scene import (
    Gas,
    Ias,
    Instance,
    box_rows,
    build_gas,
    build_ias,
    build_sliced_ias,
    geometry_of,
    sphere_rows,
    triangle_rows,
)
from .traversal import (
    ACCEPT,
    CULL_BACK_FACING,
    CULL_FRONT_FACING,
    DISABLE_ANYHIT,
    DISABLE_CLOSESTHIT,
    IGNORE,
    TERMINATE,
    TERMINATE_ON_FIRST_HIT,
    Programs,
    closest_hit_query,
    ias_walker,
    scene_query,
    walker,
)

__all__ = [
    "ACCEPT", "CULL_BACK_FACING", "CULL_FRONT_FACING", "DISABLE_ANYHIT", "DISABLE_CLOSESTHIT",
    "IGNORE", "RAYS_SERIAL_BELOW", "TERMINATE", "TERMINATE_ON_FIRST_HIT", "Gas", "Hits", "Ias",
    "Instance", "Programs", "bind_launch", "box_rows", "build_gas", "build_ias",
    "build_sliced_ias", "closest_hit_query", "launch", "scene_query", "sphere_rows", "trace",
    "triangle_rows",
]

#: CPU trace launches with fewer rays than this run on one core. A ray through the software
#: BVH costs several times a binary search (measured: ``docs/plugins/rx.md``), so the thread
#: pool's wake-up pays from far fewer items than the default threshold of cheap kernels
#: (:data:`indexzoo.native.targets.SERIAL_BELOW`).
RAYS_SERIAL_BELOW = CPU_SERIAL_BELOW_RAYS.value()

_ALL_FLAGS = (TERMINATE_ON_FIRST_HIT | DISABLE_ANYHIT | DISABLE_CLOSESTHIT | CULL_BACK_FACING
              | CULL_FRONT_FACING)


@dataclass(frozen=True)
class Hits:
    """Per ray: the closest accepted hit (``prim`` -1 and ``t`` inf on a miss), its front-face
    flag and instance id (0 for a GAS)."""

    t: Any
    prim: Any
    front: Any
    payload: Any
    inst: Any = None


@register_jitable
def _no_closesthit(ray, inst, prim, t, front, payload, params):
    return


@register_jitable
def _no_miss(ray, payload, params):
    return


@register_jitable
def _no_raygen(i, params):
    z = np.float32(0)
    return z, z, z, z, z, z, z, z


@functools.cache
def _trace_kernel(kind: int, geometry: Any, two_level: bool, intersection: Any, anyhit: Any,
                  closesthit: Any, miss: Any, raygen: Any = None) -> Kernel:
    """The trace kernel for one scene type and program set (compiled on first use, per device)."""
    walk = walker(kind, geometry, intersection, anyhit)
    closesthit = closesthit or _no_closesthit
    miss = miss or _no_miss
    generate = raygen is not None
    raygen = raygen or _no_raygen

    @register_jitable
    def ray(i, origins, dirs, tmins, tmaxs, params):
        """Ray ``i``: from the ray-generation program, or read from the arrays."""
        if generate:
            ox, oy, oz, dx, dy, dz, t0, t1 = raygen(i, params)
            return (np.float32(ox), np.float32(oy), np.float32(oz), np.float32(dx),
                    np.float32(dy), np.float32(dz), np.float32(t0), np.float32(t1))
        return (origins[i, 0], origins[i, 1], origins[i, 2], dirs[i, 0], dirs[i, 1], dirs[i, 2],
                tmins[i], tmaxs[i])

    @register_jitable
    def finish(i, best_t, best_p, best_f, best_i, flags, payload, params, out_t, out_p, out_f,
               out_i):
        out_t[i] = best_t
        out_p[i] = best_p
        out_f[i] = best_f
        out_i[i] = best_i
        if best_p >= 0:
            if (flags & 4) == 0:
                closesthit(i, best_i, best_p, best_t, best_f, payload, params)
        else:
            miss(i, payload, params)

    if not two_level:
        @register_jitable
        def gas_item(i, nodes, words, n_nodes, data, order, radius, origins, dirs, tmins,
                     tmaxs, flags, mask, payload, params, out_t, out_p, out_f, out_i):
            ox, oy, oz, dx, dy, dz, tmin, tmax = ray(i, origins, dirs, tmins, tmaxs, params)
            best_t = np.float32(np.inf)
            best_p = np.int64(-1)
            best_f = False
            best_i = np.int64(0)
            if tmin < tmax and (mask & 0xFF) != 0:
                best_t, best_p, best_f, best_i, _ = walk(
                    i, np.int64(0), nodes, words, np.int64(0), n_nodes, data, np.int64(0), order,
                    radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, payload, params,
                    best_t, best_p, best_f, best_i)
            finish(i, best_t, best_p, best_f, best_i, flags, payload, params, out_t, out_p, out_f,
                   out_i)

        return Kernel(gas_item, name="rt_trace", serial_below=RAYS_SERIAL_BELOW)

    walk_ias = ias_walker(kind, geometry, intersection, anyhit)

    @register_jitable
    def ias_item(i, top, top_words, top_order, inst, inst_words, nodes, words, data, order,
                 radius, origins, dirs, tmins, tmaxs, flags, mask, payload, params, out_t, out_p,
                 out_f, out_i):
        ox, oy, oz, dx, dy, dz, tmin, tmax = ray(i, origins, dirs, tmins, tmaxs, params)
        best_t, best_p, best_f, best_i = walk_ias(
            i, top, top_words, top_order, inst, inst_words, nodes, words, data, order, radius,
            ox, oy, oz, dx, dy, dz, tmin, tmax, flags, mask, payload, params)
        finish(i, best_t, best_p, best_f, best_i, flags, payload, params, out_t, out_p, out_f, out_i)

    return Kernel(ias_item, name="rt_trace_ias", serial_below=RAYS_SERIAL_BELOW)


def trace(scene: Gas | Ias, origins: Any, directions: Any, tmin: Any, tmax: Any,
          programs: Programs | None = None, flags: int = 0, payload: Any = None,
          params: tuple[Any, ...] = (), mask: int = 0xFF, threads_per_block: int = 128,
          device: str | None = None) -> Hits:
    """Trace one ray per row of ``origins``/``directions`` (float32, (R, 3)) with per-ray
    ``tmin``/``tmax`` (float32, (R,)) against ``scene`` (a GAS or an IAS); arrays on the GPU
    trace on the GPU.

    ``payload``: a (R, S) uint64 array the programs read and write (default: (R, 1) zeros).
    ``params``: a tuple (a ``NamedTuple`` for named fields) of arrays on the scene's device,
    scalars and nested tuples, handed to every program.
    ``mask``: the rays' visibility mask (0..255; an instance is visited when its mask shares a
    bit with it). ``device``: by default the arrays' own; ``"cuda"`` with NumPy arrays runs the
    GPU kernel under numba's CUDA simulator (tests only).
    """
    programs = programs or Programs()
    if programs.raygen is not None:
        raise InvalidInput("trace() takes rays as arrays; a ray-generation program goes to launch()")
    xp = _scene_xp(scene)
    o = xp.ascontiguousarray(origins, dtype=np.float32)
    d = xp.ascontiguousarray(directions, dtype=np.float32)
    r = int(o.shape[0]) if o.ndim == 2 else -1
    if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
        raise InvalidInput(f"origins and directions must both be (R, 3); got {tuple(o.shape)} and "
                           f"{tuple(d.shape)}")
    t0 = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(tmin, dtype=np.float32), (r,)))
    t1 = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(tmax, dtype=np.float32), (r,)))
    rays = tuple(_writable(a) for a in (o, d, t0, t1))
    return _run(scene, r, rays, programs, flags, payload, params, mask, threads_per_block, device)


def _writable(a: Any) -> Any:
    """``a``, or a copy of it where NumPy marks it read-only (one ray's broadcast bound, a
    caller's read-only array): numba compiles a kernel once per argument type, and read-only
    is part of an array's type, so one ray's trace would otherwise compile every trace kernel
    a second time. CuPy arrays are always writable."""
    return a.copy() if isinstance(a, np.ndarray) and not a.flags.writeable else a


def launch(scene: Gas | Ias, n: int, programs: Programs, flags: int = 0, payload: Any = None,
           params: tuple[Any, ...] = (), mask: int = 0xFF, threads_per_block: int = 128,
           device: str | None = None) -> Hits:
    """``optixLaunch`` with a ray-generation program: ``programs.raygen(i, params)`` makes ray
    ``i`` (``ox, oy, oz, dx, dy, dz, tmin, tmax``) inside the kernel for ``i < n``, so no ray
    arrays are written or read; otherwise as :func:`trace`."""
    if programs.raygen is None:
        raise InvalidInput("launch() needs a ray-generation program (Programs(raygen=...))")
    if not 0 <= n < 2**62:
        raise InvalidInput(f"the number of rays must be >= 0, got {n}")
    xp = _scene_xp(scene)
    none = xp.zeros((1, 3), dtype=np.float32)
    one = xp.zeros(1, dtype=np.float32)
    return _run(scene, int(n), (none, none, one, one), programs, flags, payload, params, mask,
                threads_per_block, device)


def bind_launch(scene: Gas | Ias, most: int, programs: Programs, flags: int,
                params: tuple[Any, ...], threads_per_block: int = 128,
                device: str | None = None) -> Any:
    """:func:`launch` prepared for repeated calls of at most ``most`` rays over one scene: a
    function ``bound(n, payload, *open)`` that traces ``n <= most`` generated rays with the
    (n, 1) uint64 ``payload`` and the arrays of ``params``'s :class:`~indexzoo.native.targets.
    Slot` fields (in order) filled in, at the host cost of those arrays alone (see
    :meth:`~indexzoo.native.targets.Kernel.bind`). The per-ray closest hits go to scratch
    arrays of ``most`` rays that nobody reads: a caller reads the payload only."""
    if programs.raygen is None:
        raise InvalidInput("bind_launch() needs a ray-generation program (Programs(raygen=...))")
    xp = _scene_xp(scene)
    device = device or ("cpu" if xp is np else "cuda")
    none = xp.zeros((1, 3), dtype=np.float32)
    one = xp.zeros(1, dtype=np.float32)
    geometry = geometry_of(scene)
    kernel = _trace_kernel(scene.kind, geometry, isinstance(scene, Ias), programs.intersection,
                           programs.anyhit, programs.closesthit, programs.miss, programs.raygen)
    tail = (np.float32(scene.radius), none, none, one, one, np.int64(flags), np.int64(0xFF),
            Slot(np.dtype(np.uint64), 2), params, xp.empty(most, dtype=np.float32),
            xp.empty(most, dtype=np.int64), xp.empty(most, dtype=np.bool_),
            xp.empty(most, dtype=np.int64))
    if isinstance(scene, Gas):
        b = scene.bvh
        return kernel.bind(device, b.nodes, b.nodes.view(np.int32), np.int64(b.n_nodes),
                           scene.data, b.order, *tail, threads_per_block=threads_per_block)
    top = scene.top
    return kernel.bind(device, top.nodes, top.nodes.view(np.int32), top.order, scene.inst,
                       scene.inst.view(np.int32), scene.nodes, scene.nodes.view(np.int32),
                       scene.data, scene.order, *tail, threads_per_block=threads_per_block)


def _scene_xp(scene: Any) -> Any:
    if not isinstance(scene, (Gas, Ias)):
        raise InvalidInput(f"trace needs a Gas or an Ias, got {type(scene).__name__}")
    return xp_of(scene.data)


def _run(scene: Gas | Ias, r: int, rays: tuple[Any, ...], programs: Programs, flags: int,
         payload: Any, params: tuple[Any, ...], mask: int, threads_per_block: int,
         device: str | None) -> Hits:
    xp = xp_of(scene.data)
    device = device or ("cpu" if xp is np else "cuda")
    if not 0 <= flags <= _ALL_FLAGS:
        raise InvalidInput(f"unknown ray flags {flags}")
    if not 0 <= mask <= 0xFF:
        raise InvalidInput(f"the ray mask must be 0..255, got {mask}")
    if programs.intersection is not None and scene.kind != AABBS:
        raise InvalidInput("intersection programs are for custom (AABB) primitives only")
    if payload is None:
        payload = xp.zeros((r, 1), dtype=np.uint64)
    elif payload.ndim != 2 or payload.shape[0] != r or payload.dtype != np.uint64:
        raise InvalidInput("payload must be a (R, S) uint64 array")
    out_t = xp.empty(r, dtype=np.float32)
    out_p = xp.empty(r, dtype=np.int64)
    out_f = xp.empty(r, dtype=np.bool_)
    out_i = xp.empty(r, dtype=np.int64)
    geometry = geometry_of(scene)
    kernel = _trace_kernel(scene.kind, geometry, isinstance(scene, Ias), programs.intersection,
                           programs.anyhit, programs.closesthit, programs.miss, programs.raygen)
    tail = (np.float32(scene.radius), *rays, np.int64(flags), np.int64(mask), payload,
            params if isinstance(params, tuple) else tuple(params), out_t, out_p, out_f,
            out_i)
    if isinstance(scene, Gas):
        b = scene.bvh
        kernel(device, r, b.nodes, b.nodes.view(np.int32), np.int64(b.n_nodes), scene.data, b.order,
               *tail, threads_per_block=threads_per_block)
    else:
        top = scene.top
        kernel(device, r, top.nodes, top.nodes.view(np.int32), top.order, scene.inst,
               scene.inst.view(np.int32), scene.nodes, scene.nodes.view(np.int32), scene.data,
               scene.order, *tail, threads_per_block=threads_per_block)
    return Hits(out_t, out_p, out_f, payload, out_i)
