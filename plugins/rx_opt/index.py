"""``rx-opt``: optimized RX (Y. Wu, "Fast Database Join on Ray-tracing Core Equipped GPU", MSc
thesis, University of Victoria, 2025, Ch. 3-5), on indexzoo's ray tracer and the RT query layer,
with every optimization as a parameter and the thesis's final "optimized RTX" (§5.15) as the
defaults.

Thesis -> code
--------------
* Sorted keys (§4.1): (key, rowID) pairs radix-sorted at build (``sort_pairs``; the sort counts
  in the build time); rowIDs are positions in the caller's array, so sums and rowIDs are the
  caller's, not sorted positions.
* Duplicate compression (§4.2, ``compress_duplicates``): one primitive per distinct key; the
  first sorted position of every distinct key is kept (``first``), and a lookup scans the key's
  run of duplicates from there.
* Sub-BVHs under one IAS (Alg. 5, ``partitions``): contiguous slices of the sorted (distinct)
  keys, one GAS each, built one after another (``build_sliced_ias``); a hit's position is the
  slice's offset plus the primitive index (``programs.py``).
* Closest hit + linear scan (Alg. 3 + 4, ``range_method="closest_scan"``): a closest-hit ray
  finds the first key >= lo; a scan of the sorted pairs from there stops at the first key > hi
  (``indexzoo.native.runs``: galloping, so a run of m keys costs O(log m) to delimit; sums and
  rowIDs visit every match as Alg. 4 does). ``range_method="anyhit"`` is RX's: one ray per
  occupied row, any-hit per hit.
* Sorted probes (§3.4, ``sort_probes``): the contract's sorted-probe option for point batches;
  the sort and the un-permute count in the lookup time.
* Inverse mapping (Alg. 6, ``inverse_mapping``): a point batch builds a BVH over its distinct
  probes and casts one ray per distinct key of the index; a key's hit names the probe with its
  value, whose lookups get the key's run.

Decisions where the thesis is ambiguous
---------------------------------------
* [AMBIG] Multi-row ranges (the thesis's §4.1, Alg. 3): at most two closest-hit rays per range. The sorted
  distinct high parts of the keys (``highs``, kept from the build as rx keeps them) name the
  first occupied row at or after lo's; ray 1 runs on it from lo's x part (or from 0 when lo's
  own row is empty) to hi's x part (or the row's end); only if it misses, ray 2 runs on the next
  occupied row from x = 0, if that row is not past hi's. The first key >= lo is in one of these
  two rows, so no range needs more, whatever it spans.
* [AMBIG] Point lookups: one perpendicular ray. With compression it stops at its first hit
  (the one primitive of the key: ``FIRST``); without, the closest hit among the coincident
  primitives of a key is the smallest primitive index, the first occurrence (the engine breaks
  ties on it, as the thesis assumes), and the scan starts there.
* [AMBIG] Without compression, partition cuts move to the start of a run of duplicates, so no
  run spans two sub-BVHs (the closest hit of an IAS breaks ties on the primitive index within a
  GAS, which would not name the first occurrence across two).
* [AMBIG] Alg. 5 hard-codes one partition; the final configuration uses 2^4 = 16, the default.
  ``partitions`` larger than the number of primitive keys gives one key per slice.
* [AMBIG] Inverse mapping: probes are deduplicated (their distinct values become primitives,
  their duplicates share a result), keys too (one ray per distinct key); ``auto`` inverts a
  batch with fewer distinct probes than the index has distinct keys. The index's own BVH is
  built either way (range lookups need it, and its footprint stays accounted from the build),
  so the thesis's "build plus probe" comparison (Fig. 5.14) is measured here as probe time,
  the per-batch BVH build included. Range lookups are never inverted (the thesis leaves that
  open).
* [AMBIG] Sorted probes order point batches, not ranges (``sorted_probe_kinds``): the thesis
  sorts the probe set of a join (point lookups). Ordering ranges by ``lo`` cost more than it
  saved, since each range's thread already reads one contiguous run (measured:
  ``docs/plugins/rx-opt.md``).
* [AMBIG] ``range_method="anyhit"`` with compression: a hit stands for its key's whole run.
* [AMBIG] Engines (``engine``, as rx's): on an engine without in-kernel queries (OptiX) the
  closest-hit rays are query launches (:mod:`.launched`: a range's two rays in one
  ``CLOSEST`` launch, which answers with the first ray's match that hits, as the kernel casts
  ray 2 only on a miss); without ordered closest-hit ties a hit moves to its key's first
  duplicate before the scan; AABB programs read the rays' integer bounds on an engine with
  conservative bounds. OptiX refuses generated geometry and spheres in several partitions;
  ``auto`` keeps the software engine for them.
* Every key mode, split and primitive of ``rx`` works as in ``rx``; ``update`` is not offered
  (the thesis has none: build again). Spheres are confirmed against the ray's integer bounds as
  in ``rx``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from indexzoo import (
    BuildState,
    Capabilities,
    Footprint,
    GpuIndex,
    IndexParams,
    InvalidInput,
    Operation,
    answers,
)
from indexzoo.devices import to_device, xp_of
from indexzoo.native import rt
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt import select_engine
from indexzoo.native.sort import sort_pairs
from indexzoo.native.targets import Slot
from indexzoo.persist import StateSchema
from indexzoo.validation import as_1d

from .layout import run_starts, slice_cuts
from .params import RxOptParams
from .saved import RX_OPT_SCHEMA

if TYPE_CHECKING:
    from indexzoo.native import csr
    from indexzoo.native import runs as run_kernels

    from . import launched, search
    from . import programs as opt_programs
else:  # imported when an index is built or loaded: the registry lists the class without them
    csr = lazy_module("indexzoo.native.csr")
    run_kernels = lazy_module("indexzoo.native.runs")
    launched = lazy_module("indexzoo.plugins.rx_opt.launched")
    search = lazy_module("indexzoo.plugins.rx_opt.search")
    opt_programs = lazy_module("indexzoo.plugins.rx_opt.programs")

__all__ = ["OptRxState", "RxOptIndex"]

_U64 = np.uint64


class OptRxState(BuildState):
    """One build of ``rx-opt``."""

    keys: Any      # sorted keys
    rowids: Any    # their rowIDs
    first: Any     # compression: first sorted position of each distinct key, then n (int64)
    pkeys: Any     # the primitive keys: distinct sorted keys, or every sorted key
    highs: Any     # sorted distinct high parts of the keys (occupied rows)
    scene: rt.Scene  # the BVH over the primitive keys: one GAS, or an IAS over partitions
    part_offsets: Any  # int64: the position of each partition's first primitive
    no_keys: Any   # a one-element stand-in for the keys where the programs read none
    no_rays: Any   # a one-element stand-in for the ray counts the lookup kernel keeps
    peak: int


class RxOptIndex(rt.KeySceneIndex, GpuIndex[OptRxState]):
    """Optimized RX: sorted keys, closest hit + scan, compressed duplicates, sub-BVHs, sorted
    probes, inverse mapping."""

    name: ClassVar[str] = "rx-opt"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-28-restructure-324db91/paper-scan/: 115 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 8e5, "cuda": 5.8e8}
    Params: ClassVar[type[IndexParams]] = RxOptParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: [AMBIG] sorted probes order point batches only (see the module docstring)
    sorted_probe_kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    #: the sorted pairs and what they make, the scene checked against them (see saved.py)
    state_schema: ClassVar[StateSchema] = RX_OPT_SCHEMA
    params: RxOptParams

    # -------------------------------------------------------------- build
    def _build(self, st: OptRxState, keys: Any) -> None:
        p, coder, xp = self.params, self.coder, st.xp
        coder.check_keys(keys, lambda i: f"key {int(keys[i])} at rowID {i}")
        pairs = sort_pairs(keys, st.rowid_dtype)
        st.keys, st.rowids = pairs.keys, pairs.rowids
        n = int(keys.shape[0])
        if p.compress_duplicates:
            starts = run_starts(xp, st.keys)
            st.first = xp.concatenate([starts, xp.asarray([n], dtype=np.int64)])
            st.pkeys = st.keys[starts]
        else:
            st.first = None
            st.pkeys = st.keys
        _, high = coder.parts(st.pkeys)
        st.highs = high[run_starts(xp, high)] if n else high
        st.no_keys = xp.zeros(1, dtype=_U64)
        st.no_rays = xp.zeros(1, dtype=np.int8)
        held = int(st.keys.nbytes + st.rowids.nbytes + st.highs.nbytes) + (
            0 if st.first is None else int(st.first.nbytes + st.pkeys.nbytes))
        engine = self._engine(st.device)
        st.scene, st.part_offsets, scene_peak = self._scene(engine, st.pkeys, held)
        st.peak = max(pairs.peak_bytes, held, scene_peak)

    def _engine(self, device: str) -> rt.Engine:
        """The engine of ``params.engine`` on ``device`` (:func:`select_engine`, as rx):
        ``auto`` keeps the software engine for what OptiX does not take (generated geometry,
        spheres in several partitions)."""
        p = self.params
        takes = None
        if p.geometry == "generated":
            takes = "generated geometry"
        elif p.primitive == "sphere" and p.partitions > 1:
            takes = "spheres in several partitions"
        return select_engine(p.engine, device, optix_takes=takes)

    def _cuts(self, pkeys: Any) -> list[int]:
        """Contiguous slices of the primitive keys (Alg. 5), moved to run starts without
        compression."""
        return slice_cuts(pkeys, self.params.partitions, self.params.compress_duplicates)

    def _scene(self, engine: rt.Engine, pkeys: Any, held: int) -> tuple[rt.Scene, Any, int]:
        p, coder = self.params, self.coder
        xp = xp_of(pkeys)
        cuts = self._cuts(pkeys)
        if len(cuts) <= 2:
            built = rt.key_gas(coder, p.primitive, p.geometry, pkeys, leaf_size=p.leaf_size,
                               compact=p.compact, engine=engine)
            return built.gas, xp.zeros(1, dtype=np.int64), held + built.peak_bytes
        generated = p.geometry == "generated"

        def make(s: int, e: int) -> Any:
            part = pkeys[s:e]
            return part if generated else rt.key_primitives(coder, p.primitive, part)

        ias = engine.build_sliced_ias(
            rt.KIND[p.primitive], cuts, make, rt.SPHERE_RADIUS if p.primitive == "sphere" else 0.0,
            p.leaf_size, geometry=rt.geometry_function(coder, p.primitive) if generated else None,
            compact=p.compact, held=held, codes=lambda s, e: rt.key_codes(pkeys[s:e]))
        return ias, xp.asarray(cuts[:-1], dtype=np.int64), ias.footprint().peak_build_bytes

    def _footprint(self, st: OptRxState) -> Footprint:
        parts = {"keys": int(st.keys.nbytes), "rowids": int(st.rowids.nbytes),
                 "high_parts": int(st.highs.nbytes)}
        if st.first is not None:
            parts["distinct_keys"] = int(st.pkeys.nbytes)
            parts["first_positions"] = int(st.first.nbytes)
        parts.update(st.scene.footprint().breakdown)
        parts["partition_offsets"] = int(st.part_offsets.nbytes)
        return Footprint(breakdown=parts, peak_build_bytes=max(st.peak, sum(parts.values())))

    # -------------------------------------------------------------- saving
    def _save_state(self, st: OptRxState) -> dict[str, Any]:
        """The state as saved, without the scene where the generic format cannot hold it: a
        scene of an engine that does not save scenes (OptiX: a handle on one GPU) or of
        generated geometry (its primitives come from a function). Such a scene is built again
        on load from the primitive keys, on the engine of the device it is loaded onto; the
        partition offsets follow from the same keys."""
        saved = super()._save_state(st)
        if not st.scene.engine.saves_scenes or self.params.geometry == "generated":
            saved["scene"] = None
        return saved

    def _load_state(self, st: OptRxState, saved: dict[str, Any]) -> None:
        super()._load_state(st, saved)
        if st.scene is None:  # built again (see _save_state)
            st.scene, st.part_offsets, _ = self._scene(self._engine(st.device), st.pkeys, 0)

    # -------------------------------------------------------------- tracing
    def _record(self, st: OptRxState, offsets: Any, ray_lo: Callable[[Any], Any] | None,
                ray_hi: Callable[[Any], Any] | None) -> Callable[[int, int, Any], opt_programs.OptRxRecord]:
        """The launch record maker of a batch; ``ray_lo``/``ray_hi`` map the rays' lookups to
        the integer bounds a sphere hit is confirmed against."""
        p, c = self.params, self.coder
        confirm = p.primitive == "sphere"
        keys = st.no_keys if p.primitive == "triangle" else st.pkeys
        bounds = confirm or self._needs_bounds(st.scene)

        def record(s: int, e: int, owner: Any) -> opt_programs.OptRxRecord:
            if bounds and ray_lo is not None and ray_hi is not None:
                lo = ray_lo(owner).astype(_U64, copy=False)
                hi = ray_hi(owner).astype(_U64, copy=False)
            else:
                lo = hi = st.no_keys
            return opt_programs.OptRxRecord(offsets, keys, np.int64(c.x_kind), np.int64(c.x_bits),
                                            np.int64(c.y_bits), lo, hi, np.bool_(confirm))

        return record

    def _needs_bounds(self, scene: rt.Scene) -> bool:
        """Whether the programs read the rays' integer bounds: AABB scenes on an engine that
        may hand the intersection program boxes near the ray (OptiX; ``programs.cu``)."""
        return self.params.primitive == "aabb" and scene.engine.conservative_bounds

    def _trace(self, fn: Any, scene: rt.Scene, batch: rt.query.RayBatch) -> Any:
        p = self.params
        return fn(scene, batch, opt_programs.PROGRAMS[p.primitive], max_rays=p.max_rays,
                  threads_per_block=p.threads_per_block)

    def _positions(self, res: Any) -> Any:
        """Query-layer results as int64 positions (-1: no hit)."""
        xp = xp_of(res)
        return xp.where(res == rt.query.MISS, np.int64(-1), res.astype(np.int64))

    # -------------------------------------------------------------- point lookups
    def _batch_of_points(self, st: OptRxState, q: Any, offsets: Any) -> rt.query.RayBatch:
        coder, xp = self.coder, st.xp
        legal = coder.legal(q)
        n = int(q.shape[0])
        record = self._record(st, offsets, lambda o: q[o], lambda o: q[o])
        if bool(legal.all()):
            raygen = rt.perpendicular_raygen(coder)
            return rt.query.FunctionBatch.of(
                None, lambda s, e, owner: rt.query.Generated(raygen, q[s:e]), record,
                n_queries=n, xp=xp)
        return rt.query.FunctionBatch.of(
            legal.astype(np.int64), lambda s, e, owner: rt.perpendicular_rays(coder, q[owner]),
            record)

    def _inverted(self, st: OptRxState, q: Any) -> bool:
        mode = self.params.inverse_mapping
        if mode == "off" or self.params.range_method == "anyhit":
            return False
        if mode == "on":
            return True
        return int(st.xp.unique(q).shape[0]) < int(st.pkeys.shape[0])

    def _runs_of_points(self, st: OptRxState, q: Any) -> tuple[Any, Any]:
        """(first sorted position, count) of every point lookup's run (count 0: a miss)."""
        if self._inverted(st, q):
            return self._inverse_runs(st, q)
        return self._launch_lookup(st, True, q, q)

    def _inverse_runs(self, st: OptRxState, q: Any) -> tuple[Any, Any]:
        """Alg. 6: a BVH over the batch's distinct probes, one ray per distinct key."""
        p, coder, xp = self.params, self.coder, st.xp
        n_q = int(q.shape[0])
        first = xp.zeros(n_q, dtype=np.int64)
        count = xp.zeros(n_q, dtype=np.int64)
        probes, which = xp.unique(q, return_inverse=True)
        legal = coder.legal(probes)
        if not bool(legal.all()):  # probes no key can equal: they miss
            probes = probes[legal]
            remap = xp.full(legal.shape[0], -1, dtype=np.int64)
            remap[legal] = xp.arange(int(probes.shape[0]), dtype=np.int64)
            which = remap[which]
        if probes.shape[0] == 0:
            return first, count
        gas = rt.key_gas(coder, p.primitive, p.geometry, probes, leaf_size=p.leaf_size,
                         compact=p.compact, engine=st.scene.engine).gas
        if st.first is None:
            starts = run_starts(xp, st.keys)
            keys = st.keys[starts]
            stops = xp.concatenate([starts[1:], xp.asarray([st.n], dtype=np.int64)])
        else:
            starts, stops, keys = st.first[:-1], st.first[1:], st.pkeys
        confirm = p.primitive == "sphere"
        bounds = confirm or self._needs_bounds(gas)
        zero = xp.zeros(1, dtype=np.int64)

        def record(s: int, e: int, owner: Any) -> opt_programs.OptRxRecord:
            lo = keys[owner].astype(_U64, copy=False) if bounds else st.no_keys
            prim_keys = st.no_keys if p.primitive == "triangle" else probes
            return opt_programs.OptRxRecord(zero, prim_keys, np.int64(coder.x_kind), np.int64(coder.x_bits),
                                            np.int64(coder.y_bits), lo, lo, np.bool_(confirm))

        raygen = rt.perpendicular_raygen(coder)
        batch = rt.query.FunctionBatch.of(
            None, lambda s, e, owner: rt.query.Generated(raygen, keys[s:e]), record,
            n_queries=int(keys.shape[0]), xp=xp)
        hit = self._positions(self._trace(rt.query.first, gas, batch))  # key -> probe
        run_of_probe = xp.full(int(probes.shape[0]), -1, dtype=np.int64)
        found = xp.nonzero(hit >= 0)[0]
        run_of_probe[hit[found]] = found
        run = xp.where(which >= 0, run_of_probe[xp.maximum(which, 0)], -1)
        ok = run >= 0
        first[ok] = starts[run[ok]]
        count[ok] = stops[run[ok]] - starts[run[ok]]
        return first, count

    # -------------------------------------------------------------- closest hit + scan
    def _runs_of_ranges(self, st: OptRxState, lo: Any, hi: Any) -> tuple[Any, Any]:
        """(first sorted position, count) of every range's keys: at most two closest-hit rays
        (see the module docstring), then the scan."""
        return self._launch_lookup(st, False, lo, hi)

    def _launch_lookup(self, st: OptRxState, point: bool, lo: Any, hi: Any, rays: Any = None,
                device: str | None = None) -> tuple[Any, Any]:
        """One launch of :func:`.search.lookup_kernel`: each thread casts its lookup's rays
        and scans its run (``rays``: an int8 array of zeros that receives each lookup's number
        of rays; ``device``: the index's unless a test runs the GPU kernel in the simulator)."""
        p, coder, xp = self.params, self.coder, st.xp
        q = int(lo.shape[0])
        first = xp.empty(q, dtype=np.int64)
        count = xp.empty(q, dtype=np.int64)
        if q == 0:
            return first, count
        lo = lo.astype(_U64, copy=False)
        hi = lo if point else hi.astype(_U64, copy=False)
        scene = st.scene
        if not scene.engine.in_kernel_queries:
            return self._launched_lookup(st, point, lo, hi, rays)
        kernel = search.lookup_kernel(scene.engine, coder, p.primitive, scene.geometry,
                                      scene.instanced, st.first is not None, point, p.range_ray,
                                      rays is not None)
        kernel(device or self.device, q, lo, hi, st.keys,
               st.no_keys if st.first is None else st.first, st.highs, scene.query_args(),
               self._launch_record(st, lo, hi), st.no_rays if rays is None else rays, first,
               count, threads_per_block=p.threads_per_block)
        return first, count

    def _prepared_point(self, st: OptRxState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups as two bound launches (the small-batch path): the lookup kernel,
        its fixed arguments bound, writes each lookup's run, and :data:`~indexzoo.native.runs.
        RUN_ROWID` its first rowID. Where the kernel reads more than the lookups per call
        (spheres confirm hits against the lookup's bounds in the launch record), where the
        engine cannot query from a kernel (OptiX), and for RX's any-hit method or inverse
        mapping, the hook answers."""
        p, scene = self.params, st.scene
        if (op.out != "rowid" or p.range_method != "closest_scan" or p.inverse_mapping != "off"
                or p.primitive == "sphere" or not scene.engine.in_kernel_queries):
            return None
        kernel = search.lookup_kernel(scene.engine, self.coder, p.primitive, scene.geometry,
                                      scene.instanced, st.first is not None, True, p.range_ray, False)
        u64 = Slot(np.dtype(_U64))
        runs = kernel.bind(self.device, u64, u64, st.keys,
                           st.no_keys if st.first is None else st.first, st.highs,
                           scene.query_args(), self._launch_record(st, st.no_keys, st.no_keys),
                           st.no_rays, Slot(np.dtype(np.int64)), Slot(np.dtype(np.int64)),
                           threads_per_block=p.threads_per_block)
        answer = run_kernels.prepared_run_rowids(self.device, runs, st.rowids, st.rowid_dtype, st.miss,
                                                 st.xp, threads_per_block=p.threads_per_block)
        if np.dtype(st.native_dtype) == np.dtype(_U64):
            return answer
        return lambda q: answer(q.astype(_U64))

    def _launched_lookup(self, st: OptRxState, point: bool, lo: Any, hi: Any,
                         rays: Any = None) -> tuple[Any, Any]:
        """The closest-hit rays as query launches, then the scan (:mod:`.launched`): for an
        engine whose rays cannot be cast from inside a kernel."""
        p, scene = self.params, st.scene
        if point:
            batch = self._batch_of_points(st, lo, st.part_offsets)
        else:
            batch = launched.range_batch(self.coder, lo, hi, st.highs, p.range_ray == "zero",
                                         self._record(st, st.part_offsets, lambda o: lo[o],
                                                      lambda o: hi[o]), st.xp)
        if rays is not None:
            rays[:] = (batch.starts[1:] - batch.starts[:-1]).astype(np.int8)
        pos = self._positions(self._trace(rt.query.closest, scene, batch))
        return launched.runs_from_hits(self.device, pos, point, lo, hi, st.keys, st.first,
                                       scene.engine.ordered_ties)

    def _launch_record(self, st: OptRxState, lo: Any, hi: Any) -> opt_programs.OptRxRecord:
        """The programs' launch record of a lookup kernel (``lo``/``hi``: the lookups' uint64
        bounds, read by the sphere confirmation at the lookup's index)."""
        p, coder = self.params, self.coder
        keys = st.no_keys if p.primitive == "triangle" else st.pkeys
        return opt_programs.OptRxRecord(st.part_offsets, keys, np.int64(coder.x_kind),
                                        np.int64(coder.x_bits), np.int64(coder.y_bits), lo, hi,
                                        np.bool_(p.primitive == "sphere"))

    def rays_cast(self, lo: Any, hi: Any | None = None) -> list[int]:
        """The closest-hit rays each lookup casts: of ranges ``[lo, hi]``, or of point lookups
        ``lo`` when ``hi`` is None (keys of the index's key type; ``range_method="closest_scan"``,
        point batches not inverted). A diagnostic, for tests and for reading a workload."""
        if self.params.range_method != "closest_scan":
            raise InvalidInput("rays_cast counts the closest-hit rays of range_method="
                               "'closest_scan'")
        st = self._live()
        a = as_1d(lo, "lo")
        b = a if hi is None else as_1d(hi, "hi")
        if a.shape != b.shape:
            raise InvalidInput(f"lo and hi must have the same length, got {a.shape[0]} and "
                               f"{b.shape[0]}")
        enc_lo, enc_hi = st.keymap.encode_ranges(a, b)
        enc_lo, enc_hi = to_device(enc_lo, self.device), to_device(enc_hi, self.device)
        rays = st.xp.zeros(int(enc_lo.shape[0]), dtype=np.int8)
        self._launch_lookup(st, hi is None, enc_lo, enc_hi, rays)
        return [int(r) for r in (rays.get() if st.xp is not np else rays).tolist()]

    # -------------------------------------------------------------- RX's any-hit ranges
    def _anyhit_runs(self, st: OptRxState, lo: Any, hi: Any, point: bool) -> tuple[Any, Any,
                                                                                    Any]:
        """RX's method: every hit primitive by any-hit (one ray per occupied row, or one
        perpendicular ray per point lookup); returns CSR offsets per lookup and, per hit, the
        first sorted position and length of its run."""
        coder, xp, p = self.coder, st.xp, self.params
        scene, offsets = st.scene, st.part_offsets
        if point:
            batch = self._batch_of_points(st, lo, offsets)
        else:
            casts, first_row = rt.occupied_rows(coder, lo, hi, st.highs)
            starts = csr.offsets_from_counts(casts)

            def rays(s: int, e: int, owner: Any) -> rt.query.Rays:
                return rt.occupied_row_rays(coder, lo, hi, st.highs, first_row, starts, owner, s,
                                            p.range_ray == "zero")

            batch = rt.query.FunctionBatch(
                int(lo.shape[0]), starts, False, rays,
                self._record(st, offsets, lambda o: lo[o], lambda o: hi[o]))
        hit_offsets, hits = self._trace_collect(scene, batch)
        pos = hits.astype(np.int64)
        if st.first is None:
            return hit_offsets, pos, xp.ones(pos.shape[0], dtype=np.int64)
        return hit_offsets, st.first[pos], st.first[pos + 1] - st.first[pos]

    def _trace_collect(self, scene: rt.Scene, batch: rt.query.RayBatch) -> tuple[Any, Any]:
        p = self.params
        return rt.query.collect(scene, batch, opt_programs.PROGRAMS[p.primitive], rowid_dtype=np.int64,
                                max_rays=p.max_rays, threads_per_block=p.threads_per_block)

    # -------------------------------------------------------------- answers from runs
    def _runs(self, st: OptRxState, kind: str, args: tuple[Any, ...]) -> tuple[Any, Any]:
        if kind == "point":
            return self._runs_of_points(st, args[0])
        return self._runs_of_ranges(st, *args)

    @answers(kinds=("point", "range"), outs=("rowid", "count", "sum", "rowids"))
    def _answer(self, st: OptRxState, op: Operation, *args: Any) -> Any:
        """Every out mode from the runs of sorted keys each lookup matches (closest hit +
        scan), or from RX's any-hit rays (``range_method="anyhit"``)."""
        kind, out = op
        tpb = self.params.threads_per_block
        if self.params.range_method == "anyhit":
            return self._answer_anyhit(st, kind, out, *args)
        first, count = self._runs(st, kind, args)
        return run_kernels.answer_runs(self.device, out, st.rowids, first, count, st.values,
                                       st.rowid_dtype, st.miss, group=1 << self.params.scan_group_log,
                                       threads_per_block=tpb)

    def _answer_anyhit(self, st: OptRxState, kind: str, out: str, *args: Any) -> Any:
        xp = st.xp
        lo, hi = (args[0], args[0]) if kind == "point" else args
        hit_offsets, starts, lengths = self._anyhit_runs(st, lo, hi, kind == "point")
        per_hit = csr.offsets_from_counts(lengths)
        counts = per_hit[hit_offsets[1:]] - per_hit[hit_offsets[:-1]]
        if out == "count":
            return counts.astype(st.rowid_dtype)
        _, rows = csr.gather_runs(self.device, st.rowids, starts, lengths,
                                  threads_per_block=self.params.threads_per_block)
        offsets = csr.offsets_from_counts(counts)
        if out == "rowids":
            return offsets, rows
        if out == "rowid":
            has = counts > 0
            if rows.shape[0] == 0:
                return xp.full(int(counts.shape[0]), st.miss, dtype=st.rowid_dtype)
            return xp.where(has, rows[xp.where(has, offsets[:-1], 0)], st.miss).astype(
                st.rowid_dtype)
        picked = rows.astype(_U64) if st.values is None else st.values[rows]
        prefix = xp.zeros(int(picked.shape[0]) + 1, dtype=_U64)
        if picked.shape[0]:
            xp.cumsum(picked, dtype=_U64, out=prefix[1:])
        return prefix[offsets[1:]] - prefix[offsets[:-1]]


