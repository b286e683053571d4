"""One ray through a scene: the software engine's traversal, as numba device functions that
the trace kernels of :mod:`.trace` and the in-kernel queries (:func:`closest_hit_query`,
:func:`scene_query`) compose with a launch's programs.

The BVH's nodes are stored depth-first with escape indices, so a walk is one increasing index
(on a hit, the next record; on a miss, the escape index): no per-ray stack, and each primitive
reaches any-hit at most once. Ray flags and any-hit verdicts are defined here (see :mod:`.trace`
for their meaning).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from .bvh import slab, slab_walk
from .geometry import hit_box, hit_sphere_c, hit_triangle_v
from .scene import STORED

__all__ = ["ACCEPT", "CULL_BACK_FACING", "CULL_FRONT_FACING", "DISABLE_ANYHIT",
           "DISABLE_CLOSESTHIT", "IGNORE", "TERMINATE", "TERMINATE_ON_FIRST_HIT", "Programs",
           "closest_hit_query", "ias_walker", "scene_query", "walker"]

TERMINATE_ON_FIRST_HIT = 1
DISABLE_ANYHIT = 2
DISABLE_CLOSESTHIT = 4
CULL_BACK_FACING = 8
CULL_FRONT_FACING = 16

ACCEPT, IGNORE, TERMINATE = 0, 1, 2


@dataclass(frozen=True)
class Programs:
    """The programs of a launch; ``None`` = OptiX's default (accept, record, nothing)."""

    intersection: Any = None
    anyhit: Any = None
    closesthit: Any = None
    miss: Any = None
    raygen: Any = None  # for launch(): f(i, params) -> (ox, oy, oz, dx, dy, dz, tmin, tmax)


@register_jitable
def _no_anyhit(ray, inst, prim, t, front, payload, params):
    return 0


@register_jitable
def _no_intersection(data, i, inst, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params):
    return np.float32(np.inf), False


@functools.cache
def walker(kind: int, geometry: Any, intersection: Any, anyhit: Any) -> Any:
    """``walk(...)``: one ray through one GAS's records (specialised per kind and programs)."""
    has_anyhit = anyhit is not None
    custom = intersection is not None
    anyhit = anyhit or _no_anyhit
    intersection = intersection or _no_intersection

    @register_jitable
    def walk(i, inst, nodes, words, nbase, n_nodes, data, dbase, order, radius,
             ox, oy, oz, dx, dy, dz, tmin, tmax, flags, payload, params,
             best_t, best_p, best_f, best_i):
        inf = np.float32(np.inf)
        ix = np.float32(1.0) / dx if dx != 0 else inf
        iy = np.float32(1.0) / dy if dy != 0 else inf
        iz = np.float32(1.0) / dz if dz != 0 else inf
        done = False
        j = np.int64(0)
        while j < n_nodes:
            # cull with the closest hit so far, widened a little so that ties (same t, smaller
            # primitive index) are still visited
            cull = tmax if best_p < 0 else min(tmax, best_t + abs(best_t) * np.float32(1e-6)
                                                + np.float32(1e-30))
            # inner loop: skip and descend until a leaf the ray overlaps (the warp's threads
            # reconverge here before any of them tests primitives)
            leaf = np.int64(-1)
            while j < n_nodes:
                k = nbase + j
                hit = slab_walk(nodes, k, ox, oy, oz, ix, iy, iz, tmin, cull)
                c = words[k, 6]
                if c >= 0:  # inner node: first child on a hit, else the escape index
                    j = j + 1 if hit else np.int64(c)
                    continue
                j += 1
                if hit:
                    leaf = k
                    break
            if leaf < 0:
                break
            c = words[leaf, 6]
            start = dbase + np.int64(words[leaf, 7])
            for q in range(start, start - np.int64(c)):
                g = geometry(data, q)
                if kind == 0:
                    t, front = hit_triangle_v(g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8],
                                              ox, oy, oz, dx, dy, dz, tmin, tmax)
                elif kind == 1:
                    t, front = hit_sphere_c(g[0], g[1], g[2], radius, ox, oy, oz, dx, dy, dz,
                                            tmin, tmax)
                elif custom:
                    t, front = intersection(data, q, inst, np.int64(order[q]), ox, oy, oz, dx, dy,
                                            dz, tmin, tmax, params)
                else:
                    t, front = hit_box(g[0], g[1], g[2], g[3], g[4], g[5], ox, oy, oz, dx, dy, dz,
                                       tmin, tmax)
                if not (t < tmax):  # miss (inf) or outside the interval
                    continue
                if kind == 0 and ((front and (flags & 16) != 0) or
                                  (not front and (flags & 8) != 0)):
                    continue
                if t > best_t:
                    continue
                p = np.int64(order[q])
                if t == best_t and not (p < best_p or (p == best_p and inst < best_i)):
                    continue
                verdict = 0
                if has_anyhit and (flags & 2) == 0:
                    verdict = anyhit(i, inst, p, t, front, payload, params)
                if verdict == 1:
                    continue
                best_t, best_p, best_f, best_i = t, p, front, inst
                if verdict == 2 or (flags & 1) != 0:
                    done = True
                    break
            if done:
                break
        return best_t, best_p, best_f, best_i, done

    return walk


@functools.cache
def ias_walker(kind: int, geometry: Any, intersection: Any, anyhit: Any) -> Any:
    """``walk_ias(...) -> (t, prim, front, inst)``: one ray through an IAS (the top-level BVH
    over instances, then each instance's GAS in its object space)."""
    walk = walker(kind, geometry, intersection, anyhit)

    @register_jitable
    def walk_ias(i, top, top_words, top_order, inst, inst_words, nodes, words, data, order,
                 radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, mask, payload, params):
        inf = np.float32(np.inf)
        best_t = inf
        best_p = np.int64(-1)
        best_f = False
        best_i = np.int64(0)
        ix = np.float32(1.0) / dx if dx != 0 else inf
        iy = np.float32(1.0) / dy if dy != 0 else inf
        iz = np.float32(1.0) / dz if dz != 0 else inf
        n_top = top.shape[0]
        j = np.int64(0) if tmin < tmax else np.int64(n_top)
        while j < n_top:
            cull = tmax if best_p < 0 else min(tmax, best_t + abs(best_t) * np.float32(1e-6)
                                                + np.float32(1e-30))
            hit, _ = slab(top, j, ox, oy, oz, ix, iy, iz, tmin, cull)
            c = top_words[j, 6]
            if c >= 0:
                j = j + 1 if hit else np.int64(c)
                continue
            j += 1
            if not hit:
                continue
            done = False
            first = np.int64(top_words[j - 1, 7])
            for pos in range(first, first - np.int64(c)):
                s = np.int64(top_order[pos])
                w = inst_words[s, 15]
                if (w & mask & 0xFF) == 0:
                    continue
                m = inst
                # the ray in the instance's object space (t is the same along both)
                px = m[s, 0] * ox + m[s, 1] * oy + m[s, 2] * oz + m[s, 3]
                py = m[s, 4] * ox + m[s, 5] * oy + m[s, 6] * oz + m[s, 7]
                pz = m[s, 8] * ox + m[s, 9] * oy + m[s, 10] * oz + m[s, 11]
                qx = m[s, 0] * dx + m[s, 1] * dy + m[s, 2] * dz
                qy = m[s, 4] * dx + m[s, 5] * dy + m[s, 6] * dz
                qz = m[s, 8] * dx + m[s, 9] * dy + m[s, 10] * dz
                best_t, best_p, best_f, best_i, done = walk(
                    i, np.int64(w >> 8), nodes, words, np.int64(inst_words[s, 12]),
                    np.int64(inst_words[s, 14]), data, np.int64(inst_words[s, 13]), order, radius,
                    px, py, pz, qx, qy, qz, tmin, tmax, flags, payload, params,
                    best_t, best_p, best_f, best_i)
                if done:
                    break
            if done:
                break
        return best_t, best_p, best_f, best_i

    return walk_ias


@functools.cache
def closest_hit_query(kind: int, geometry: Any) -> Any:
    """``closest(nodes, words, n_nodes, data, order, radius, ox, oy, oz, dx, dy, dz, tmin,
    tmax) -> (t, prim, front)``: one closest-hit ray through a GAS, called from inside a kernel
    (``prim`` -1 and ``t`` inf on a miss; ties go to the smaller primitive index).

    This is ``optixTrace`` called from a ray-generation program with no any-hit or
    intersection program: a kernel that chains rays, each one's origin depending on the last
    one's hit (cgRX's successor search), casts them all in one thread and one launch instead of
    one launch per ray with the rays of every phase written to memory. The GAS's arrays come
    from :meth:`Gas.query_args`. Specialised per primitive kind and geometry function.
    """
    walk = walker(kind, geometry if geometry is not None else STORED[kind], None, None)

    @register_jitable
    def closest(nodes, words, n_nodes, data, order, radius, ox, oy, oz, dx, dy, dz, tmin, tmax):
        best_t = np.float32(np.inf)
        best_p = np.int64(-1)
        best_f = False
        if tmin < tmax:
            best_t, best_p, best_f, _, _ = walk(
                np.int64(0), np.int64(0), nodes, words, np.int64(0), n_nodes, data, np.int64(0),
                order, radius, ox, oy, oz, dx, dy, dz, tmin, tmax, np.int64(0), order, order,
                best_t, best_p, best_f, np.int64(0))
        return best_t, best_p, best_f

    return closest


@functools.cache
def scene_query(kind: int, geometry: Any, two_level: bool, intersection: Any = None,
                anyhit: Any = None) -> Any:
    """``query(scene, ray, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, params) -> (t, prim,
    front, inst)``: one ray through a GAS (``two_level`` False) or an IAS, traced from inside a
    kernel with an intersection program (custom primitives) and an any-hit program; the
    closest accepted hit (``prim`` -1 and ``t`` inf on a miss; ties go to the smaller primitive
    index, then instance). ``scene`` is :meth:`Gas.query_args` or :meth:`Ias.query_args`;
    ``flags`` as for :func:`trace` (:data:`TERMINATE_ON_FIRST_HIT` stops at the first accepted
    hit); ``params`` is handed to the programs, and ``ray`` to the any-hit program as its ray
    index. The any-hit program gets no payload array (a stand-in it must not touch): what it
    decides goes into its verdict.

    This is ``optixTrace`` from a ray-generation program with the index's own programs:
    optimized RX's range lookups cast their rays this way, one thread per lookup, without a
    launch per ray phase. Specialised per primitive kind, geometry function, scene level and
    programs.
    """
    geometry = geometry if geometry is not None else STORED[kind]
    if two_level:
        walk_ias = ias_walker(kind, geometry, intersection, anyhit)

        @register_jitable
        def query_ias(scene, ray, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, params):
            top, top_words, top_order, inst, inst_words, nodes, words, data, order, radius = scene
            return walk_ias(ray, top, top_words, top_order, inst, inst_words, nodes, words, data,
                            order, radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags,
                            np.int64(0xFF), order, params)

        return query_ias
    walk = walker(kind, geometry, intersection, anyhit)

    @register_jitable
    def query_gas(scene, ray, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, params):
        nodes, words, n_nodes, data, order, radius = scene
        best_t = np.float32(np.inf)
        best_p = np.int64(-1)
        best_f = False
        best_i = np.int64(0)
        if tmin < tmax:
            best_t, best_p, best_f, best_i, _ = walk(
                ray, np.int64(0), nodes, words, np.int64(0), n_nodes, data, np.int64(0), order,
                radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, order, params, best_t, best_p,
                best_f, best_i)
        return best_t, best_p, best_f, best_i

    return query_gas


