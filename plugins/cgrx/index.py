"""``cgrx``: coarse-granular RX (Henneberg, Kharal & Schuhknecht, arXiv 2406.03965, as
described in Y. Wu's MSc thesis, §3.2, and digest 001 §2), on indexzoo's ray tracer and the RT
query layer: one triangle per bucket of sorted keys, a successor search of at most five
closest-hit rays, then a search and scan in the sorted keys.

Paper / artifact -> code
------------------------
* Build: radix-sorted (key, rowID) pairs (``sort_pairs``); buckets of ``2^bucket_log`` sorted
  keys, each represented by its largest key; the coordinate split, slanted triangles, moved and
  flipped representatives, end-of-row and end-of-plane triangles of digest §2.2
  (:mod:`.scene`, :mod:`.coords`); one GAS over them.
* Finding the bucket of a lower bound ``lo`` (digest §2.2, "Finding the bucket"): none beyond
  the largest key; bucket 0 up to the first representative; else a ray +x from lo's point
  along its row; if it misses, a ray +y along the row-marker column of lo's plane, whose hit is
  an end-of-plane triangle (its bucket), a flipped triangle (its bucket: the only
  representative of that row) or another marker, whose row a ray +x from x = 0 then searches;
  if the +y ray misses too, a ray +z along the plane-marker column finds the next plane, a ray
  +y from y = 0 its first marked row, and (unless that hit is flipped) a ray +x that row's
  first representative. At most five rays, each phase one closest-hit launch for the lookups
  still searching (``query.closest_rays``).
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
  after the hit (``scene.flipped_ids``: two key loads) instead of from its winding; the stored
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
* [AMBIG] "x4" is read as the artifact does: 16-thread scan groups (``scan_group_log=4``).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.native.rt import query
from indexzoo.native.runs import RUN_BOUNDS, answer_runs
from indexzoo.native.sort import sort_pairs

from .coords import EX, EY, EZ, CgCoder
from .params import CgrxParams
from .scene import CgScene, build_scene, flipped_ids, to_bucket

__all__ = ["CgrxIndex", "CgrxState"]

_U64 = np.uint64
_INF = np.float32(np.inf)


class CgRecord(NamedTuple):
    """cgRX's launch parameters: the cgRX id of every primitive."""

    ids: Any


@register_jitable
def cg_match(ray, inst, prim, t, front, params):
    return np.int64(params.ids[prim])


PROGRAMS = query.QueryPrograms(match=cg_match)


class CgrxState(BuildState):
    """One build of ``cgrx``: the sorted pairs and the scene."""

    keys: Any
    rowids: Any
    coder: CgCoder
    scene: CgScene | None  # None for an empty build
    peak: int


class CgrxIndex(GpuIndex[CgrxState]):
    """Coarse-granular RX: one triangle per bucket of sorted keys, at most five closest-hit rays
    per lookup, a search and scan in the bucket."""

    name: ClassVar[str] = "cgrx"
    Params: ClassVar[type[IndexParams]] = CgrxParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    params: CgrxParams

    # -------------------------------------------------------------- build
    def _build(self, st: CgrxState, keys: Any) -> None:
        p = self.params
        pairs = sort_pairs(keys, st.rowid_dtype)
        st.keys, st.rowids = pairs.keys, pairs.rowids
        st.coder = CgCoder.for_dtype(keys.dtype)
        held = int(st.keys.nbytes + st.rowids.nbytes)
        if keys.shape[0] == 0:
            st.scene, st.peak = None, pairs.peak_bytes
            return
        st.scene = build_scene(st.coder, st.keys, 1 << p.bucket_log, p.leaf_size, p.compact,
                               p.geometry)
        scene_bytes = sum(st.scene.nbytes().values())
        # the triangles' construction holds about 20 words per representative besides the
        # engine's build
        n_reps = st.scene.n_buckets
        st.peak = max(pairs.peak_bytes,
                      held + st.scene.gas.footprint().peak_build_bytes + 160 * n_reps,
                      held + scene_bytes)

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

    # -------------------------------------------------------------- the successor search
    def _cast(self, st: CgrxState, origins: Any, direction: int) -> tuple[Any, Any]:
        """One closest-hit ray per row of ``origins`` along +x, +y or +z (0, 1, 2): the hit
        primitive's cgRX id (-1: none) and whether it was a front face."""
        xp = st.xp
        sc = st.scene
        assert sc is not None
        r = int(origins.shape[0])
        d = xp.zeros((r, 3), dtype=np.float32)
        d[:, direction] = 1
        rec = CgRecord(sc.ids)
        batch = query.FunctionBatch.of(
            None, lambda s, e, owner: query.Rays(origins[s:e], d[s:e], np.float32(0), _INF),
            lambda s, e, owner: rec, n_queries=r, xp=xp)
        p = self.params
        h, _, _ = query.closest_rays(sc.gas, batch, PROGRAMS, max_rays=p.max_rays,
                                     threads_per_block=p.threads_per_block)
        found = h != query.MISS
        ids = xp.where(found, h.astype(np.int64), np.int64(-1))
        front = found & flipped_ids(st.keys, xp.maximum(ids, 0), sc.n_buckets,
                                    1 << p.bucket_log, st.coder.x_bits)
        return ids, front

    def _where(self, st: CgrxState, h: Any) -> tuple[Any, Any]:
        """The row (y field) and plane (z field) where the triangles with ids ``h`` sit: those
        of the representative they belong to, the plane's last row for end-of-plane ones."""
        sc = st.scene
        assert sc is not None
        xp, p, n = st.xp, np.int64(sc.n_buckets), st.n
        b = xp.where(h >= 2 * p, h - 2 * p, xp.where(h >= p, h - p, h))
        rep = st.keys[xp.minimum((b + 1) << np.int64(self.params.bucket_log), n) - 1]
        _, y, z = st.coder.fields(rep)
        return xp.where(h >= 2 * p, _U64(st.coder.y_max), y), z

    def _buckets(self, st: CgrxState, lo: Any) -> Any:
        """The bucket to search for the first key >= lo (int64; -1: beyond every key)."""
        xp, coder, sc = st.xp, st.coder, st.scene
        assert sc is not None
        q = int(lo.shape[0])
        bucket = xp.full(q, -1, dtype=np.int64)
        lo64 = lo.astype(_U64)
        # one-element slices, not scalars: on CuPy a device scalar cannot become np.uint64
        k = min((1 << self.params.bucket_log), st.n)
        first_rep = st.keys[k - 1:k].astype(_U64)
        last = st.keys[-1:].astype(_U64)
        bucket[lo64 <= first_rep] = 0
        todo = xp.nonzero((lo64 > first_rep) & (lo64 <= last))[0]
        if todo.shape[0] == 0:
            return bucket
        x, y, z = coder.fields(lo64[todo])
        cx, cy, cz = coder.x_coord(x), coder.y_coord(y), coder.z_coord(z)
        ex, ey, ez = np.float32(EX), np.float32(EY), np.float32(EZ)
        p = sc.n_buckets
        # ray 1: +x along lo's row from just before lo's point
        h, _ = self._cast(st, xp.stack([cx - ex, cy, cz], axis=1), 0)
        hit = h >= 0
        bucket[todo[hit]] = to_bucket(h[hit], p)
        miss = xp.nonzero(~hit)[0]
        if miss.shape[0] == 0:
            return bucket
        # ray 2: +y along the row markers of lo's plane, from just past lo's row
        rm = xp.full(miss.shape[0], coder.row_marker_x, dtype=np.float32)
        h2, front2 = self._cast(st, xp.stack([rm, cy[miss] + ey, cz[miss]], axis=1), 1)
        direct = (h2 >= 2 * p) | ((h2 >= 0) & front2)
        bucket[todo[miss[direct]]] = to_bucket(h2[direct], p)
        via_row = xp.nonzero((h2 >= 0) & ~direct)[0]
        if via_row.shape[0]:
            self._in_row(st, bucket, todo[miss[via_row]], h2[via_row], cz[miss[via_row]])
        up = xp.nonzero(h2 < 0)[0]
        if up.shape[0] == 0:
            return bucket
        # ray 3: +z along the plane markers, to the next plane
        sel = miss[up]
        rm = xp.full(up.shape[0], coder.row_marker_x, dtype=np.float32)
        pm = xp.full(up.shape[0], coder.plane_marker_y, dtype=np.float32)
        h3, _ = self._cast(st, xp.stack([rm, pm, cz[sel] + ez], axis=1), 2)
        ok = xp.nonzero(h3 >= 0)[0]
        if ok.shape[0] == 0:
            return bucket
        _, plane = self._where(st, h3[ok])
        zc = coder.z_coord(plane)
        # ray 4: +y from y = 0 in that plane: its first marked row
        rm = xp.full(ok.shape[0], coder.row_marker_x, dtype=np.float32)
        h4, front4 = self._cast(
            st, xp.stack([rm, xp.zeros(ok.shape[0], dtype=np.float32), zc], axis=1), 1)
        idx = todo[sel[ok]]
        flipped = (h4 >= 0) & front4
        bucket[idx[flipped]] = to_bucket(h4[flipped], p)
        rest = xp.nonzero((h4 >= 0) & ~front4)[0]
        if rest.shape[0]:
            self._in_row(st, bucket, idx[rest], h4[rest], zc[rest])
        return bucket

    def _in_row(self, st: CgrxState, bucket: Any, idx: Any, marker: Any, cz: Any) -> None:
        """The last ray: +x from x = 0 along the row of the hit ``marker`` triangles."""
        xp, coder = st.xp, st.coder
        row, _ = self._where(st, marker)
        origins = xp.stack([xp.zeros(idx.shape[0], dtype=np.float32), coder.y_coord(row), cz],
                           axis=1)
        h, _ = self._cast(st, origins, 0)
        assert st.scene is not None
        found = h >= 0
        bucket[idx[found]] = to_bucket(h[found], st.scene.n_buckets)

    # -------------------------------------------------------------- answers
    def _runs(self, st: CgrxState, lo: Any, hi: Any) -> tuple[Any, Any]:
        """(first sorted position, count) of the keys in every ``[lo, hi]``."""
        xp, q = st.xp, int(lo.shape[0])
        first = xp.zeros(q, dtype=np.int64)
        count = xp.zeros(q, dtype=np.int64)
        if st.n == 0 or q == 0:
            return first, count
        bucket = self._buckets(st, lo)
        start = xp.where(bucket >= 0, bucket << np.int64(self.params.bucket_log), np.int64(-1))
        RUN_BOUNDS(self.device, q, st.keys, start, lo, hi, first, count,
                   threads_per_block=self.params.threads_per_block)
        return first, count

    def _answer(self, st: CgrxState, out: str, lo: Any, hi: Any) -> Any:
        first, count = self._runs(st, lo, hi)
        p = self.params
        return answer_runs(self.device, out, st.rowids, first, count, st.values,
                           st.rowid_dtype, st.miss, group=1 << p.scan_group_log,
                           threads_per_block=p.threads_per_block)

    def _point_rowid(self, st: CgrxState, q: Any) -> Any:
        return self._answer(st, "rowid", q, q)

    def _point_count(self, st: CgrxState, q: Any) -> Any:
        return self._answer(st, "count", q, q)

    def _point_sum(self, st: CgrxState, q: Any) -> Any:
        return self._answer(st, "sum", q, q)

    def _point_rowids(self, st: CgrxState, q: Any) -> tuple[Any, Any]:
        return self._answer(st, "rowids", q, q)

    def _range_rowid(self, st: CgrxState, lo: Any, hi: Any) -> Any:
        return self._answer(st, "rowid", lo, hi)

    def _range_count(self, st: CgrxState, lo: Any, hi: Any) -> Any:
        return self._answer(st, "count", lo, hi)

    def _range_sum(self, st: CgrxState, lo: Any, hi: Any) -> Any:
        return self._answer(st, "sum", lo, hi)

    def _range_rowids(self, st: CgrxState, lo: Any, hi: Any) -> tuple[Any, Any]:
        return self._answer(st, "rowids", lo, hi)
