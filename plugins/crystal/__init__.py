"""Query engine ``crystal``: the CUDA-core peer of RTCUDB, Crystal-style (Shanbhag, Madden,
Yu, SIGMOD 2020) fused kernels over the flat columns.

One kernel per query: a row's filter columns are tested against the query's code intervals
(an IN-set or an OR is several intervals), and only a qualifying row reads its GROUP BY and
aggregate columns, computes its group's slot by a perfect hash (the mixed-radix number of its
group codes over the columns' domains, as Crystal's SSB kernels index their result arrays by
dimension keys) and adds its values into the per-slot arrays. Every needed column is read at
most once, in one pass: the engine's bytes are the bandwidth floor of the query
(:func:`indexzoo.query.floor_bytes`), which it reports.

On the GPU the kernel is generated per query, its constants literals of the source, with
Crystal's tiles of rows per thread (:mod:`.codegen`); a query with at most ``shared_slots``
result slots aggregates per block in shared memory first. On the CPU one compiled
kernel serves every query, its constants read from small arrays (:mod:`.kernels`): compiling
per query would cost more there than the query.

The host's part of a query is kept small, since at SSB's sizes the kernel takes well under a
millisecond: a view keeps, per query, the plan, the bound kernel launches, one result buffer
(reset with one memset where the query has no MIN or MAX) and what decoding its groups needs;
a query copies back only the slots it filled (a second kernel finds and packs them), not the
whole result array.

Departures from Crystal: one generator serves every query, where Crystal's kernels are written
by hand per SSB query (same structure: tile loads, predicated on the rows still qualifying,
column by column; a perfect hash into the result). Crystal aggregates Q2-Q4 with device-memory
atomics into its result table; here any query whose slots fit shared memory is pre-aggregated
per block, as Crystal does for Q1.x only. The slots come out in the lexicographic order of the
group codes, so an ORDER BY on a prefix of the GROUP BY columns is skipped.
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import Field

from indexzoo import Unsupported
from indexzoo.devices import array_module, to_numpy
from indexzoo.hookspecs import hookimpl
from indexzoo.native.lazy import lazy_module
from indexzoo.native.targets import KernelParams
from indexzoo.query import (
    Expr,
    Groups,
    Plan,
    Query,
    QueryEngine,
    Table,
    View,
    floor_bytes,
    intervals_arrays,
    terms_array,
)
from indexzoo.resources import MemoryEstimate, check_fits

from . import codegen

if TYPE_CHECKING:
    from indexzoo.native import groupagg

    from . import kernels
else:  # imported when a query runs: the registry lists the engine without them
    groupagg = lazy_module("indexzoo.native.groupagg")
    kernels = lazy_module("indexzoo.plugins.crystal.kernels")

__all__ = ["CrystalEngine", "CrystalParams"]


class CrystalParams(KernelParams):
    max_slots: int = Field(default=1 << 26, ge=1, description=(
        "The most result slots (product of the GROUP BY columns' domain sizes) a query may "
        "use; more raises Unsupported."))
    shared_slots: int = Field(default=1024, ge=0, description=(
        "GPU: a query with at most this many result slots (and whose COUNT and SUM rows fit "
        "in 192 KiB) aggregates per block in shared memory first; 0: always in device "
        "memory. Measured on an H100 at SF 10: shared memory wins with 1 slot (SSB Q1.x: "
        "9x) and 175 (Q4.1), device memory with 4375 and more."))
    items_per_thread: int = Field(default=codegen.ITEMS, ge=1, le=16, description=(
        "GPU: rows a thread takes per tile (Crystal's ITEMS_PER_THREAD)."))
    eager_filters: int = Field(default=2, ge=0, description=(
        "GPU: the query's first this many filter columns are read for every row of a tile "
        "at once (independent loads, one memory round trip, the whole columns read); the "
        "others only for the rows still qualifying, column by column (Crystal's predicated "
        "loads: fewer bytes, one round trip each). Measured on an H200 at SF 10, kernel alone, "
        "in one run: 2 made each of the 13 SSB queries faster than 0 (Q1.1 0.94 -> 0.78x its "
        "read floor, Q3.1 0.99 -> 0.92x), 1 and 3 fewer; on an H100, 1 had made 8 of them "
        "2-17% faster and Q3.1 10-12% slower, and every filter eager 12 of them slower."))
    result_copies: int = Field(default=4, ge=1, le=64, description=(
        "GPU: a query that aggregates in device memory with at most 65,536 result slots "
        "keeps this many copies of its result, block b adding into copy b % result_copies, "
        "folded into one before the slots are packed, so that the rows of a few hot slots do "
        "not all wait on the same words. Measured on an H200 at SF 10: SSB Q3.1's kernel "
        "(2.2 M qualifying rows into 150 of 4,375 slots) took 0.51 ms with one copy and "
        "0.33 ms with 2 to 128."))


_OPS = {"sum": 0, "min": 1, "max": 2}
_INIT = (0, np.iinfo(np.int64).max, np.iinfo(np.int64).min)  # SUM, MIN, MAX start values

#: A GROUP BY column whose codes span more than this many values, and more than the table's
#: rows, is renumbered 0..k-1 by its distinct codes (a perfect hash over a sparse column's
#: whole domain would hold mostly empty slots).
DENSE_ABOVE = 1 << 16


def result_rows(p: Plan) -> tuple[np.ndarray, list[int]]:
    """``row_of`` (3 per value expression: its SUM, MIN and MAX row, -1 if not asked) and the
    kinds of the rows (0 COUNT or SUM, 1 MIN, 2 MAX), COUNT and SUM rows first."""
    asked = [[False] * 3 for _ in p.values]
    for op, vi in p.aggs:
        asked[vi][_OPS[op]] = True
    row_of = np.full(3 * max(len(p.values), 1), -1, dtype=np.int64)
    kinds = [0]
    for k in range(3):
        for e in range(len(p.values)):
            if asked[e][k]:
                row_of[3 * e + k] = len(kinds)
                kinds.append(k)
    return row_of, kinds


def _group_codes(ids: np.ndarray, strides: list[int], sizes: list[int], mins: list[int],
                 maps: list[Any]) -> list[np.ndarray]:
    """Per group column, the table codes of result slots ``ids`` (the slot is the mixed-radix
    number of the columns' codes less their minimum, or of a dense column's numbers)."""
    keys = [(ids // s) % k + lo for s, k, lo in zip(strides, sizes, mins, strict=True)]
    return [k if m is None else m[k] for k, m in zip(keys, maps, strict=True)]


def _padded(n: int) -> int:
    """``n`` columns rounded up to a multiple of four (at least four)."""
    return max(4, -(-n // 4) * 4)


#: The most shared memory a block of a query's kernel takes (its COUNT and SUM rows).
SHARED_BYTES = 192 * 1024
#: The most result slots a query keeps ``result_copies`` copies of (more slots spread their
#: rows' atomics over more words already, and each copy is zeroed every run).
COPIES_UP_TO = 1 << 16

#: Result slots a query's first copy back holds; a query that fills more copies the rest next.
FIRST_COPY_SLOTS = 1024
#: The most result slots a query keeps its group columns' codes by slot for (8 bytes a slot
#: and column).
DECODE_TABLE_SLOTS = 1 << 16


@dataclass
class _Prepared:
    """One query on one view, ready to launch: its plan, its bound kernels, its buffer and
    what a run does to the buffer before and after.

    ``buf`` (int64) holds, in order: the COUNT and SUM rows, the MIN and MAX rows (``res``
    spans the rows), then ``packed``: the number of slots filled (one word) and their records,
    which :func:`.kernels.compact_kernel` writes, then the result's further copies where the
    query keeps ``result_copies`` of them (each laid out as ``res``; ``fold`` adds them into
    ``res`` after the kernel). A run zeroes the COUNT and SUM rows and the
    number (one memset where no MIN or MAX row lies between them) and sets the MIN and MAX rows
    to their start values (``fills``).
    """

    plan: Plan
    launch: Any
    compact: Any
    buf: Any
    packed: Any
    n_slots: int
    n_zero: int  # words zeroed from the start of buf
    fills: list[tuple[int, int, int]]  # then (start, stop, value) of buf
    kinds: list[int]
    outputs: list[tuple[int, int, int]]  # (kind, expression, row) of each row asked for
    strides: list[int]
    sizes: list[int]
    mins: list[int]
    maps: list[Any]  # per group column: the table codes of its dense numbers, or None
    bytes_read: int
    private: bool
    n_listed: Any  # the number of slots the CPU kernel lists (None on the GPU, which lists none)
    host: Any = None  # page-locked buffer of the first copy back (GPU)
    fold: Any = None  # folds the result's further copies into copy 0 (GPU, result_copies)
    #: GPU: the run's device work as one CUDA graph (captured at the second run: the first
    #: loads the kernels), False where it could not be captured (launched one by one)
    graph: Any = None
    runs: int = 0
    head: Any = None  # GPU: the device words a run copies back first (:meth:`CrystalEngine._head`)
    #: per group column, its table code by slot (:data:`DECODE_TABLE_SLOTS` slots at most),
    #: else None: a run's groups decode by one gather a column, not three operations
    by_slot: list[np.ndarray] | None = None

    @property
    def rows(self) -> int:
        return len(self.kinds)


class CrystalView(View):
    """The flat columns, moved to the engine's device once, and the queries run on them."""

    def __init__(self, table: Table, device: str, name: str = ""):
        super().__init__(table, None, None, None, name or "crystal")
        self.device = device
        self._cols: dict[str, Any] = {}
        self._queries: dict[Query, _Prepared] = {}
        self.lock = threading.Lock()  # a prepared query's buffers serve one run at a time

    def col(self, name: str) -> Any:
        if name not in self._cols:
            self._cols[name] = array_module(self.device).asarray(self.table.column(name))
        return self._cols[name]


class CrystalEngine(QueryEngine):
    """Crystal-style fused scan + group-by + aggregation kernel per query (CUDA cores)."""

    name: ClassVar[str] = "crystal"
    Params: ClassVar[type[CrystalParams]] = CrystalParams
    params: CrystalParams

    def _prepare(self, table: Table, scan: list[str], group: list[str], values: list[Expr],
                 queries: list[Query], name: str) -> View:
        view = CrystalView(table, self.device, name)
        for c in [*scan, *group, *(c for e in values for c in e.columns())]:
            view.col(c)
        return view

    def _prepared(self, view: CrystalView, p: Plan) -> _Prepared:
        """``p`` ready to launch on ``view`` (kept per query while the view lives)."""
        try:
            hit = view._queries.get(p.query)
        except TypeError:  # an unhashable literal: prepared afresh each time
            hit = None
        if hit is not None and hit.plan is p:
            return hit
        t = view.table
        xp = array_module(self.device)
        gnames: list[str] = []
        gmaps: list[np.ndarray | None] = []
        doms: list[tuple[int, int]] = []
        for c in p.group_by:
            lo, hi = t.domain(c)
            if hi - lo + 1 > max(DENSE_ABOVE, t.n_rows):
                name, codes = t.dense(c)
                gnames.append(name)
                gmaps.append(codes)
                doms.append((0, len(codes) - 1))
            else:
                gnames.append(c)
                gmaps.append(None)
                doms.append((lo, hi))
        sizes = [hi - lo + 1 for lo, hi in doms]
        n_slots = math.prod(sizes) if sizes else 1
        if n_slots > self.params.max_slots:
            raise Unsupported(f"GROUP BY {', '.join(p.group_by)} spans {n_slots} slots, more "
                              f"than max_slots={self.params.max_slots}")
        strides = [int(np.prod(sizes[j + 1:])) for j in range(len(sizes))]
        fnames = list(p.filters)
        vnames = list(dict.fromkeys(c for e in p.values for c in e.columns()))
        gmin = [lo_ for lo_, _ in doms]
        terms = [terms_array(e, vnames) for e in p.values]
        row_of, kinds = result_rows(p)
        rows, n_add = len(kinds), kinds.count(0)
        shared_ok = (n_slots <= self.params.shared_slots
                     and 8 * n_add * n_slots <= SHARED_BYTES)
        copies = (self.params.result_copies if self.device == "cuda" and not shared_ok
                  and n_slots <= COPIES_UP_TO else 1)
        block = rows * n_slots  # words of one copy of the result
        copy_at = block + 1 + n_slots * (rows + 1)  # copy 1's first word, after packed
        words = copy_at + (copies - 1) * block
        what = f"crystal's result buffer ({n_slots} groups x {rows} aggregates)"
        check_fits(MemoryEstimate({what: 8 * words}), self.device, what)
        buf = xp.zeros(words, dtype=np.int64)
        res, packed = buf[:block], buf[block:copy_at]
        fold = None
        if self.device == "cuda":
            qk = codegen.QueryKernel(
                filters=tuple(tuple(p.filters[c]) for c in fnames),
                gmin=tuple(int(x) for x in gmin), gstride=tuple(strides),
                terms=tuple(tuple((int(c), int(a), int(b)) for c, a, b in tm) for tm in terms),
                row_of=tuple(int(x) for x in row_of), n_values=len(vnames), n_slots=n_slots,
                shared=shared_ok,
                items=self.params.items_per_thread, eager_filters=self.params.eager_filters,
                copies=copies, copy_at=copy_at, copy_words=block,
                group_filter=tuple(fnames.index(c) if c in fnames else -1 for c in gnames),
                value_filter=tuple(fnames.index(c) if c in fnames else -1 for c in vnames))
            shared = codegen.shared_bytes(qk)
            tpb = self.params.threads_per_block
            kern = codegen.kernel(qk)
            launch = kern.bind(
                self.device, *(view.col(c) for c in [*fnames, *gnames, *vnames]),
                res if copies == 1 else buf,
                threads_per_block=tpb,
                blocks=kernels.blocks_for(kern, tpb, shared, tpb * qk.items), shared_mem=shared)
            private = qk.shared
            listed, n_listed = xp.zeros(0, dtype=np.int64), None
            if copies > 1:
                fold = kernels.fold_kernel(self.device).bind(
                    self.device, buf, n_slots, copies, copy_at, xp.asarray(kinds, np.int64),
                    threads_per_block=self.params.threads_per_block)
        else:
            args = self._generic_args(view, p, gnames, fnames, vnames, gmin, strides, terms,
                                      row_of)
            listed, n_listed = xp.zeros(n_slots, dtype=np.int64), xp.zeros(1, dtype=np.int64)
            launch = kernels.item_kernel(self.device).bind(
                self.device, *args, n_slots, res, listed, n_listed,
                threads_per_block=self.params.threads_per_block)
            private = False
        compact = kernels.compact_kernel(self.device).bind(
            self.device, res, rows, n_slots, listed, packed,
            threads_per_block=self.params.threads_per_block)
        fills = []  # the MIN rows, then the MAX rows (each kind's rows are adjacent)
        for kind in (1, 2):
            if kind in kinds:
                first, last = kinds.index(kind), len(kinds) - kinds[::-1].index(kind)
                fills.append((first * n_slots, last * n_slots, _INIT[kind]))
        if fills:  # the count of filled slots is not next to the COUNT and SUM rows
            fills.append((rows * n_slots, rows * n_slots + 1, 0))
        n_zero = n_add * n_slots + (0 if fills else 1)
        if copies > 1 and not fills:  # no MIN or MAX: every copy zeroed, packed with them
            n_zero = words
        elif copies > 1:  # each further copy as copy 0: COUNT and SUM rows 0, MIN and MAX rows
            starts = [(a, b, v) for a, b, v in fills if b <= block]  # copy 0's MIN and MAX rows
            for k in range(1, copies):
                at = copy_at + (k - 1) * block
                fills.append((at, at + n_add * n_slots, 0))
                fills.extend((at + a, at + b, v) for a, b, v in starts)
        outputs = [(kind, e, int(row_of[3 * e + kind])) for kind in range(3)
                   for e in range(len(p.values)) if row_of[3 * e + kind] >= 0]
        prepared = _Prepared(
            p, launch, compact, buf, packed, n_slots, n_zero,
            fills, kinds, outputs, strides, sizes, gmin, gmaps, floor_bytes(t, p.query), private,
            n_listed, groupagg.host_buffer(buf, 1 + min(n_slots, FIRST_COPY_SLOTS) * (rows + 1)),
            fold)
        if n_slots <= DECODE_TABLE_SLOTS:
            prepared.by_slot = _group_codes(np.arange(n_slots, dtype=np.int64), strides, sizes,
                                            gmin, gmaps)
        with contextlib.suppress(TypeError):  # an unhashable query is not kept
            view._queries[p.query] = prepared
        return prepared

    def _generic_args(self, view: CrystalView, p: Plan, gnames: list[str], fnames: list[str],
                      vnames: list[str], gmin: list[int], strides: list[int],
                      terms: list[np.ndarray], row_of: np.ndarray) -> tuple[Any, ...]:
        """The generic kernel's arguments before ``n_slots``: the query's columns as tuples of
        one dtype, its constants as small arrays."""
        t = view.table
        xp = array_module(self.device)
        used = [*fnames, *gnames, *vnames]
        dtype = np.result_type(*(t.column(c).dtype for c in used)) if used else np.int32

        def cols(names: list[str]) -> tuple[Any, ...]:  # one dtype, all writable: one type
            return tuple(xp.require(view.col(c), dtype, "CW") if xp is np else
                         view.col(c).astype(dtype, copy=False) for c in names)

        # Tuples padded to a multiple of four columns, so that one compiled kernel serves
        # every query of up to four filters, group and value columns: a padding filter is an
        # always-true interval, a padding group column has stride 0 (both repeat a column the
        # row reads anyway), padding value columns are never read.
        starts, lo, hi = intervals_arrays(p, fnames)
        low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        fcols = cols(fnames) if fnames else (
            xp.zeros(t.n_rows, dtype=dtype) if not used else view.col(used[0]).astype(dtype),)
        k = _padded(len(fcols))
        starts = np.concatenate([starts, starts[-1] + np.arange(1, k - len(fcols) + 1)])
        lo = np.concatenate([lo, np.full(k - len(fcols), low)]).astype(np.int64)
        hi = np.concatenate([hi, np.full(k - len(fcols), high)]).astype(np.int64)
        if not fnames:  # an always-true filter on the placeholder
            starts, lo, hi = np.arange(k + 1), np.full(k, low), np.full(k, high)
        fcols = fcols + (fcols[0],) * (k - len(fcols))
        gcols = cols(gnames)
        kg = _padded(len(gcols))
        gcols = gcols + (fcols[0],) * (kg - len(gcols))
        gmin_a = np.array(gmin + [0] * (kg - len(gmin)), dtype=np.int64)
        gstride = np.array(strides + [0] * (kg - len(strides)), dtype=np.int64)
        vtuple = cols(vnames)
        vtuple = vtuple + (fcols[0],) * (_padded(len(vtuple)) - len(vtuple))
        tstarts = np.cumsum([0, *(len(x) for x in terms)]).astype(np.int64)
        allterms = np.concatenate(terms) if terms else np.zeros((0, 3), dtype=np.int64)
        dev = [xp.asarray(a) for a in (starts, lo, hi, gmin_a, gstride, allterms, tstarts,
                                        row_of)]
        return (fcols, dev[0], dev[1], dev[2], gcols, dev[3], dev[4], vtuple, dev[5], dev[6],
                dev[7])

    def _execute(self, view: View, p: Plan) -> Groups:
        assert isinstance(view, CrystalView)
        with view.lock:
            return self._run(view, self._prepared(view, p))

    def _run(self, view: CrystalView, q: _Prepared) -> Groups:
        p = q.plan
        if q.host is not None and not p.empty:  # GPU
            head = self._device_run(view, q)
        else:
            self._reset(q)
            if not p.empty:
                q.launch(view.table.n_rows)
                if q.fold is not None:
                    q.fold(q.rows * q.n_slots)
            head = None
        if q.n_slots == 1 and q.n_listed is None:  # one slot (GPU): its rows are its record
            row = head.copy() if head is not None else to_numpy(q.buf[:q.rows])
            records = np.concatenate([[0], row]).reshape(1, -1)[:1 if row[0] else 0]
        elif head is not None:
            records = groupagg.packed_records(head, q.packed, q.rows + 1,  # (a new array)
                                              min(q.n_slots, FIRST_COPY_SLOTS))
        else:
            # the slots the CPU kernel listed, or every slot (an empty query on the GPU)
            q.compact(q.n_slots if q.n_listed is None else int(q.n_listed[0]))
            records = groupagg.read_packed(q.packed, q.rows + 1, min(q.n_slots, FIRST_COPY_SLOTS),
                                           q.host)
        ids, vals = records[:, 0], records[:, 1:].T
        if not p.group_by and len(records) == 0:  # a query without GROUP BY answers one row
            ids = np.zeros(1, dtype=np.int64)
            vals = np.array([[_INIT[kind]] for kind in q.kinds], dtype=np.int64)
        keys = ([codes[ids] for codes in q.by_slot] if q.by_slot is not None else
                _group_codes(ids, q.strides, q.sizes, q.mins, q.maps))
        per: list[list[np.ndarray | None]] = [[None] * len(p.values) for _ in range(3)]
        for kind, e, r in q.outputs:
            per[kind][e] = vals[r]
        return Groups(keys, vals[0], per[0], per[1], per[2], ordered=True,
                      bytes_read=q.bytes_read)

    @staticmethod
    def _reset(q: _Prepared) -> None:
        """The result buffer as a run starts: COUNT and SUM rows zero, MIN and MAX rows at
        their start values."""
        groupagg.zero_prefix(q.buf, q.n_zero)
        for start, stop, value in q.fills:
            q.buf[start:stop] = value
        if q.n_listed is not None:
            q.n_listed[0] = 0

    @staticmethod
    def _head(q: _Prepared) -> Any:
        """The device words a GPU run copies back first: a one-slot query's rows, else the
        number of packed records and the first :data:`FIRST_COPY_SLOTS` of them. Sliced once
        per prepared query (a CuPy slice costs a run several microseconds)."""
        if q.head is None:
            q.head = q.buf[:q.rows] if q.n_slots == 1 else \
                q.packed[:min(1 + min(q.n_slots, FIRST_COPY_SLOTS) * (q.rows + 1),
                              int(q.packed.shape[0]))]
        return q.head

    def _device_work(self, view: CrystalView, q: _Prepared, stream: Any) -> None:
        """A GPU run's work on ``stream``, in order, none of it waiting for the host: reset,
        the query's kernel, the fold of the result copies, the compaction (more than one
        slot) and the copy of :meth:`_head` into the page-locked ``q.host``."""
        import cupy

        self._reset(q)
        q.launch(view.table.n_rows)
        if q.fold is not None:
            q.fold(q.rows * q.n_slots)
        if q.n_slots > 1:
            q.compact(q.n_slots)
        head = self._head(q)
        cupy.cuda.runtime.memcpyAsync(q.host.ctypes.data, head.data.ptr, int(head.nbytes),
                                      cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)

    def _device_run(self, view: CrystalView, q: _Prepared) -> np.ndarray:
        """A GPU run on CuPy's current stream: its work as one CUDA graph launch (the launches
        one by one where the graph could not be captured), then a wait for it; returns the
        head words in ``q.host``. A run of SSB's queries at SF 10 takes 0.2-0.5 ms, in which
        five to seven separate launches and copies cost the host 0.03-0.07 ms."""
        import cupy

        stream = cupy.cuda.get_current_stream()
        q.runs += 1
        if q.graph is None and q.runs > 1:
            q.graph = self._capture(view, q)
        if q.graph:
            q.graph.launch(stream)
        else:
            self._device_work(view, q, stream)
        stream.synchronize()
        return q.host[:len(self._head(q))]

    def _capture(self, view: CrystalView, q: _Prepared) -> Any:
        """:meth:`_device_work` captured into a CUDA graph on a stream of its own, or False
        where CuPy or the driver cannot capture it (the run then launches one by one)."""
        import cupy

        stream = cupy.cuda.Stream(non_blocking=True)
        try:
            with stream:
                stream.begin_capture(cupy.cuda.runtime.streamCaptureModeThreadLocal)
                try:
                    self._device_work(view, q, stream)
                finally:
                    graph = stream.end_capture()
        except Exception:  # an older CuPy, a driver that refuses a step of the capture
            return False
        return graph


@hookimpl
def indexzoo_register_query_engines(register: Any) -> None:
    register(CrystalEngine)
