"""The rtcudb query engine: prepared views (the paper's materialized BVHs) and the query
pipeline (query area -> rays -> any-hit aggregation -> groups)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

import numpy as np
from pydantic import Field

from indexzoo.devices import array_module, to_numpy
from indexzoo.native.lazy import lazy_module
from indexzoo.native.targets import resident_threads
from indexzoo.query import Expr, Groups, Plan, Query, QueryEngine, Table, View, evaluate, plan

from . import rt
from .encoding import BijectionEncoder, GroupDictionary, Packer, attribute_order

if TYPE_CHECKING:
    from indexzoo.native import groupagg

    from . import kernels
else:  # imported when a view is prepared: the registry lists the engine without them
    groupagg = lazy_module("indexzoo.native.groupagg")
    kernels = lazy_module("indexzoo.plugins.rtcudb.kernels")

__all__ = ["RtcudbEngine", "RtcudbParams", "RtcudbView"]

_NEED = {"sum": 1, "min": 2, "max": 4}

#: The grid (rays per axis) a device takes when ``grid`` is not given: on the GPU, SSB at SF 10
#: ran 4-65x faster with 512 than with 4 (docs/plugins/rtcudb.md); on the CPU 4 was fastest.
DEFAULT_GRID = {"cpu": 4, "cuda": 512}

#: Most rays one launch of the RT backend traces (a query with more intervals launches in
#: batches of intervals).
MAX_RAYS = 1 << 24

#: Distinct X coordinates of the triangles when X carries no value (a power of two below
#: float32's exact integers).
SPREAD = 1 << 16

#: The orders the BVH's primitives may be sorted by before the build (``bvh_order``).
BvhOrder = Literal["morton", "cells-z", "z-cells-z"]
ORDERS: tuple[str, ...] = get_args(BvhOrder)

#: Groups a sorted-backend query's first copy back holds; one that reaches more copies the rest
#: next.
FIRST_COPY_GROUPS = 1024


class RtcudbParams(rt.EngineParams):
    backend: Literal["rt", "sorted"] = Field(default="rt", description=(
        "rt: triangles in a BVH on the ray-tracing engine, rays along +Z (the paper); sorted: "
        "the same records sorted by scan code, each Z-interval a slice, no BVH."))
    scan_encoding: Literal["encode", "split"] = Field(default="encode", description=(
        "encode: every scan attribute in Z by bijection encoding (§4.2); split: only the "
        "first in Z, the others in device memory, re-checked per hit (§6.6's ablation)."))
    pipeline: Literal["fused", "per-operator"] = Field(default="fused", description=(
        "fused: scan, group-by and aggregation as one RT job; per-operator: an RTScan-style "
        "job writes a bitmap, a second job over triangles at Z = 0 aggregates (§6.5)."))
    coordinate_bits: int = Field(default=24, ge=8, le=24, description=(
        "Exact integer bits of a float32 coordinate: codes and packed values beyond them "
        "spill to device memory (§4.5)."))
    grid: int | None = Field(default=None, ge=1, le=4096, description=(
        "Rays per axis of the XY grid over each Z-interval (the legs of the triangles grow "
        "to match, so every triangle is hit by one to three rays). null: the device's best "
        "measured, 4 on the CPU (few rays, few cores), 512 on the GPU (rays enough to share "
        "the hits among its threads)."))
    max_intervals: int = Field(default=1 << 14, ge=1, description=(
        "Most Z-intervals per query; beyond, trailing attributes are re-checked per hit."))
    bvh_order: BvhOrder = Field(default="z-cells-z", description=(
        "The order of the triangles the BVH is built over. z-cells-z: the high half of the "
        "scan code's bits, then the cell of the ray grid, then the low half (a ray's walk "
        "skips far Z at the top, finds its cell, then its Z-interval within the cell); cells-z: "
        "the cell, then the scan code; morton: the tracer's Morton codes of the triangles' "
        "centres, Z stretched so that it splits first."))


def _lattice(extent: int, grid: int) -> tuple[int, np.ndarray]:
    """(leg, points): legs of 2H and integer grid points 1 + i*(H-1), so that every integer
    a in [0, extent] has a point in [a+1, a+H-1], strictly inside its triangle."""
    g = max(1, math.ceil((extent + 1) / grid))
    h = g + 1
    return 2 * h, 1 + g * np.arange(extent // g + 2, dtype=np.int64)


class RtcudbView(View):
    """A prepared view: the scan code Z (bijection encoding of the scan attributes, in the
    heuristic's order), the group code Y (lexicographic dictionary), the packed values X
    and the spilled columns; and, per backend, the BVH over one triangle per row or the
    records sorted by Z."""

    def __init__(self, table: Table, name: str, encoder: BijectionEncoder,
                 spilled_scan: list[str], groups: GroupDictionary, values: list[Expr],
                 packer: Packer):
        super().__init__(table, [*encoder.names, *spilled_scan], list(groups.names), values,
                         name or "rtcudb")
        self.encoder = encoder
        self.spilled_scan = spilled_scan
        self.groups = groups
        self.packer = packer
        self.arrays: dict[str, Any] = {}  # device arrays, in the backend's row order
        self.spills: Any = None  # (spilled values, rows) int64
        self.scan_rows: dict[str, int] = {}  # scan attribute -> its row of arrays["scan"]
        self.y_spilled = False
        self.one_group = False
        self.scene: Any = None
        self.flat_scene: Any = None
        self.legs = (2, 2)
        self.z_scale = 1
        self.points: tuple[np.ndarray, np.ndarray] = (np.ones(1), np.ones(1))
        self.queries: dict[Query, _SortedQuery] = {}  # the sorted backend's prepared queries
        self.lock = threading.Lock()  # a prepared query's buffer serves one run at a time

    def footprint_bytes(self) -> int:
        total = sum(int(a.nbytes) for a in self.arrays.values()) + int(self.spills.nbytes)
        for s in (self.scene, self.flat_scene):
            if s is not None:
                total += sum(rt.scene_bytes(s).values())
        return total


def _hashable(q: Query) -> bool:
    try:
        hash(q)
    except TypeError:
        return False
    return True


@dataclass
class _SortedQuery:
    """A query prepared on the sorted backend's view (see ``RtcudbEngine._sorted_query``)."""

    plan: Plan
    n_intervals: int
    recheck: list[str]
    buf: Any
    n_zero: int  # words zeroed per run: the touched count, the counts, the sums
    minmax: tuple[int, int]  # the span of buf holding the mins then the maxs
    e: int
    rec: int  # words per packed group
    slices: Any
    offs: Any
    prefix: Any  # the GPU's bound launch of the serial scan, where there are few intervals
    records: tuple[Any, ...]  # the sorted kernel's arguments after its stride
    compact: Any
    packed: Any
    record: int  # bytes a record reads
    launch: Any = None  # the GPU's bound launch of the sorted kernel
    threads: int = 0
    host: Any = None  # page-locked buffer of the first copy back (GPU)


class RtcudbEngine(QueryEngine):
    """RTCUDB (Shi et al.): scan, group-by and aggregation as one ray-tracing job over a
    prepared view."""

    name: ClassVar[str] = "rtcudb"
    Params: ClassVar[type[RtcudbParams]] = RtcudbParams
    params: RtcudbParams

    # ------------------------------------------------------------------ views
    def _prepare(self, table: Table, scan: list[str], group: list[str], values: list[Expr],
                 queries: list[Query], name: str) -> View:
        pr = self.params
        xp = array_module(self.device)
        rt_backend = pr.backend == "rt"
        limit = (1 << pr.coordinate_bits) - 2 if rt_backend else 1 << 62
        domains = {c: table.domain(c) for c in scan}
        order = attribute_order(domains, [plan(table, q).filters for q in queries])
        enc = BijectionEncoder.fitting(order[:1] if pr.scan_encoding == "split" else order,
                                       domains, limit)
        spilled_scan = [c for c in order if c not in enc.names]
        n = table.n_rows
        # the sorted backend's sorts and gathers run on the view's device; the BVH's
        # triangles are made on the host
        bx = np if rt_backend else xp
        cols = {c: bx.asarray(table.column(c)) for c in {*enc.names, *spilled_scan, *group}}
        z = enc.encode([cols[c] for c in enc.names]) if enc.names else \
            bx.zeros(n, dtype=np.int64)
        gd, y = GroupDictionary.build(group, [cols[c] for c in group], n, bx)
        vals = [evaluate(table, e) for e in values]
        packer = Packer.plan(vals, pr.coordinate_bits if rt_backend else 62)
        x = packer.pack(vals, n)
        if rt_backend and not any(packer.packed) and n:
            # [ours] X carries no value (all spilled, or none asked): the rows' positions
            # spread the triangles over X, so that the grid's rays share the hits
            x = np.arange(n, dtype=np.int64) % SPREAD
        view = RtcudbView(table, name, enc, spilled_scan, gd, values, packer)
        spills = [v for v, p in zip(vals, packer.packed, strict=True) if not p]
        if rt_backend:
            view.y_spilled = gd.size > limit
            yc = np.zeros(n, dtype=np.int64) if view.y_spilled else y
            view.one_group = gd.size == 1
            if view.one_group:
                # [ours] Y carries no group: the rows' positions spread the triangles over Y
                # as well (the any-hit program takes group 0), so the grid casts more rays,
                # each with fewer hits
                yc = (np.arange(n, dtype=np.int64) // SPREAD) % SPREAD
            grid = pr.grid or DEFAULT_GRID[self.device]
            sx, px = _lattice(int(x.max()) if n else 0, grid)
            sy, py = _lattice(int(yc.max()) if n else 0, grid)
            view.legs, view.points = (sx, sy), (px, py)
            # Z stretched by a power of two while it stays exact, so that the BVH (which splits
            # its longest axis first) separates rows by scan code before X and Y
            view.z_scale = 1 << max(0, pr.coordinate_bits - 1 - max(1, enc.span).bit_length())
            tri = _triangles(x, yc, z * view.z_scale, sx, sy)
            view.arrays["tri"] = xp.asarray(tri)
            eng = rt.engine_for(pr.engine, self.device, pr.pipeline == "per-operator")
            # the software engine builds its BVH over our order; OptiX builds its own
            codes = bvh_codes(pr.bvh_order, tri, view.z_scale, view.legs) \
                if not rt.on_layer_engine(eng) else None
            view.scene = rt.build_triangles(view.arrays["tri"],
                                            None if codes is None else xp.asarray(codes), eng)
            if pr.pipeline == "per-operator":
                flat = _triangles(x, yc, np.zeros(n, dtype=np.int64), sx, sy)
                view.arrays["flat_tri"] = xp.asarray(flat)
                view.flat_scene = rt.build_triangles(view.arrays["flat_tri"], None, eng)
            flag = kernels.ONE_GROUP if view.one_group else kernels.IN_Y
            view.arrays["y"] = xp.asarray(y if view.y_spilled else np.full(1, flag, dtype=np.int64))
            perm = None
        else:
            perm = _by_scan_then_group(xp, z, y, enc.span, gd.size)
            view.arrays["z"] = z[perm]
            view.arrays["x"] = xp.asarray(x)[perm]
            view.arrays["y"] = y[perm].astype(np.int32 if gd.size < 2**31 else np.int64)
            del z, y
        scan_names = [*spilled_scan, *enc.names]
        view.scan_rows = {c: j for j, c in enumerate(scan_names)}
        scan2d = bx.stack([cols[c] for c in scan_names]) if scan_names else \
            bx.zeros((1, n), dtype=np.int32)
        view.arrays["scan"] = xp.asarray(scan2d if perm is None else scan2d[:, perm])
        if spills:
            spill2d = bx.stack([bx.asarray(v) for v in spills])
            view.spills = xp.asarray(spill2d if perm is None else spill2d[:, perm])
        else:
            view.spills = xp.zeros((1, 1), dtype=np.int64)
        return view

    # ------------------------------------------------------------------ queries
    def _execute(self, view: View, p: Plan) -> Groups:
        assert isinstance(view, RtcudbView)
        if self.params.backend == "sorted":
            with view.lock:
                return self._run_sorted(view, self._sorted_query(view, p))
        xp = array_module(self.device)
        enc = view.encoder
        ivs, recheck, rcsr, vidx, spill_of, need = _filters_and_values(
            view, p, self.params.max_intervals, xp)
        rbytes = len(recheck) * int(view.arrays["scan"].itemsize)
        pk = view.packer
        vshift = np.array([pk.shift[i] for i in vidx] or [0], dtype=np.int64)
        vmask = np.array([pk.mask(i) for i in vidx] or [0], dtype=np.int64)
        voff = np.array([pk.offset[i] for i in vidx] or [0], dtype=np.int64)
        vspill = np.array([spill_of[i] for i in vidx] or [0], dtype=np.int64)
        spills = view.spills
        e = len(vidx)
        k = view.groups.size
        count = xp.zeros(k, dtype=np.int64)
        width = k * max(e, 1)
        sums = xp.zeros(width, dtype=np.int64)
        mins = xp.full(width, np.iinfo(np.int64).max, dtype=np.int64)
        maxs = xp.full(width, np.iinfo(np.int64).min, dtype=np.int64)
        vals = tuple(xp.asarray(a) for a in (vshift, vmask, voff))
        tail = (*vals, spills, xp.asarray(vspill), xp.asarray(need), count, sums, mins, maxs)
        n_spilled_read = int(sum(1 for i in vidx if not pk.packed[i]))
        stats: dict[str, Any] = {"intervals": len(ivs), "recheck": list(recheck),
                                 "z_order": list(enc.names), "spilled_scan": view.spilled_scan}
        touched = 0
        if ivs and not p.empty:
            touched = self._trace(view, ivs, rcsr, tail, stats)
            record = 12 + 4 + 8 * n_spilled_read + rbytes
            stats["records"] = touched
            bytes_read = touched * record + int(stats.get("bytes_searched", 0))
        else:
            bytes_read = 0
        # only the groups the rays reached come back (Q4.3's view has 1.75 M groups: their
        # four whole arrays were 56 MB of copies a run)
        reached = xp.flatnonzero(count)
        per = [to_numpy(a.reshape(k, max(e, 1))[reached]) for a in (sums, mins, maxs)]
        return _regroup(view, p, to_numpy(reached), to_numpy(count[reached]), per, e,
                        bytes_read, stats)

    def _trace(self, view: RtcudbView, ivs: list[tuple[int, int]],
               rcsr: tuple[Any, ...], tail: tuple[Any, ...], stats: dict[str, Any]) -> int:
        xp = array_module(self.device)
        n = view.table.n_rows
        px, py = (xp.asarray(a) for a in view.points)
        per = int(px.size * py.size)
        words = xp.zeros((n + 31) // 32, dtype=np.uint32)
        tri = view.arrays["tri"]
        stats["rays"] = per * len(ivs)
        fused = self.params.pipeline == "fused"
        # the intervals in batches of at most MAX_RAYS rays a launch (one payload word a ray)
        step = max(1, MAX_RAYS // per)
        for k in range(0, len(ivs), step):
            part = ivs[k:k + step]
            lo = xp.asarray(np.array([a for a, _ in part], dtype=np.int64))
            hi = xp.asarray(np.array([b for _, b in part], dtype=np.int64))
            rays = (px, py, lo, hi, np.int64(view.z_scale))  # for the ray-generation program
            if fused and rt.on_layer(view.scene):  # OptiX: the query layer's launch
                self._trace_layer(view, px, py, lo, hi, tri, words, rcsr, tail,
                                  per * len(part))
            elif fused:
                params = (*rays, tri, words, view.arrays["scan"], *rcsr, view.arrays["y"],
                          *tail)
                rt.cast(view.scene, per * len(part), kernels.raygen_program(),
                        kernels.anyhit_program(self.device), params, self.device)
            else:
                rt.cast(view.scene, per * len(part), kernels.raygen_program(),
                        kernels.bitmap_program(self.device), (*rays, words, view.arrays["scan"], *rcsr),
                        self.device)
        if not fused:
            zero = xp.zeros(1, dtype=np.int64)
            seen = xp.zeros_like(words)
            params2 = (px, py, zero, zero, np.int64(1), view.arrays["flat_tri"], words, seen,
                       view.arrays["y"], *tail)
            rt.cast(view.flat_scene, per, kernels.raygen_program(), kernels.flagged_program(self.device),
                    params2, self.device)
            stats["rays"] += per
            return n  # the second job hits every primitive
        # the flag bits: the distinct primitives any ray reached
        return int(xp.unpackbits(words.view(np.uint8)).sum())  # on the device

    def _trace_layer(self, view: RtcudbView, px: Any, py: Any, lo: Any, hi: Any, tri: Any,
                     words: Any, rcsr: tuple[Any, ...], tail: tuple[Any, ...],
                     n_rays: int) -> None:
        """One launch of the fused RT stage through the query layer (:func:`.kernels.layer_programs`,
        the OptiX engine's CUDA twins in ``programs.cu``)."""
        ridx, rstarts, rlo, rhi = rcsr
        vshift, vmask, voff, spills, vspill, need, count, sums, mins, maxs = tail
        scan = view.arrays["scan"]
        programs, raygen = kernels.layer_programs(self.device)
        i64 = np.int64

        def record(base: int) -> kernels.RtcudbRecord:
            return kernels.RtcudbRecord(px, i64(px.size), py, i64(py.size), lo, hi, i64(view.z_scale),
                                        i64(base), tri, words, scan, i64(scan.shape[1]), ridx,
                                        i64(ridx.size), rstarts, rlo, rhi, view.arrays["y"], vshift,
                                        vmask, voff, i64(vshift.size), spills, i64(spills.shape[1]),
                                        vspill, need, count, sums, mins, maxs)

        rt.cast_layer(view.scene, n_rays, programs, raygen, record, MAX_RAYS, self.device)

    def _sorted_query(self, view: RtcudbView, p: Plan) -> _SortedQuery:
        """``p`` ready to run on the sorted backend's ``view`` (kept per query while the view
        lives): its Z-intervals and re-checks on the device, the bound launches and one result
        buffer."""
        hit = view.queries.get(p.query) if _hashable(p.query) else None
        if hit is not None and hit.plan is p:
            return hit
        xp = array_module(self.device)
        ivs, recheck, rcsr, vidx, spill_of, need = _filters_and_values(
            view, p, self.params.max_intervals, xp)
        pk = view.packer
        minmax = bool(np.any(need & 6))
        e, k = len(vidx), view.groups.size
        width = k * max(e, 1)
        # one buffer: the touched count, the counts and sums (zeroed per run), the mins and
        # maxs (set per run, where asked), the touched list, the packed groups
        rec = 2 + max(e, 1) * (3 if minmax else 1)
        mm = width if minmax else 1
        buf = xp.zeros(1 + k + width + 2 * mm + k + 1 + k * rec, dtype=np.int64)
        cuts = np.cumsum([0, 1, k, width, mm, mm, k, 1 + k * rec])
        n_touched, count, sums, mins, maxs, touched, packed = (
            buf[cuts[j]:cuts[j + 1]] for j in range(7))
        tail = (*(xp.asarray(np.array(a or [0], dtype=np.int64)) for a in (
            [pk.shift[i] for i in vidx], [pk.mask(i) for i in vidx],
            [pk.offset[i] for i in vidx], [spill_of[i] for i in vidx])), xp.asarray(need))
        vshift, vmask, voff, vspill, dneed = tail
        n_iv = len(ivs)
        lo = xp.asarray(np.array([a for a, _ in ivs] or [0], dtype=np.int64))
        hi = xp.asarray(np.array([b for _, b in ivs] or [-1], dtype=np.int64))
        starts = xp.zeros(max(n_iv, 1), dtype=np.int64)
        offs = xp.zeros(max(n_iv, 1) + 1, dtype=np.int64)
        tpb = self.params.threads_per_block
        q = _SortedQuery(
            plan=p, n_intervals=n_iv, recheck=recheck, buf=buf, n_zero=int(cuts[3]),
            minmax=(int(cuts[3]), int(cuts[5])) if minmax else (0, 0), e=e, rec=rec,
            slices=kernels.slices_kernel().bind(self.device, view.arrays["z"], lo, hi, starts,
                                                offs[1:], threads_per_block=tpb),
            offs=offs,
            prefix=kernels.prefix_kernel().bind(self.device, offs, threads_per_block=32)
            if self.device == "cuda" and n_iv <= kernels.SERIAL_SCAN else None,
            records=(offs, starts, view.arrays["x"], view.arrays["y"], view.arrays["scan"],
                     *rcsr, vshift, vmask, voff, view.spills, vspill, dneed, count, sums, mins,
                     maxs, touched, n_touched),
            compact=kernels.compact_kernel().bind(self.device, n_touched, touched, count, sums, mins,
                                                  maxs, max(e, 1), minmax, packed,
                                                  threads_per_block=tpb),
            packed=packed, record=(8 + int(view.arrays["y"].itemsize)
                                   + 8 * sum(1 for i in vidx if not pk.packed[i])
                                   + len(recheck) * int(view.arrays["scan"].itemsize)))
        q.host = groupagg.host_buffer(packed, 1 + min(view.groups.size, FIRST_COPY_GROUPS) * rec)
        if self.device == "cuda":  # a fixed grid that strides over the count on the device
            q.threads = min(view.table.n_rows, resident_threads())
            q.launch = kernels.sorted_kernel(self.device).bind(
                self.device, np.int64(q.threads), *q.records, threads_per_block=tpb)
        if _hashable(p.query):
            view.queries[p.query] = q
        return q

    def _run_sorted(self, view: RtcudbView, q: _SortedQuery) -> Groups:
        """One run of a prepared query on the sorted backend: the Z-slices of its intervals
        searched, their records added into the groups, the groups they reached packed and
        copied back (one copy, a second where more groups than the first holds)."""
        p, xp = q.plan, array_module(self.device)
        on_host = isinstance(q.buf, np.ndarray)
        groupagg.zero_prefix(q.buf, q.n_zero)
        if q.minmax[1] > q.minmax[0]:
            a, b = q.minmax
            half = (b - a) // 2
            q.buf[a:a + half] = np.iinfo(np.int64).max
            q.buf[a + half:b] = np.iinfo(np.int64).min
        stats: dict[str, Any] = {"intervals": q.n_intervals, "recheck": list(q.recheck),
                                 "z_order": list(view.encoder.names),
                                 "spilled_scan": view.spilled_scan}
        n = view.table.n_rows
        stats["bytes_searched"] = 2 * q.n_intervals * 8 * max(1, int(n).bit_length())
        k = view.groups.size
        if q.n_intervals and not p.empty:
            q.slices(q.n_intervals)
            if q.prefix is not None:
                q.prefix(1)
            else:
                xp.cumsum(q.offs[1:], out=q.offs[1:])
            if q.launch is None:  # the CPU knows the count at no cost: items of MIN_RUN
                items = -(-int(q.offs[-1]) // kernels.MIN_RUN)
                kernels.sorted_kernel(self.device)(self.device, items, np.int64(max(items, 1)),
                                                   *q.records,
                                                   threads_per_block=self.params.threads_per_block)
            else:
                q.launch(q.threads)
        # (no intervals: nothing ran, the touched count stays 0)
        q.compact(max(int(q.buf[0]), 1) if on_host else k)
        recs = groupagg.read_packed(q.packed, q.rec, min(k, FIRST_COPY_GROUPS), q.host)
        e = max(q.e, 1)
        sums = recs[:, 2:2 + e]
        if q.rec > 2 + e:
            mins, maxs = recs[:, 2 + e:2 + 2 * e], recs[:, 2 + 2 * e:2 + 3 * e]
        else:  # not asked: their start values
            mins = np.full_like(sums, np.iinfo(np.int64).max)
            maxs = np.full_like(sums, np.iinfo(np.int64).min)
        touched_records = int(recs[:, 1].sum())
        stats["records"] = touched_records
        bytes_read = touched_records * q.record + int(stats["bytes_searched"]) \
            if q.n_intervals and not p.empty else 0
        return _regroup(view, p, recs[:, 0], recs[:, 1], [sums, mins, maxs], q.e,
                        bytes_read, stats)


def _by_scan_then_group(xp: Any, z: Any, y: Any, span: int, k: int) -> Any:
    """The order of the records by Z code, and by group within a Z code: a thread's run of
    qualifying records then holds few groups, each summed in registers and added once."""
    if span * k < 1 << 62:  # one int64 key, one sort
        return xp.argsort(z * k + y)
    return xp.lexsort(xp.stack([y, z]))  # the last key first


def _spread2(v: np.ndarray) -> np.ndarray:
    """The bits of ``v`` (uint64, below 2^16) moved to the even positions."""
    v = v & np.uint64(0xFFFF)
    v = (v | (v << np.uint64(8))) & np.uint64(0x00FF00FF)
    v = (v | (v << np.uint64(4))) & np.uint64(0x0F0F0F0F)
    v = (v | (v << np.uint64(2))) & np.uint64(0x33333333)
    return (v | (v << np.uint64(1))) & np.uint64(0x55555555)


def bvh_codes(order: str, tri: np.ndarray, z_scale: int,
              legs: tuple[int, int]) -> np.ndarray | None:
    """The sort codes of the triangles ``tri`` (Z stretched by ``z_scale``, legs ``legs``) for
    ``order`` (one of :data:`ORDERS`; None: the tracer's own Morton codes). ``cells-z``: the
    Morton number of the ray-grid cell that holds the right-angle vertex, then the scan code;
    ``z-cells-z``: the high half of the scan code's bits, the cell, then the low half."""
    if order == "morton":
        return None
    z = (tri[:, 2].astype(np.int64) // z_scale).astype(np.uint64)
    cells = []
    for axis in range(2):
        step = max(1, legs[axis] // 2 - 1)  # the grid's spacing (_lattice's g)
        cells.append((tri[:, axis].astype(np.int64) // step).astype(np.uint64))
    cell = _spread2(cells[0]) << np.uint64(1) | _spread2(cells[1])  # below 2^32
    zbits = max(1, int(z.max(initial=0)).bit_length())
    low = np.uint64(zbits // 2 if order == "z-cells-z" else zbits)
    high = z >> low
    return (high << (low + np.uint64(32))) | (cell << low) | (z & ((np.uint64(1) << low) - 1))


def _triangles(x: np.ndarray, y: np.ndarray, z: np.ndarray, sx: int, sy: int) -> np.ndarray:
    """One right triangle per row: (a, b, c), (a + sx, b, c), (a, b + sy, c)."""
    n = len(x)
    tri = np.empty((n, 9), dtype=np.float32)
    tri[:, 0] = tri[:, 6] = x
    tri[:, 3] = x + sx
    tri[:, 1] = tri[:, 4] = y
    tri[:, 7] = y + sy
    tri[:, 2] = tri[:, 5] = tri[:, 8] = z
    return tri


def _recheck(view: RtcudbView, p: Plan, names: list[str], xp: Any) -> tuple[Any, ...]:
    """The re-checked attributes (rows of the view's scan array) and their intervals (CSR):
    ``(ridx, starts, lo, hi)``."""
    starts, lo, hi = [0], [], []
    for c in names:
        for a, b in p.filters[c]:
            lo.append(a)
            hi.append(b)
        starts.append(len(lo))
    ridx = [view.scan_rows[c] for c in names]
    return tuple(xp.asarray(np.array(a, dtype=np.int64)) for a in (ridx, starts, lo, hi))


def _filters_and_values(view: RtcudbView, p: Plan, max_intervals: int, xp: Any
                        ) -> tuple[list[tuple[int, int]], list[str], tuple[Any, ...], list[int],
                                   np.ndarray, np.ndarray]:
    """What both back ends make of ``p`` first: its Z-intervals, the attributes left to a
    re-check and their intervals (:func:`_recheck`), the positions of its value expressions in
    the view, each value's spill row (``spill_of``), and per value the aggregates asked
    (``need``, ``NEED_*`` bits)."""
    enc = view.encoder
    ivs, recheck = enc.intervals({c: p.filters[c] for c in enc.names if c in p.filters},
                                 max_intervals)
    recheck += [c for c in view.spilled_scan if c in p.filters]
    rcsr = _recheck(view, p, recheck, xp)
    assert view.values is not None
    vidx = [view.values.index(e) for e in p.values]
    spill_of = np.cumsum([0, *(0 if pk else 1 for pk in view.packer.packed)])
    need = np.zeros(max(1, len(vidx)), dtype=np.int64)
    for op, vi in p.aggs:
        need[vi] |= _NEED[op]
    return ivs, recheck, rcsr, vidx, spill_of, need


def _regroup(view: RtcudbView, p: Plan, present: np.ndarray, cnt: np.ndarray,
             per: list[np.ndarray], e: int, bytes_read: int, stats: dict[str, Any]) -> Groups:
    """The view's groups reached (``present``, ascending codes of its GROUP BY tuple, with
    their counts and per-expression sums, mins and maxs as rows) as the query's groups."""
    gd = view.groups
    names = list(gd.names)
    if list(p.group_by) == names:
        keys = [gd.tuples[j][present] for j in range(len(names))]
        return Groups(keys, cnt, [per[0][:, i] for i in range(e)],
                      [per[1][:, i] for i in range(e)],
                      [per[2][:, i] for i in range(e)], ordered=True,
                      bytes_read=bytes_read, stats=stats)
    if p.group_by:
        stacked = np.stack([gd.tuples[names.index(c)][present] for c in p.group_by], axis=1)
        uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        keys = [uniq[:, j] for j in range(uniq.shape[1])]
        m = uniq.shape[0]
    else:
        inv = np.zeros(len(present), dtype=np.int64)
        keys, m = [], 1
    c = np.zeros(m, dtype=np.int64)
    np.add.at(c, inv, cnt)
    sums, mins, maxs = [], [], []
    for i in range(e):
        s = np.zeros(m, dtype=np.int64)
        np.add.at(s, inv, per[0][:, i])
        lo = np.full(m, np.iinfo(np.int64).max)
        np.minimum.at(lo, inv, per[1][:, i])
        hi = np.full(m, np.iinfo(np.int64).min)
        np.maximum.at(hi, inv, per[2][:, i])
        sums.append(s)
        mins.append(lo)
        maxs.append(hi)
    return Groups(keys, c, list(sums), list(mins), list(maxs), ordered=True,
                  bytes_read=bytes_read, stats=stats)
