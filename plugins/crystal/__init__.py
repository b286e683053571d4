"""Query engine ``crystal``: the CUDA-core peer of RTCUDB, Crystal-style (Shanbhag, Madden,
Yu, SIGMOD 2020) fused kernels over the flat columns.

One kernel per query: a row's filter columns are tested against the query's code intervals
(an IN-set or an OR is several intervals), and only a qualifying row reads its GROUP BY and
aggregate columns, computes its group's slot by a perfect hash (the mixed-radix number of its
group codes over the columns' domains, as Crystal's SSB kernels index their result arrays by
dimension keys) and adds its values into the per-slot arrays. Every needed column is read once,
in one pass: the engine's bytes are the bandwidth floor of the query
(:func:`indexzoo.query.floor_bytes`), which it reports.

Two kernels (:mod:`.kernels`), chosen per query by the size of its result arrays:

* on the GPU, where the COUNT and SUM slots fit ``shared_slots_bytes``, each block aggregates in
  shared memory and adds its slots into device memory once at the end (Crystal's block-level
  pre-aggregation, which its Q1.x kernels do with a block reduction);
* otherwise (and always on the CPU) one thread per row adds into device memory with atomics.

The host's part of a query is kept small, since at SSB's sizes the kernel takes well under a
millisecond: a view keeps, per query, the plan, the kernel's small argument arrays on the
device and the result buffer (reset with one launch), and a query copies back only the slots
it filled (the kernels list them), not the whole result array.

Departures from Crystal: Crystal's kernels are written per SSB query with tile loads into
registers and shared-memory selection flags; here one generic kernel, specialised by numba per
column dtype, serves every query (its filter, group and value columns are arrays of indexes
and intervals read per row). Crystal aggregates Q2-Q4 with global atomics into a hash table;
here any query whose slots fit shared memory is pre-aggregated per block. The slots come out
in the lexicographic order of the group codes, so an ORDER BY on a prefix of the GROUP BY
columns is skipped.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from indexzoo import Unsupported
from indexzoo.devices import array_module, to_numpy
from indexzoo.hookspecs import hookimpl
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

from .kernels import item_kernel, launch_private

__all__ = ["CrystalEngine", "CrystalParams"]


class CrystalParams(KernelParams):
    max_slots: int = Field(default=1 << 26, ge=1, description=(
        "The most result slots (product of the GROUP BY columns' domain sizes) a query may "
        "use; more raises Unsupported."))
    shared_slots_bytes: int = Field(default=160 * 1024, ge=0, le=227 * 1024, description=(
        "GPU: a query whose COUNT and SUM slots (8 bytes each) fit in this many bytes is "
        "aggregated per block in shared memory first; 0 always adds into device memory."))
    private_threads_per_block: int = Field(default=512, ge=32, le=1024, multiple_of=32,
                                           description=(
        "GPU: CUDA threads per block of the shared-memory kernel."))


_OPS = {"sum": 0, "avg": 0, "min": 1, "max": 2}
_INIT = (0, np.iinfo(np.int64).max, np.iinfo(np.int64).min)  # SUM, MIN, MAX start values


def result_rows(p: Plan) -> tuple[np.ndarray, list[int]]:
    """``row_of`` (3 per value expression: its SUM, MIN and MAX row, -1 if not asked) and the
    kinds of the rows (0 COUNT or SUM, 1 MIN, 2 MAX), COUNT and SUM rows first."""
    asked = [[False] * 3 for _ in p.values]
    for a, vi in zip(p.query.select, p.value_of, strict=True):
        if vi >= 0:
            asked[vi][_OPS[a.op]] = True
    row_of = np.full(3 * max(len(p.values), 1), -1, dtype=np.int64)
    kinds = [0]
    for k in range(3):
        for e in range(len(p.values)):
            if asked[e][k]:
                row_of[3 * e + k] = len(kinds)
                kinds.append(k)
    return row_of, kinds


def _padded(n: int) -> int:
    """``n`` columns rounded up to a multiple of four (at least four)."""
    return max(4, -(-n // 4) * 4)


@dataclass
class _Prepared:
    """One query on one view, ready to launch: the plan, the kernel's arguments (the result
    buffer among them) and what reads the answer back."""

    plan: Plan
    args: tuple[Any, ...]
    res: Any
    init: Any
    touched: Any
    n_touched: Any
    n_slots: int
    kinds: list[int]
    row_of: np.ndarray
    strides: list[int]
    sizes: list[int]
    mins: list[int]
    private: bool


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
        doms = [t.domain(c) for c in p.group_by]
        sizes = [hi - lo + 1 for lo, hi in doms]
        n_slots = int(np.prod(sizes)) if sizes else 1
        if n_slots > self.params.max_slots:
            raise Unsupported(f"GROUP BY {', '.join(p.group_by)} spans {n_slots} slots, more "
                              f"than max_slots={self.params.max_slots}")
        strides = [int(np.prod(sizes[j + 1:])) for j in range(len(sizes))]
        fnames = list(p.filters)
        vnames = list(dict.fromkeys(c for e in p.values for c in e.columns()))
        used = [*fnames, *p.group_by, *vnames]
        dtype = np.result_type(*(t.column(c).dtype for c in used)) if used else np.int32

        def cols(names: list[str]) -> tuple[Any, ...]:
            return tuple(view.col(c).astype(dtype, copy=False) for c in names)

        # Tuples padded to a multiple of four columns, so that one compiled kernel serves
        # every query of up to four filters, group and value columns: a padding filter is an
        # always-true interval, a padding group column has stride 0 (both repeat a column the
        # row reads anyway), padding value columns are never read.
        big = 2**62
        starts, lo, hi = intervals_arrays(p, fnames)
        fcols = cols(fnames) if fnames else (
            xp.zeros(t.n_rows, dtype=dtype) if not used else view.col(used[0]).astype(dtype),)
        k = _padded(len(fcols))
        starts = np.concatenate([starts, starts[-1] + np.arange(1, k - len(fcols) + 1)])
        lo = np.concatenate([lo, np.full(k - len(fcols), -big)]).astype(np.int64)
        hi = np.concatenate([hi, np.full(k - len(fcols), big)]).astype(np.int64)
        if not fnames:  # an always-true filter on the placeholder
            starts, lo, hi = np.arange(k + 1), np.full(k, -big), np.full(k, big)
        fcols = fcols + (fcols[0],) * (k - len(fcols))
        gcols = cols(list(p.group_by))
        gmin = np.array([lo_ for lo_, _ in doms], dtype=np.int64)
        gstride = np.array(strides, dtype=np.int64)
        kg = _padded(len(gcols))
        gcols = gcols + (fcols[0],) * (kg - len(gcols))
        gmin = np.concatenate([gmin, np.zeros(kg - len(gmin), dtype=np.int64)])
        gstride = np.concatenate([gstride, np.zeros(kg - len(gstride), dtype=np.int64)])
        vtuple = cols(vnames)
        vtuple = vtuple + (fcols[0],) * (_padded(len(vtuple)) - len(vtuple))
        terms = [terms_array(e, vnames) for e in p.values]
        tstarts = np.cumsum([0, *(len(x) for x in terms)]).astype(np.int64)
        allterms = np.concatenate(terms) if terms else np.zeros((0, 3), dtype=np.int64)
        row_of, kinds = result_rows(p)
        n_add = kinds.count(0)
        dev = [xp.asarray(a) for a in (starts, lo, hi, gmin, gstride, allterms, tstarts,
                                        row_of)]
        res = xp.empty(len(kinds) * n_slots, dtype=np.int64)
        init = xp.asarray(np.array([_INIT[kind] for kind in kinds], dtype=np.int64)[:, None])
        touched = xp.empty(n_slots, dtype=np.int64)
        n_touched = xp.zeros(1, dtype=np.int64)
        private = (self.device == "cuda"
                   and 8 * n_add * n_slots <= self.params.shared_slots_bytes)
        args = (fcols, dev[0], dev[1], dev[2], gcols, dev[3], dev[4], vtuple, dev[5], dev[6],
                dev[7], n_slots, *((n_add,) if private else ()), res, touched, n_touched)
        prepared = _Prepared(p, args, res, init, touched, n_touched, n_slots, kinds, row_of,
                             strides, sizes, [lo_ for lo_, _ in doms], private)
        with contextlib.suppress(TypeError):  # an unhashable query is not kept
            view._queries[p.query] = prepared
        return prepared

    def _execute(self, view: View, p: Plan) -> Groups:
        assert isinstance(view, CrystalView)
        with view.lock:
            return self._run(view, self._prepared(view, p))

    def _run(self, view: CrystalView, q: _Prepared) -> Groups:
        p, n_rows = q.plan, view.table.n_rows
        rows = len(q.kinds)
        q.res.reshape(rows, q.n_slots)[...] = q.init
        q.n_touched[...] = 0
        if not p.empty:
            if q.private:
                launch_private(n_rows, q.args, q.kinds.count(0), q.n_slots,
                               self.params.private_threads_per_block)
            else:
                item_kernel(self.device)(self.device, n_rows, *q.args,
                                         threads_per_block=self.params.threads_per_block)
        m = int(to_numpy(q.n_touched)[0])
        ids = q.touched[:m]
        vals = to_numpy(q.res.reshape(rows, q.n_slots)[:, ids])
        ids_h = to_numpy(ids)
        order = np.argsort(ids_h, kind="stable")
        ids_h, vals = ids_h[order], vals[:, order]
        n_exprs = len(p.values)
        if not p.group_by and m == 0:  # a query without GROUP BY answers one row
            ids_h = np.zeros(1, dtype=np.int64)
            vals = np.array(q.init.reshape(-1).tolist(), dtype=np.int64)[:, None]
            vals[0] = 0
        keys = [(ids_h // s) % k + lo_ for s, k, lo_ in zip(q.strides, q.sizes, q.mins,
                                                             strict=True)]
        per: list[list[np.ndarray | None]] = [[None] * n_exprs for _ in range(3)]
        for e in range(n_exprs):
            for kind in range(3):
                r = int(q.row_of[3 * e + kind])
                if r >= 0:
                    per[kind][e] = vals[r]
        return Groups(keys, vals[0], per[0], per[1], per[2], ordered=True,
                      bytes_read=floor_bytes(view.table, p.query))


@hookimpl
def indexzoo_register_query_engines(register: Any) -> None:
    register(CrystalEngine)
