"""Query engine ``crystal``: the CUDA-core peer of RTCUDB, Crystal-style (Shanbhag, Madden,
Yu, SIGMOD 2020) fused kernels over the flat columns.

One kernel per query, one thread per row: the row's filter columns are tested against the
query's code intervals (an IN-set or an OR is several intervals), and only a qualifying row
reads its GROUP BY and aggregate columns, computes its group's slot by a perfect hash (the
mixed-radix number of its group codes over the columns' domains, as Crystal's SSB kernels
index their result arrays by dimension keys) and adds its values with atomics into the
per-slot arrays. Every needed column is read once, in one pass: the engine's bytes are the
bandwidth floor of the query (:func:`indexzoo.query.floor_bytes`), which it reports.

Departures from Crystal: Crystal's kernels are written per SSB query with tile loads into
registers and shared-memory selection flags; here one generic kernel, specialised by numba per
column dtype, serves every query (its filter, group and value columns are arrays of indexes
and intervals read per row). The slots come out in the lexicographic order of the group
codes, so an ORDER BY on a prefix of the GROUP BY columns is skipped.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import numpy as np
from numba.extending import register_jitable
from pydantic import Field

from indexzoo import Unsupported
from indexzoo.devices import array_module, to_numpy
from indexzoo.hookspecs import hookimpl
from indexzoo.native.groupagg import accumulate, atomics, expr_value, passes
from indexzoo.native.targets import Kernel, KernelParams
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

__all__ = ["CrystalEngine", "CrystalParams"]


class CrystalParams(KernelParams):
    max_slots: int = Field(default=1 << 26, ge=1, description=(
        "The most result slots (product of the GROUP BY columns' domain sizes) a query may "
        "use; more raises Unsupported."))


@functools.cache
def _kernel(device: str) -> Kernel:
    add = atomics(device)[0]
    acc = accumulate(device)

    @register_jitable
    def crystal_item(i, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts,
                     need, count, sums, mins, maxs):
        if not passes(i, fcols, starts, lo, hi):
            return
        g = np.int64(0)
        for j in range(len(gcols)):
            g += (np.int64(gcols[j][i]) - gmin[j]) * gstride[j]
        add(count, g, np.int64(1))
        n_exprs = len(tstarts) - 1
        for e in range(n_exprs):
            v = expr_value(i, vcols, terms, tstarts[e], tstarts[e + 1])
            acc(g, e, n_exprs, v, need[e], sums, mins, maxs)

    return Kernel(crystal_item, name="crystal_query")


def needs(p: Plan) -> np.ndarray:
    """Per value expression of ``p``, the bits of the aggregates asked of it."""
    bits = np.zeros(builtins_max(len(p.values), 1), dtype=np.int64)
    for a, vi in zip(p.query.select, p.value_of, strict=True):
        if vi >= 0:
            bits[vi] |= {"sum": 1, "avg": 1, "min": 2, "max": 4}[a.op]
    return bits


builtins_max = max


def _padded(n: int) -> int:
    """``n`` columns rounded up to a multiple of four (at least four)."""
    return builtins_max(4, -(-n // 4) * 4)


class CrystalView(View):
    """The flat columns, moved to the engine's device once."""

    def __init__(self, table: Table, device: str, name: str = ""):
        super().__init__(table, None, None, None, name or "crystal")
        self.device = device
        self._cols: dict[str, Any] = {}

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

    def _execute(self, view: View, p: Plan) -> Groups:
        assert isinstance(view, CrystalView)
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
        n_exprs = len(p.values)
        count = xp.zeros(n_slots, dtype=np.int64)
        sums = xp.zeros(n_slots * builtins_max(n_exprs, 1), dtype=np.int64)
        mins = xp.full(n_slots * builtins_max(n_exprs, 1), np.iinfo(np.int64).max, dtype=np.int64)
        maxs = xp.full(n_slots * builtins_max(n_exprs, 1), np.iinfo(np.int64).min, dtype=np.int64)
        dev = [xp.asarray(a) for a in (starts, lo, hi, gmin, gstride, allterms, tstarts,
                                        needs(p))]
        if not p.empty:
            _kernel(self.device)(self.device, t.n_rows, fcols, dev[0], dev[1], dev[2], gcols,
                                 dev[3], dev[4], vtuple, dev[5], dev[6], dev[7], count,
                                 sums, mins, maxs, threads_per_block=self.params.threads_per_block)
        cnt = to_numpy(count)
        slots = np.flatnonzero(cnt) if p.group_by else np.zeros(1, dtype=np.int64)
        keys = [(slots // s) % k + lo_ for s, k, (lo_, _) in zip(strides, sizes, doms,
                                                                    strict=True)]
        per = [to_numpy(a).reshape(n_slots, builtins_max(n_exprs, 1)) for a in (sums, mins, maxs)]
        return Groups(keys, cnt[slots], [per[0][slots, e] for e in range(n_exprs)],
                      [per[1][slots, e] for e in range(n_exprs)],
                      [per[2][slots, e] for e in range(n_exprs)], ordered=True,
                      bytes_read=floor_bytes(t, p.query))


@hookimpl
def indexzoo_register_query_engines(register: Any) -> None:
    register(CrystalEngine)
