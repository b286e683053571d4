"""A query lowered onto a table: what every engine reads (:class:`Plan`).

* Filters become, per column, sorted disjoint inclusive intervals of its codes, clipped to
  its non-NULL codes (a comparison never matches NULL).
* Each aggregate becomes int64 *values* for the engines to add up, or to take the MIN or
  MAX of, per group (:attr:`Plan.values`, :attr:`Plan.aggs`), and an :class:`Output` that
  rebuilds the exact answer from what they return, in :func:`~.result.finish`:

  - a value whose every step is proven within int64 by the columns' ranges (SSB's
    ``lo_extendedprice * lo_discount``) goes to the engines as it is: a polynomial over the
    columns, each summed in one int64 accumulator while ``rows * max|value|`` fits int64;
  - otherwise the plan derives int64 columns from the exact values (:mod:`.exact`): the
    value less an offset (a UBIGINT column's values less 2^63), NULL rows set to what leaves
    a SUM, a MIN or a MAX unchanged, a column of 1s counting the non-NULL rows, and a SUM
    that could pass int64 split into limbs of at most 32 bits (their sums cannot wrap);
    values spanning more than 2^64 reach MIN and MAX as their ranks.

  So no engine adds, multiplies or compares anything but int64 values that fit.
* Rows where a step of an expression leaves its SQL type (:class:`Check`): a query that
  reads one of them raises :class:`~indexzoo.OutOfRange` before any engine runs, where
  DuckDB raises.
"""

from __future__ import annotations

import builtins
import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInput, OutOfRange, Unsupported
from .exact import bounds, evaluate_exact, explain, typed
from .expr import Expr, Filter, Query, col, polynomial
from .rewrite import Node, sum_parts
from .table import I64_MAX, I64_MIN, Table, unknown_columns

__all__ = ["Check", "Output", "Plan", "check_rows", "evaluate", "lower_values", "plan",
           "qualifying"]

Intervals = list[tuple[int, int]]


@dataclass(frozen=True)
class Output:
    """How one aggregate of the query comes back from the engines' results per group:
    ``nn`` the value whose SUM counts its non-NULL rows (None: COUNT(*) does);
    SUM = sum(weight * SUM(value)) + offset * nn over ``sum``; MIN/MAX = the MIN/MAX of
    value ``extreme``, decoded by ``decode`` (``("column", name)``: codes of that column;
    ``("int", offset)``: plus an offset; ``("rank", values)``: an index into the values)."""

    op: str
    expr: Expr | None
    nn: int | None = None
    sum: tuple[tuple[int, int], ...] = ()
    offset: int = 0
    extreme: int | None = None
    decode: tuple[str, Any] = ("int", 0)
    sqltype: str = "i64"


@dataclass(frozen=True)
class Check:
    """``rows`` (indexes) where a step of ``node`` (an expression as DuckDB evaluates it)
    leaves its SQL type."""

    node: Node
    rows: np.ndarray


@dataclass(frozen=True)
class Plan:
    """A query lowered onto a table's codes: per filtered column its code intervals (an
    empty list: no row qualifies); the GROUP BY columns; ``values``, the int64 expressions
    (polynomials of at most two columns each) the engines aggregate; ``aggs``, the
    ``(op, value)`` pairs they must fill (op ``sum``, ``min`` or ``max``; COUNT(*) always);
    one :class:`Output` per aggregate of the query; the rows to check."""

    query: Query
    filters: dict[str, Intervals]
    group_by: tuple[str, ...]
    values: tuple[Expr, ...]
    aggs: tuple[tuple[str, int], ...]
    outputs: tuple[Output, ...]
    checks: tuple[Check, ...]
    empty: bool

    def columns(self) -> tuple[str, ...]:
        return self.query.columns()

    def needs(self, op: str, value: int) -> bool:
        return (op, value) in self.aggs


# ----------------------------------------------------------------------------- filters
def _merge(ivs: Intervals) -> Intervals:
    out: Intervals = []
    for lo, hi in sorted(ivs):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], builtins.max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    out = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = builtins.max(lo1, lo2), builtins.min(hi1, hi2)
            if lo <= hi:
                out.append((lo, hi))
    return _merge(out)


def _complement(ivs: Intervals, lo: int, hi: int) -> Intervals:
    out, at = [], lo
    for a, b in _merge(ivs):
        if a > at:
            out.append((at, builtins.min(a - 1, hi)))
        at = builtins.max(at, b + 1)
    if at <= hi:
        out.append((at, hi))
    return [(a, b) for a, b in out if a <= b]


def _intervals(table: Table, f: Filter) -> Intervals:
    """The codes ``f`` admits (NULL never, but for IS NULL)."""
    name = f.column
    info = table.info[name]
    vlo, vhi = table.value_domain(name)
    domain = [(vlo, vhi)] if vlo <= vhi else []
    if f.kind == "is_null":
        return [(info.null_code, info.null_code)] if info.null_code is not None else []
    if f.kind == "is_not_null":
        return domain
    if f.kind == "or":
        return _merge([iv for part in f.values for iv in _intervals(table, part)])
    values = f.values
    if f.kind in ("not_in",) and any(v is None for v in values):
        return []  # x NOT IN (.., NULL) is never true
    if f.kind == "not_between" and (values[0] is None) != (values[1] is None):
        # x NOT BETWEEN a AND b is x < a OR x > b: true where the bound that is not NULL
        # decides it
        if values[0] is None:
            return _intersect([(table.bounds(name, values[1])[1] + 1, vhi)], domain)
        return _intersect([(vlo, table.bounds(name, values[0])[0])], domain)
    if f.kind != "in" and any(v is None for v in values):
        return []  # a comparison with NULL is never true
    if f.kind in ("in", "not_in"):
        ivs = []
        for v in values:
            if v is None:
                continue
            below, at_most = table.bounds(name, v)
            if below < at_most:
                ivs.append((below + 1, at_most))
        ivs = _intersect(_merge(ivs), domain)
        return _complement(ivs, vlo, vhi) if f.kind == "not_in" else ivs
    if f.kind in ("between", "not_between"):
        lo = table.bounds(name, values[0])[0] + 1
        hi = table.bounds(name, values[1])[1]
        ivs = _intersect([(lo, hi)], domain) if lo <= hi else []
        return _complement(ivs, vlo, vhi) if f.kind == "not_between" else ivs
    below, at_most = table.bounds(name, values[0])
    iv = {"lt": (vlo, below), "le": (vlo, at_most), "gt": (at_most + 1, vhi),
          "ge": (below + 1, vhi)}[f.kind]
    return _intersect([iv], domain)


# ----------------------------------------------------------------------------- values
class _Values:
    """The int64 values a plan's engines aggregate, collected without repeats."""

    def __init__(self) -> None:
        self.values: list[Expr] = []
        self.aggs: list[tuple[str, int]] = []

    def add(self, e: Expr, op: str) -> int:
        if e not in self.values:
            self.values.append(e)
        i = self.values.index(e)
        if (op, i) not in self.aggs:
            self.aggs.append((op, i))
        return i


def _limb_bits(n_rows: int) -> int:
    """Bits of a limb whose sum over ``n_rows`` rows stays below 2^62."""
    return builtins.min(32, 62 - builtins.max(1, n_rows).bit_length())


def _limbs(table: Table, key: str, p: np.ndarray, top: int) -> list[tuple[str, int]]:
    """``p`` (int64 or Python integers, |p| < 2^top) as limbs: derived columns and their
    weights, SUM(p) = sum(weight * SUM(limb))."""
    b = _limb_bits(table.n_rows)
    k = builtins.max(1, -(-top // b))
    out = []
    for j in range(k):
        def make(j: int = j) -> np.ndarray:
            v = p >> (b * j)
            if j < k - 1:
                v = v & ((1 << b) - 1)
            return np.asarray(v).astype(np.int64)
        out.append((table.derive(f"limb{j}/{k}:{key}", make), 1 << (b * j)))
    return out


def _sum_safe(table: Table, lo: int, hi: int) -> bool:
    return table.n_rows * builtins.max(abs(lo), abs(hi), 0) <= I64_MAX


def _filled(p: np.ndarray, good: np.ndarray | None, fill: int) -> np.ndarray:
    if good is None:
        return p
    out = np.array(p, dtype=np.int64, copy=True)
    out[~good] = fill
    return out


def _lower_column(table: Table, name: str, op: str, vals: _Values) -> Output:
    info = table.info[name]
    nulls = table.nulls(name)
    e = col(name)
    nn = None if nulls is None else _nn(table, name, ~nulls, vals)
    if op in ("min", "max"):
        if nulls is None:
            i = vals.add(e, op)
        else:
            fill = I64_MAX if op == "min" else I64_MIN
            i = vals.add(col(table.derive(f"{op}:{name}", lambda: _filled(
                table.column(name), ~nulls, fill))), op)
        return Output(op, e, nn, extreme=i, decode=("column", name), sqltype=info.sqltype)
    if not info.integer:
        raise Unsupported(f"{op.upper()}({name}): column {name!r} holds {info.sqltype} values; "
                          f"SUM and AVG take integer columns")
    if info.sqltype == "bool" and op == "avg":
        raise Unsupported(f"AVG({name}): column {name!r} holds BOOLEAN values (DuckDB has no "
                          f"avg(BOOLEAN))")
    if info.dictionary is not None:
        return _lower_exact(table, e, typed(table, e), op, vals)
    lo, hi = table.value_domain(name)
    if nulls is None:
        p, key = e, name
    else:
        p = col(table.derive(f"sum:{name}", lambda: _filled(table.column(name), ~nulls, 0)))
        key = f"sum:{name}"
    parts: tuple[tuple[int, int], ...]
    if _sum_safe(table, lo, hi):
        parts = ((vals.add(p, "sum"), 1),)
    else:
        codes = table.column(p.args[0])
        parts = tuple((vals.add(col(c), "sum"), w) for c, w in _limbs(
            table, key, codes.astype(np.int64), 64))
    return Output(op, e, nn, sum=parts, offset=info.base, sqltype=info.sqltype)


def _nn(table: Table, key: str, valid: np.ndarray, vals: _Values) -> int:
    """The value counting the rows of ``valid`` (its SUM per group)."""
    return vals.add(col(table.derive(f"nn:{key}", lambda: valid.astype(np.int32))), "sum")


def _lower_exact(table: Table, e: Expr, node: Node, op: str, vals: _Values,
                 offset_sum: int = 0) -> Output:
    """``node`` (the bound form of ``e``) through derived columns of its exact values;
    ``offset_sum``: a constant each non-NULL row adds to a SUM (DuckDB's SUM rewrite)."""
    ev = evaluate_exact(table, node)
    key = node.key()
    nn = None if ev.valid is None else _nn(table, key, ev.valid, vals)
    good = ev.good
    lo, hi = ev.lo, ev.hi
    wide = hi - lo >= 1 << 64
    offset = 0 if lo > hi or wide or (lo >= I64_MIN and hi <= I64_MAX) else lo + (1 << 63)

    def shifted() -> np.ndarray:
        v = ev.values if offset == 0 else np.where(good if good is not None else True,
                                                   ev.values - offset, 0)
        return np.asarray(v).astype(np.int64)

    if op in ("min", "max"):
        fill = I64_MAX if op == "min" else I64_MIN
        if wide:
            uniq, inv = table.cached(("ranks", node), lambda: np.unique(
                ev.values[good] if good is not None else ev.values, return_inverse=True))

            def ranks() -> np.ndarray:
                r = np.full(table.n_rows, fill, dtype=np.int64)
                if good is None:
                    r[:] = inv.reshape(-1)
                else:
                    r[good] = inv.reshape(-1)
                return r

            i = vals.add(col(table.derive(f"rank{op}:{key}", ranks)), op)
            return Output(op, e, nn, extreme=i, decode=("rank", uniq), sqltype=node.type)
        i = vals.add(col(table.derive(f"{op}@{offset}:{key}",
                                      lambda: _filled(shifted(), good, fill))), op)
        return Output(op, e, nn, extreme=i, decode=("int", offset), sqltype=node.type)
    if wide:
        top = builtins.max(abs(lo), abs(hi)).bit_length() + 1
        parts = tuple((vals.add(col(c), "sum"), w) for c, w in _limbs(table, key, ev.values,
                                                                     top))
        return Output(op, e, nn, sum=parts, offset=offset_sum, sqltype=node.type)
    p = table.derive(f"sum@{offset}:{key}", lambda: _filled(shifted(), good, 0))
    if lo > hi or _sum_safe(table, lo - offset, hi - offset):
        parts = ((vals.add(col(p), "sum"), 1),)
    else:
        parts = tuple((vals.add(col(c), "sum"), w) for c, w in _limbs(
            table, f"sum@{offset}:{key}", table.column(p), 64))
    return Output(op, e, nn, sum=parts, offset=offset + offset_sum, sqltype=node.type)


def _lower(table: Table, op: str, e: Expr | None, vals: _Values, checks: dict[Any, Check],
           grouped: bool = True) -> Output:
    if e is None:
        return Output("count", None)
    if e.op == "col" and op == "count":
        nulls = table.nulls(e.args[0])
        return Output("count", e, None if nulls is None else
                      _nn(table, e.args[0], ~nulls, vals))
    if e.op == "col":
        return _lower_column(table, e.args[0], op, vals)
    node = typed(table, e)
    offset_sum = 0
    if op == "sum" and not grouped:  # DuckDB sums x + C as SUM(x) + C * COUNT(x)
        parts = sum_parts(node)
        if parts is not None:
            node, offset_sum = parts
    b = bounds(table, node)
    if b.may_raise:
        ev = evaluate_exact(table, node)
        if ev.bad is not None:
            checks.setdefault(node, Check(node, np.flatnonzero(ev.bad)))
    nullable = any(table.nulls(c) is not None for c in node.columns())
    if op == "count":
        if not nullable:
            return Output("count", e)
        ev = evaluate_exact(table, node)
        assert ev.valid is not None
        return Output("count", e, _nn(table, node.key(), ev.valid, vals))
    if node.op == "col":  # x * 1, x + 0 and the SUM rewrite leave a column
        out = _lower_column(table, node.args[0], op, vals)
        return Output(out.op, e, out.nn, out.sum, out.offset + offset_sum, out.extreme,
                      out.decode, node.type)
    if b.kernel_safe and not nullable and node.op != "lit":
        p = polynomial(node.expr().terms)
        if op in ("min", "max"):
            return Output(op, e, extreme=vals.add(p, op), decode=("int", 0), sqltype=b.sqltype)
        if _sum_safe(table, b.lo, b.hi):
            return Output(op, e, sum=((vals.add(p, "sum"), 1),), offset=offset_sum,
                          sqltype=b.sqltype)
    return _lower_exact(table, e, node, op, vals, offset_sum)


def lower_values(table: Table, exprs: Sequence[Expr]) -> list[Expr]:
    """The int64 values the engines aggregate for ``exprs``, whichever of SUM, MIN, MAX,
    AVG and COUNT a query asks of them (what a prepared view holds)."""
    vals = _Values()
    for e in exprs:
        for op in ("sum", "min", "max", "count"):
            try:
                _lower(table, op, e, vals, {})
            except Unsupported:
                if op != "sum":
                    raise
    return vals.values


# ----------------------------------------------------------------------------- plans
def plan(table: Table, query: Query) -> Plan:
    """Lower ``query`` onto ``table`` (unknown columns and aggregates a column's type does
    not take raise, naming them)."""
    unknown = [c for c in query.columns() if c not in table.columns]
    if unknown:
        raise unknown_columns(unknown, table.columns)
    filters: dict[str, Intervals] = {}
    for f in query.where:
        ivs = _intervals(table, f)
        filters[f.column] = _intersect(filters[f.column], ivs) if f.column in filters else ivs
    vals = _Values()
    checks: dict[Any, Check] = {}
    grouped = bool(query.group_by)
    outputs = tuple(_lower(table, a.op, a.expr, vals, checks, grouped) for a in query.select)
    for h in query.having:
        _check_having(table, h, outputs[[a.alias for a in query.select].index(h.column)])
    empty = any(not ivs for ivs in filters.values())
    return Plan(query, filters, tuple(query.group_by), tuple(vals.values), tuple(vals.aggs),
                outputs, tuple(checks.values()), empty)


def _literal_kind(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (str, np.str_)):
        return "text"
    if isinstance(x, (bytes, np.bytes_)):
        return "blob"
    if isinstance(x, (datetime.date, np.datetime64)):
        return "date"
    return "number"


def _check_having(table: Table, h: Filter, o: Output) -> None:
    """Refuse a HAVING literal the aggregate's values do not compare with (as DuckDB's binder
    does), before any row is read."""
    parts = h.values if h.kind == "or" else (h,)
    kind = "number"
    if o.op in ("min", "max") and o.decode[0] == "column":
        t = table.info[o.decode[1]].sqltype
        kind = {"text": "text", "blob": "blob", "date": "date", "timestamp": "date",
                "bool": "bool"}.get(t, "number")
    for part in parts:
        for x in part.values:
            if x is None:
                continue
            got = _literal_kind(x)
            if got != kind and {got, kind} != {"number", "bool"} \
                    and not (kind == "date" and got == "text"):
                raise InvalidInput(f"HAVING {part.sql()}: {o.op}({o.expr}) holds "
                                   f"{kind} values; {x!r} does not compare with them")


def qualifying(table: Table, p: Plan, rows: np.ndarray | None = None) -> np.ndarray:
    """Which of ``rows`` (all rows: None) pass the plan's filters."""
    n = table.n_rows if rows is None else len(rows)
    mask = np.ones(n, dtype=bool)
    if p.empty:
        return np.zeros(n, dtype=bool)
    for c, ivs in p.filters.items():
        v = table.column(c) if rows is None else table.column(c)[rows]
        m = np.zeros(n, dtype=bool)
        for lo, hi in ivs:
            m |= (v >= lo) & (v <= hi)
        mask &= m
    return mask


def check_rows(table: Table, p: Plan) -> None:
    """Raise :class:`~indexzoo.OutOfRange` where a qualifying row makes a step of an
    aggregate's expression leave its type (DuckDB raises there)."""
    for c in p.checks:
        hit = c.rows[qualifying(table, p, c.rows)]
        if hit.size:
            raise OutOfRange(explain(table, c.node, int(hit[0])))


def evaluate(table: Table, e: Expr, mask: np.ndarray | None = None) -> np.ndarray:
    """A plan's value ``e`` over the table's rows (those of ``mask``), int64: exact, since a
    plan's values never leave int64."""
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
