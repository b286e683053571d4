"""What engines return (:class:`Groups`) and what users get (:class:`QueryResult`), and the
step between them every engine shares (:func:`finish`): exact aggregates from the engines'
int64 results, NULLs, HAVING, ORDER BY (NULLs last, as DuckDB sorts), LIMIT and decoding.

Results: ``QueryResult.columns`` maps each output name to a NumPy array in the column's own
dtype (a GROUP BY column's, or the aggregate's SQL type: int64 for COUNT, float64 for AVG,
MIN/MAX typed as their expression, e.g. uint64 for a UBIGINT column). A SUM is int64 where
every sum of the column fits int64, else an object array of Python integers (exact, as
DuckDB's HUGEINT). A column holding a NULL is a ``numpy.ma.MaskedArray`` whose mask marks
the NULLs; ``to_pandas()`` turns those into pandas' nullable dtypes and ``to_arrow()`` into
Arrow nulls.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import IndexZooError, InvalidInput, OutOfRange
from . import sqltypes
from .expr import Filter
from .plan import Output, Plan
from .table import I64_MAX, I64_MIN, Table

__all__ = ["Groups", "QueryResult", "finish"]


@dataclass
class Groups:
    """What an engine returns: one row per group with at least one qualifying row (for a
    query without GROUP BY: one row, or none when no row qualifies): ``keys`` (codes, one
    array per GROUP BY column), ``count`` and, per value of the plan, ``sum``, ``min`` and
    ``max`` (int64; an engine fills those of :attr:`Plan.aggs`, the others may be None).
    ``ordered``: the rows are in lexicographic order of the keys. ``bytes_read``: bytes the
    engine read (its accounting). ``stats``: anything else it measured."""

    keys: list[np.ndarray]
    count: np.ndarray
    sum: list[np.ndarray | None]
    min: list[np.ndarray | None]
    max: list[np.ndarray | None]
    ordered: bool = False
    bytes_read: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


def _python(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    return x


@dataclass
class QueryResult:
    """A query's answer: ``columns`` (name -> NumPy array, in SELECT order; a masked array
    where the column holds NULLs), plus what the engine measured (``bytes_read``, ``stats``,
    ``order_skipped``)."""

    columns: dict[str, np.ndarray]
    bytes_read: int = 0
    order_skipped: bool = False
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def rows(self) -> list[tuple[Any, ...]]:
        """The answer as rows of Python values, None for NULL (as DuckDB's ``fetchall``)."""
        cols = []
        for v in self.columns.values():
            mask = np.ma.getmaskarray(v) if np.ma.isMaskedArray(v) else None
            data = np.ma.getdata(v)
            cols.append([None if mask is not None and mask[i] else _python(data[i])
                         for i in range(len(data))])
        return list(zip(*cols, strict=True))

    def to_pandas(self) -> Any:
        """A pandas DataFrame; columns with NULLs take pandas' nullable dtypes."""
        import pandas as pd

        out = {}
        for k, v in self.columns.items():
            if not np.ma.isMaskedArray(v):
                out[k] = v
                continue
            mask, data = np.ma.getmaskarray(v), np.ma.getdata(v)
            if data.dtype.kind in "iu":
                out[k] = pd.arrays.IntegerArray(data, mask)
            elif data.dtype.kind == "f":
                out[k] = pd.arrays.FloatingArray(data, mask)
            elif data.dtype.kind == "b":
                out[k] = pd.arrays.BooleanArray(data, mask)
            else:
                out[k] = pd.Series([None if m else x for x, m in zip(data, mask, strict=True)],
                                   dtype=object)
        return pd.DataFrame(out)

    def to_arrow(self) -> Any:
        """A PyArrow table; NULLs as Arrow nulls, sums past int64 as decimals."""
        import pyarrow as pa

        out = {}
        for k, v in self.columns.items():
            mask = np.ma.getmaskarray(v) if np.ma.isMaskedArray(v) else None
            data = np.ma.getdata(v)
            if data.dtype == object and all(isinstance(x, int) for x in data):
                import decimal

                big = builtins.max((abs(x) for x in data), default=0)
                kind = pa.decimal128(38, 0) if big < 10 ** 38 else pa.decimal256(76, 0)
                vals = [None if mask is not None and mask[i] else decimal.Decimal(int(x))
                        for i, x in enumerate(data)]
                out[k] = pa.array(vals, type=kind)
            else:
                out[k] = pa.array(data, mask=mask)
        return pa.table(out)


# ----------------------------------------------------------------------------- finish
def _exact_ints(values: list[int] | np.ndarray) -> np.ndarray:
    """Python integers as int64 where every one fits, else as an object array."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype != object:
        return arr.astype(np.int64)
    if not arr.size or (builtins.min(arr) >= I64_MIN and builtins.max(arr) <= I64_MAX):
        return arr.astype(np.int64)
    return arr


def _typed(values: np.ndarray, sqltype: str) -> np.ndarray:
    """Exact integers (int64 or Python integers) in the dtype of ``sqltype``."""
    dtype = sqltypes.dtype_of(sqltype)
    if dtype.kind == "O":
        return np.asarray(values, dtype=object)
    return np.array(values.tolist() if values.dtype == object else values, dtype=dtype)


def _masked(values: np.ndarray, null: np.ndarray | None) -> np.ndarray:
    if null is None or not null.any():
        return values
    data = values.copy()
    if data.dtype == object:
        data[null] = 0
    return np.ma.MaskedArray(data, mask=null)


class _Phys:
    """The engines' int64 results per group (kept groups only)."""

    def __init__(self, g: Groups, keep: np.ndarray | None, n: int):
        self.g, self.keep, self.n = g, keep, n

    def get(self, op: str, i: int) -> np.ndarray:
        arrs = {"sum": self.g.sum, "min": self.g.min, "max": self.g.max}[op]
        if self.n == 0:
            return np.zeros(0, dtype=np.int64)
        if self.keep is None:  # no group reached: the aggregates' start values
            fill = {"sum": 0, "min": I64_MAX, "max": I64_MIN}[op]
            return np.full(self.n, fill, dtype=np.int64)
        a = arrs[i] if i < len(arrs) else None
        if a is None:
            raise IndexZooError(f"the engine left out the {op} of value {i}")
        return np.asarray(a, dtype=np.int64)[self.keep]


def _aggregate(table: Table, o: Output, count: np.ndarray, phys: _Phys,
               grouped: bool) -> np.ndarray:
    nn = count if o.nn is None else phys.get("sum", o.nn)
    if o.op == "sum" and o.nn is None and grouped and len(o.sum) == 1 \
            and o.sum[0][1] == 1 and not o.offset:  # SSB's case: one int64 sum, no NULL
        return phys.get("sum", o.sum[0][0])
    null = nn == 0
    if o.op == "count":
        return nn.astype(np.int64)
    if o.op in ("min", "max"):
        assert o.extreme is not None
        got = phys.get(o.op, o.extreme)
        kind, arg = o.decode
        if kind == "column":
            vlo, vhi = table.value_domain(arg)
            safe = np.where(null, vlo if vlo <= vhi else table.domain(arg)[0], got)
            return _masked(np.ma.getdata(table.decode(arg, safe)), null)
        if kind == "rank":
            ranks = np.where(null, 0, got) if len(arg) else np.zeros(0, dtype=np.int64)
            vals = np.asarray(arg, dtype=object)[ranks] if len(arg) else \
                np.zeros(len(got), dtype=object)
            return _masked(_typed(_exact_ints(vals), o.sqltype), null)
        exact = got if arg == 0 else _exact_ints(got.astype(object) + arg)
        return _masked(_typed(np.where(null, 0, exact), o.sqltype), null)
    # sum and avg: sum(weight * SUM(value)) + offset * nn, exact
    parts = [(phys.get("sum", i), w) for i, w in o.sum]
    if len(parts) == 1 and parts[0][1] == 1 and o.offset == 0:
        total = parts[0][0]
    else:
        acc = np.zeros(len(count), dtype=object)
        for arr, w in parts:
            acc = acc + arr.astype(object) * w
        if o.offset:
            acc = acc + nn.astype(object) * o.offset
        total = _exact_ints(acc)
    if o.sqltype == "i128" and total.dtype == object and total.size:
        lo, hi = sqltypes.RANGE["i128"]
        if builtins.min(total) < lo or builtins.max(total) > hi:
            raise OutOfRange(f"Out of range: overflow in HUGEINT addition in SUM({o.expr})")
    if o.op == "avg":
        return _masked(_average(total, nn), null)
    return _masked(total, null)


def _average(total: np.ndarray, nn: np.ndarray) -> np.ndarray:
    """``total / nn`` correctly rounded (NaN where ``nn`` is 0)."""
    out = np.full(len(total), np.nan)
    for i in range(len(total)):
        if nn[i]:
            out[i] = int(total[i]) / int(nn[i])
    return out


def _rank(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(null flag, rank) of ``v``'s values: equal values share a rank, ranks follow the
    values' order (NaN last)."""
    mask = np.ma.getmaskarray(v) if np.ma.isMaskedArray(v) else np.zeros(len(v), dtype=bool)
    data = np.ma.getdata(v)
    rank = np.zeros(len(v), dtype=np.int64)
    if (~mask).any():
        rank[~mask] = np.unique(data[~mask], return_inverse=True)[1].reshape(-1)
    return mask.astype(np.int64), rank


def _passes(v: np.ndarray, h: Filter) -> np.ndarray:
    """Rows of the aggregate ``v`` that pass ``h`` (NULL passes only IS NULL)."""
    mask = np.ma.getmaskarray(v) if np.ma.isMaskedArray(v) else np.zeros(len(v), dtype=bool)
    if h.kind == "is_null":
        return mask.copy()
    if h.kind == "is_not_null":
        return ~mask
    if h.kind == "or":
        out = np.zeros(len(v), dtype=bool)
        for part in h.values:
            out |= _passes(v, part)
        return out
    data = np.ma.getdata(v).tolist()
    x = h.values
    if any(y is None for y in x) and h.kind != "in":
        return np.zeros(len(v), dtype=bool)
    x = tuple(y for y in x if y is not None)

    def test(a: Any) -> bool:
        if h.kind == "between":
            return bool(x[0] <= a <= x[1])
        if h.kind == "not_between":
            return not bool(x[0] <= a <= x[1])
        if h.kind == "in":
            return any(a == y for y in x)
        if h.kind == "not_in":
            return all(a != y for y in x)
        return {"lt": a < x[0], "le": a <= x[0], "gt": a > x[0], "ge": a >= x[0]}[h.kind]

    try:
        return np.array([not m and test(a) for a, m in zip(data, mask, strict=True)],
                        dtype=bool)
    except TypeError:
        raise InvalidInput(f"HAVING {h.sql()}: the aggregate's values do not compare with "
                           f"{', '.join(map(repr, x))}") from None


def _null_last(table: Table, name: str) -> bool:
    """Whether column ``name``'s NULL code sorts after its values (or it has none)."""
    i = table.info[name]
    return i.null_code is None or i.null_code > table.value_domain(name)[1]


def finish(table: Table, p: Plan, g: Groups) -> QueryResult:
    """The query's answer from an engine's groups: exact aggregates, NULLs, HAVING, ORDER BY
    (NULLs last), LIMIT, decoded GROUP BY columns, the output columns in order."""
    q = p.query
    count = np.asarray(g.count, dtype=np.int64).reshape(-1)
    keep: np.ndarray | None
    if q.group_by:  # every row an engine returns is a group some row reached
        keep = slice(None)  # type: ignore[assignment]
    elif count.size:
        keep = np.zeros(len(count), dtype=bool)
        keep[0] = True
        count = count[:1]
    else:  # no GROUP BY and no row: one row of COUNT 0 and NULLs
        keep, count = None, np.zeros(1, dtype=np.int64)
    phys = _Phys(g, keep, len(count))
    cols: dict[str, np.ndarray] = {}
    for name, k in zip(q.group_by, g.keys, strict=True):
        cols[name] = np.asarray(k, dtype=np.int64)[keep]
    for a, o in zip(q.select, p.outputs, strict=True):
        cols[a.alias] = _aggregate(table, o, count, phys, bool(q.group_by))
    for name in q.group_by:
        cols[name] = table.decode(name, cols[name])
    n = len(count)
    if q.having:
        mask = np.ones(n, dtype=bool)
        for h in q.having:
            mask &= _passes(cols[h.column], h)
        cols = {k: v[mask] for k, v in cols.items()}
    skipped = False
    if q.order_by:
        names = [o.lstrip("-") for o in q.order_by]
        if (g.ordered and not any(o.startswith("-") for o in q.order_by)
                and tuple(names) == tuple(q.group_by[:len(names)])
                and all(_null_last(table, c) for c in names)):
            skipped = True
        else:
            keys = []
            for name, key in zip(reversed(names), reversed(q.order_by), strict=True):
                null, rank = _rank(cols[name])
                keys += [-rank if key.startswith("-") else rank, null]
            order = np.lexsort(keys)
            cols = {k: v[order] for k, v in cols.items()}
    if q.limit is not None:
        cols = {k: v[:q.limit] for k, v in cols.items()}
    return QueryResult({k: cols[k] for k in q.outputs}, g.bytes_read, skipped, dict(g.stats))
