"""The RT stage's programs and the sorted backend's kernel: one record per qualifying row,
deduplicated, re-checked where needed, added into per-group arrays (Algorithm 1).

A record is what the paper puts in a triangle's right-angle vertex ``(a, b, c)``: ``a`` the
packed aggregate values (X), ``b`` the group code (Y), ``c`` the scan code (Z). Values not
packed into X, and scan attributes not encoded into Z, sit in device memory and are read by
primitive index (§4.5, §6.6). Every kernel body is built per device around
:func:`indexzoo.native.groupagg.atomics`.
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.groupagg import accumulate, atomics, in_intervals
from indexzoo.native.search import range_bounds
from indexzoo.native.targets import Kernel

from .rt import IGNORE, NO_MATCH, QueryPrograms

__all__ = ["CUDA", "IN_Y", "MIN_RUN", "ONE_GROUP", "RtcudbRecord", "anyhit_program",
           "bitmap_program", "compact_kernel", "flagged_program", "layer_programs",
           "raygen_program", "slices_kernel", "sorted_kernel"]


@register_jitable
def value_of(row, x, j, vshift, vmask, voff, spills, vspill):
    s = vshift[j]
    if s >= 0:
        return ((x >> s) & vmask[j]) + voff[j]
    return np.int64(spills[vspill[j], row])


#: The first word of the any-hit programs' ``ycol`` when the group codes are not in device
#: memory: each record's group code is its Y coordinate (IN_Y), or every record is in group 0
#: and Y spreads the triangles (ONE_GROUP). Spilled group codes (§4.5) are at least 0.
IN_Y = -1
ONE_GROUP = -2


@register_jitable
def group_of(prim, tri, ycol):
    """The group code of primitive ``prim``'s record."""
    f = ycol[0]
    if f == ONE_GROUP:
        return np.int64(0)
    if f < 0:
        return np.int64(tri[prim, 1])
    return np.int64(ycol[prim])


@register_jitable
def passes(row, scan, ridx, starts, lo, hi):
    """Row ``row`` of the spilled scan attributes ``scan[ridx[j]]`` within the intervals
    ``starts[j]..starts[j+1]`` for every j."""
    ok = True
    for j in range(len(ridx)):
        if not in_intervals(np.int64(scan[ridx[j], row]), j, starts, lo, hi):
            ok = False
            break
    return ok


@functools.cache
def _add_record(device: str) -> Any:
    add = atomics(device)[0]
    acc = accumulate(device)

    @register_jitable
    def add_record(row, x, b, vshift, vmask, voff, spills, vspill, need, count, sums, mins,
                   maxs):
        """Adds the record into group ``b``; returns the group's count before."""
        n = len(vshift)
        for j in range(n):
            v = value_of(row, x, j, vshift, vmask, voff, spills, vspill)
            acc(b, j, n, v, need[j], sums, mins, maxs)
        return add(count, b, np.int64(1))

    return add_record


@register_jitable
def _raygen(i, params):
    """Ray ``i``: grid point ``i % (nx * ny)`` of the XY grid, over Z-interval ``i // (nx *
    ny)``, along +Z from one below the interval's first (stretched) code to one above its last.
    ``params`` starts with (grid xs, grid ys, interval los, interval his, Z stretch)."""
    px = params[0]
    py = params[1]
    per = len(px) * len(py)
    k = i // per
    r = i - k * per
    ix = r // len(py)
    iy = r - ix * len(py)
    lo = params[2][k]
    hi = params[3][k]
    s = params[4]
    return (np.float32(px[ix]), np.float32(py[iy]), np.float32(lo * s - 1), np.float32(0),
            np.float32(0), np.float32(1), np.float32(0), np.float32((hi - lo) * s + 2))


def raygen_program() -> Any:
    """The ray-generation program: rays made in the kernel, no ray arrays."""
    return _raygen


@functools.cache
def _algorithm1(device: str) -> Any:
    """``hit(prim, tri, words, scan, ridx, rstarts, rlo, rhi, ycol, vshift, vmask, voff,
    spills, vspill, need, count, sums, mins, maxs)``: Algorithm 1 for one hit, the body of
    both engines' programs."""
    aor = atomics(device)[3]
    add_record = _add_record(device)

    @register_jitable
    def hit(prim, tri, words, scan, ridx, rstarts, rlo, rhi, ycol, vshift, vmask, voff, spills,
            vspill, need, count, sums, mins, maxs):
        bit = np.uint32(1) << np.uint32(prim & 31)
        old = aor(words, prim >> 5, bit)
        if old & bit:
            return
        if not passes(prim, scan, ridx, rstarts, rlo, rhi):
            return
        x = np.int64(tri[prim, 0])
        b = group_of(prim, tri, ycol)
        add_record(prim, x, b, vshift, vmask, voff, spills, vspill, need, count, sums, mins,
                   maxs)

    return hit


@functools.cache
def anyhit_program(device: str) -> Any:
    """Algorithm 1: flag-bit dedup, re-check of the attributes Z does not encode, then the
    record's values into its group."""
    hit = _algorithm1(device)

    @register_jitable
    def anyhit(ray, inst, prim, t, front, payload, params):
        (_, _, _, _, _, tri, words, scan, ridx, rstarts, rlo, rhi, ycol, vshift, vmask, voff,
         spills, vspill, need, count, sums, mins, maxs) = params
        hit(prim, tri, words, scan, ridx, rstarts, rlo, rhi, ycol, vshift, vmask, voff, spills,
            vspill, need, count, sums, mins, maxs)
        return IGNORE

    return anyhit


class RtcudbRecord(NamedTuple):
    """The fused RT stage's launch parameters as a query-layer record (the OptiX engine's
    launch; fields of ``params`` in :func:`layer_programs`' programs and ``programs.cu``)."""

    gx: Any         # int64 grid coordinates on X, and their number
    n_gx: Any
    gy: Any         # on Y
    n_gy: Any
    zlo: Any        # int64 per Z-interval of the launch: its first and last code
    zhi: Any
    zscale: Any     # int64: the Z stretch
    ray_base: Any   # int64: the launch's first ray
    tri: Any        # (N, 9) float32: the triangles, the records' X and Y in columns 0 and 1
    words: Any      # uint32 flag bits, one per record
    scan: Any       # (rows, N) the scan attributes, row stride scan_row
    scan_row: Any
    ridx: Any       # int64: the re-checked rows of scan, and their intervals (CSR)
    n_ridx: Any
    rstarts: Any
    rlo: Any
    rhi: Any
    ycol: Any       # int64: IN_Y / ONE_GROUP, or every record's spilled group code
    vshift: Any     # int64 per value: its bits in X (shift < 0: spilled), mask, offset
    vmask: Any
    voff: Any
    n_vals: Any
    spills: Any     # (k, N) int64 spilled values, row stride spill_row
    spill_row: Any
    vspill: Any
    need: Any       # int64 per value: 1 SUM, 2 MIN, 4 MAX
    count: Any      # int64 per group; SUM, MIN, MAX per group and value
    sums: Any
    mins: Any
    maxs: Any


#: The OptiX twins (``programs.cu``) of :func:`layer_programs`, ``ONE_GROUP`` defined first.
CUDA = (f"#define RTC_ONE_GROUP ({ONE_GROUP}LL)\n"
        + importlib.resources.files(__package__).joinpath("programs.cu").read_text())


@functools.cache
def layer_programs(device: str) -> tuple[QueryPrograms, Any]:
    """Algorithm 1 as the query layer's programs (for engines that launch through the layer:
    OptiX, with the CUDA twins): ``(programs, raygen)``. The match does the any-hit program's
    work and ignores the hit; the ray-generation program is :func:`raygen_program`'s over the
    record's fields."""
    hit = _algorithm1(device)

    @register_jitable
    def rtcudb_match(ray, inst, prim, t, front, params):
        hit(prim, params.tri, params.words, params.scan, params.ridx, params.rstarts,
            params.rlo, params.rhi, params.ycol, params.vshift, params.vmask, params.voff,
            params.spills, params.vspill, params.need, params.count, params.sums, params.mins,
            params.maxs)
        return NO_MATCH

    @register_jitable
    def rtcudb_raygen(i, params):
        return _raygen(params.ray_base + i, (params.gx, params.gy, params.zlo, params.zhi,
                                             params.zscale))

    return QueryPrograms(match=rtcudb_match, cuda=CUDA), rtcudb_raygen


@functools.cache
def bitmap_program(device: str) -> Any:
    """Per-operator RT, step 1 (RTScan): set the bit of every primitive on a ray that passes
    the re-check."""
    aor = atomics(device)[3]

    @register_jitable
    def scan_hit(ray, inst, prim, t, front, payload, params):
        _, _, _, _, _, words, scan, ridx, rstarts, rlo, rhi = params
        if passes(prim, scan, ridx, rstarts, rlo, rhi):
            aor(words, prim >> 5, np.uint32(1) << np.uint32(prim & 31))
        return IGNORE

    return scan_hit


@functools.cache
def flagged_program(device: str) -> Any:
    """Per-operator RT, step 2: every primitive lies on Z = 0 and is hit; those whose bit the
    scan set add their record (a second bitmap dedups)."""
    aor = atomics(device)[3]
    add_record = _add_record(device)

    @register_jitable
    def agg_hit(ray, inst, prim, t, front, payload, params):
        (_, _, _, _, _, tri, selected, words, ycol, vshift, vmask, voff, spills, vspill, need,
         count, sums, mins, maxs) = params
        bit = np.uint32(1) << np.uint32(prim & 31)
        if not (selected[prim >> 5] & bit):
            return IGNORE
        old = aor(words, prim >> 5, bit)
        if old & bit:
            return IGNORE
        x = np.int64(tri[prim, 0])
        b = group_of(prim, tri, ycol)
        add_record(prim, x, b, vshift, vmask, voff, spills, vspill, need, count, sums, mins,
                   maxs)
        return IGNORE

    return agg_hit


#: Fewest qualifying positions a thread of the sorted kernel takes, one after the other: a run
#: of records of one group is summed in registers and added once (SSB's Q1.x: every record
#: goes to the one group, whose words would otherwise take an atomic add per record).
MIN_RUN = 64


@functools.cache
def _flush(device: str) -> Any:
    add = atomics(device)[0]

    @register_jitable
    def flush(b, c, s0, s1, s2, s3, n, need, count, sums, touched, n_touched):
        """Adds a thread's run of ``c`` records of group ``b`` (its first four values' sums in
        ``s0..s3``) into the group."""
        for j in range(min(n, 4)):
            if need[j] & 1:
                add(sums, b * n + j, s0 if j == 0 else s1 if j == 1 else s2 if j == 2 else s3)
        if add(count, b, c) == 0:
            touched[add(n_touched, 0, np.int64(1))] = b

    return flush


@functools.cache
def sorted_kernel(device: str) -> Kernel:
    """Item ``i`` takes the ``chunk`` qualifying positions from ``i * chunk`` (``chunk`` at
    least :data:`MIN_RUN`, and enough for ``stride`` items to cover ``offs[-1]``) over the
    Z-slices ``[starts[r], starts[r] + offs[r+1] - offs[r])`` of the Z-sorted records. The
    count is read on the device, so a GPU launch needs no synchronisation. A group's first
    add lists it in ``touched`` (``n_touched[0]`` counts them)."""
    add, amin, amax, _ = atomics(device)
    flush = _flush(device)

    @register_jitable
    def sorted_item(i, stride, offs, starts, x, y, scan, ridx, rstarts, rlo, rhi, vshift,
                    vmask, voff, spills, vspill, need, count, sums, mins, maxs, touched,
                    n_touched):
        total = offs[len(offs) - 1]
        chunk = max((total + stride - 1) // stride, MIN_RUN)
        k = np.int64(i) * chunk
        if k >= total:
            return
        end = min(k + chunk, total)
        lo = 0
        hi = len(offs) - 1
        while hi - lo > 1:  # offs[lo] <= k < offs[hi]
            mid = (lo + hi) >> 1
            if offs[mid] <= k:
                lo = mid
            else:
                hi = mid
        n = len(vshift)
        last = np.int64(-1)
        c = np.int64(0)
        s0 = s1 = s2 = s3 = np.int64(0)
        while k < end:
            while offs[lo + 1] <= k:
                lo += 1
            row = starts[lo] + k - offs[lo]
            k += 1
            if not passes(row, scan, ridx, rstarts, rlo, rhi):
                continue
            b = np.int64(y[row])
            if b != last:
                if last >= 0:
                    flush(last, c, s0, s1, s2, s3, n, need, count, sums, touched, n_touched)
                last = b
                c = np.int64(0)
                s0 = s1 = s2 = s3 = np.int64(0)
            c += 1
            xv = np.int64(x[row])
            for j in range(n):
                v = value_of(row, xv, j, vshift, vmask, voff, spills, vspill)
                nd = need[j]
                if nd & 1:
                    if j == 0:
                        s0 += v
                    elif j == 1:
                        s1 += v
                    elif j == 2:
                        s2 += v
                    elif j == 3:
                        s3 += v
                    else:
                        add(sums, b * n + j, v)
                if nd & 2:
                    amin(mins, b * n + j, v)
                if nd & 4:
                    amax(maxs, b * n + j, v)
        if last >= 0:
            flush(last, c, s0, s1, s2, s3, n, need, count, sums, touched, n_touched)

    return Kernel(sorted_item, name="rtcudb_sorted")


@register_jitable
def slice_item(j, z, lo, hi, starts, lens):
    """Interval ``j``'s slice of the Z-sorted codes: its start and length."""
    a, b = range_bounds(z, lo[j], hi[j])
    starts[j] = a
    lens[j] = b - a


@functools.cache
def slices_kernel() -> Kernel:
    """``(n_intervals, z, lo, hi, starts, lens)``: one item per Z-interval."""
    return Kernel(slice_item, name="rtcudb_slices")


#: Most Z-intervals whose slice lengths one GPU thread sums in order (a launch of its own, a
#: few microseconds); more go to the array library's scan.
SERIAL_SCAN = 4096


@register_jitable
def prefix_item(i, offs):
    """``offs[1:]`` (the slice lengths) replaced by their running sums, by one item."""
    s = offs[0]
    for j in range(1, len(offs)):
        s += offs[j]
        offs[j] = s


@functools.cache
def prefix_kernel() -> Kernel:
    """``(1, offs)``: the running sums of the slice lengths, in place."""
    return Kernel(prefix_item, name="rtcudb_prefix")


@register_jitable
def compact_item(k, n_touched, touched, count, sums, mins, maxs, n_values, minmax, packed):
    """The k-th touched group packed as ``(group, count, its n_values sums[, mins, maxs])``
    after ``packed[0]``, which receives their number."""
    m = n_touched[0]
    if k == 0:
        packed[0] = m
    if k < m:
        b = touched[k]
        width = 2 + n_values * (3 if minmax else 1)
        at = 1 + k * width
        packed[at] = b
        packed[at + 1] = count[b]
        for j in range(n_values):
            packed[at + 2 + j] = sums[b * n_values + j]
            if minmax:
                packed[at + 2 + n_values + j] = mins[b * n_values + j]
                packed[at + 2 + 2 * n_values + j] = maxs[b * n_values + j]


@functools.cache
def compact_kernel() -> Kernel:
    """``(n_groups, n_touched, touched, count, sums, mins, maxs, n_values, minmax, packed)``:
    one item per group of the view."""
    return Kernel(compact_item, name="rtcudb_compact")
