"""``rx``: RTIndeX, database indexing as ray tracing (Henneberg & Schuhknecht, PVLDB 16; digest
``papers/digests/000-rx.md``), on indexzoo's software ray tracer (``indexzoo.native.rt``), with
every configuration of the paper.

Paper -> code
-------------
* §2.1 build: one primitive per key, primitive index = rowID (:mod:`.scene`), a GAS over them
  (``build_gas``; OptiX's ``optixAccelBuild``).
* §3.2 key modes, Table 1: :mod:`.keys` (naive, extended with C = 0x3F000000 and nextafter gaps,
  3D with a configurable x/y/z split, default 23/23/18).
* §3.3 rays, Table 2, and §3.2's one ray per high part for 3D ranges: :mod:`.rays`.
* §3.5 primitives: triangles (the artifact's triangle around the key's point), spheres
  (r = 0.25), AABBs with an intersection program comparing the stored integer key exactly
  (:mod:`.programs`). Stored as OptiX stores them, or (``geometry="generated"``, an engine
  option without an OptiX equivalent) made from the keys during traversal.
* §3.6 updates: :meth:`RxIndex.update`, rebuild or refit (``Gas.refit``).
* §2.2 / artifact programs: any-hit counts, sums, collects or takes the first hit
  (:mod:`.programs`); launched with DISABLE_CLOSESTHIT, and TERMINATE_ON_FIRST_HIT for ``rowid``.

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
  keeps tmin = 0.5 >= 0; that costs one key in naive mode (2^23 - 2 is its largest) and one x bit
  in 3D mode (its split is 22/22/20). The issue fixes naive keys < 2^23 and 23/23/18, so x =
  float(x) as in Table 1, and a from-zero ray that starts at x = 0 has tmin = -0.5. The engine
  has no sign rule for tmin (hits need tmin < t < tmax); an OptiX backend, which wants tmin >= 0,
  would need the shift.
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
  ``scene.py``, ``programs.py``) and are not checked.
* ``compact`` is the engine's: compact=False keeps the BVH's worst-case node buffer (what a
  builder reserves before it knows the tree's shape, like ``optixAccelComputeMemoryUsage``),
  compact=True cuts it to the used records (``optixAccelCompact``); memory_footprint reports the
  bytes held either way. Refit needs compact=False (§3.6: the update flag disables compaction's
  effect).
* [AMBIG] ``update(positions, new_keys)``: keys change in place, rowIDs and values stay; a
  position given twice takes its last new key. Refit moves the changed primitives and refits the
  BVH (same topology: answers stay exact, lookups may slow down, Table 4); rebuild builds the
  scene anew (the paper's choice). The keys are kept (``keys`` in the footprint) for both and for
  the AABB intersection program.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.devices import to_numpy
from indexzoo.native.csr import offsets_from_counts
from indexzoo.native.rt.trace import (
    DISABLE_CLOSESTHIT,
    TERMINATE_ON_FIRST_HIT,
    Gas,
    Programs,
    build_gas,
    launch,
    trace,
)
from indexzoo.native.targets import values_arg

from .keys import KeyCoder
from .params import RxParams
from .programs import OP_COUNT, OP_FILL, OP_FIRST, OP_SUM, rx_anyhit, rx_intersect
from .rays import Plan, perpendicular_plan, range_plan
from .scene import KIND, SPHERE_RADIUS, geometry_function, perpendicular_raygen, primitives

__all__ = ["RxIndex", "RxState"]

_U64 = np.uint64
_MISS = _U64(np.iinfo(np.uint64).max)
_PROGRAMS = {"triangle": Programs(anyhit=rx_anyhit), "sphere": Programs(anyhit=rx_anyhit),
             "aabb": Programs(intersection=rx_intersect, anyhit=rx_anyhit)}


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


class RxState(BuildState):
    """One build (or update) of ``rx``: the scene and what lookups read besides it."""

    gas: Gas
    own_keys: Any        # the key column in rowID order, or None (generated triangles)
    high_parts: Any      # sorted distinct high parts (stored geometry), or None
    peak: int
    dummy: dict[str, Any]  # one-element stand-ins for launch parameters a pass does not use


class RxIndex(GpuIndex[RxState]):
    """RTIndeX (RX): keys as primitives of a ray-traced scene, lookups as rays.

    Every configuration of the paper: key modes, primitives, ray kinds, compaction, updates."""

    name: ClassVar[str] = "rx"
    Params: ClassVar[type[IndexParams]] = RxParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True,
                                                        updates=True)
    params: RxParams

    @property
    def coder(self) -> KeyCoder:
        p = self.params
        return KeyCoder.for_params(p.key_mode, p.x_bits, p.y_bits, p.z_bits)

    # -------------------------------------------------------------- build
    def _build(self, st: RxState, keys: Any) -> None:
        self.coder.check_keys(keys, _show_key(st, keys, lambda i: f"rowID {i}"))
        self._scene(st, keys)

    def _scene(self, st: RxState, keys: Any, gas: Gas | None = None, held: int = 0) -> None:
        """Fill ``st`` with the scene of ``keys``: a build, or, given the current ``gas``, a
        refit. ``held``: bytes the caller keeps alive meanwhile (an update's current scene)."""
        p, coder = self.params, self.coder
        n, kb = int(keys.shape[0]), int(keys.nbytes)
        wide = 0 if keys.dtype == _U64 else 8 * n  # the uint64 copy of uint32 keys
        generated = p.geometry == "generated"
        if generated:  # the engine makes the primitives from the keys (its records)
            data, geometry, peak = keys, geometry_function(coder, p.primitive), kb
        else:
            data, geometry = primitives(coder, p.primitive, keys), None
            # conversion: the uint64 x and high parts, the float32 columns, the stacked rows
            peak = kb + wide + 16 * n + 2 * int(data.nbytes)
        radius = SPHERE_RADIUS if p.primitive == "sphere" else 0.0
        if gas is None:
            new_gas = build_gas(KIND[p.primitive], data, radius=radius, leaf_size=p.leaf_size,
                                geometry=geometry, compact=p.compact)
        else:
            new_gas = gas.refit(data)  # a new Gas: the current one stays as it is
        # the engine's build or refit (its peak counts the primitives or records)
        peak = max(peak, kb + new_gas.footprint().peak_build_bytes)
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
        st.dummy = {"keys": xp.zeros(1, dtype=_U64), "offsets": xp.zeros(1, dtype=np.int64),
                    "out": xp.zeros(1, dtype=st.rowid_dtype)}

    def _distinct_highs(self, xp: Any, keys: Any) -> Any:
        if self.coder.mode == "3d":
            _, high = self.coder.parts(keys)
            return xp.unique(high)  # sorts a copy of the high parts
        return xp.zeros(min(int(keys.shape[0]), 1), dtype=_U64)  # naive/extended: all 0

    @staticmethod
    def _keys(st: RxState) -> Any:
        """The key column in rowID order (the index's copy, or rebuilt from the scene's
        records)."""
        if st.own_keys is not None:
            return st.own_keys
        gas = st.gas
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

    # -------------------------------------------------------------- updates
    def _update(self, old: RxState, new: RxState, positions: Any, new_keys: Any) -> None:
        """Refit or rebuild (``params.update``) over the key column with the new keys."""
        host_pos = to_numpy(positions)
        self.coder.check_keys(new_keys, _show_key(old, new_keys,
                                                  lambda i: f"rowID {int(host_pos[i])}", "new "))
        keys = self._keys(old).copy()
        keys[positions] = new_keys
        refit = self.params.update == "refit"
        self._scene(new, keys, old.gas if refit else None, held=sum(self._parts(old).values()))

    # -------------------------------------------------------------- tracing
    def _launch(self, st: RxState, plan: Plan, s: int, e: int, op: int, ray_offsets: Any = None,
                out: Any = None) -> Any:
        """Trace rays ``s .. e-1`` of ``plan`` with any-hit operation ``op``; returns their
        payloads."""
        xp, p = st.xp, self.params
        generate = plan.kind == "perpendicular" and plan.one_each
        rays = None if generate else plan.rays(s, e)
        r = e - s
        payload = xp.full((r, 1), _MISS, dtype=_U64) if op == OP_FIRST else \
            xp.zeros((r, 1), dtype=_U64)
        values, use_values = values_arg(st.values, xp)
        dummy = st.dummy
        keys = dummy["keys"] if p.primitive == "triangle" else self._keys(st)
        confirm = p.primitive == "sphere"
        if confirm:  # see programs.py: the engine's sphere test is not exact on long rays
            owner = plan.owners(s, e) if rays is None else rays.owner
            ray_lo = plan.a[owner]
            ray_hi = ray_lo if plan.b is None else plan.b[owner]
        else:
            ray_lo = ray_hi = dummy["keys"]
        coder = self.coder
        params = (np.int64(op), keys, values, use_values,
                  dummy["offsets"] if ray_offsets is None else ray_offsets,
                  dummy["out"] if out is None else out,
                  np.int64(coder.x_kind), np.int64(coder.x_bits), np.int64(coder.y_bits),
                  ray_lo.astype(_U64, copy=False), ray_hi.astype(_U64, copy=False),
                  np.bool_(confirm))
        flags = DISABLE_CLOSESTHIT | (TERMINATE_ON_FIRST_HIT if op == OP_FIRST else 0)
        if rays is None:  # one perpendicular ray per lookup, made in the kernel (__raygen__)
            queries = plan.a[s:e]
            programs = dataclasses.replace(_PROGRAMS[p.primitive],
                                           raygen=perpendicular_raygen(coder, len(params)))
            launch(st.gas, r, programs, flags=flags, payload=payload, params=(*params, queries),
                   threads_per_block=p.threads_per_block)
            return payload[:, 0]
        trace(st.gas, rays.origins, rays.directions, rays.tmin, rays.tmax,
              programs=_PROGRAMS[p.primitive], flags=flags, payload=payload, params=params,
              threads_per_block=p.threads_per_block)
        return payload[:, 0]

    def _chunks(self, plan: Plan) -> list[tuple[int, int]]:
        step = self.params.max_rays
        return [(s, min(s + step, plan.n_rays)) for s in range(0, plan.n_rays, step)]

    @staticmethod
    def _segments(xp: Any, plan: Plan, s: int, e: int) -> tuple[int, int, Any, Any]:
        """Lookups ``q0 .. q1-1`` own rays in ``s .. e-1``; their rays there are
        ``a[i] .. b[i]-1`` (chunk-local)."""
        ends = xp.searchsorted(plan.starts, xp.asarray([s, e - 1], dtype=np.int64), side="right")
        q0, q1 = int(ends[0]) - 1, int(ends[1])
        a = xp.clip(plan.starts[q0:q1] - s, 0, e - s)
        b = xp.clip(plan.starts[q0 + 1:q1 + 1] - s, 0, e - s)
        return q0, q1, a, b

    def _reduce(self, st: RxState, plan: Plan, op: int) -> Any:
        """Per lookup: the count (int64), the sum (uint64) or the first rowID (uint64, _MISS)."""
        xp = st.xp
        q = plan.n_queries
        if op == OP_FIRST:
            res = xp.full(q, _MISS, dtype=_U64)
        else:
            res = xp.zeros(q, dtype=np.int64 if op == OP_COUNT else _U64)
        for s, e in self._chunks(plan):
            pay = self._launch(st, plan, s, e, op)
            if plan.one_each:  # ray i is lookup i: its payload is the answer
                res[s:e] = pay if op == OP_FIRST else pay.astype(res.dtype)
                continue
            q0, q1, a, b = self._segments(xp, plan, s, e)
            if op == OP_FIRST:
                hit = (pay != _MISS).astype(np.int64)
                ch = xp.zeros(e - s + 1, dtype=np.int64)
                xp.cumsum(hit, out=ch[1:])
                has = ch[b] > ch[a]
                idx = xp.clip(xp.searchsorted(ch, ch[a] + 1, side="left") - 1, 0, e - s - 1)
                part = xp.where(has, pay[idx], _MISS)
                res[q0:q1] = xp.where(res[q0:q1] == _MISS, part, res[q0:q1])
            else:
                cs = xp.zeros(e - s + 1, dtype=res.dtype)
                xp.cumsum(pay.astype(res.dtype), out=cs[1:])
                res[q0:q1] += cs[b] - cs[a]  # uint64 differences wrap correctly
        return res

    def _collect(self, st: RxState, plan: Plan) -> tuple[Any, Any]:
        """CSR of every match: count pass, exclusive scan, fill pass."""
        xp = st.xp
        chunks = self._chunks(plan)
        counts = self._reduce(st, plan, OP_COUNT) if len(chunks) != 1 else None
        single = None
        if counts is None:  # one launch: keep its per-ray counts for the fill pass
            s, e = chunks[0]
            single = self._launch(st, plan, s, e, OP_COUNT)
            q0, q1, a, b = self._segments(xp, plan, s, e)
            cs = xp.zeros(e - s + 1, dtype=np.int64)
            xp.cumsum(single.astype(np.int64), out=cs[1:])
            counts = xp.zeros(plan.n_queries, dtype=np.int64)
            counts[q0:q1] = cs[b] - cs[a]
        offsets = offsets_from_counts(counts)
        out = xp.empty(int(offsets[-1]), dtype=st.rowid_dtype)
        if out.shape[0] == 0:
            return offsets, out
        done = xp.zeros(plan.n_queries, dtype=np.int64)  # matches written per lookup so far
        for s, e in chunks:
            per_ray = single if single is not None else self._launch(st, plan, s, e, OP_COUNT)
            per_ray = per_ray.astype(np.int64)
            owner = plan.owners(s, e)
            q0, q1, a, b = self._segments(xp, plan, s, e)
            excl = xp.cumsum(per_ray) - per_ray
            seg0 = excl[xp.clip(a, 0, e - s - 1)]  # the exclusive sum at each lookup's first ray
            ray_off = offsets[owner] + done[owner] + excl - seg0[owner - q0]
            self._launch(st, plan, s, e, OP_FILL, ray_offsets=ray_off, out=out)
            cs = xp.zeros(e - s + 1, dtype=np.int64)
            xp.cumsum(per_ray, out=cs[1:])
            done[q0:q1] += cs[b] - cs[a]
        return offsets, out

    # -------------------------------------------------------------- lookups
    def _point_plan(self, st: RxState, q: Any) -> Plan:
        if self.params.point_ray == "perpendicular":
            return perpendicular_plan(self.coder, q)
        return self._range_plan(st, q, q)

    def _range_plan(self, st: RxState, lo: Any, hi: Any) -> Plan:
        return range_plan(self.coder, lo, hi, self._highs(st), self.params.range_ray == "zero")

    def _rowid(self, st: RxState, plan: Plan) -> Any:
        res = self._reduce(st, plan, OP_FIRST)
        return st.xp.where(res == _MISS, st.miss, res).astype(st.rowid_dtype)

    def _point_rowid(self, st: RxState, q: Any) -> Any:
        return self._rowid(st, self._point_plan(st, q))

    def _point_count(self, st: RxState, q: Any) -> Any:
        return self._reduce(st, self._point_plan(st, q), OP_COUNT).astype(st.rowid_dtype)

    def _point_sum(self, st: RxState, q: Any) -> Any:
        return self._reduce(st, self._point_plan(st, q), OP_SUM)

    def _point_rowids(self, st: RxState, q: Any) -> tuple[Any, Any]:
        return self._collect(st, self._point_plan(st, q))

    def _range_rowid(self, st: RxState, lo: Any, hi: Any) -> Any:
        return self._rowid(st, self._range_plan(st, lo, hi))

    def _range_count(self, st: RxState, lo: Any, hi: Any) -> Any:
        return self._reduce(st, self._range_plan(st, lo, hi), OP_COUNT).astype(st.rowid_dtype)

    def _range_sum(self, st: RxState, lo: Any, hi: Any) -> Any:
        return self._reduce(st, self._range_plan(st, lo, hi), OP_SUM)

    def _range_rowids(self, st: RxState, lo: Any, hi: Any) -> tuple[Any, Any]:
        return self._collect(st, self._range_plan(st, lo, hi))
