"""Queries over one table: filters, GROUP BY, aggregates, HAVING, ORDER BY and LIMIT,
answered by a query engine chosen by name, the way an index is, exactly as DuckDB answers
them.

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
    >>> q.parse("SELECT year, sum(price * qty) AS revenue, count(*) AS count FROM t "
    ...         "WHERE year BETWEEN 1993 AND 1994 GROUP BY year ORDER BY year") == spec
    True

The pieces, one module each:

* :mod:`.expr`: :func:`col`, integer literals and ``+ - *`` make expressions (trees, kept as
  written); ``.between/.eq/.ne/.isin/.not_in/.lt/.le/.gt/.ge/.is_null/.is_not_null`` make
  filters (``|`` joins filters on one column); :func:`sum`, :func:`avg`, :func:`min`,
  :func:`max`, :func:`count` make aggregates; :class:`Query` holds them.
  :meth:`Query.sql` writes DuckDB's SQL, every identifier quoted.
* :mod:`.sql`: :func:`parse` reads SQL text into the same :class:`Query`
  (``QueryEngine.sql(text, t=table)`` runs it).
* :mod:`.table`: :class:`Table` reads any table the zoo accepts (a dict of arrays, pandas,
  Polars, Arrow) column by column, NULLs included, as order-preserving integer codes.
* :mod:`.sqltypes` and :mod:`.exact`: DuckDB's integer types and the exact value of every
  step of an expression.
* :mod:`.plan`: :func:`plan` lowers a query onto a table: code intervals per filtered
  column, and the int64 values the engines aggregate, derived so that nothing wraps.
* :mod:`.result`: what engines return (:class:`Groups`) and :func:`finish`, which every
  engine shares: exact SUMs, NULLs, AVG, HAVING, ORDER BY, LIMIT, decoding.
* :mod:`.engine`: :class:`QueryEngine` and :class:`View`; engines are plugins (the hook
  ``indexzoo_register_query_engines(register)``); :func:`indexzoo.query_engine` makes one
  by name or spec (:class:`EngineSpec`). The core never imports an engine.
* :mod:`.reference`: the NumPy reference (a convenience; the tests judge every engine by
  DuckDB).

The rules (as DuckDB's; ``docs/plugins/rtcudb.md`` states them for users):

* Values. Integer columns keep their SQL type (``int8`` TINYINT .. ``uint64`` UBIGINT);
  filters compare exactly over the whole int64 and uint64 ranges. ``a + b``, ``a - b``,
  ``a * b`` take DuckDB's result type; a qualifying row where a step leaves its type makes
  the query raise :class:`~indexzoo.OutOfRange`, where DuckDB raises. SUM is exact (int64
  where every sum fits, else Python integers); MIN and MAX exact, in the expression's type;
  AVG the exact sum over the count, correctly rounded. SUM and AVG take integer and
  boolean columns (AVG not boolean); MIN, MAX and COUNT any column.
* NULLs. A comparison never matches NULL (``IS NULL`` does); aggregates skip NULLs;
  ``count(col)`` counts the non-NULL rows; the NULLs of a GROUP BY column form one group;
  an aggregate over no row is NULL, COUNT 0, and a query without GROUP BY answers one row
  even when no row qualifies. A result column holding a NULL is a masked array.
* ORDER BY sorts NULLs last (ascending and descending), ties in the order of the groups'
  codes; an engine whose groups come out in code order skips an ORDER BY on a prefix of the
  GROUP BY columns (RTCUDB's OrderBy elimination).

Prepared views: :meth:`QueryEngine.prepare` builds an engine's view of a table for a set of
attributes (or for the attributes of a list of queries) once; :meth:`QueryEngine.run`
accepts a view and reuses it. A query needing attributes a view lacks raises
:class:`~indexzoo.Unsupported` naming them.
"""

from __future__ import annotations

from .engine import (
    EngineError,
    EngineSpec,
    QueryEngine,
    View,
    floor_bytes,
    intervals_arrays,
    terms_array,
)
from .expr import Agg, Expr, Filter, Query, avg, col, count, lit, max, min, sum
from .plan import Output, Plan, evaluate, plan
from .reference import reference
from .result import Groups, QueryResult, finish
from .sql import parse
from .table import ColumnInfo, Table

__all__ = [
    "Agg",
    "ColumnInfo",
    "EngineError",
    "EngineSpec",
    "Expr",
    "Filter",
    "Groups",
    "Output",
    "Plan",
    "Query",
    "QueryEngine",
    "QueryResult",
    "Table",
    "View",
    "avg",
    "col",
    "count",
    "evaluate",
    "finish",
    "floor_bytes",
    "intervals_arrays",
    "lit",
    "max",
    "min",
    "parse",
    "plan",
    "reference",
    "sum",
    "terms_array",
]
