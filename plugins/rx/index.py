"""``rx``: RTIndeX, database indexing as ray tracing (Henneberg & Schuhknecht, "RTIndeX:
Exploiting Hardware-Accelerated GPU Raytracing for Database Indexing", PVLDB 16, 2023), on
indexzoo's software ray tracer (``indexzoo.native.rt``) and its query layer, with
every configuration of the paper.

Paper -> code
-------------
* §2.1 build: one primitive per key, primitive index = rowID
  (:mod:`indexzoo.native.rt.keyprims`), a GAS over them (``build_gas``; OptiX's
  ``optixAccelBuild``).
* §3.2 key modes, Table 1: :mod:`indexzoo.native.rt.keymap` (naive, extended with
  C = 0x3F000000 and nextafter gaps, 3D with a configurable x/y/z split, default 23/23/18).
* §3.3 rays, Table 2, and §3.2's one ray per high part for 3D ranges: :mod:`.rays` (the rays
  themselves: :mod:`indexzoo.native.rt.keyrays`).
* §3.5 primitives: triangles (the artifact's triangle around the key's point), spheres
  (r = 0.25), AABBs with an intersection program comparing the stored integer key exactly
  (:mod:`.programs`). Stored as OptiX stores them, or (``geometry="generated"``, an engine
  option without an OptiX equivalent) made from the keys during traversal.
* §3.6 updates: :meth:`RxIndex.update`, rebuild or refit (``Gas.refit``).
* §2.2 / artifact programs: any-hit counts, sums, collects or takes the first hit
  (:mod:`.programs`); launched with DISABLE_CLOSESTHIT, and TERMINATE_ON_FIRST_HIT for ``rowid``.
* The paper's OptiX: ``engine="optix"`` runs the same scene and rays on NVIDIA OptiX
  (:mod:`indexzoo.native.rt.optix`; rx's programs in CUDA C++: ``programs.cu``); ``software``
  on indexzoo's tracer; ``auto`` picks OptiX on a GPU with RT cores (docs/rt-engine.md).

Decisions where the paper is silent or ambiguous
------------------------------------------------
* [AMBIG] Point lookups return **every** rowID of the key (``count``, ``sum``, ``rowids``: any-hit
  ignores each hit, so the ray goes on); ``rowid`` is the artifact's first hit (any one match).
  The artifact's point any-hit stops at the first hit, which contradicts the paper's "each lookup
  ray hits all duplicate primitives in one go" (§2.1, §4.3).
* [AMBIG] ``rowids`` = a count pass, an exclusive scan of the per-ray counts, and a fill pass
  whose any-hit writes each rowID at its ray's offset plus the ray's running count (the paper
  only sums values). ``sum`` adds ``values[rowID]`` (uint64, wrapping; the artifact: uint32).
* [AMBIG] No +1 shift. The artifact maps x to ``float(x + 1)`` so that a from-zero ray at key 0
  keeps tmin = 0.5 >= 0; that costs one key in naive mode (2^23 - 2 is its largest) and one x
  bit in 3D mode (its split is 22/22/20). Here naive mode holds every key < 2^23 and the default
  split is 23/23/18, so x = float(x) as in Table 1, and a from-zero ray that starts at x = 0 has
  tmin = -0.5. The software engine has no sign rule for tmin (hits need tmin < t < tmax); OptiX
  wants tmin >= 0, so the OptiX backend starts such a ray at its tmin (origin -0.5, tmin 0: the
  same segment, the same hits) instead of shifting every key.
* [AMBIG] The triangle is the artifact's, around the key's point c with e = 0.5:
  (x-e, y+e, z-e), (x-e, y-e, z-e), (x+e, y, z+e), which contains c; the paper's example
  triangle does not contain (k, 0, 0) and is not used. In extended mode e is the gap float on
  either side in x (0.5 in y and z).
* [AMBIG] A 3D split needs x_bits + y_bits + z_bits = 64 and x_bits <= 23 (every x part must be
  exact, since middle rays span the whole x line); y_bits or z_bits above 23 are allowed (the
  2-bit toy split of Fig. 4 is 2/62/0) but then only keys whose y and z parts are below 2^23
  are held.
* [AMBIG] Extended mode maps y and z as Table 1 does, to 0 with +-0.5 gaps; only x uses the
  nextafter gaps. (The artifact bit-casts them too, to 0.5f, with one-ulp gaps.)
* [AMBIG] 3D ranges cast one ray per high part **that occurs among the keys** (sorted distinct high
  parts kept from the build, ``high_parts`` in the footprint): a ray on another line cannot hit
  anything, so answers are the paper's, and a range over sparse 64-bit keys casts at most one ray
  per distinct high part instead of up to 2^41. A batch is traced in launches of at most
  ``max_rays`` rays, so no legal range can exhaust memory. For dense keys (the paper's §3
  experiments) every line between the keys' first and last high part occurs: the same rays.
* [AMBIG] First / middle / last rays of a 3D range run from lo's x part (or 0) to hi's x part (or
  2^x_bits - 1), as the artifact's loop does; lo > hi is an empty range (no ray).
* [AMBIG] Parallel point rays are ranges [k, k] with ``range_ray``'s origin (offset or zero).
* [AMBIG] Keys a mode cannot hold raise InvalidInput naming the limit and the mode that holds
  them; lookups outside the mode's keys simply miss (no key can match), and range bounds are
  clipped to them.
* [AMBIG] The AABB intersection program recovers the ray's integer bounds from the ray (the
  engine does not hand intersection programs the launch index the artifact reads them through),
  compares ``keys[rowID]`` exactly, and reports the hit at the key's point; any-hit then does the
  work, as for triangles (the artifact does it inside the intersection program and never
  reports a hit: same result).
* [AMBIG] Sphere hits are confirmed in any-hit against the ray's integer key bounds
  (``ray_lo <= keys[rowID] <= ray_hi``, launch parameters). The engine's float32 sphere test
  derives the entry distance from ``c / q`` with ``c = |o - centre|^2 - r^2``; some 2^22 along a
  ray, r^2 = 1/16 vanishes in the rounding of ``|o - centre|^2`` and the entry can land up to
  about 0.3 off, past a 0.25-wide gap: without the check the next key beyond a long range's end
  was counted (seen in the conformance suite). Triangles and AABBs hit exactly (see
  ``indexzoo.native.rt.keyprims``, ``programs.py``) and are not checked.
* ``compact`` is the engine's: compact=False keeps the BVH's worst-case node buffer (what a
  builder reserves before it knows the tree's shape, like ``optixAccelComputeMemoryUsage``),
  compact=True cuts it to the used records (``optixAccelCompact``); memory_footprint reports the
  bytes held either way. Refit needs compact=False (§3.6: the update flag disables compaction's
  effect).
* [AMBIG] ``engine="auto"`` is OptiX only on a GPU with RT cores. Without RT cores OptiX
  traverses in software in the driver, no faster overall than the software engine (measured:
  ``docs/plugins/rx.md``), while the software engine holds less memory and also runs on the
  CPU, so auto keeps it there. On OptiX, ``update="refit"`` builds a new GAS (OptiX
  refits in place, and the old state must stay readable for lookups running meanwhile);
  extended mode's AABBs (x up to 1.7e38) are built scaled down under one scaling instance,
  because OptiX's traversal missed custom-primitive boxes from 2^41 up
  (``indexzoo.native.rt.optix.accel.FAR``); spheres are custom primitives with the software engine's
  sphere test (pyoptix binds no sphere input); AABB hits also check the ray's row, since
  OptiX may call an intersection program for boxes near the ray.
* [AMBIG] ``update(positions, new_keys)``: keys change in place, rowIDs and values stay; a
  position given twice takes its last new key. Refit moves the changed primitives and refits the
  BVH (same topology: answers stay exact, lookups may slow down, Table 4); rebuild builds the
  scene anew (the paper's choice). The keys are kept (``keys`` in the footprint) for both and for
  the AABB intersection program.
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
    answers,
)
from indexzoo.devices import to_numpy
from indexzoo.native import rt
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt import select_engine
from indexzoo.persist import StateSchema

from .params import RxParams
from .saved import RX_SCHEMA

if TYPE_CHECKING:
    from . import programs as rx_programs
    from . import rays
else:  # imported when an index is built or loaded: the registry lists the class without them
    rx_programs = lazy_module("indexzoo.plugins.rx.programs")
    rays = lazy_module("indexzoo.plugins.rx.rays")

__all__ = ["RxIndex", "RxState"]

_U64 = np.uint64


def _show_key(st: BuildState, keys: Any, where: Any, new: str = "") -> Any:
    """``show(i)``: the key at position ``i`` of ``keys`` as the user gave it, at ``where(i)``
    (``{new}key K at rowID R``, or ``new key K for rowID R`` for an update)."""
    at = "for" if new else "at"

    def show(i: int) -> str:
        raw = keys[i:i + 1]
        km = st.keymap
        if km.invertible and km.kind != "unsigned":
            user = km.decode(raw.get() if hasattr(raw, "get") else raw)[0]
            return f"{new}key {user} {at} {where(i)} (mapped to {int(raw[0])} by the key map)"
        return f"{new}key {int(raw[0])} {at} {where(i)}"
    return show


#: The most point lookups a prepared call traces through its bound launch (see
#: ``RxIndex._prepared_point``); the launch keeps per-ray scratch arrays of this size.
PREPARED_RAYS = 1 << 12


class RxState(BuildState):
    """One build (or update) of ``rx``: the scene and what lookups read besides it."""

    gas: rt.Scene        # the scene, on its engine (``gas.engine``)
    own_keys: Any        # the key column in rowID order, or None (generated triangles)
    high_parts: Any      # sorted distinct high parts (stored geometry), or None
    peak: int
    no_keys: Any         # a one-element stand-in for the keys where the programs need none


class RxIndex(rt.KeySceneIndex, GpuIndex[RxState]):
    """RTIndeX (RX): keys as primitives of a ray-traced scene, lookups as rays.

    Every configuration of the paper: key modes, primitives, ray kinds, compaction, updates."""

    name: ClassVar[str] = "rx"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-21-rx-4816583/: 113 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 3e5, "cuda": 5.9e8}
    Params: ClassVar[type[IndexParams]] = RxParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True,
                                                        updates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: the scene, its BVH and primitives checked against the keys (see saved.py)
    state_schema: ClassVar[StateSchema] = RX_SCHEMA
    params: RxParams

    # -------------------------------------------------------------- build
    def _build(self, st: RxState, keys: Any) -> None:
        self.coder.check_keys(keys, _show_key(st, keys, lambda i: f"rowID {i}"))
        self._scene(st, keys, engine=self._engine(st.device))

    def _engine(self, device: str) -> rt.Engine:
        """The engine of ``params.engine`` on ``device`` (:func:`select_engine`): ``optix``
        raises DeviceUnavailable (saying what is missing) where OptiX cannot run; ``auto`` is
        OptiX only on a GPU with RT cores where OptiX is usable and the geometry is stored
        (without RT cores OptiX traverses in software, and the software engine measured
        faster there: see docs/rt-engine.md)."""
        p = self.params
        takes = None if p.geometry == "stored" else "generated geometry"
        return select_engine(p.engine, device, optix_takes=takes)

    def _scene(self, st: RxState, keys: Any, gas: Any = None, held: int = 0,
               engine: rt.Engine | None = None) -> None:
        """Fill ``st`` with the scene of ``keys``: a build on ``engine``, or, given the current
        ``gas``, a refit on its engine. ``held``: bytes the caller keeps alive meanwhile (an
        update's current scene)."""
        p, coder = self.params, self.coder
        n, kb = int(keys.shape[0]), int(keys.nbytes)
        wide = 0 if keys.dtype == _U64 else 8 * n  # the uint64 copy of uint32 keys
        generated = p.geometry == "generated"
        built = rt.key_gas(coder, p.primitive, p.geometry, keys, leaf_size=p.leaf_size,
                           compact=p.compact, refit=gas, engine=engine)
        new_gas, peak = built.gas, built.peak_bytes
        # generated triangles: the engine's records are the keys (in BVH order); the index
        # keeps no second copy and rebuilds the rowID-ordered column when an update needs it
        own = None if generated and p.primitive == "triangle" else keys
        # stored geometry keeps the distinct high parts; generated geometry (the lean
        # configuration) makes them per range batch instead of holding them
        highs = None if generated else self._distinct_highs(st.xp, keys)
        if highs is not None:
            peak = max(peak, kb + wide + 16 * n + int(highs.nbytes))
        xp = st.xp
        st.own_keys, st.gas, st.high_parts, st.peak = own, new_gas, highs, held + peak
        st.no_keys = xp.zeros(1, dtype=_U64)

    def _distinct_highs(self, xp: Any, keys: Any) -> Any:
        return rays.distinct_highs(self.coder, keys)

    @staticmethod
    def _keys(st: RxState) -> Any:
        """The key column in rowID order (the index's copy, or rebuilt from the scene's
        records)."""
        if st.own_keys is not None:
            return st.own_keys
        gas = st.gas  # generated triangles: the software engine's Gas
        keys = st.xp.empty_like(gas.data)
        keys[gas.bvh.order] = gas.data
        return keys

    def _highs(self, st: RxState) -> Any:
        """The sorted distinct high parts of the keys (3D ranges cast one ray per high part
        that occurs): kept from the build with stored geometry, made for each range batch with
        generated geometry."""
        if st.high_parts is not None:
            return st.high_parts
        return self._distinct_highs(st.xp, self._keys(st))

    @staticmethod
    def _parts(st: RxState) -> dict[str, int]:
        parts = {"keys": 0 if st.own_keys is None else int(st.own_keys.nbytes),
                 **st.gas.footprint().breakdown}
        if st.high_parts is not None:
            parts["high_parts"] = int(st.high_parts.nbytes)
        return parts

    def _footprint(self, st: RxState) -> Footprint:
        parts = self._parts(st)
        return Footprint(breakdown=parts, peak_build_bytes=max(st.peak, sum(parts.values())))

    # -------------------------------------------------------------- saving
    def _save_state(self, st: RxState) -> dict[str, Any]:
        """The state as saved: a software GAS without its geometry function (generated
        geometry: the function is made again from the params on load); an OptiX GAS not at
        all (an engine's handle on one GPU: the scene is built again on load from the keys,
        which stored geometry, OptiX's only one, keeps)."""
        saved = super()._save_state(st)
        gas = st.gas
        if not gas.engine.saves_scenes:  # an engine's handle on one GPU
            saved["gas"] = None
        elif gas.generated:
            saved["gas"] = dataclasses.replace(gas, geometry=None)
        return saved

    def _load_state(self, st: RxState, saved: dict[str, Any]) -> None:
        gas = saved.pop("gas")
        super()._load_state(st, saved)
        p = self.params
        if gas is None:  # saved from OptiX: build again, on the engine this device runs
            self._scene(st, st.own_keys, engine=self._engine(st.device))
            return
        if p.geometry == "generated":
            gas = dataclasses.replace(gas, geometry=rt.geometry_function(self.coder, p.primitive))
        st.gas = gas

    # -------------------------------------------------------------- updates
    def _update(self, old: RxState, new: RxState, positions: Any, new_keys: Any) -> None:
        """Refit or rebuild (``params.update``) over the key column with the new keys."""
        host_pos = to_numpy(positions)
        self.coder.check_keys(new_keys, _show_key(old, new_keys,
                                                  lambda i: f"rowID {int(host_pos[i])}", "new "))
        keys = self._keys(old).copy()
        keys[positions] = new_keys
        refit = self.params.update == "refit"
        self._scene(new, keys, old.gas if refit else None, held=sum(self._parts(old).values()),
                    engine=old.gas.engine)

    # -------------------------------------------------------------- tracing
    def _batch(self, st: RxState, plan: rays.Plan) -> rays.Plan:
        """The plan with what rx's programs read: the keys (AABB and sphere scenes) and, for
        spheres, the hit confirmation (see programs.py)."""
        prim = self.params.primitive
        keys = st.no_keys if prim == "triangle" else self._keys(st)
        # an engine that may hand the AABB program boxes near the ray (OptiX) needs the rays'
        # integer bounds to compare keys with (programs.cu)
        return plan.with_record(keys, prim == "sphere",
                                bounds=prim == "aabb" and st.gas.engine.conservative_bounds)

    def _launch_args(self) -> dict[str, Any]:
        p = self.params
        return {"max_rays": p.max_rays, "threads_per_block": p.threads_per_block}

    # -------------------------------------------------------------- lookups
    def _plan_points(self, st: RxState, q: Any) -> rays.Plan:
        """The rays of point lookups: one perpendicular ray each, or the rays of ``[q, q]``."""
        if self.params.point_ray == "perpendicular":
            return rays.perpendicular_plan(self.coder, q)
        return self._plan_ranges(st, q, q)

    def _plan_ranges(self, st: RxState, lo: Any, hi: Any) -> rays.Plan:
        """The rays of range lookups: along each occupied row the range covers."""
        return rays.range_plan(self.coder, lo, hi, self._highs(st), self.params.range_ray == "zero")

    def _prepared_point(self, st: RxState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups of perpendicular rays as bound launches (the small-batch path): a
        call of at most :data:`PREPARED_RAYS` lookups fills the payload, traces one generated
        ray per lookup and writes the answers (:func:`~indexzoo.native.rt.query.
        prepared_first`); a larger one goes to the hook. Where the hook has work to do per
        call (a key mode that cannot hold every key, spheres confirming hits, parallel point
        rays) or the engine has no bound launch (OptiX), the hook answers every call."""
        p, coder = self.params, self.coder
        if (op.out != "rowid" or p.point_ray != "perpendicular" or p.primitive == "sphere"
                or not coder.holds_every_key
                or (p.primitive == "aabb" and st.gas.engine.conservative_bounds)):
            return None
        keys = st.no_keys if p.primitive == "triangle" else self._keys(st)
        record = rx_programs.RxRecord(keys, np.int64(coder.x_kind), np.int64(coder.x_bits),
                                      np.int64(coder.y_bits), keys, keys, np.bool_(False))
        most = min(PREPARED_RAYS, p.max_rays)
        small = rt.query.prepared_first(st.gas, rx_programs.PROGRAMS[p.primitive], record,
                                        rt.perpendicular_raygen(coder), st.native_dtype,
                                        st.rowid_dtype, st.miss, st.xp, most=most,
                                        threads_per_block=p.threads_per_block, device=self.device)
        if small is None:
            return None
        hook = self._answer

        def answer(q: Any) -> Any:
            return small(q) if q.shape[0] <= most else hook(st, op, q)

        return answer

    @answers(kinds=("point", "range"), outs=("rowid", "count", "sum", "rowids"))
    def _answer(self, st: RxState, op: Operation, *arrays: Any) -> Any:
        """A lookup batch's rays, traced with the hit operation of the out mode: the first
        match (``rowid``), every match counted, summed or collected."""
        plan = self._plan_points(st, *arrays) if op.kind == "point" else \
            self._plan_ranges(st, *arrays)
        batch, programs = self._batch(st, plan), rx_programs.PROGRAMS[self.params.primitive]
        if op.out == "rowid":
            res = rt.query.first(st.gas, batch, programs, **self._launch_args())
            return st.xp.where(res == rt.query.MISS, st.miss, res).astype(st.rowid_dtype)
        if op.out == "count":
            return rt.query.count(st.gas, batch, programs, **self._launch_args()
                                  ).astype(st.rowid_dtype)
        if op.out == "sum":
            return rt.query.sum_values(st.gas, batch, programs, st.values, **self._launch_args())
        return rt.query.collect(st.gas, batch, programs, rowid_dtype=st.rowid_dtype,
                                **self._launch_args())
