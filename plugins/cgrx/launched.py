"""cgRX's successor search as query launches, for engines whose rays cannot be cast from
inside a numba kernel (OptiX: ``engine.in_kernel_queries`` is False).

The rays are :mod:`.search`'s, one link of the chain per launch: a step kernel
(:func:`step_kernel`, one thread per lookup, the same source on both devices) reads the last
ray's hit and either answers the lookup's bucket or writes its next ray (origin and axis);
the lookups that need one cast it in one launch of the query layer's ``CLOSEST`` (the
``match`` program names the hit triangle's cgRX id); at most five launches. A lookup's states:

====  ===========================================================================
1     ray 1 cast (+x along lo's row from just before lo's point)
2     ray 2 cast (+y along the row-marker column of lo's plane)
3     ray 3 cast (+z along the plane-marker column)
4     ray 4 cast (+y from y = 0 along the plane found)
5     ray 5 cast (+x from x = 0 along the row found): its hit is the answer
0     answered (``bucket``: the bucket to scan from, -1: none)
====  ===========================================================================

Then the scan, as the kernel's: the run of keys in ``[lo, hi]`` from the bucket's start
(:data:`indexzoo.native.runs.RUN_BOUNDS`). Closest-hit ties: the software engine breaks them on
the smaller primitive index, which the scene's (z, y, x) order makes the nearer triangle;
OptiX leaves them unspecified, so where an engine's ties are unordered a bucket that starts
past the first key >= lo (the previous bucket's representative is >= lo) is replaced by a
binary search for that key: every answer stays exact.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.native.rt import Rays, query
from indexzoo.native.runs import RUN_BOUNDS
from indexzoo.native.targets import Kernel

from .coords import CgCoder
from .search import search_parts

__all__ = ["MAX_LINKS", "runs", "step_kernel"]

#: The most rays a lookup casts.
MAX_LINKS = 5


@functools.cache
def step_kernel(coder: CgCoder) -> Kernel:
    """``kernel(device, Q, lo, keys, p, blog, state, hit, cz, bucket, origin, axis)``: for
    each lookup ``i`` in a state that cast a ray (1-5, its hit id in ``hit[i]``, -1 for a
    miss), or in state -1 (not started), the next state: the next ray's ``origin[i]`` (3
    float32) and ``axis[i]`` (0, 1, 2: +x, +y, +z), or state 0 with ``bucket[i]``. ``cz``
    keeps the z of the plane the last rays run in."""
    parts = search_parts(coder)
    bucket_of_id, flipped, row_plane = parts.bucket_of_id, parts.flipped, parts.row_plane
    (xb, zb_shift, xm, ym, half, ys, zs, ex, ey, ez, row_marker_x,
     plane_marker_y) = coder.kernel_constants()
    zero = np.float32(0)

    @register_jitable
    def cast(i, state, origin, axis, s, ox, oy, oz, a):
        state[i] = np.int8(s)
        origin[i, 0] = ox
        origin[i, 1] = oy
        origin[i, 2] = oz
        axis[i] = np.int8(a)

    @register_jitable
    def answer(i, state, bucket, b):
        state[i] = np.int8(0)
        bucket[i] = b

    @register_jitable
    def step_item(i, lo, keys, p, blog, state, hit, cz, bucket, origin, axis):
        s = state[i]
        h = np.int64(hit[i])
        if s == 0:
            return
        if s < 0:  # not started: the lookups answered without a ray, else ray 1
            n = np.int64(keys.shape[0])
            lo_i = np.uint64(lo[i])
            if lo_i <= np.uint64(keys[min(np.int64(1) << blog, n) - np.int64(1)]):
                answer(i, state, bucket, np.int64(0))
            elif lo_i > np.uint64(keys[n - np.int64(1)]):
                answer(i, state, bucket, np.int64(-1))
            else:
                cx = np.float32(lo_i & xm) + half
                cy = (np.float32((lo_i >> xb) & ym) + half) * ys
                cz[i] = (np.float32(lo_i >> zb_shift) + half) * zs
                cast(i, state, origin, axis, 1, cx - ex, cy, cz[i], 0)
        elif s == 1:
            if h >= 0:
                answer(i, state, bucket, bucket_of_id(h, p))
            else:
                lo_i = np.uint64(lo[i])
                cy = (np.float32((lo_i >> xb) & ym) + half) * ys
                cast(i, state, origin, axis, 2, row_marker_x, cy + ey, cz[i], 1)
        elif s == 2:
            if h >= 0:
                if h >= 2 * p or flipped(keys, h, p, blog):
                    answer(i, state, bucket, bucket_of_id(h, p))
                else:
                    y, _ = row_plane(keys, h, p, blog)
                    cast(i, state, origin, axis, 5, zero, (np.float32(y) + half) * ys, cz[i], 0)
            else:
                cast(i, state, origin, axis, 3, row_marker_x, plane_marker_y, cz[i] + ez, 2)
        elif s == 3:
            if h < 0:
                answer(i, state, bucket, np.int64(-1))
            else:
                _, z = row_plane(keys, h, p, blog)
                cz[i] = (np.float32(z) + half) * zs
                cast(i, state, origin, axis, 4, row_marker_x, zero, cz[i], 1)
        elif s == 4:
            if h < 0:
                answer(i, state, bucket, np.int64(-1))
            elif flipped(keys, h, p, blog):
                answer(i, state, bucket, bucket_of_id(h, p))
            else:
                y, _ = row_plane(keys, h, p, blog)
                cast(i, state, origin, axis, 5, zero, (np.float32(y) + half) * ys, cz[i], 0)
        else:  # ray 5: the row's first representative
            answer(i, state, bucket, bucket_of_id(h, p) if h >= 0 else np.int64(-1))

    return Kernel(step_item, name="cgrx_step")


def runs(device: str, coder: CgCoder, scene: Any, programs: Any, record: Any, lo: Any,
         hi: Any, keys: Any, n_buckets: int, bucket_log: int, *, max_rays: int,
         threads_per_block: int) -> tuple[Any, Any]:
    """``(first, count)`` of the keys in every ``[lo, hi]`` (``lo <= hi``; sorted ``keys``, at
    least one) by the successor search's rays cast as query launches over ``scene`` (cgRX's
    ``programs`` and launch ``record``), then the scan."""
    xp = xp_of(lo)
    q = int(lo.shape[0])
    state = xp.full(q, -1, dtype=np.int8)
    hit = xp.full(q, -1, dtype=np.int64)
    cz = xp.zeros(q, dtype=np.float32)
    bucket = xp.full(q, -1, dtype=np.int64)
    origin = xp.zeros((q, 3), dtype=np.float32)
    axis = xp.zeros(q, dtype=np.int8)
    step = step_kernel(coder)
    p, blog = np.int64(n_buckets), np.int64(bucket_log)
    big = np.float32(np.finfo(np.float32).max)  # every hit lies closer
    for _ in range(MAX_LINKS + 1):
        step(device, q, lo, keys, p, blog, state, hit, cz, bucket, origin, axis,
             threads_per_block=threads_per_block)
        active = xp.nonzero(state > 0)[0]
        r = int(active.shape[0])
        if r == 0:
            break
        d = xp.zeros((r, 3), dtype=np.float32)
        d[xp.arange(r), axis[active].astype(np.int64)] = 1
        rays = Rays(origin[active], d, xp.zeros(r, np.float32), xp.full(r, big, np.float32))
        batch = query.FunctionBatch.of(
            None, lambda s, e, owner, rays=rays: Rays(rays.origins[s:e], rays.directions[s:e],
                                                      rays.tmin[s:e], rays.tmax[s:e]),
            lambda s, e, owner: record, n_queries=r, xp=xp)
        got = query.closest(scene, batch, programs, max_rays=max_rays,
                            threads_per_block=threads_per_block)
        hit[active] = xp.where(got == query.MISS, np.int64(-1), got.astype(np.int64))
    start = xp.where(bucket >= 0, bucket << blog, np.int64(-1))
    if not scene.engine.ordered_ties:  # a bucket past the first key >= lo: search for it
        late = (bucket > 0) & (keys[xp.maximum((bucket << blog) - 1, 0)] >= lo)
        start = xp.where(late, xp.searchsorted(keys, lo, side="left").astype(np.int64), start)
    first = xp.zeros(q, dtype=np.int64)
    count = xp.zeros(q, dtype=np.int64)
    RUN_BOUNDS(device, q, keys, xp.ascontiguousarray(start), lo, hi, first, count,
               threads_per_block=threads_per_block)
    return first, count
