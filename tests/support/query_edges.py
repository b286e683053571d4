"""Seeded random tables that reach the edges, random queries over them, and the comparison of
an engine's answer with DuckDB's (the judge; never our own reference).

Tables: int64 at its ends and near 2^62, uint64 at and above 2^63, int32/int16/int8/uint32
at theirs, booleans, text with quotes, accents and NULs, dates, floats, columns named like SQL
keywords and with quotes; each column NULL-able; 0 to 200 rows; given as a dict of NumPy
(masked) arrays, pandas (nullable dtypes), Arrow or Polars. Queries: conjunctions of every
filter kind with literals drawn from the column's values, its type's ends and beyond; GROUP BY
up to two columns; SUM/AVG/MIN/MAX of columns and of ``+ - *`` expressions (products that
overflow, sums past 2^63), COUNT(*) and COUNT(col); HAVING; ORDER BY every group column (so
that answers are comparable row by row) and LIMIT.

An engine agrees with DuckDB when it returns the same rows (AVG within 1e-12), raises
:class:`indexzoo.OutOfRange` where DuckDB raises its out-of-range error, and raises an
``IndexZooError`` where DuckDB refuses the query (a binder error).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import indexzoo
from indexzoo import query as q

I64, U64 = (-(1 << 63), (1 << 63) - 1), (0, (1 << 64) - 1)

EDGES: dict[str, list[int]] = {
    "int64": [-(1 << 63), -(1 << 63) + 1, -(1 << 62) - 1, -(1 << 62), -(1 << 31) - 1, -1, 0, 1,
              1 << 31, 1 << 62, (1 << 62) + 1, (1 << 63) - 2, (1 << 63) - 1],
    "uint64": [0, 1, 1 << 32, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 63) + 1, (1 << 64) - 2,
               (1 << 64) - 1],
    "int32": [-(1 << 31), -(1 << 31) + 1, -1, 0, 1, 1 << 30, (1 << 31) - 2, (1 << 31) - 1],
    "uint32": [0, 1, 1 << 31, (1 << 32) - 1],
    "int16": [-(1 << 15), -1, 0, 1, (1 << 15) - 1],
    "int8": [-128, -1, 0, 1, 100, 127],
    "uint8": [0, 1, 200, 255],
}
SMALL = {"int64": 1000, "uint64": 1000, "int32": 1000, "uint32": 1000, "int16": 100,
         "int8": 20, "uint8": 20}
TEXT = ["a", "b'c", 'q"uote', "", " lead", "ünï", "Zz", "a b", "a\x00", "\x00", "a\x00b"]
DATES = [np.datetime64(d) for d in ("1969-12-31", "1970-01-01", "1994-01-01", "1998-12-31",
                                    "2024-02-29")]
FLOATS = [-1.5, 0.0, 0.25, 2.0, 1e300, -7.0]

#: Column name -> kind. Names include an SQL keyword and characters that need quoting.
COLUMNS = {"k": "key", "t": "text", "d": "date", "b": "bool", "x": "int64", "y": "int64s",
           "u": "uint64", "v": "uint32", "w": "int32", "order": "int16", 'we"ird': "int8",
           "u8": "uint8", "f": "float"}
INTEGER = {"int64", "int64s", "uint64", "uint32", "int32", "int16", "int8", "uint8", "key"}
ENGINES = ["crystal", "rtcudb", "rtcudb-sorted", "rtcudb-split", "rtcudb-per-operator"]
FORMS = ("dict", "pandas", "arrow", "polars")


@dataclass
class Column:
    kind: str
    values: list[Any]  # Python values, None for NULL


def _dtype(kind: str) -> str:
    return {"int64s": "int64", "key": "int32"}.get(kind, kind)


def draw_column(rng: np.random.Generator, kind: str, n: int, nullable: bool) -> Column:
    vals: list[Any] = []
    for _ in range(n):
        if nullable and rng.random() < 0.25:
            vals.append(None)
        elif kind == "key":
            vals.append(int(rng.integers(0, 5)))
        elif kind == "int64s":
            vals.append(int(rng.integers(-50, 51)))
        elif kind in EDGES:
            if rng.random() < 0.45:
                vals.append(int(rng.choice(np.array(EDGES[kind], dtype=object))))
            else:
                lo = 0 if kind.startswith("u") else -SMALL[kind]
                vals.append(int(rng.integers(lo, SMALL[kind])))
        elif kind == "text":
            vals.append(str(rng.choice(TEXT)))
        elif kind == "date":
            vals.append(DATES[int(rng.integers(0, len(DATES)))])
        elif kind == "bool":
            vals.append(bool(rng.random() < 0.5))
        elif kind == "float":
            vals.append(float(rng.choice(FLOATS)))
    return Column(kind, vals)


def draw_table(rng: np.random.Generator) -> dict[str, Column]:
    n = int(rng.choice([0, 1, 2, 5, 17, 64, 200], p=[.04, .06, .1, .2, .25, .2, .15]))
    names = [c for c in COLUMNS if rng.random() < 0.8 or c in ("k", "x")]
    return {c: draw_column(rng, COLUMNS[c], n, bool(rng.random() < 0.4)) for c in names}


# ----------------------------------------------------------------------------- forms
def _mask(col: Column) -> np.ndarray:
    return np.array([v is None for v in col.values], dtype=bool)


def _filled(col: Column) -> np.ndarray:
    kind = col.kind
    fill: Any = {"text": "", "date": DATES[0], "bool": False, "float": 0.0}.get(kind, 0)
    vals = [fill if v is None else v for v in col.values]
    if kind == "text":
        return np.array(vals, dtype=object)
    if kind == "date":
        return np.array(vals, dtype="datetime64[D]")
    if kind == "bool":
        return np.array(vals, dtype=bool)
    if kind == "float":
        return np.array(vals, dtype=np.float64)
    return np.array(vals, dtype=_dtype(kind))


def as_arrow(cols: dict[str, Column]) -> Any:
    import pyarrow as pa

    out = {}
    for name, c in cols.items():
        mask = _mask(c)
        data = _filled(c)
        if c.kind == "text":
            out[name] = pa.array([None if m else s for s, m in zip(data, mask, strict=True)],
                                 type=pa.string())
        else:
            out[name] = pa.array(data, mask=mask if mask.any() else None)
    return pa.table(out) if out else pa.table({})


def as_form(cols: dict[str, Column], form: str) -> Any:
    if form == "arrow":
        return as_arrow(cols)
    if form == "polars":
        try:
            import polars as pl
        except ImportError:  # (the GPU machine has no Polars: that seed's table is Arrow)
            return as_arrow(cols)
        return pl.from_arrow(as_arrow(cols))
    if form == "pandas":
        return as_arrow(cols).to_pandas(types_mapper=_pandas_type)
    out = {}
    for name, c in cols.items():
        mask = _mask(c)
        data = _filled(c)
        if c.kind == "text" and mask.any():
            data = np.array([None if m else s for s, m in zip(data, mask, strict=True)],
                            dtype=object)
            out[name] = data
        else:
            out[name] = np.ma.MaskedArray(data, mask=mask) if mask.any() else data
    return out


def _pandas_type(t: Any) -> Any:
    import pandas as pd
    import pyarrow as pa

    table = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
             pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
             pa.uint32(): pd.UInt32Dtype(),
             pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
             pa.float64(): pd.Float64Dtype(), pa.string(): pd.StringDtype()}
    return table.get(t)


# ----------------------------------------------------------------------------- queries
def _literal(rng: np.random.Generator, c: Column) -> Any:
    present = [v for v in c.values if v is not None]
    r = rng.random()
    if r < 0.05:
        return None
    if c.kind in INTEGER:
        pool = list(EDGES.get(_dtype(c.kind), []))
        pool += [I64[0], I64[1], 1 << 63, U64[1], 1 << 64, -1, 0]
        if present and r < 0.6:
            v = present[int(rng.integers(0, len(present)))]
            return int(v) + int(rng.integers(-1, 2))
        return int(pool[int(rng.integers(0, len(pool)))])
    if c.kind == "text":
        return present[int(rng.integers(0, len(present)))] if present and r < 0.6 else \
            str(rng.choice([*TEXT, "zz", "b"]))
    if c.kind == "date":
        base = present[int(rng.integers(0, len(present)))] if present and r < 0.6 else \
            DATES[int(rng.integers(0, len(DATES)))]
        return base + np.timedelta64(int(rng.integers(-1, 2)), "D")
    if c.kind == "bool":
        return bool(rng.random() < 0.5)
    return float(rng.choice([*FLOATS, 0.1, 3.0]))


def _filter(rng: np.random.Generator, name: str, c: Column, depth: int = 0) -> q.Filter:
    s = q.col(name)
    kind = str(rng.choice(["eq", "ne", "lt", "le", "gt", "ge", "between", "not_between",
                           "in", "not_in", "is_null", "is_not_null", "or"]))
    if kind == "or" and depth == 0:
        return _filter(rng, name, c, 1) | _filter(rng, name, c, 1)
    if kind == "or":
        kind = "eq"
    if kind in ("is_null", "is_not_null"):
        return getattr(s, kind)()
    if kind in ("between", "not_between"):
        return getattr(s, kind)(_literal(rng, c), _literal(rng, c))
    if kind in ("in", "not_in"):
        return getattr(s, "isin" if kind == "in" else kind)(
            [_literal(rng, c) for _ in range(int(rng.integers(1, 4)))])
    return getattr(s, kind)(_literal(rng, c))


def _operand(rng: np.random.Generator, ints: list[str]) -> q.Expr:
    if rng.random() < 0.2:
        return q.lit(int(rng.choice(np.array([-1, 2, 3, 7, 1 << 31, -(1 << 62), 1 << 40],
                                             dtype=object))))
    return q.col(ints[int(rng.integers(0, len(ints)))])


def _expression(rng: np.random.Generator, ints: list[str]) -> q.Expr:
    a, b = _operand(rng, ints), q.col(ints[int(rng.integers(0, len(ints)))])
    shape = int(rng.integers(0, 11))
    if shape == 7:  # a chain with two constants (DuckDB moves them together)
        return b + int(rng.choice([1, -1, 100])) + int(rng.choice([1, 2, -100]))
    if shape == 8:
        return int(rng.choice([2, -3])) * b * int(rng.choice([2, 1 << 61]))
    if shape == 9:  # steps DuckDB removes
        return (b * 1 + 0) if rng.random() < 0.5 else (0 + b - 0)
    if shape == 10:
        return (b + a) + int(rng.choice([1, -1]))
    if shape == 0:
        return b
    if shape == 1:
        return a + b
    if shape == 2:
        return b - a
    if shape == 3:
        return a * b
    if shape == 4:
        return -b
    if shape == 5:
        return (b - a) * _operand(rng, ints)
    return b + 1 if rng.random() < 0.5 else b - 1


def draw_query(rng: np.random.Generator, cols: dict[str, Column]) -> q.Query:
    names = list(cols)
    ints = [n for n in names if cols[n].kind in INTEGER]
    where = [_filter(rng, n, cols[n]) for n in
             rng.choice(names, size=int(rng.integers(0, 4)), replace=True)]
    keys = [n for n in names if cols[n].kind in ("key", "text", "date", "bool", "int64", "uint64",
                                                 "int32")]
    group = list(dict.fromkeys(rng.choice(keys, size=int(rng.integers(0, 3))).tolist())) \
        if keys else []
    aggs: list[q.Agg] = []
    for j in range(int(rng.integers(1, 5))):
        op = str(rng.choice(["count", "count_col", "sum", "avg", "min", "max", "sum", "min"]))
        if op == "count":
            aggs.append(q.count(alias=f"a{j}"))
        elif op == "count_col" and rng.random() < 0.3:
            aggs.append(q.count(_expression(rng, ints), f"a{j}"))
        elif op == "count_col":
            aggs.append(q.count(names[int(rng.integers(0, len(names)))], f"a{j}"))
        elif op in ("min", "max") and rng.random() < 0.3:
            aggs.append(getattr(q, op)(names[int(rng.integers(0, len(names)))], f"a{j}"))
        elif op == "sum" and "b" in cols and rng.random() < 0.1:
            aggs.append(q.sum("b", f"a{j}"))
        else:
            aggs.append(getattr(q, op)(_expression(rng, ints), f"a{j}"))
    having = []
    if group and rng.random() < 0.2:
        a = aggs[int(rng.integers(0, len(aggs)))]
        having.append(q.col(a.alias).gt(int(rng.choice([0, 1, 2, -(1 << 62), 1 << 62]))))
    order = [("-" if rng.random() < 0.3 else "") + g for g in group]
    if group and rng.random() < 0.3:
        order.insert(0, ("-" if rng.random() < 0.5 else "") + aggs[0].alias)
    limit = int(rng.integers(0, 4)) if group and rng.random() < 0.2 else None
    return q.Query(where=where, group_by=group, select=aggs, having=having, order_by=order,
                   limit=limit)


# ----------------------------------------------------------------------------- judging
def _norm(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (datetime.date, np.datetime64)):
        return np.datetime64(v, "us")
    return v


def _same(a: Any, b: Any) -> bool:
    a, b = _norm(a), _norm(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0) or (
            math.isnan(float(a)) and math.isnan(float(b)))
    return bool(a == b)


def duckdb_rows(con: Any, query: q.Query) -> list[tuple[Any, ...]] | Exception:
    try:
        return con.execute(query.sql("t")).fetchall()
    except Exception as exc:  # DuckDB refuses: its exception is the expected outcome
        return exc


def agree(got: list[tuple[Any, ...]] | Exception, want: list[tuple[Any, ...]] | Exception
          ) -> str | None:
    """None where the engine agrees with DuckDB, else what differs."""
    import duckdb

    if isinstance(want, Exception):
        if isinstance(want, duckdb.OutOfRangeException):
            return None if isinstance(got, indexzoo.OutOfRange) else \
                f"DuckDB raised out of range ({want}); the engine gave {got!r}"
        return None if isinstance(got, indexzoo.IndexZooError) else \
            f"DuckDB refused ({type(want).__name__}: {str(want)[:120]}); the engine gave {got!r}"
    if isinstance(got, Exception):
        return f"the engine raised {type(got).__name__}: {got}; DuckDB answered {want}"
    if len(got) != len(want):
        return f"{len(got)} rows, DuckDB {len(want)}: {got[:5]} vs {want[:5]}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if len(g) != len(w) or not all(_same(x, y) for x, y in zip(g, w, strict=True)):
            return f"row {i}: {g} vs DuckDB's {w}"
    return None


def outcome(want: list[tuple[Any, ...]] | Exception) -> str:
    """What DuckDB did: ``out of range``, ``refused``, ``empty`` or ``rows``."""
    import duckdb

    if isinstance(want, duckdb.OutOfRangeException):
        return "out of range"
    if isinstance(want, Exception):
        return "refused"
    return "rows" if want else "empty"


def run_case(seed: int, engines: list[str], device: str, queries: int = 4,
             outcomes: dict[str, int] | None = None) -> list[str]:
    """Every disagreement of ``engines`` on ``device`` with DuckDB over one seeded table
    (in one seeded form) and ``queries`` seeded queries (``outcomes`` counts what DuckDB
    did)."""
    import duckdb

    rng = np.random.default_rng(seed)
    cols = draw_table(rng)
    form = FORMS[seed % len(FORMS)]
    table = as_form(cols, form)
    con = duckdb.connect()
    con.register("t", table if form != "dict" else as_arrow(cols))
    problems = []
    specs = [draw_query(rng, cols) for _ in range(queries)]
    for spec in specs:
        want = duckdb_rows(con, spec)
        if outcomes is not None:
            outcomes[outcome(want)] = outcomes.get(outcome(want), 0) + 1
        for name in engines:
            engine = indexzoo.query_engine(name, device=device)
            try:
                got: Any = engine.run(table, spec).rows()
            except indexzoo.IndexZooError as exc:
                got = exc
            msg = agree(got, want)
            if msg:
                problems.append(f"seed {seed} ({form}, {len(next(iter(cols.values())).values)} "
                                f"rows) {name} on {device}: {spec.sql('t')}: {msg}")
    return problems
