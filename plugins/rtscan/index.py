"""``rtscan``: RTScan (Lv et al., "RTScan: Efficient Scan with Ray Tracing Cores", PVLDB 17(6),
2024), on indexzoo's software ray tracer and the RT query layer: a multi-column scan index whose
range lookups produce bitmaps.

Paper -> code
-------------
* §4.1 workflow: build = uniform encoding, sieving vectors, one BVH per group of
  ``group_size`` (3) columns; a range lookup = encode the predicates, sieve, refine, and AND
  the groups on CUDA cores (:meth:`RtscanIndex._range_bitmap`, stages ``encode``, ``sieve``,
  ``refine``, ``merge``; :mod:`.profile` times them). The query plan (rank bounds, vector
  choice, refine boxes and their rays or slabs) is one kernel launch (:mod:`.plan`).
* §4.2 Uniform Encoding (``encoding``): :mod:`.encoding`. Codes are 0-based ranks from a stable
  argsort, duplicates consecutive; a bound ``lo`` becomes the first rank of the first value
  ``>= lo`` and ``hi`` the last rank of the last value ``<= hi``: through the mapping table
  (distinct values, first rank) in the paper's layout, through each column's sorted sample and
  then its keys by its order in the compact one (``layout``, below). With encoding off the
  coordinates are the values.
* §4.3 Data Sieving (``sieve_vectors``, ``sieve_fine``, ``selection``): :mod:`.sieve`; the
  approximate result is one kernel pass (the AND of at most two borders' sets per column, one
  vector each, or three for a border of the second level).
* §4.3.2 refine regions: :mod:`.regions`, as order-independent boxes (ours)
  ``U_j x prod_{k<j} C_k x prod_{k>j} H_k``.
* §4.4 Matrix RT Refine (``refine="rt"``): :mod:`.layout` (cube width, epsilon, rays with
  interval, spacing and length) and :mod:`.refine` (scene, programs). Alg. 1's shader is the
  match program: the hit row's exact codes against the group's predicates, then the query
  layer's ``BITMAP`` operation (added for RTScan to ``indexzoo.native.rt.query``) sets the bit
  (atomic OR) or clears it (atomic AND-NOT), as the artifact's ``atomicOr``/``atomicAnd``.
  Rows met twice get the same bit twice.
* [AMBIG] ``rtscan``'s default refine (``refine="auto"``): the paper's Matrix RT Refine where
  the engine is OptiX (RT cores, the paper's hardware), the direct refine on the software
  engine. Without RT cores the direct refine was 1.21-2.31x a plain read of the columns at
  1e8 x 3, the RT refine 0.13-1.69x, and it held 7.9x the table against 12.2x in the paper's
  layout (one H100, ``benchmarks/results/h100/2026-11-26-scan-raw/``). The paper's RTScan on
  any engine is the ``rtscan-rt`` preset; its other variants keep the RT refine.
* [AMBIG] The layout (``layout``; at most 4x the table). The paper's structures
  (codes, order, mapping table, 127 vectors a column) hold 7.97x a table of uint32 columns
  with the direct refine; the order and one copy of each row's values (codes or keys) are
  already 2x, so 127 vectors cannot fit. ``compact`` (the default of every preset but
  ``rtscan-paper``) keeps the keys, the order and every :data:`~.encoding.SAMPLE_STRIDE`-th
  (64th) value of each sorted column (1/64 of it): a bound's rank is a binary search in the
  sample, then at most 6 steps reading ``keys[order[r]]``. Nothing else of the encoding is
  stored: ranks are computed where they are used (the RT scene's cube coordinates and the
  sieve's vectors, at build, from the order), and the exact check of every refined row reads
  its keys against the query's values (a row's rank is in ``[x0, x1)`` exactly when its value
  is in ``[lo, hi]``, so the answers are the same). 3.95x at 1e6 x 3 and at 1e8 x 3
  (``4 N d`` keys + ``4 N d`` order + ``4 N d / 64`` samples + ``62 N d / 8`` vectors + a few
  KB of borders, over ``4 N d``). ``layout="paper"`` (the ``rtscan-paper`` preset, with
  ``sieve_vectors=128, sieve_fine=0``) is the paper's layout as before.
* [AMBIG] The sieve in that budget: two levels (``sieve_fine``, ours), K = 32 bins of 32 fine
  bins each, 31 + 31 vectors a column (1.94x the table), where one level of 63 vectors (64
  bins) would have doubled the rows the refine gathers against the paper's 128 bins, and the
  refine's rows are what the time above the sieve's pass costs. A fine border ``f_{c,t}`` is
  ``F_c | (F_{c+1} & G_t)``: 1024 bins, so a quarter of a bin is N/4096 rows per predicate side
  (one eighth of the paper's), for two more vectors read per bound side (N/4 bytes of a
  column's N/8-byte vectors, against the N rows of 4 bytes a plain scan reads). Fine borders
  are equi-depth within their bin and moved to the start of their value's run as the first
  level's; a ``G_t`` that moves no border in any bin is not stored (sieve "sized to need"). The
  selection rule is the paper's over all borders of both levels. ``sieve_fine=0`` is the
  paper's one level.
* [AMBIG] Files: a file saved before ``layout`` existed holds the paper's layout and one sieve
  level and still loads as such (``_params_for_load`` fills in ``layout="paper"``,
  ``sieve_fine=0``; state version 1 is kept because such a state is read as it was written).
  A file of the compact layout names it in its params, which an older rtscan refuses as an
  unknown parameter.
* ``rtscan-direct`` (ours, ``refine="direct"``): the slab's rows ``order[a:b]``, checked
  on CUDA cores with the same atomics, no BVH.
* Point lookups (ours): never a bitmap per key; each key's rank run in the column where it
  is shortest (mapping table), those rows checked on the other columns.

Decisions where the paper is ambiguous
--------------------------------------
* [AMBIG-1] "K = 2^{27}" read as K = 27: ``eps = 2^(K-23)`` where ``2^K`` bounds every float of
  the scene (ranks at N = 1e8: eps = 16, the paper's value). The coverage argument is in
  :mod:`.layout`; the artifact's eps = 0 is not copied (it misses rows past 2^24), and epsilon
  is no parameter: the rule always applies.
* [AMBIG-2/3/4] ``sieve_vectors`` = K areas (the artifact's ``VAREA_N``; the paper's 128, our
  default 32 with a second level), K-1 stored vectors, equi-depth borders ``i N / K`` moved to
  the start of their value's run; a value spanning several borders leaves fewer vectors.
* [AMBIG-5] Spacing and interval are fractions of the cube width ``w`` (Fig. 29), default
  ``I = S = w`` (the tuned "interval = space"), cubes ``w + eps`` wide; rows in gaps are still
  met because segment ends sit half a unit off the integer centres (proof in :mod:`.layout`).
* [AMBIG-6/7] Grid counts are ``ceil(extent / I)`` from each box's own minimum.
* [AMBIG-8] The segment length is relative: ``L = 13.4 w`` (1.1e6 / 8.3e4). ``w`` defaults to
  ``ceil((R^g / (14.4 N))^(1/g))`` (about one row per ray cell; 8.85e4 at N = 1e8, R = N, g = 3
  against the tuned 8.3e4), ``R`` the group's widest coordinate span.
* [AMBIG-10] Rank intervals are half-open over integers, so the slab cleared for ``x > 80``
  holds the code of 80 itself (the paper's "[70, 80]").
* [AMBIG-11] Auto selection compares ``C - X_i`` with ``X_{i+1} - C`` (the midpoint), a tie
  going to negative selection; the lower side of a BETWEEN (or ``>``) applies the rule to the
  complement: positive = the vector whose rows all satisfy the bound.
* [AMBIG-15] Bitmaps are the native answer (``out="bitmap"``); the base class derives rowIDs
  (ascending), counts (popcount), one rowID and sums from them.
* [ours] The vector choice compares rank widths (row counts) with and without encoding.
* [ours] Encoding in the compact layout decides the RT scene's coordinates only (ranks, or
  the values): the plan and the direct refine work in ranks and check keys either way.
* [ours] Equality needs no ``special_eq_scan``: ``x = v`` is the rank interval of ``v``, sieved
  and refined like any range (a key inside one bin gets an empty approximation and one slab).
* [ours] Groups of one or two columns keep the unused coordinates at 0 (cubes and rays on the
  plane / line); ``ray_axis`` along an unused axis gives the paper's §4.4.5 layouts (rays
  perpendicular to the data, one cube deep).
* [ours] Without encoding, a 64-bit column whose values reach past 2^32 is placed at
  ``value >> (bits - 32)`` (order-preserving, so boxes map outward exactly and the exact check
  on every hit still decides): float32 cannot tell such values apart anyway.
* [ours] The RT shader checks its group's columns (Alg. 1); the direct refine checks all
  columns. Either way every row a refine meets gets ``bit := exact`` for its group, and the
  groups are ANDed.
* [ours] A query with an empty predicate on any column answers 0 (its plan flags every group's
  approximation zero and has no boxes); a group without a predicate for a query passes all
  its rows without a refine.
* [ours] The plan is made on the device, not on the host as the paper encodes queries: one
  kernel encodes each bound and chooses its side's vectors (an item per bound: a thread, or
  on the GPU in the compact layout a warp searching by votes, :mod:`.plan_cuda`), a second
  (a thread per query) writes the refine boxes into six fixed slots per query and group, so
  nothing is sized on the host (a small GPU call makes both in one launch, a block a query:
  :data:`.launches.QUERY_PLAN`); one
  running sum over the slots' work and one device-to-host copy per batch (the refine sizes
  of all groups, as the launches need their item counts) follow. A batch costs a constant
  number of launches: the plan, the sum, and per group the sieve, the refine (one per
  ``max_rays`` rays) and the AND.
* [ours] On the GPU a direct refine of at most :data:`STRIDED_QUERIES` queries skips the sum
  and the copy: a fixed number of threads per slot walk its slab with that stride
  (:func:`.refine.direct_strided`), so a small batch's call never waits for the device (the
  one-query latency of the paper's runs).
* [ours] Hits reach the bitmap through the refine's own any-hit program with the query layer's
  ``BITMAP`` atomics (:func:`query.bit_writers`) rather than COLLECT and a scatter: one trace,
  and the atomics are the paper's. The rays are launched straight on the engine
  (``engine.launch``), each finding its box in the plan, so no per-ray arrays are made.
* [AMBIG] Engines (``engine``, as rx's): on an engine whose programs are not numba functions
  (OptiX) the refine is the query layer's ``BITMAP`` launches, one lookup per plan slot
  (:func:`.refine.mark_plan`, programs in ``programs.cu``): the same rays and bits, a binary
  search per hit for its slot and 8 bytes a ray of a launch for its row offset. A group scene
  on OptiX is not saved; loading builds it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams, Operation
from indexzoo.devices import to_numpy, xp_of
from indexzoo.native import rt
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt import select_engine
from indexzoo.persist import StateSchema

from .bits import words_for
from .encoding import (
    ColumnTables,
    SortedTables,
    build_sorted_tables,
    build_tables,
    coordinate_shifts,
    group_columns,
    ranks_of,
)
from .params import RtscanParams
from .profile import StageTimer
from .saved import RTSCAN_SCHEMA

if TYPE_CHECKING:
    from indexzoo.native import csr

    from . import launches as launch_kernels
    from . import layout as layout_kernels
    from . import plan as plan_kernels
    from . import prepared as prepared_kernels
    from . import refine as refine_kernels
    from . import sieve as sieve_kernels
    from .plan import Plan
else:  # imported when an index is built or loaded: the registry lists the class without them
    csr = lazy_module("indexzoo.native.csr")
    launch_kernels = lazy_module("indexzoo.plugins.rtscan.launches")
    layout_kernels = lazy_module("indexzoo.plugins.rtscan.layout")
    plan_kernels = lazy_module("indexzoo.plugins.rtscan.plan")
    prepared_kernels = lazy_module("indexzoo.plugins.rtscan.prepared")
    refine_kernels = lazy_module("indexzoo.plugins.rtscan.refine")
    sieve_kernels = lazy_module("indexzoo.plugins.rtscan.sieve")

__all__ = ["MAX_COLUMNS", "RtscanIndex", "RtscanState"]

#: The most columns one build takes (groups of three beyond the third).
MAX_COLUMNS = 64
#: Bitmap bytes per batch chunk of queries (a temporary per group beyond the first).
_CHUNK_BYTES = 1 << 26
#: Most queries per batch chunk: the plan's slots (6 per query and group) of boxes whose ray
#: counts are capped at ``layout.RAY_CAP`` must sum within int64.
_CHUNK_QUERIES = 1 << 16
_AXIS_CODES = {"longest": -1, "x": 0, "y": 1, "z": 2}
#: On the GPU, batches of at most this many queries refine directly with a fixed number of
#: threads per slot (:func:`.refine.direct_strided`): no running sum, no device-to-host copy,
#: so the call never waits for the device. Larger batches, and the CPU (where the sum and the
#: "copy" cost nearly nothing), balance their rows over threads by the running sum.
STRIDED_QUERIES = 8
_NULL = contextlib.nullcontext()


def _threads_per_slot(n: int) -> int:
    """Threads per slot of the strided direct refine on the GPU: enough that the few slots of
    a small batch fill the device (a slab holds at most ``n`` rows), at most 2^15 (every
    thread of a slot is launched whatever its slab holds; it was 2^17, and on an H200 at
    1e8 rows the call was timed with 2^15 only, so the cap's own effect is not measured)."""
    return min(1 << 15, max(32, n // 64))


class RtscanState(BuildState):
    """One build of ``rtscan``."""

    lc: Any              # (N, d) Fortran order: each row's values (the keys), or its codes
    #                      (ranks: the paper's layout with encoding)
    tables: ColumnTables | SortedTables  # orders and mapping tables (codes = tables.ranks
    #                      when encoding), or orders and sorted samples (compact layout)
    sieve: sieve_kernels.Sieve | sieve_kernels.FineSieve | None
    groups: tuple[refine_kernels.GroupScene, ...]
    shifts: tuple[int, ...]  # per column: coordinate = value >> shift (encoding off)
    plan_args: plan_kernels.PlanArgs  # the plan kernel's own inputs (groups, geometry, shifts)
    refine: str          # the refine this build runs: "rt" or "direct" (auto resolved)
    peak: int


class RtscanIndex(rt.EngineIndex, GpuIndex[RtscanState]):
    """RTScan: encoding, sieving and RT refine of conjunctive ranges, bitmaps as answers.

    Uniform encoding, data sieving and Matrix RT Refine over groups of three columns (up to
    64 columns, the groups ANDed)."""

    name: ClassVar[str] = "rtscan"
    #: Rows a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22 x 3
    #: rows (benchmarks/results/cpu/2026-11-29-build-rates/), an H100's at 1e8 x 3 rows
    #: (benchmarks/results/h100/2026-11-23-5a580fe/call2-938deae/: 1.55 s).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 9e5, "cuda": 6.5e7}
    Params: ClassVar[type[IndexParams]] = RtscanParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True,
                                                        duplicates=True, dims=MAX_COLUMNS)
    full_scan: ClassVar[bool] = True
    plugin_api: ClassVar[str] = "2.0"
    #: the tables checked, everything else made again from them and compared (saved.py)
    state_schema: ClassVar[StateSchema] = RTSCAN_SCHEMA
    params: RtscanParams

    #: Attach a :class:`~.profile.StageTimes` to time the stages (None: nothing is timed).
    stage_timer: StageTimer | None = None

    def _stage(self, name: str) -> contextlib.AbstractContextManager[Any]:
        timer = self.stage_timer
        return _NULL if timer is None else timer.stage(name)

    def _count(self, name: str, value: Any) -> None:
        timer = self.stage_timer
        if timer is not None:
            timer.count(name, int(value))

    # -------------------------------------------------------------- build
    def _build(self, st: RtscanState, keys: Any) -> None:
        p = self.params
        if keys.ndim == 1:
            keys = keys.reshape(-1, 1)
        n, d = int(keys.shape[0]), int(keys.shape[1])
        own = int(keys.nbytes)  # the index's own copy of the keys, held during the build
        tables: ColumnTables | SortedTables
        with self._stage("build_tables"):
            if p.layout == "compact":
                tables, starts = build_sorted_tables(keys)
            else:
                tables = build_tables(keys, keep_ranks=p.encoding)
                starts = tables.starts
            st.tables = tables
        st.lc = keys if tables.ranks is None else tables.ranks
        held = own + sum(tables.nbytes().values())
        peak = own + tables.peak_bytes
        st.shifts = coordinate_shifts(self._tops(st), p.encoding)
        st.sieve = None
        with self._stage("build_sieve"):
            if p.sieve_vectors and n:
                held_ranks: Any = tables.ranks
                temp = None if held_ranks is not None else self._ranks(tables)
                ranks = held_ranks if temp is None else temp
                cols = [ranks[:, j] for j in range(d)]
                if p.sieve_fine:
                    st.sieve, extra = sieve_kernels.build_fine_sieve(
                        cols, starts, n, p.sieve_vectors, p.sieve_fine)
                else:
                    st.sieve, extra = sieve_kernels.build_sieve(cols, starts, n,
                                                                p.sieve_vectors)
                peak = max(peak, held + extra + (0 if temp is None else int(temp.nbytes)))
                held += sum(st.sieve.nbytes().values())
                del temp, ranks, cols, held_ranks
        del starts
        groups = []
        engine = self._engine(st.device)
        st.refine = self._resolved_refine(engine)
        with self._stage("build_bvh"):
            for cols_ in self._group_columns(d):
                coords = [self._coords(st, j) for j in cols_]
                g = refine_kernels.build_group(coords, cols_, n, p,
                                               with_scene=st.refine == "rt", engine=engine)
                # the coordinates made for the scene: shifted values, or ranks (compact)
                temp = sum(int(c.nbytes) for c, j in zip(coords, cols_, strict=True)
                           if not self._coords_are_held(st, j))
                peak = max(peak, held + temp + g.peak_bytes)
                held += sum(g.nbytes().values())
                groups.append(g)
        st.groups = tuple(groups)
        st.plan_args = self._plan_args(st)
        held += sum(st.plan_args.nbytes().values())
        st.peak = max(peak, held)

    def _tops(self, st: RtscanState) -> list[int]:
        """Each column's largest value (0 for an empty build), for the coordinate shifts."""
        t, n = st.tables, int(st.tables.order.shape[0])
        if n == 0:
            return [0] * int(t.order.shape[1])
        if isinstance(t, ColumnTables):
            return [int(u[-1]) for u in t.uniq]
        return [int(st.lc[int(t.order[n - 1, j]), j]) for j in range(int(t.order.shape[1]))]

    def _engine(self, device: str) -> rt.Engine:
        """The engine of ``params.engine`` on ``device`` (:func:`select_engine`, as rx's). The
        direct refine traces nothing: it runs the same on either engine."""
        return select_engine(self.params.engine, device)

    def _resolved_refine(self, engine: rt.Engine) -> str:
        """``params.refine``, ``auto`` resolved: the RT refine where the engine traverses in
        hardware (OptiX: RT cores), the direct refine on the software engine (measured faster
        there, and it builds no BVH)."""
        p = self.params
        if p.refine != "auto":
            return p.refine
        return "rt" if engine.hardware_traversal else "direct"

    def _save_state(self, st: RtscanState) -> dict[str, Any]:
        """The state as saved: a group's scene on an engine that cannot save it (OptiX: a
        handle on one GPU) without it, built again on load from the coordinates."""
        saved = super()._save_state(st)
        saved["groups"] = tuple(
            g if g.gas is None or g.gas.engine.saves_scenes else dataclasses.replace(g, gas=None)
            for g in st.groups)
        return saved

    @classmethod
    def _params_for_load(cls, params: Any, device: str) -> Any:
        """A file saved before the ``layout`` parameter (its params have every field of their
        time, ``sieve_vectors`` among them, and no ``layout``) holds the paper's layout and one
        sieve level (state version 1 then and now: its state is read as it was written); then
        the engine's rule (``engine="optix"`` onto the CPU becomes ``"auto"``)."""
        if isinstance(params, dict) and "sieve_vectors" in params and "layout" not in params:
            params = {**params, "layout": "paper", "sieve_fine": 0}
        return super()._params_for_load(params, device)

    def _load_state(self, st: RtscanState, saved: dict[str, Any]) -> None:
        super()._load_state(st, saved)
        p = self.params
        n = int(st.lc.shape[0])
        if "refine" not in saved:  # saved before auto: its params name the refine
            st.refine = "rt" if p.refine == "auto" else p.refine
        if st.refine != "rt" or n == 0 or all(g.gas is not None for g in st.groups):
            return
        engine = self._engine(st.device)
        st.groups = tuple(
            g if g.gas is not None else refine_kernels.build_group(
                [self._coords(st, j) for j in g.cols], g.cols, n, p, True, engine)
            for g in st.groups)

    def _plan_args(self, st: RtscanState) -> plan_kernels.PlanArgs:
        return plan_kernels.plan_args(st.xp, st.groups, st.shifts)

    def _group_columns(self, d: int) -> list[tuple[int, ...]]:
        return group_columns(d, self.params.group_size)

    @staticmethod
    def _ranks(tables: ColumnTables | SortedTables) -> Any:
        """Each row's rank per column (a temporary where no codes are kept, for the
        vectors)."""
        xp = xp_of(tables.order)
        n, d = tables.order.shape
        ranks = xp.empty((n, d), dtype=tables.order.dtype, order="F")
        for j in range(d):
            ranks[tables.order[:, j], j] = xp.arange(n, dtype=tables.order.dtype)
        return ranks

    def _coords(self, st: RtscanState, j: int) -> Any:
        """Column ``j``'s scene coordinates, below 2^32: the ranks or values held (a view),
        64-bit values shifted right (a uint32 copy), or ranks made from the order (compact
        layout with encoding: computed where they are used)."""
        if self.params.encoding and st.tables.ranks is None:
            return ranks_of(st.tables.order, j)
        col = st.lc[:, j]
        if st.shifts[j]:
            col = (col >> col.dtype.type(st.shifts[j])).astype(np.uint32)
        return col

    def _coords_are_held(self, st: RtscanState, j: int) -> bool:
        """Whether :meth:`_coords` of column ``j`` is a view of what the build holds."""
        return not st.shifts[j] and not (self.params.encoding and st.tables.ranks is None)

    def _footprint(self, st: RtscanState) -> Footprint:
        parts = dict(st.tables.nbytes())
        if "codes" not in parts:
            parts["keys"] = int(st.lc.nbytes)
        if st.sieve is not None:
            parts.update(st.sieve.nbytes())
        parts.update(st.plan_args.nbytes())
        for g in st.groups:
            for k, v in g.nbytes().items():
                parts[k] = parts.get(k, 0) + v
        return Footprint(breakdown=parts, peak_build_bytes=max(st.peak, sum(parts.values())))

    # -------------------------------------------------------------- predicates
    def _predicates(self, st: RtscanState, lo: Any, hi: Any) -> tuple[Any, Any, Any, Any]:
        """Rank intervals ``[x0, x1)`` (the plan's first launch, :data:`.launches.RANKS` or
        :data:`.launches.SORTED_RANKS`) and the exact bounds in the space of ``lc`` (``plo``,
        ``phi``: ranks where it holds codes, the bounds themselves else), all (Q, d)."""
        from .plan import RK_COLUMNS, X0, X1

        xp, n = st.xp, st.n
        q, d = int(lo.shape[0]), int(lo.shape[1])
        rk = xp.zeros((q, d, RK_COLUMNS), dtype=np.int64)
        if q:
            kernel, args, group = launch_kernels.rank_launch(st.tables, st.lc,
                                                             self._sieve_args(st))
            kernel(self.device, 2 * d * q, lo, hi, *args, rk, group=group,
                   threads_per_block=self.params.threads_per_block)
        x0, x1 = xp.ascontiguousarray(rk[:, :, X0]), xp.ascontiguousarray(rk[:, :, X1])
        if st.tables.ranks is None:
            return x0, x1, xp.ascontiguousarray(lo), xp.ascontiguousarray(hi)
        empty = x0 >= x1
        dt = st.lc.dtype
        plo = xp.where(empty, 1, x0).astype(dt)
        phi = xp.where(empty, 0, xp.minimum(x1 - 1, max(n - 1, 0))).astype(dt)
        return x0, x1, plo, phi

    # -------------------------------------------------------------- range lookups
    def _prepared_range(self, st: RtscanState, op: Operation) -> Callable[[Any, Any], Any] | None:
        """GPU bitmaps of the direct refine over one column group, for batches of up to
        :data:`STRIDED_QUERIES` queries, with every launch's fixed arguments bound
        (:mod:`.prepared`); None (the hook) otherwise."""
        if (op.out != "bitmap" or self.device != "cuda" or st.refine != "direct"
                or len(st.groups) != 1):
            return None
        return prepared_kernels.prepared_direct(self, st, self.device, STRIDED_QUERIES,
                                                _threads_per_slot(st.n),
                                                _AXIS_CODES[self.params.ray_axis])

    def _range_bitmap(self, st: RtscanState, lo: Any, hi: Any) -> Any:
        xp = st.xp
        if lo.ndim == 1:
            lo, hi = lo.reshape(-1, 1), hi.reshape(-1, 1)
        q, words = int(lo.shape[0]), words_for(st.n)
        if q == 0 or st.n == 0:
            return xp.zeros((q, words), dtype=np.uint32)
        out = xp.empty((q, words), dtype=np.uint32)  # the sieve writes every word
        self._count("queries", q)
        per = max(1, min(_CHUNK_QUERIES, _CHUNK_BYTES // max(4 * words, 1)))
        if q <= per:
            self._answer(st, lo, hi, out)
            return out
        for s in range(0, q, per):
            self._answer(st, lo[s:s + per], hi[s:s + per], out[s:s + per])
        return out

    def _plan(self, st: RtscanState, lo: Any, hi: Any, device: str | None = None,
              running_sums: bool = True) -> Plan:
        """The batch's plan, made on the device in two launches (:mod:`.plan`), and (unless
        ``running_sums`` is False) the running sums of its slots' work. ``device``: the
        index's (``"cuda"`` with NumPy arrays: numba's CUDA simulator, for tests)."""
        from .layout import PLAN_COLUMNS, RAYS
        from .plan import (
            D_COUNT,
            DIRECT_COLUMNS,
            PLAN,
            RK_COLUMNS,
            SEL_COLUMNS,
            SLOTS,
            Plan,
        )

        p, xp, tables, pa = self.params, st.xp, st.tables, st.plan_args
        q, d = int(lo.shape[0]), int(lo.shape[1])
        g = len(st.groups)
        rt = st.refine == "rt"
        bounds = xp.empty((2, q, d), dtype=st.lc.dtype)
        width = PLAN_COLUMNS if rt else DIRECT_COLUMNS
        n_rk, n_sel = q * d * RK_COLUMNS, g * q * SEL_COLUMNS
        buf = xp.empty(n_rk + n_sel + g * q * SLOTS * width, dtype=np.int64)  # one allocation
        rk = buf[:n_rk].reshape(q, d, RK_COLUMNS)
        sel = buf[n_rk:n_rk + n_sel].reshape(g, q, SEL_COLUMNS)
        boxes = buf[n_rk + n_sel:].reshape(g, q * SLOTS, width)
        dev = device or self.device
        kernel, args, group = launch_kernels.rank_launch(tables, st.lc, self._sieve_args(st))
        kernel(dev, 2 * d * q, lo, hi, *args, rk, group=group,
               threads_per_block=p.threads_per_block)
        PLAN(dev, q, lo, hi, st.lc, tables.order, pa.shifts, pa.group_cols, pa.geo,
             np.int64(st.n), np.bool_(p.encoding), np.bool_(tables.ranks is not None),
             np.bool_(rt), np.int64(_AXIS_CODES[p.ray_axis]), bounds[0], bounds[1], rk, sel,
             boxes, threads_per_block=p.threads_per_block)
        ends = xp.cumsum(boxes[:, :, RAYS if rt else D_COUNT], axis=1) if running_sums else None
        return Plan(bounds[0], bounds[1], rk, sel, boxes, ends)

    def _sieve_args(self, st: RtscanState) -> tuple[Any, ...]:
        """The sieve's arguments of the rank kernel (:func:`.plan.sieve_side`): the borders
        (the first level's of a two-level sieve), their offsets, the vectors of each column's
        first borders, the fine table, its offsets, the fine vectors and the fine bins (0: one
        level), then whether there is a sieve and the selection's code; stand-ins where there
        is no such part, never read then."""
        none = st.plan_args.no_borders
        sv = st.sieve
        rule = np.int64(plan_kernels.SELECTION_CODES[self.params.selection])
        if sv is None:
            return (none, none, none, none, none, none.reshape(1, 1), np.int64(0),
                    np.bool_(False), rule)
        if isinstance(sv, sieve_kernels.FineSieve):
            return (sv.coarse, sv.coarse_offsets, sv.vector_base, sv.fine, sv.fine_base,
                    sv.fine_ids, np.int64(sv.bins), np.bool_(True), rule)
        return (sv.borders, sv.border_offsets, sv.vector_base, none, none, none.reshape(1, 1),
                np.int64(0), np.bool_(True), rule)

    def _answer(self, st: RtscanState, lo: Any, hi: Any, out: Any,
                device: str | None = None) -> None:
        """The bitmaps ``out`` (Q, W) of a batch chunk: the plan, then per group the sieve's
        approximation and the refine, the groups ANDed into ``out`` (``device`` as
        :meth:`_plan`'s)."""
        p, xp, n = self.params, st.xp, st.n
        dev = device or self.device
        strided = (st.refine == "direct" and dev == "cuda"
                   and int(lo.shape[0]) <= STRIDED_QUERIES)
        with self._stage("encode"):
            plan = self._plan(st, lo, hi, dev, running_sums=not strided)
        vectors = st.plan_args.no_vectors if st.sieve is None else st.sieve.vectors
        sizes = None
        for gi, grp in enumerate(st.groups):
            words = out if gi == 0 else xp.empty_like(out)
            with self._stage("sieve"):
                sieve_kernels.approximate_sel(dev, vectors, plan.sel[gi], n, words, p.threads_per_block)
            if strided:
                with self._stage("refine"):
                    if self.stage_timer is not None:
                        counts = plan.boxes[gi, :, plan_kernels.D_COUNT]
                        self._count("boxes", xp.count_nonzero(counts))
                        self._count("candidates", int(counts.sum()))
                    refine_kernels.direct_strided(st.tables.order, st.lc, plan.plo, plan.phi,
                                                  plan.boxes[gi], words, _threads_per_slot(n),
                                                  p.threads_per_block, dev)
            else:
                with self._stage("refine"):
                    if sizes is None:  # the one device-to-host copy: every group's refine size
                        sizes = to_numpy(plan.ends[:, -1])
                    self._refine_summed(st, gi, grp, plan, int(sizes[gi]), words, dev)
            with self._stage("merge"):
                if gi:
                    xp.bitwise_and(out, words, out=out)

    def _refine_summed(self, st: RtscanState, gi: int, grp: refine_kernels.GroupScene,
                       plan: Plan, total: int, words: Any, dev: str) -> None:
        """Group ``gi``'s refine of ``total`` items balanced by the plan's running sums (the
        RT refine, and the direct refine of larger batches)."""
        p = self.params
        if self.stage_timer is not None:
            self._count("boxes", st.xp.count_nonzero(plan.boxes[gi, :, plan.count_column]))
            self._count("rays" if st.refine == "rt" else "candidates", total)
        if st.refine == "direct":
            refine_kernels.direct_plan(st.tables.order, st.lc, plan.plo, plan.phi, plan.boxes[gi],
                                       plan.ends[gi], total, words, p.threads_per_block, dev)
        else:
            layout_kernels.too_many_rays(float(total), grp.geom)
            refine_kernels.trace_plan(grp, plan.boxes[gi], plan.ends[gi], total, st.lc, plan.plo,
                                      plan.phi, words, p, dev)

    def _box_coords(self, st: RtscanState, grp: refine_kernels.GroupScene, lo: np.ndarray,
                    hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rank boxes ``[lo, hi)`` as inclusive scene coordinates (B, 3) on the host (unused
        axes 0): the ranks themselves, or the values at the boxes' first and last ranks. The
        host reference of the plan kernel's coordinates (tests)."""
        b = int(lo.shape[0])
        lo3 = np.zeros((b, 3), dtype=np.int64)
        hi3 = np.zeros((b, 3), dtype=np.int64)
        g = len(grp.cols)
        if self.params.encoding:
            lo3[:, :g], hi3[:, :g] = lo, hi - 1
            return lo3, hi3
        xp = st.xp
        ranks = xp.asarray(np.concatenate([lo, hi - 1], axis=0))
        vals = []
        for k, j in enumerate(grp.cols):
            col = st.lc[:, j]
            v = col[st.tables.order[ranks[:, k], j]]
            if st.shifts[j]:
                v = v >> col.dtype.type(st.shifts[j])
            vals.append(v.astype(np.int64))
        both = to_numpy(xp.stack(vals, axis=1))
        lo3[:, :g], hi3[:, :g] = both[:b], both[b:]
        return lo3, hi3

    # -------------------------------------------------------------- point lookups
    def _point_rowids(self, st: RtscanState, q: Any) -> tuple[Any, Any]:
        xp = st.xp
        if q.ndim == 1:
            q = q.reshape(-1, 1)
        nq, d = int(q.shape[0]), int(q.shape[1])
        with self._stage("encode"):
            x0, x1, plo, phi = self._predicates(st, q, q)
        runs = xp.maximum(x1 - x0, 0)
        col = xp.argmin(runs, axis=1)  # the column where the key's run is shortest
        rows = xp.arange(nq)
        count = runs[rows, col] * xp.all(runs > 0, axis=1)
        flat = st.tables.order.T.reshape(-1)  # column-major: rank a of column j at j*N + a
        start = col.astype(np.int64) * st.n + x0[rows, col]
        offsets, cand = csr.gather_runs_xp(flat, start, count)
        if d == 1 or int(cand.shape[0]) == 0:
            return offsets, cand.astype(st.rowid_dtype)
        owner = xp.repeat(xp.arange(nq, dtype=np.int64), count)
        cand = cand.astype(np.int64)
        ok = xp.ones(int(cand.shape[0]), dtype=bool)
        for j in range(d):
            v = st.lc[cand, j]
            ok &= (v >= plo[owner, j]) & (v <= phi[owner, j])
        kept = xp.bincount(owner[ok], minlength=nq)
        offsets = xp.zeros(nq + 1, dtype=np.int64)
        xp.cumsum(kept, out=offsets[1:])
        return offsets, cand[ok].astype(st.rowid_dtype)
