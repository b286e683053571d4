"""``rx-opt``'s lookup kernels: one thread per lookup casts its closest-hit ray(s) and then
finds the run of sorted keys it asks for (thesis Alg. 3 + 4), all in one launch.

In OptiX terms each is a ray-generation program that calls ``optixTrace`` (one ray for a point
lookup, at most two for a range, the second only when the first misses) through the IAS of
sub-BVHs (Alg. 5) or the single GAS, with rx-opt's programs (:mod:`.programs`), and then scans.
The engine's in-kernel :meth:`~indexzoo.native.rt.Engine.scene_query` is that ``optixTrace``
(the software engine's; an engine without in-kernel queries, OptiX, casts the same rays as
query launches instead: :mod:`.launched`).

An earlier version cast each ray phase as its own launch of the RT query layer, with the rows,
the ray coordinates, the compaction of the second rays and the run search as array operations
between them: three launches and host synchronisations per range call, whose host time
dominated (measured: ``docs/plugins/rx-opt.md``). The rays and answers are the same:

* **Point lookup** ``q`` (a key the key mode can hold; any other misses): the perpendicular ray
  through ``q``'s point. A hit is exact (triangles and boxes meet only the ray of their own
  key, a sphere hit is confirmed against ``q`` by the any-hit program), so with compressed
  duplicates the first accepted hit is the key's one primitive (the ray stops there) and
  ``first_of`` gives its run without reading a key; without, the closest hit among the
  coincident primitives is the smallest primitive index, the first occurrence, and the scan
  delimits the run.
* **Range** ``[lo, hi]``: the first occupied row at or after lo's (a binary search of the
  sorted distinct high parts ``highs``) if it is not past hi's; ray 1 along it from lo's x part
  (0 if lo's own row is empty) to hi's (the row's end if hi is in a later row); only if ray 1
  misses and ran on lo's own row, ray 2 along the next occupied row from x = 0, if that row is
  not past hi's. The rays start and end in gaps exactly as :func:`indexzoo.native.rt.keyrays.
  row_rays` makes them (``range_ray``: ``zero`` from x = 0 with ``tmin`` at the start gap, or
  ``offset`` from the start gap).
* Then the scan (Alg. 4): :func:`indexzoo.native.runs.run_from` delimits the run of keys in
  ``[lo, hi]`` from the hit's sorted position (galloping).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.rt import (
    ACCEPT,
    IGNORE,
    KIND,
    PART_LIMIT,
    RAYS_SERIAL_BELOW,
    TERMINATE_ON_FIRST_HIT,
    Engine,
    KeyCoder,
    gaps_of_x,
    point_function,
)
from indexzoo.native.runs import run_from
from indexzoo.native.search import lower_bound
from indexzoo.native.targets import Kernel

from .programs import PROGRAMS, optrx_match

__all__ = ["lookup_kernel"]


@register_jitable
def _confirming_anyhit(ray, inst, prim, t, front, payload, params):
    """Sphere scenes: a hit counts only if its key lies within the lookup's integer bounds."""
    return IGNORE if optrx_match(ray, inst, prim, t, front, params) < 0 else ACCEPT


def _legal_function(coder: KeyCoder) -> Any:
    """``legal(k)``: whether the key mode holds key ``k`` (:meth:`KeyCoder.legal` for one key)."""
    xb = np.uint64(coder.x_bits)
    yb = np.uint64(coder.y_bits)
    y_mask = np.uint64((1 << coder.y_bits) - 1)
    limit = np.uint64(PART_LIMIT)
    flat = coder.mode != "3d"
    check_y = coder.y_bits > 23
    check_z = coder.z_bits > 23

    @register_jitable
    def legal(k):
        h = np.uint64(k) >> xb
        if flat:
            return h == np.uint64(0)
        ok = True
        if check_y and (h & y_mask) >= limit:
            ok = False
        if check_z and (h >> yb) >= limit:
            ok = False
        return ok

    return legal


@functools.cache
def lookup_kernel(engine: Engine, coder: KeyCoder, primitive: str, geometry: Any,
                  two_level: bool, compressed: bool, point: bool, range_ray: str = "zero",
                  record: bool = False) -> Kernel:
    """On ``engine`` (one with in-kernel queries),
    ``kernel(device, Q, lo, hi, keys, first_of, highs, scene, rec, rays, first, count)``:
    for each lookup ``i`` the run ``first[i]``, ``count[i]`` of sorted ``keys`` in ``[lo[i],
    hi[i]]`` (count 0: none); ``point``: point lookups (``lo`` is ``hi``), else ranges.

    ``first_of``: with ``compressed``, the first sorted position of every distinct key, then n
    (a stand-in otherwise); ``highs``: the sorted distinct high parts (ranges); ``scene``: the
    GAS's or (``two_level``) the IAS's :meth:`query_args`; ``rec``: rx-opt's launch record
    (:class:`.programs.OptRxRecord`) whose ``ray_lo``/``ray_hi`` are ``lo``/``hi``, read at the
    lookup's index by the sphere confirmation. Specialised per key mode, primitive, geometry
    function, scene level, compression, lookup kind and range ray.

    ``record``: the kernel also writes the number of rays lookup ``i`` cast to ``rays[i]``
    (int8), for tests and diagnostics; otherwise ``rays`` is never touched (a one-element
    stand-in) and the count is compiled out."""
    programs = PROGRAMS[primitive]
    anyhit = _confirming_anyhit if primitive == "sphere" else None
    query = engine.scene_query(KIND[primitive], geometry, two_level, programs.intersection,
                               anyhit)
    legal = _legal_function(coder)
    point_of = point_function(coder)
    xb = np.uint64(coder.x_bits)
    yb = np.uint64(coder.y_bits)
    xm = np.uint64(coder.x_max)
    y_mask = np.uint64((1 << coder.y_bits) - 1)
    x_kind = np.int64(coder.x_kind)
    zero_ray = range_ray == "zero"
    point_flags = np.int64(TERMINATE_ON_FIRST_HIT if compressed else 0)
    f0, f1, half = np.float32(0), np.float32(1), np.float32(0.5)
    u0 = np.uint64(0)

    @register_jitable
    def position(rec, prim, inst):
        """The sorted position where a hit's run starts (-1: no hit)."""
        if prim < 0:
            return np.int64(-1)
        return rec.part_offsets[inst] + prim

    if record:
        @register_jitable
        def note(rays, i):
            rays[i] += np.int8(1)
    else:
        @register_jitable
        def note(rays, i):
            return

    @register_jitable
    def along_row(scene, rec, rays, i, high, x0, x1):
        """The closest hit's primitive position of the ray along row ``high`` over the x parts
        ``x0 .. x1`` (-1: none)."""
        start, _ = gaps_of_x(x0, x_kind)
        _, end = gaps_of_x(x1, x_kind)
        y = np.float32(high & y_mask)
        z = np.float32(high >> yb)
        note(rays, i)
        if zero_ray:
            _, prim, _, inst = query(scene, i, f0, y, z, f1, f0, f0, start, end, np.int64(0), rec)
        else:
            # end - start is exact: both are multiples of 0.5 below 2^23 (offset rays are ruled
            # out in extended mode)
            _, prim, _, inst = query(scene, i, start, y, z, f1, f0, f0, f0, end - start,
                                     np.int64(0), rec)
        return position(rec, prim, inst)

    @register_jitable
    def range_start(scene, rec, rays, highs, i, lo, hi):
        """The primitive position of the first key >= lo if it is <= hi (-1: none)."""
        n_rows = np.int64(highs.shape[0])
        hlo = lo >> xb
        hhi = hi >> xb
        j = np.int64(lower_bound(highs, hlo))
        if j >= n_rows:
            return np.int64(-1)
        row = np.uint64(highs[j])
        if row > hhi:
            return np.int64(-1)
        x0 = lo & xm if row == hlo else u0
        x1 = hi & xm if row == hhi else xm
        pos = along_row(scene, rec, rays, i, row, x0, x1)
        if pos < 0 and row == hlo and j + 1 < n_rows:
            row2 = np.uint64(highs[j + 1])
            if row2 <= hhi:
                pos = along_row(scene, rec, rays, i, row2, u0, hi & xm if row2 == hhi else xm)
        return pos

    @register_jitable
    def point_start(scene, rec, rays, lo, i):
        """The primitive position of the perpendicular ray's hit (-1: none)."""
        x, _, _, y, z = point_of(lo, i)
        note(rays, i)
        _, prim, _, inst = query(scene, i, x, y, z - half, f0, f0, f1, f0, f1, point_flags, rec)
        return position(rec, prim, inst)

    @register_jitable
    def find(i, lo, lo_i, hi_i, keys, first_of, highs, scene, rec, rays):
        """``(p, m)``: the sorted position ``p`` where the lookup's keys start (-1: none) and
        their number ``m`` when the hit already tells it (a compressed point lookup), else -1."""
        if keys.shape[0] == 0 or lo_i > hi_i:
            return np.int64(-1), np.int64(-1)
        if point:
            if not legal(lo_i):
                return np.int64(-1), np.int64(-1)
            pos = point_start(scene, rec, rays, lo, i)
        else:
            pos = range_start(scene, rec, rays, highs, i, lo_i, hi_i)
        if pos < 0:
            return np.int64(-1), np.int64(-1)
        if compressed:
            s = np.int64(first_of[pos])
            if point:  # the hit is the key's one primitive (exact): its run, without a search
                return s, np.int64(first_of[pos + 1]) - s
            return s, np.int64(-1)
        return pos, np.int64(-1)

    @register_jitable
    def lookup_item(i, lo, hi, keys, first_of, highs, scene, rec, rays, first, count):
        first[i] = 0
        count[i] = 0
        lo_i = np.uint64(lo[i])
        hi_i = np.uint64(hi[i])
        p, m = find(i, lo, lo_i, hi_i, keys, first_of, highs, scene, rec, rays)
        if p < 0:
            return
        if m >= 0:
            first[i] = p
            count[i] = m
            return
        first[i], count[i] = run_from(keys, p, lo_i, hi_i)

    return Kernel(lookup_item, name="rx_opt_lookup", serial_below=RAYS_SERIAL_BELOW)

