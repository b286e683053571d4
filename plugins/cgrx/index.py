"""``cgrx``: coarse-granular RX (Henneberg, Kharal & Schuhknecht, arXiv 2406.03965, as described
in Y. Wu's MSc thesis, §3.2, and built by the public artifact), on indexzoo's ray tracer and the
RT query layer: one triangle per bucket of sorted keys, a successor search of at most five
closest-hit rays, then a search and scan in the sorted keys.

Paper / artifact -> code
------------------------
* Build: radix-sorted (key, rowID) pairs (``sort_pairs``); buckets of ``2^bucket_log`` sorted
  keys, each represented by its largest key; the coordinate split, slanted triangles, moved and
  flipped representatives, end-of-row and end-of-plane triangles of the artifact
  (:mod:`.scene`, :mod:`.coords`); one GAS over them.
* Finding the bucket of a lower bound ``lo`` (the thesis's §3.2 and the artifact): none beyond
  the largest key; bucket 0 up to the first representative; else a ray +x from lo's point
  along its row; if it misses, a ray +y along the row-marker column of lo's plane, whose hit is
  an end-of-plane triangle (its bucket), a flipped triangle (its bucket: the only
  representative of that row) or another marker, whose row a ray +x from x = 0 then searches;
  if the +y ray misses too, a ray +z along the plane-marker column finds the next plane, a ray
  +y from y = 0 its first marked row, and (unless that hit is flipped) a ray +x that row's
  first representative. At most five rays, chained in one thread: one launch per batch does
  the search and the in-bucket search (:mod:`.search`, ``optixTrace`` called from a
  ray-generation program, as the artifact's raygen does).
* In the bucket: the first position with a key >= lo at or after the bucket's start, and the
  run of keys <= hi from there, skipping keys < lo (a moved representative can start the scan
  one bucket early): ``indexzoo.native.runs`` (galloping, so a bucket of 2^b keys costs O(b)).
  Sums and rowIDs visit every match; with ``scan_group_log > 0`` the GPU sums a run with groups
  of ``2^scan_group_log`` threads, each reading consecutive pairs (the collaborative scan).

Decisions
---------
* [AMBIG] The row after a +y (or +z) hit is taken from the hit triangle's own row (plane)
  instead of ``y + ey + t_hit``: the same row, exactly, where float32 ``t`` far along an axis
  (up to 2^38 for y) could round across half a row.
* [AMBIG] Triangles are stored in (z, y, x) order, so that the engine's tie-break (smaller
  primitive index) prefers the nearer of two triangles whose float32 distances round equal.
* [AMBIG] ``geometry="generated"`` (default): the engine makes each triangle from an 8-byte
  position code during traversal, the same float32 vertices as the 36 bytes of
  ``geometry="stored"`` (OptiX's GAS, which keeps vertices, flipped ones included). Whether a
  hit triangle is flipped (the only representative of its row) is then answered from the keys
  after the hit (the lookup kernel's ``flipped``: two key loads) instead of from its winding; the stored
  triangles' front faces agree with it (tested). Leaves of 8 triangles by default; both
  choices keep the scene small next to the sorted pairs.
* [AMBIG] End-of-row and end-of-plane triangles are also made for the last representative
  (they stand for a bucket that does not exist, but mark its row and plane for the +y and +z
  rays; no lookup past the largest key casts a ray).
* Equal representatives: only the first of a run is mapped (plus a moved one), as in the
  artifact; a lookup that lands in any of their buckets scans on from there.
* Point lookups are ranges ``[q, q]`` and see every duplicate; ``rowid`` is the first match in
  key order (the sort is stable: the smallest rowID).
* Results follow the contract: rowIDs are positions in the caller's array, sums are uint64.
* [AMBIG] Engines (``engine``, as rx's): an engine without generated geometry (OptiX) stores
  the triangles whatever ``geometry`` says; one without in-kernel queries casts the search's
  rays one link per query launch (:mod:`.launched`); one without ordered closest-hit ties
  replaces a bucket that starts past the first key >= lo by a binary search for it.
* [AMBIG] "x4" is read as the artifact does: 16-thread scan groups (``scan_group_log=4``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from indexzoo import (
    BuildState,
    Capabilities,
    Footprint,
    GpuIndex,
    IndexParams,
    Operation,
    Unsupported,
    answers,
)
from indexzoo.devices import to_device
from indexzoo.native import rt
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt import select_engine
from indexzoo.native.sort import sort_pairs
from indexzoo.native.targets import Slot
from indexzoo.persist import StateSchema
from indexzoo.validation import as_1d

from .coords import PATH_WIDTH, CgCoder
from .params import CgrxParams
from .saved import CGRX_SCHEMA

if TYPE_CHECKING:
    from indexzoo.native import runs as run_kernels

    from . import launched, search
    from . import programs as cg_programs
    from . import scene as cg_scene
else:  # imported when an index is built or loaded: the registry lists the class without them
    run_kernels = lazy_module("indexzoo.native.runs")
    launched = lazy_module("indexzoo.plugins.cgrx.launched")
    search = lazy_module("indexzoo.plugins.cgrx.search")
    cg_programs = lazy_module("indexzoo.plugins.cgrx.programs")
    cg_scene = lazy_module("indexzoo.plugins.cgrx.scene")

__all__ = ["CgrxIndex", "CgrxState"]



class CgrxState(BuildState):
    """One build of ``cgrx``: the sorted pairs and the scene."""

    keys: Any
    rowids: Any
    coder: CgCoder
    scene: cg_scene.CgScene | None  # None for an empty build
    peak: int
    no_path: Any  # the lookup kernel's ``path`` when it records nothing (one row)


class CgrxIndex(rt.EngineIndex, GpuIndex[CgrxState]):
    """Coarse-granular RX: one triangle per bucket of sorted keys, at most five closest-hit rays
    per lookup, a search and scan in the bucket."""

    name: ClassVar[str] = "cgrx"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-26-defaults-c90bde0/: 14.3-16.5 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 4e6, "cuda": 4.1e9}
    Params: ClassVar[type[IndexParams]] = CgrxParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: a point lookup q is the range [q, q]: the successor search of q finds its run
    points_as_ranges: ClassVar[bool] = True
    #: the sorted pairs and the scene they make (see saved.py)
    state_schema: ClassVar[StateSchema] = CGRX_SCHEMA
    params: CgrxParams

    # -------------------------------------------------------------- build
    def _build(self, st: CgrxState, keys: Any) -> None:
        p = self.params
        pairs = sort_pairs(keys, st.rowid_dtype)
        st.keys, st.rowids = pairs.keys, pairs.rowids
        st.coder = CgCoder.for_dtype(keys.dtype)
        st.no_path = st.xp.full((1, PATH_WIDTH), -1, dtype=np.int8)
        held = int(st.keys.nbytes + st.rowids.nbytes)
        if keys.shape[0] == 0:
            st.scene, st.peak = None, pairs.peak_bytes
            return
        st.scene = cg_scene.build_scene(st.coder, st.keys, 1 << p.bucket_log, p.leaf_size,
                                        p.compact, p.geometry, self._engine(st.device))
        scene_bytes = sum(st.scene.nbytes().values())
        # the scene's kernels hold a kind, a count and an offset per bucket (17 bytes) and a
        # position code, an int64 id and a flip per triangle (17 bytes) besides the engine's
        # build
        scene_build = 17 * st.scene.n_buckets + 17 * int(st.scene.ids.shape[0])
        st.peak = max(pairs.peak_bytes,
                      held + st.scene.gas.footprint().peak_build_bytes + scene_build,
                      held + scene_bytes)

    def _engine(self, device: str) -> rt.Engine:
        """The engine of ``params.engine`` on ``device`` (:func:`select_engine`, as rx's):
        OptiX takes every configuration (it stores the triangles)."""
        return select_engine(self.params.engine, device)

    def _save_state(self, st: CgrxState) -> dict[str, Any]:
        """The state as saved: generated geometry's GAS without its function (made again
        from the coder on load); a scene on an engine that cannot save it (OptiX: a handle on
        one GPU) not at all (built again on load from the sorted keys)."""
        saved = super()._save_state(st)
        sc = st.scene
        if sc is not None and not sc.gas.engine.saves_scenes:
            saved["scene"] = None
        elif sc is not None and sc.gas.generated:
            saved["scene"] = dataclasses.replace(sc, gas=dataclasses.replace(sc.gas,
                                                                              geometry=None))
        return saved

    def _load_state(self, st: CgrxState, saved: dict[str, Any]) -> None:
        super()._load_state(st, saved)
        sc = st.scene
        p = self.params
        if sc is None and int(st.keys.shape[0]):  # saved from OptiX: build again
            st.scene = cg_scene.build_scene(st.coder, st.keys, 1 << p.bucket_log, p.leaf_size,
                                            p.compact, p.geometry, self._engine(st.device))
            return
        if sc is not None and self.params.geometry == "generated":
            gas = dataclasses.replace(sc.gas, geometry=cg_scene.triangle_function(st.coder))
            st.scene = dataclasses.replace(sc, gas=gas)

    def _footprint(self, st: CgrxState) -> Footprint:
        parts = {"keys": int(st.keys.nbytes), "rowids": int(st.rowids.nbytes)}
        if st.scene is not None:
            parts.update(st.scene.nbytes())
        return Footprint(breakdown=parts, peak_build_bytes=max(st.peak, sum(parts.values())))

    @property
    def scene_counts(self) -> dict[str, int]:
        """How many representatives, moved, flipped, end-of-row and end-of-plane triangles."""
        sc = self._live().scene
        return {} if sc is None else dict(sc.counts)

    # -------------------------------------------------------------- lookups
    def _runs(self, st: CgrxState, lo: Any, hi: Any, path: Any = None) -> tuple[Any, Any]:
        """(first sorted position, count) of the keys in every ``[lo, hi]``: the successor
        search and the in-bucket search, one kernel (:mod:`.search`); ``path`` records the
        rays (see :func:`.search.lookup_kernel`)."""
        xp, q = st.xp, int(lo.shape[0])
        first = xp.empty(q, dtype=np.int64)
        count = xp.empty(q, dtype=np.int64)
        sc = st.scene
        if sc is None or q == 0:
            first[:] = 0
            count[:] = 0
            return first, count
        record = path is not None
        engine = sc.gas.engine
        if not engine.in_kernel_queries:  # the same rays, one query launch per link
            if record:
                raise Unsupported("ray paths are recorded by the one-launch lookup kernel of "
                                  "an engine with in-kernel queries (engine='software')")
            p = self.params
            return launched.runs(self.device, st.coder, sc.gas, cg_programs.PROGRAMS,
                                 cg_programs.CgRecord(sc.ids), lo, hi, st.keys, sc.n_buckets,
                                 p.bucket_log, max_rays=1 << 24,
                                 threads_per_block=p.threads_per_block)
        kernel = search.lookup_kernel(st.coder, sc.gas.geometry, record, engine)
        kernel(self.device, q, lo, hi, st.keys, np.int64(sc.n_buckets),
               np.int64(self.params.bucket_log), *sc.gas.query_args(), sc.ids,
               path if record else st.no_path, first, count,
               threads_per_block=self.params.threads_per_block)
        return first, count

    def _prepared_point(self, st: CgrxState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups as two bound launches (the small-batch path): the lookup kernel,
        its fixed arguments bound, writes each lookup's run, and :data:`~indexzoo.native.runs.
        RUN_ROWID` its first rowID. On an engine that cannot query from a kernel (OptiX) the
        hook answers."""
        sc, p = st.scene, self.params
        if op.out != "rowid" or sc is None or not sc.gas.engine.in_kernel_queries:
            return None
        kernel = search.lookup_kernel(st.coder, sc.gas.geometry, False, sc.gas.engine)
        key = Slot(np.dtype(st.keys.dtype))
        runs = kernel.bind(self.device, key, key, st.keys, np.int64(sc.n_buckets),
                           np.int64(p.bucket_log), *sc.gas.query_args(), sc.ids, st.no_path,
                           Slot(np.dtype(np.int64)), Slot(np.dtype(np.int64)),
                           threads_per_block=p.threads_per_block)
        return run_kernels.prepared_run_rowids(self.device, runs, st.rowids, st.rowid_dtype, st.miss,
                                               st.xp, threads_per_block=p.threads_per_block)

    def ray_paths(self, lo: Any) -> list[list[tuple[str, bool, bool]]]:
        """The successor search's rays for each lower bound in ``lo`` (keys of the index's
        key type): per ray its axis (``"x"``, ``"y"``, ``"z"``), whether it hit, and whether
        the triangle it hit is flipped (the only representative of its row). Lookups answered
        without a ray (below the first representative, beyond the largest key) have none.
        A diagnostic, for tests and for reading the paths of a workload."""
        st = self._live()
        a = as_1d(lo, "lo")
        enc, _ = st.keymap.encode_ranges(a, a)
        enc = to_device(enc, self.device)
        q = int(enc.shape[0])
        path = st.xp.full((q, PATH_WIDTH), -1, dtype=np.int8)
        self._runs(st, enc, enc, path)
        rows = path.get() if st.xp is not np else path
        return [[("xyz"[c >> 2], bool(c & 2), bool(c & 1)) for c in row if c >= 0]
                for row in rows.tolist()]

    # -------------------------------------------------------------- answers
    @answers(kinds=("point", "range"), outs=("rowid", "count", "sum", "rowids"))
    def _answer(self, st: CgrxState, op: Operation, lo: Any, hi: Any = None) -> Any:
        """Every out mode from the runs the closest-hit rays and the bucket search find (a
        point lookup ``q`` is the range ``[q, q]``)."""
        first, count = self._runs(st, lo, lo if hi is None else hi)
        p = self.params
        return run_kernels.answer_runs(self.device, op.out, st.rowids, first, count, st.values,
                                       st.rowid_dtype, st.miss, group=1 << p.scan_group_log,
                                       threads_per_block=p.threads_per_block)
