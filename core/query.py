"""Queries over one table: filters, GROUP BY, aggregates, ORDER BY and LIMIT, answered by a
query engine chosen by name, the way an index is.

    >>> import numpy as np
    >>> from indexzoo import query as q
    >>> table = {"year": np.array([1993, 1993, 1994, 1995]), "price": np.array([5, 7, 11, 13]),
    ...          "qty": np.array([1, 2, 3, 4])}
    >>> spec = q.Query(where=[q.col("year").between(1993, 1994)], group_by=["year"],
    ...                select=[q.sum(q.col("price") * q.col("qty"), "revenue"), q.count()],
    ...                order_by=["year"])
    >>> import indexzoo
    >>> indexzoo.query_engine("crystal", device="cpu").run(table, spec).columns
    {'year': array([1993, 1994]), 'revenue': array([19, 33]), 'count': array([2, 1])}

The pieces:

* :class:`Table` reads any table the zoo accepts (a dict of arrays, pandas, Polars, Arrow; see
  :mod:`indexzoo.columns`) column by column. Integer and boolean columns stay integers; every
  other column (text, floats, dates) is replaced by its codes in an order-preserving dictionary
  (its sorted distinct values), so comparisons, ranges and the order of ORDER BY are the
  values'. Literals in filters are values, translated once per query.
* Expressions: :func:`col` and ``+``, ``-``, ``*`` with integers (degree two at most: a sum of
  products of two columns, e.g. ``lo_extendedprice * lo_discount``, ``lo_revenue -
  lo_supplycost``). Aggregates of integer columns only; sums are exact (int64).
* Filters: ``col(c).between(lo, hi)``, ``.eq(v)``, ``.isin([...])``, ``.lt/.le/.gt/.ge(v)``,
  on any column; a query's filters are ANDed. Each column's filters become sorted disjoint
  inclusive intervals of its codes (:class:`Plan`), which is what every engine reads.
* :class:`Query` -> :class:`Plan` (:func:`plan`) -> an engine's :class:`Groups` -> the small
  result table, :class:`QueryResult` (``.columns``: a dict of NumPy arrays; ``to_pandas()``,
  ``to_arrow()``). AVG, ORDER BY and LIMIT run here, on the groups, for every engine; an
  engine whose groups come out in lexicographic order of the GROUP BY columns says so
  (``Groups.ordered``) and ORDER BY on a prefix of them is then skipped (RTCUDB §5's OrderBy
  elimination).
* Engines are plugins: a module registered under the ``indexzoo`` entry-point group answers
  the hook ``indexzoo_register_query_engines(register)`` with :class:`QueryEngine`
  subclasses. :func:`indexzoo.query_engines` lists them; :func:`indexzoo.query_engine` makes
  one from a name or a spec dict (``{"engine": "rtcudb", "params": {...}, "device": "cpu"}``,
  :class:`EngineSpec`). The core never imports an engine.
* Prepared views: :meth:`QueryEngine.prepare` builds an engine's view of a table for a set of
  attributes (or for the attributes of a list of queries) once; :meth:`QueryEngine.run`
  accepts a view and reuses it. A query needing attributes a view lacks raises
  :class:`~indexzoo.Unsupported` naming them.

Decisions: a query with no GROUP BY returns one row even when no row qualifies (count 0, and
0 for SUM, where SQL would say NULL); groups with no qualifying row are left out, as in SQL.
Nulls in a column are refused (:class:`~indexzoo.Unsupported`), never guessed.
"""

from __future__ import annotations

import abc
import builtins
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from .columns import table_columns, table_names
from .errors import ConfigError, IndexZooError, InvalidInput, Unsupported
from .reading import read_column

__all__ = [
    "Agg",
    "EngineSpec",
    "Expr",
    "Filter",
    "Groups",
    "Plan",
    "Query",
    "QueryEngine",
    "QueryResult",
    "Table",
    "View",
    "avg",
    "col",
    "count",
    "max",
    "min",
    "plan",
    "reference",
    "sum",
]

AggOp = Literal["sum", "count", "min", "max", "avg"]


# ----------------------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Expr:
    """An integer polynomial of degree <= 2 over columns: ``terms`` are ``(coef, a, b)`` with
    ``a``/``b`` column names or None (1)."""

    terms: tuple[tuple[int, str | None, str | None], ...]

    def __add__(self, other: Expr | int) -> Expr:
        return Expr(_simplify(self.terms + _expr(other).terms))

    __radd__ = __add__

    def __sub__(self, other: Expr | int) -> Expr:
        return self + (-_expr(other))

    def __rsub__(self, other: Expr | int) -> Expr:
        return _expr(other) + (-self)

    def __neg__(self) -> Expr:
        return Expr(tuple((-c, a, b) for c, a, b in self.terms))

    def __mul__(self, other: Expr | int) -> Expr:
        out = []
        for c1, a1, b1 in self.terms:
            for c2, a2, b2 in _expr(other).terms:
                names = [n for n in (a1, b1, a2, b2) if n is not None]
                if len(names) > 2:
                    raise Unsupported(f"{self} * {_expr(other)}: expressions are polynomials of "
                                      f"degree two at most (a product of two columns)")
                names += [None] * (2 - len(names))  # type: ignore[list-item]
                out.append((c1 * c2, names[0], names[1]))
        return Expr(_simplify(tuple(out)))

    __rmul__ = __mul__

    def columns(self) -> tuple[str, ...]:
        """The columns the expression reads, in order of first use."""
        seen: dict[str, None] = {}
        for _, a, b in self.terms:
            for n in (a, b):
                if n is not None:
                    seen[n] = None
        return tuple(seen)

    def column(self) -> str | None:
        """The column name when the expression is one plain column, else None."""
        if len(self.terms) == 1 and self.terms[0][0] == 1 and self.terms[0][2] is None:
            return self.terms[0][1]
        return None

    def sql(self) -> str:
        parts = []
        for c, a, b in self.terms:
            factors = [n for n in (a, b) if n is not None]
            if c != 1 or not factors:
                factors.insert(0, str(c))
            parts.append(" * ".join(factors))
        return " + ".join(parts).replace("+ -", "- ") or "0"

    __str__ = sql

    def between(self, lo: Any, hi: Any) -> Filter:
        return Filter(self._name(), "between", (lo, hi))

    def eq(self, value: Any) -> Filter:
        return Filter(self._name(), "in", (value,))

    def isin(self, values: Iterable[Any]) -> Filter:
        return Filter(self._name(), "in", tuple(values))

    def lt(self, value: Any) -> Filter:
        return Filter(self._name(), "lt", (value,))

    def le(self, value: Any) -> Filter:
        return Filter(self._name(), "le", (value,))

    def gt(self, value: Any) -> Filter:
        return Filter(self._name(), "gt", (value,))

    def ge(self, value: Any) -> Filter:
        return Filter(self._name(), "ge", (value,))

    def _name(self) -> str:
        name = self.column()
        if name is None:
            raise Unsupported(f"filters are on columns, not on expressions ({self})")
        return name


def _expr(x: Expr | int) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Expr(((int(x), None, None),))
    raise InvalidInput(f"expressions combine columns and integers, got {x!r}")


def _simplify(terms: tuple[tuple[int, str | None, str | None], ...]
              ) -> tuple[tuple[int, str | None, str | None], ...]:
    acc: dict[tuple[str | None, str | None], int] = {}
    for c, a, b in terms:
        key: tuple[str | None, str | None] = (a, b) if (b is None or (a is not None and a <= b)) \
            else (b, a)
        acc[key] = acc.get(key, 0) + c
    return tuple((c, a, b) for (a, b), c in acc.items() if c != 0)


def col(name: str) -> Expr:
    """The column ``name`` as an expression (and the subject of a filter)."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"a column name is a non-empty string, got {name!r}")
    return Expr(((1, name, None),))


@dataclass(frozen=True)
class Filter:
    """A predicate on one column: ``kind`` is between, in, lt, le, gt or ge; ``values`` are
    literals in the column's own values (text for text columns)."""

    column: str
    kind: str
    values: tuple[Any, ...]

    def sql(self) -> str:
        v = [_literal(x) for x in self.values]
        if self.kind == "between":
            return f"{self.column} BETWEEN {v[0]} AND {v[1]}"
        if self.kind == "in":
            return f"{self.column} = {v[0]}" if len(v) == 1 else \
                f"{self.column} IN ({', '.join(v)})"
        op = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}[self.kind]
        return f"{self.column} {op} {v[0]}"


def _literal(x: Any) -> str:
    if isinstance(x, str):
        return "'" + x.replace("'", "''") + "'"
    return str(x)


@dataclass(frozen=True)
class Agg:
    """An aggregate: ``op`` of ``expr`` (None for COUNT(*)), named ``alias``."""

    op: AggOp
    expr: Expr | None
    alias: str

    def sql(self) -> str:
        inner = "*" if self.expr is None else self.expr.sql()
        return f"{self.op}({inner}) AS {self.alias}"


def _agg(op: AggOp, expr: Expr | str | None, alias: str | None) -> Agg:
    e = col(expr) if isinstance(expr, str) else expr
    if op != "count" and e is None:
        raise InvalidInput(f"{op} needs an expression")
    if alias is None:
        alias = op if e is None else f"{op}_{e.column() or 'expr'}"
    return Agg(op, e, alias)


def sum(expr: Expr | str, alias: str | None = None) -> Agg:
    """SUM(expr), exact (int64)."""
    return _agg("sum", expr, alias)


def count(alias: str = "count") -> Agg:
    """COUNT(*)."""
    return _agg("count", None, alias)


def min(expr: Expr | str, alias: str | None = None) -> Agg:
    """MIN(expr)."""
    return _agg("min", expr, alias)


def max(expr: Expr | str, alias: str | None = None) -> Agg:
    """MAX(expr)."""
    return _agg("max", expr, alias)


def avg(expr: Expr | str, alias: str | None = None) -> Agg:
    """AVG(expr): the exact sum divided by the count, as float64."""
    return _agg("avg", expr, alias)


@dataclass(frozen=True)
class Query:
    """SELECT group_by..., select... FROM table WHERE AND(where) GROUP BY group_by
    HAVING AND(having) ORDER BY order_by LIMIT limit. ``having`` filters name aggregate
    aliases (``col("revenue").gt(10**6)``); ``order_by`` names group columns or aggregate
    aliases; ``"-name"`` sorts descending."""

    where: Sequence[Filter] = ()
    group_by: Sequence[str] = ()
    select: Sequence[Agg] = ()
    order_by: Sequence[str] = ()
    limit: int | None = None
    having: Sequence[Filter] = ()
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", tuple(self.where))
        object.__setattr__(self, "group_by", tuple(self.group_by))
        object.__setattr__(self, "select", tuple(self.select))
        object.__setattr__(self, "order_by", tuple(self.order_by))
        object.__setattr__(self, "having", tuple(self.having))
        if not self.select:
            raise InvalidInput("a query selects at least one aggregate")
        if len(self.group_by) > 4:
            raise Unsupported(f"GROUP BY takes up to four columns, got {len(self.group_by)}")
        names = list(self.group_by) + [a.alias for a in self.select]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidInput(f"output names must be distinct; repeated: {', '.join(dup)}")
        unknown = [o.lstrip("-") for o in self.order_by if o.lstrip("-") not in names]
        if unknown:
            raise InvalidInput(f"ORDER BY names {', '.join(unknown)}, which the query does not "
                               f"output (it outputs {', '.join(names)})")
        aliases = {a.alias for a in self.select}
        bad = [h.column for h in self.having if h.column not in aliases]
        if bad:
            raise InvalidInput(f"HAVING names {', '.join(bad)}; it filters the aggregates "
                               f"{', '.join(sorted(aliases))}")
        if self.limit is not None and self.limit < 0:
            raise InvalidInput(f"LIMIT must be >= 0, got {self.limit}")

    def without_order(self) -> Query:
        """The same query with ORDER BY and LIMIT removed (the paper's timed form)."""
        return dataclasses.replace(self, order_by=(), limit=None)

    def columns(self) -> tuple[str, ...]:
        """Every column the query reads."""
        seen: dict[str, None] = {}
        for f in self.where:
            seen[f.column] = None
        for g in self.group_by:
            seen[g] = None
        for a in self.select:
            for c in a.expr.columns() if a.expr is not None else ():
                seen[c] = None
        return tuple(seen)

    def sql(self, table: str = "t") -> str:
        """The query as SQL (DuckDB's dialect)."""
        out = ", ".join([*self.group_by, *(a.sql() for a in self.select)])
        text = f"SELECT {out} FROM {table}"
        if self.where:
            text += " WHERE " + " AND ".join(f.sql() for f in self.where)
        if self.group_by:
            text += " GROUP BY " + ", ".join(self.group_by)
        if self.having:
            by_alias = {a.alias: a.sql().rsplit(" AS ", 1)[0] for a in self.select}
            text += " HAVING " + " AND ".join(
                dataclasses.replace(h, column=by_alias[h.column]).sql() for h in self.having)
        if self.order_by:
            text += " ORDER BY " + ", ".join(
                f"{o[1:]} DESC" if o.startswith("-") else f"{o} ASC" for o in self.order_by)
        if self.limit is not None:
            text += f" LIMIT {self.limit}"
        return text


# ----------------------------------------------------------------------------- tables
class Table:
    """Columns by name: integers as they are (int32 when they fit, else int64), every other
    column as codes into its sorted distinct values (``dictionaries[name]``)."""

    def __init__(self, columns: Mapping[str, np.ndarray],
                 dictionaries: Mapping[str, np.ndarray] | None = None):
        self.columns: dict[str, np.ndarray] = dict(columns)
        self.dictionaries: dict[str, np.ndarray] = dict(dictionaries or {})
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise InvalidInput(f"columns differ in length: {sorted(lengths)}")
        self.n_rows = lengths.pop() if lengths else 0
        self._domains: dict[str, tuple[int, int]] = {}

    @classmethod
    def of(cls, obj: Any) -> Table:
        """``obj`` as a Table: a Table, a dict of columns, or any table the zoo reads."""
        if isinstance(obj, Table):
            return obj
        if isinstance(obj, Mapping):
            items = list(obj.items())
        else:
            cols, names = table_columns(obj), table_names(obj)
            if cols is None or names is None:
                raise InvalidInput(f"a query reads a table with named columns (a dict, pandas, "
                                   f"Polars or Arrow), got {type(obj).__name__}")
            items = list(zip(names, cols, strict=True))
        columns: dict[str, np.ndarray] = {}
        dictionaries: dict[str, np.ndarray] = {}
        for name, raw in items:
            c = read_column(raw, str(name))
            if c.nulls is not None and bool(np.asarray(c.nulls).any()):
                raise Unsupported(f"column {name!r} holds nulls, which the query engines do not "
                                  f"take")
            v = np.asarray(c.values)
            if v.dtype.kind in "iub":
                v = v.astype(np.int64) if v.dtype.kind == "b" else v
                if v.size and (int(v.min()) < -2**31 or int(v.max()) >= 2**31):
                    columns[str(name)] = v.astype(np.int64)
                else:
                    columns[str(name)] = v.astype(np.int32, copy=False)
            else:
                uniq, codes = np.unique(v, return_inverse=True)
                columns[str(name)] = codes.astype(np.int32)
                dictionaries[str(name)] = uniq
        return cls(columns, dictionaries)

    def column(self, name: str) -> np.ndarray:
        try:
            return self.columns[name]
        except KeyError:
            raise InvalidInput(f"unknown column {name!r}; the table has "
                               f"{', '.join(self.columns)}") from None

    def domain(self, name: str) -> tuple[int, int]:
        """(smallest, largest) code of the column ((0, -1) when the table is empty)."""
        if name not in self._domains:
            v = self.column(name)
            self._domains[name] = (int(v.min()), int(v.max())) if v.size else (0, -1)
        return self._domains[name]

    def code_bounds(self, name: str, kind: str, value: Any) -> tuple[int, int]:
        """The inclusive code interval of ``name <kind> value`` (lt, le, gt, ge, eq)."""
        big = 2**62
        d = self.dictionaries.get(name)
        if d is None:
            try:
                v = int(value)
            except (TypeError, ValueError):
                raise InvalidInput(f"column {name!r} holds integers; {value!r} is not one") \
                    from None
            if v != value:
                raise InvalidInput(f"column {name!r} holds integers; {value!r} is not one")
            return {"eq": (v, v), "lt": (-big, v - 1), "le": (-big, v), "gt": (v + 1, big),
                    "ge": (v, big)}[kind]
        try:
            left = int(np.searchsorted(d, value, side="left"))
            right = int(np.searchsorted(d, value, side="right"))
        except TypeError:
            raise InvalidInput(f"column {name!r} holds {d.dtype} values; {value!r} does not "
                               f"compare with them") from None
        return {"eq": (left, right - 1), "lt": (0, left - 1), "le": (0, right - 1),
                "gt": (right, len(d) - 1), "ge": (left, len(d) - 1)}[kind]

    def decode(self, name: str, codes: np.ndarray) -> np.ndarray:
        d = self.dictionaries.get(name)
        return codes if d is None else d[codes]


def _intervals(table: Table, f: Filter) -> list[tuple[int, int]]:
    if f.kind == "between":
        lo = table.code_bounds(f.column, "ge", f.values[0])[0]
        hi = table.code_bounds(f.column, "le", f.values[1])[1]
        return [(lo, hi)] if lo <= hi else []
    if f.kind == "in":
        out = [table.code_bounds(f.column, "eq", v) for v in f.values]
        return _merge([iv for iv in out if iv[0] <= iv[1]])
    if f.kind in ("lt", "le", "gt", "ge"):
        iv = table.code_bounds(f.column, f.kind, f.values[0])
        return [iv] if iv[0] <= iv[1] else []
    raise InvalidInput(f"unknown filter kind {f.kind!r}")


def _merge(ivs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ivs):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], builtins.max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = builtins.max(lo1, lo2), builtins.min(hi1, hi2)
            if lo <= hi:
                out.append((lo, hi))
    return _merge(out)


# ----------------------------------------------------------------------------- plans
@dataclass(frozen=True)
class Plan:
    """A query lowered onto a table's codes: per filtered column, sorted disjoint inclusive
    code intervals, clipped to the column's domain (an empty list: no row qualifies); the GROUP
    BY columns; one (op, terms) per aggregate; ``values``: the distinct non-COUNT expressions,
    each aggregate's index into them (-1 for COUNT)."""

    query: Query
    filters: dict[str, list[tuple[int, int]]]
    group_by: tuple[str, ...]
    values: tuple[Expr, ...]
    value_of: tuple[int, ...]
    empty: bool

    def columns(self) -> tuple[str, ...]:
        return self.query.columns()


def plan(table: Table, query: Query) -> Plan:
    """Lower ``query`` onto ``table`` (unknown columns and aggregates of non-integer columns
    raise, naming them)."""
    unknown = [c for c in query.columns() if c not in table.columns]
    if unknown:
        raise InvalidInput(f"unknown column{'s' if len(unknown) > 1 else ''} "
                           f"{', '.join(map(repr, unknown))}; the table has "
                           f"{', '.join(table.columns)}")
    filters: dict[str, list[tuple[int, int]]] = {}
    for f in query.where:
        lo, hi = table.domain(f.column)
        ivs = _intersect(_intervals(table, f), [(lo, hi)])
        filters[f.column] = _intersect(filters[f.column], ivs) if f.column in filters else ivs
    values: list[Expr] = []
    value_of = []
    for a in query.select:
        if a.expr is None:
            value_of.append(-1)
            continue
        text = [c for c in a.expr.columns() if c in table.dictionaries]
        if text:
            raise Unsupported(f"{a.op}({a.expr}) aggregates {', '.join(text)}, which hold "
                              f"non-integer values; aggregates take integer columns")
        if a.expr not in values:
            values.append(a.expr)
        value_of.append(values.index(a.expr))
    empty = any(not ivs for ivs in filters.values())
    return Plan(query, filters, tuple(query.group_by), tuple(values), tuple(value_of), empty)


# ----------------------------------------------------------------------------- results
@dataclass
class Groups:
    """What an engine returns: one row per group with at least one qualifying row (one row
    for a query without GROUP BY): ``keys`` (codes, one array per GROUP BY column), ``count``
    and, per value expression of the plan, ``sum``, ``min`` and ``max`` (int64; an engine
    fills the ones the query's aggregates need, the others may be None). ``ordered``: the rows
    are in lexicographic order of the keys. ``bytes_read``: bytes the engine read (its
    accounting). ``stats``: anything else it measured."""

    keys: list[np.ndarray]
    count: np.ndarray
    sum: list[np.ndarray | None]
    min: list[np.ndarray | None]
    max: list[np.ndarray | None]
    ordered: bool = False
    bytes_read: int = 0
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class QueryResult:
    """A query's answer: ``columns`` (name -> NumPy array, in SELECT order), plus what the
    engine measured (``bytes_read``, ``stats``, ``order_skipped``)."""

    columns: dict[str, np.ndarray]
    bytes_read: int = 0
    order_skipped: bool = False
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def to_pandas(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.columns)

    def to_arrow(self) -> Any:
        import pyarrow as pa

        return pa.table(self.columns)


def finish(table: Table, p: Plan, g: Groups) -> QueryResult:
    """AVG, decoding, ORDER BY and LIMIT over an engine's groups."""
    q = p.query
    keep = g.count > 0
    if not q.group_by:
        keep = np.ones(1, dtype=bool)
    out: dict[str, np.ndarray] = {}
    for name, k in zip(q.group_by, g.keys, strict=True):
        out[name] = np.asarray(k)[keep]
    for a, vi in zip(q.select, p.value_of, strict=True):
        cnt = np.asarray(g.count)[keep]
        if a.op == "count":
            out[a.alias] = cnt.astype(np.int64)
            continue
        src = {"sum": g.sum, "avg": g.sum, "min": g.min, "max": g.max}[a.op][vi]
        if src is None:
            raise IndexZooError(f"engine left out the {a.op} of {a.expr}")
        v = np.asarray(src)[keep]
        if a.op == "avg":
            with np.errstate(invalid="ignore", divide="ignore"):
                out[a.alias] = v.astype(np.float64) / cnt
        else:
            out[a.alias] = v.astype(np.int64)
    if q.having:
        mask = np.ones(len(next(iter(out.values()))), dtype=bool)
        for h in q.having:
            mask &= _having(out[h.column], h)
        out = {k: v[mask] for k, v in out.items()}
    skipped = False
    if q.order_by:
        names = [o.lstrip("-") for o in q.order_by]
        prefix = (g.ordered and not any(o.startswith("-") for o in q.order_by)
                  and tuple(names) == tuple(q.group_by[:len(names)]))
        if prefix:
            skipped = True
        else:
            order = np.lexsort([-_sortable(out[n]) if o.startswith("-") else _sortable(out[n])
                                for n, o in zip(reversed(names), reversed(q.order_by),
                                                strict=True)])
            out = {k: v[order] for k, v in out.items()}
    if q.limit is not None:
        out = {k: v[:q.limit] for k, v in out.items()}
    for name in q.group_by:
        out[name] = table.decode(name, out[name])
    return QueryResult(out, g.bytes_read, skipped, dict(g.stats))


def _having(v: np.ndarray, h: Filter) -> np.ndarray:
    """Rows of the aggregate ``v`` that pass ``h``."""
    x = h.values
    if h.kind == "between":
        return (v >= x[0]) & (v <= x[1])
    if h.kind == "in":
        return np.isin(v, np.array(x))
    return {"lt": v < x[0], "le": v <= x[0], "gt": v > x[0], "ge": v >= x[0]}[h.kind]


def _sortable(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float64) if v.dtype.kind == "f" else v.astype(np.int64)


# ----------------------------------------------------------------------------- views, engines
class View:
    """An engine's prepared form of a table for a set of attributes: ``scan`` (columns it can
    filter on), ``group`` (columns it can group by), ``values`` (expressions it can
    aggregate). ``None`` means any. Subclasses hold the engine's structures."""

    def __init__(self, table: Table, scan: Sequence[str] | None, group: Sequence[str] | None,
                 values: Sequence[Expr] | None, name: str = ""):
        self.table = table
        self.scan = None if scan is None else tuple(scan)
        self.group = None if group is None else tuple(group)
        self.values = None if values is None else tuple(values)
        self.name = name
        self._plans: dict[Query, Plan] = {}

    def plan(self, query: Query) -> Plan:
        """``query`` lowered onto this view's table (:func:`plan`), kept per query: a view's
        table does not change, and a query run again skips the lowering."""
        plans: dict[Query, Plan] = self.__dict__.setdefault("_plans", {})
        try:
            hit = plans.get(query)
        except TypeError:  # a literal that does not hash: lowered each time
            return plan(self.table, query)
        if hit is None:
            hit = plans[query] = plan(self.table, query)
        return hit

    def check(self, p: Plan) -> None:
        """Raise Unsupported naming every attribute ``p`` needs that the view lacks."""
        missing = []
        if self.scan is not None:
            missing += [f"{c} (filter)" for c in p.filters if c not in self.scan]
        if self.group is not None:
            missing += [f"{c} (group by)" for c in p.group_by if c not in self.group]
        if self.values is not None:
            missing += [f"{e} (aggregate)" for e in p.values if e not in self.values]
        if missing:
            raise Unsupported(f"view {self.name or '(unnamed)'} lacks "
                              f"{', '.join(missing)}; prepare a view with them")

    def footprint_bytes(self) -> int:
        return 0


class QueryEngine(abc.ABC):
    """A query engine: ``prepare`` a view of a table once, ``run`` queries on it."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def __init__(self, params: BaseModel | Mapping[str, Any] | None = None, *,
                 device: str = "auto", **kwargs: Any):
        from .devices import resolve_device

        if isinstance(params, BaseModel):
            params = params.model_dump()
        merged = {**dict(params or {}), **kwargs}
        try:
            self.params = self.Params(**merged)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ConfigError(f"engine {self.name!r}: {'.'.join(map(str, err['loc']))}: "
                              f"{err['msg']} (got {err.get('input')!r})") from None
        self.device = resolve_device(device)

    def prepare(self, table: Any, queries: Sequence[Query] = (), *,
                scan: Sequence[str] | None = None, group: Sequence[str] | None = None,
                values: Sequence[Expr | str] | None = None, name: str = "") -> View:
        """A view of ``table`` holding the attributes of ``queries`` plus those named."""
        t = Table.of(table)
        sc = list(scan or [])
        gr = list(group or [])
        va: list[Expr] = [col(v) if isinstance(v, str) else v for v in (values or [])]
        for q in queries:
            p = plan(t, q)
            sc += [c for c in p.filters if c not in sc]
            gr += [c for c in p.group_by if c not in gr]
            va += [e for e in p.values if e not in va]
        unknown = [c for c in [*sc, *gr, *(c for e in va for c in e.columns())]
                   if c not in t.columns]
        if unknown:
            raise InvalidInput(f"unknown column{'s' if len(unknown) > 1 else ''} "
                               f"{', '.join(map(repr, dict.fromkeys(unknown)))}; the table has "
                               f"{', '.join(t.columns)}")
        return self._prepare(t, sc, gr, va, list(queries), name)

    def run(self, source: Any, query: Query) -> QueryResult:
        """Answer ``query`` over ``source``: a view from :meth:`prepare` (reused), or a table
        (a view for this query alone is prepared first)."""
        view = source if isinstance(source, View) else self.prepare(source, [query])
        p = view.plan(query)
        view.check(p)
        return finish(view.table, p, self._execute(view, p))

    @abc.abstractmethod
    def _prepare(self, table: Table, scan: list[str], group: list[str], values: list[Expr],
                 queries: list[Query], name: str) -> View: ...

    @abc.abstractmethod
    def _execute(self, view: View, p: Plan) -> Groups: ...


def floor_bytes(table: Table, query: Query) -> int:
    """The bandwidth floor of a query: one read of every column it needs."""
    return int(builtins.sum(table.column(c).nbytes for c in query.columns()))


def reference(table: Any, query: Query) -> QueryResult:
    """The NumPy oracle: filter with boolean masks, group with ``np.unique``."""
    t = Table.of(table)
    p = plan(t, query)
    mask = np.ones(t.n_rows, dtype=bool)
    for c, ivs in p.filters.items():
        v = t.column(c)
        m = np.zeros(t.n_rows, dtype=bool)
        for lo, hi in ivs:
            m |= (v >= lo) & (v <= hi)
        mask &= m
    vals = [evaluate(t, e, mask) for e in p.values]
    if p.group_by:
        keys = np.stack([t.column(c)[mask].astype(np.int64) for c in p.group_by], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        k = uniq.shape[0]
        cnt = np.bincount(inv, minlength=k)
        key_cols = [uniq[:, j] for j in range(uniq.shape[1])]
    else:
        inv = np.zeros(int(mask.sum()), dtype=np.int64)
        k = 1
        cnt = np.array([inv.size])
        key_cols = []
    sums: list[np.ndarray | None] = []
    mins: list[np.ndarray | None] = []
    maxs: list[np.ndarray | None] = []
    for v in vals:
        s = np.zeros(k, dtype=np.int64)
        np.add.at(s, inv, v)
        smallest = np.full(k, np.iinfo(np.int64).max)
        np.minimum.at(smallest, inv, v)
        largest = np.full(k, np.iinfo(np.int64).min)
        np.maximum.at(largest, inv, v)
        sums.append(s)
        mins.append(smallest)
        maxs.append(largest)
    g = Groups(key_cols, cnt, sums, mins, maxs, ordered=True)
    return finish(t, p, g)


def evaluate(table: Table, e: Expr, mask: np.ndarray | None = None) -> np.ndarray:
    """``e`` over the table's rows (those of ``mask``), int64."""
    n = int(mask.sum()) if mask is not None else table.n_rows
    out = np.zeros(n, dtype=np.int64)
    for c, a, b in e.terms:
        term = np.full(n, c, dtype=np.int64)
        for name in (a, b):
            if name is not None:
                v = table.column(name)
                term *= (v[mask] if mask is not None else v).astype(np.int64)
        out += term
    return out


def terms_array(e: Expr, columns: Sequence[str]) -> np.ndarray:
    """``e`` as an (n_terms, 3) int64 array: coefficient, index of ``a`` and of ``b`` in
    ``columns`` (-1: none), for kernels."""
    rows = [(c, columns.index(a) if a is not None else -1, columns.index(b) if b is not None else -1)
            for c, a, b in e.terms]
    return np.array(rows or [(0, -1, -1)], dtype=np.int64).reshape(-1, 3)


def intervals_arrays(p: Plan, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plan's filters as CSR arrays for kernels: ``starts`` (len(columns)+1), ``lo``,
    ``hi`` (int64), one segment per column of ``columns``."""
    starts = [0]
    lo: list[int] = []
    hi: list[int] = []
    for c in columns:
        for a, b in p.filters[c]:
            lo.append(a)
            hi.append(b)
        starts.append(len(lo))
    return (np.array(starts, dtype=np.int64), np.array(lo, dtype=np.int64),
            np.array(hi, dtype=np.int64))


# ----------------------------------------------------------------------------- specs
class EngineSpec(BaseModel):
    """``{"engine": NAME, "params": {...}, "device": "cpu"|"cuda"|"auto"}``: a query engine
    by configuration (:func:`indexzoo.query_engine`)."""

    model_config = ConfigDict(extra="forbid")
    engine: str
    params: dict[str, Any] = {}
    device: str = "auto"


def ceil_log2(n: int) -> int:
    return builtins.max(0, math.ceil(math.log2(n))) if n > 1 else 0
