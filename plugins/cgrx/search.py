"""cgRX's lookup kernel (the successor search of the thesis's §3.2, as the public artifact finds
the bucket, then the in-bucket search): one thread per lookup chains the successor search's
closest-hit rays (at most five, each one's origin taken from the last one's hit) and then finds
the run of keys in ``[lo, hi]`` from the bucket's start, all in one launch.

In OptiX terms this is a ray-generation program that calls ``optixTrace`` up to five times
(:func:`indexzoo.native.rt.trace.closest_hit_query`); the artifact does the same in its
raygen program. Nothing between the rays goes through memory or the host: an earlier version
cast each phase as its own launch over the lookups still searching, with the compaction,
coordinates and flip tests between them as array operations (seven launches and six host
synchronisations per batch; measured: ``docs/plugins/cgrx.md``).

The rays, for a lower bound ``lo`` strictly between the first representative and the largest
key (bucket 0 up to the first representative, none beyond the largest key):

1. +x along lo's row from just before lo's point: the next representative in the row;
2. on a miss, +y along the row-marker column of lo's plane from just past lo's row: an
   end-of-plane triangle or a flipped one (the only representative of its row) answers
   directly, any other marker names the row that ray 5 searches;
3. on a miss, +z along the plane-marker column: the next plane that holds representatives;
4. +y from y = 0 along that plane's row-marker column: its first marked row (flipped: the
   answer; else ray 5 searches the row);
5. +x from x = 0 along the row found: its first representative.

A hit triangle's cgRX id ``h`` stands for bucket ``h`` (a representative), ``h - P + 1``
(end-of-row) or ``h - 2P + 1`` (end-of-plane); the row and plane it sits on and whether it is
flipped are read from the representative keys, as :mod:`.scene` describes.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.rt import RAYS_SERIAL_BELOW, TRIANGLES, Engine, engine_named
from indexzoo.native.runs import run_from
from indexzoo.native.targets import Kernel

from .coords import PATH_WIDTH, CgCoder
from .scene import moved_flipped, rep_of

__all__ = ["PATH_WIDTH", "SearchParts", "lookup_kernel", "search_parts"]


class SearchParts(NamedTuple):
    """The successor search's per-hit helpers for one key width (jitable functions)."""

    rep_key: Any        # rep_key(keys, b, blog): the representative of bucket b
    bucket_of_id: Any   # bucket_of_id(h, p): the bucket a hit id stands for
    flipped: Any        # flipped(keys, h, p, blog): whether triangle h is flipped
    row_plane: Any      # row_plane(keys, h, p, blog): (y field, z field) where h sits


@functools.cache
def search_parts(coder: CgCoder) -> SearchParts:
    """The helpers the successor search reads a hit with, for one key width (``coder``)."""
    xb = np.uint64(coder.x_bits)
    zb_shift = np.uint64(coder.x_bits + coder.y_bits)
    ym = np.uint64(coder.y_max)

    @register_jitable
    def rep_key(keys, b, blog):
        """The representative (largest key) of bucket ``b``."""
        return rep_of(keys, b, np.int64(1) << blog)

    @register_jitable
    def bucket_of_id(h, p):
        """The bucket a hit id stands for."""
        if h >= 2 * p:
            return h - 2 * p + np.int64(1)
        if h >= p:
            return h - p + np.int64(1)
        return h

    @register_jitable
    def flipped(keys, h, p, blog):
        """Whether triangle ``h`` is flipped (a representative, moved, the only one of its
        row: :func:`.scene.moved_flipped`, asked of the keys instead of the winding)."""
        if h >= p:
            return False
        _, f = moved_flipped(keys, h, p, np.int64(1) << blog, xb)
        return f

    @register_jitable
    def row_plane(keys, h, p, blog):
        """The row (y field) and plane (z field) where triangle ``h`` sits: its
        representative's, the plane's last row for an end-of-plane triangle."""
        b = h - 2 * p if h >= 2 * p else (h - p if h >= p else h)
        rep = rep_key(keys, b, blog)
        y = ym if h >= 2 * p else (rep >> xb) & ym
        return y, rep >> zb_shift

    return SearchParts(rep_key, bucket_of_id, flipped, row_plane)


@functools.cache
def lookup_kernel(coder: CgCoder, geometry: Any, record: bool = False,
                  engine: Engine | None = None) -> Kernel:
    """``kernel(device, Q, lo, hi, keys, n_buckets, bucket_log, nodes, words, n_nodes, data,
    order, radius, ids, path, first, count)``: for each lookup ``i`` the run ``first[i]``,
    ``count[i]`` of sorted keys in ``[lo[i], hi[i]]`` (count 0: none), for one key width
    (``coder``) and the scene's geometry function (None: stored triangles), on ``engine`` (one
    with in-kernel queries; default the software engine).

    ``record``: the kernel also writes row ``i`` of ``path`` ((Q, :data:`PATH_WIDTH`) int8,
    filled with -1 beforehand) with the successor search's rays, for tests and diagnostics;
    otherwise ``path`` is never touched (a one-element stand-in) and the recording is compiled
    out."""
    closest = (engine or engine_named("software")).closest_hit_query(TRIANGLES, geometry)
    (xb, zb_shift, xm, ym, half, ys, zs, ex, ey, ez, row_marker_x,
     plane_marker_y) = coder.kernel_constants()
    zero, one = np.float32(0), np.float32(1)
    inf = np.float32(np.inf)
    _, bucket_of_id, flipped, row_plane = search_parts(coder)

    if record:
        @register_jitable
        def note(trail, h, axis, keys, p, blog):
            i, path, k = trail
            f = 1 if h >= 0 and flipped(keys, h, p, blog) else 0
            path[i, k] = np.int8(axis * 4 + (2 if h >= 0 else 0) + f)
            return i, path, k + 1
    else:
        @register_jitable
        def note(trail, h, axis, keys, p, blog):
            return trail

    @register_jitable
    def cast(scene, ids, ox, oy, oz, axis):
        """One closest-hit ray along +x, +y or +z (0, 1, 2): the hit triangle's id, -1 on a
        miss."""
        nodes, words, n_nodes, data, order, radius = scene
        dx = one if axis == 0 else zero
        dy = one if axis == 1 else zero
        dz = one if axis == 2 else zero
        _, prim, _ = closest(nodes, words, n_nodes, data, order, radius, ox, oy, oz, dx, dy,
                             dz, zero, inf)
        if prim < 0:
            return np.int64(-1)
        return np.int64(ids[prim])

    @register_jitable
    def in_row(scene, ids, keys, h, p, blog, cz, trail):
        """The last ray: +x from x = 0 along the row of marker ``h``, in the plane at ``cz``."""
        y, _ = row_plane(keys, h, p, blog)
        h5 = cast(scene, ids, zero, (np.float32(y) + half) * ys, cz, 0)
        note(trail, h5, 0, keys, p, blog)
        return bucket_of_id(h5, p) if h5 >= 0 else np.int64(-1)

    @register_jitable
    def bucket_of(lo, keys, p, blog, scene, ids, trail):
        """The bucket where the search for the first key >= ``lo`` starts (-1: none)."""
        n = np.int64(keys.shape[0])
        if lo <= np.uint64(keys[min(np.int64(1) << blog, n) - np.int64(1)]):
            return np.int64(0)
        if lo > np.uint64(keys[n - np.int64(1)]):
            return np.int64(-1)
        cx = np.float32(lo & xm) + half
        cy = (np.float32((lo >> xb) & ym) + half) * ys
        cz = (np.float32(lo >> zb_shift) + half) * zs
        h = cast(scene, ids, cx - ex, cy, cz, 0)  # 1: along lo's row
        trail = note(trail, h, 0, keys, p, blog)
        if h >= 0:
            return bucket_of_id(h, p)
        h = cast(scene, ids, row_marker_x, cy + ey, cz, 1)  # 2: the plane's row markers
        trail = note(trail, h, 1, keys, p, blog)
        if h >= 0:
            if h >= 2 * p or flipped(keys, h, p, blog):
                return bucket_of_id(h, p)
            return in_row(scene, ids, keys, h, p, blog, cz, trail)
        h = cast(scene, ids, row_marker_x, plane_marker_y, cz + ez, 2)  # 3: the next plane
        trail = note(trail, h, 2, keys, p, blog)
        if h < 0:
            return np.int64(-1)
        _, z = row_plane(keys, h, p, blog)
        zc = (np.float32(z) + half) * zs
        h = cast(scene, ids, row_marker_x, zero, zc, 1)  # 4: its first marked row
        trail = note(trail, h, 1, keys, p, blog)
        if h < 0:
            return np.int64(-1)
        if flipped(keys, h, p, blog):
            return bucket_of_id(h, p)
        return in_row(scene, ids, keys, h, p, blog, zc, trail)

    @register_jitable
    def lookup_item(i, lo, hi, keys, n_buckets, bucket_log, nodes, words, n_nodes, data, order,
                    radius, ids, path, first, count):
        first[i] = 0
        count[i] = 0
        lo_i = np.uint64(lo[i])
        hi_i = np.uint64(hi[i])
        if keys.shape[0] == 0 or lo_i > hi_i:
            return
        scene = (nodes, words, n_nodes, data, order, radius)
        b = bucket_of(lo_i, keys, n_buckets, bucket_log, scene, ids, (i, path, np.int64(0)))
        if b >= 0:
            first[i], count[i] = run_from(keys, b << bucket_log, lo_i, hi_i)

    return Kernel(lookup_item, name="cgrx_lookup", serial_below=RAYS_SERIAL_BELOW)
