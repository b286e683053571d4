"""Query engines as plugins: :class:`QueryEngine` (``prepare`` a view of a table, ``run``
queries on it, ``sql`` for SQL text), :class:`View`, :class:`EngineSpec`, and the small
helpers engines share to read a plan (:func:`terms_array`, :func:`intervals_arrays`,
:func:`floor_bytes`)."""

from __future__ import annotations

import abc
import builtins
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, IndexZooError, InvalidInput, Unsupported
from .expr import Expr, Query, col
from .plan import Plan, check_rows, lower_values, plan
from .result import Groups, QueryResult, finish
from .table import Table, unknown_columns

__all__ = ["EngineError", "EngineSpec", "QueryEngine", "View", "floor_bytes",
           "intervals_arrays", "terms_array"]


class EngineError(IndexZooError, RuntimeError):
    """An engine failed on a query it should have answered (a bug in the engine): the
    message names the engine and the query, the cause is chained."""


class View:
    """An engine's prepared form of a table for a set of attributes: ``scan`` (columns it can
    filter on), ``group`` (columns it can group by), ``values`` (the plan values it can
    aggregate, :attr:`Plan.values`). ``None`` means any. Subclasses hold the engine's
    structures."""

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
        """Raise Unsupported naming every attribute ``p`` needs that the view lacks (a plan
        that passed once is not looked at again: a view's plans are kept per query)."""
        passed: dict[int, Plan] = self.__dict__.setdefault("_passed", {})
        if passed.get(id(p)) is p:
            return
        missing = []
        if self.scan is not None:
            missing += [f"{c} (filter)" for c in p.filters if c not in self.scan]
        if self.group is not None:
            missing += [f"{c} (group by)" for c in p.group_by if c not in self.group]
        if self.values is not None:
            lacking = {i for i, e in enumerate(p.values) if e not in self.values}
            for o in p.outputs if lacking else ():
                uses = {o.nn, o.extreme, *(j for j, _ in o.sum)}
                text = f"{o.expr.sql() if o.expr is not None else '*'} (aggregate)"
                if lacking & uses and text not in missing:
                    missing.append(text)
        if missing:
            raise Unsupported(f"view {self.name or '(unnamed)'} lacks "
                              f"{', '.join(missing)}; prepare a view with them")
        passed[id(p)] = p

    def footprint_bytes(self) -> int:
        return 0


class QueryEngine(abc.ABC):
    """A query engine: ``prepare`` a view of a table once, ``run`` queries on it."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]

    def __init__(self, params: BaseModel | Mapping[str, Any] | None = None, *,
                 device: str = "auto", **kwargs: Any):
        from ..devices import resolve_device

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
        exprs: list[Expr] = [col(v) if isinstance(v, str) else v for v in (values or [])]
        unknown = [c for c in [*sc, *gr, *(c for e in exprs for c in e.columns())]
                   if c not in t.columns]
        if unknown:
            raise unknown_columns(unknown, t.columns)
        va: list[Expr] = lower_values(t, exprs)
        for q in queries:
            p = plan(t, q)
            sc += [c for c in p.filters if c not in sc]
            gr += [c for c in p.group_by if c not in gr]
            va += [e for e in p.values if e not in va]
        with self._guard(None):
            return self._prepare(t, sc, gr, va, list(queries), name)

    @contextlib.contextmanager
    def _guard(self, query: Query | None) -> Iterator[None]:
        """Errors of the engine's own making as :class:`EngineError` (a bug, reported in one
        line with the cause chained), never a bare ``IndexError`` or numba error."""
        try:
            yield
        except IndexZooError:
            raise
        except (ArithmeticError, LookupError, TypeError, ValueError, AssertionError) as exc:
            what = "preparing a view" if query is None else f"on {query.sql()}"
            raise EngineError(f"engine {self.name!r} failed {what}: {type(exc).__name__}: "
                              f"{(str(exc).splitlines() or [''])[0][:200]}") from exc

    def run(self, source: Any, query: Query) -> QueryResult:
        """Answer ``query`` over ``source``: a view from :meth:`prepare` (reused), or a table
        (a view for this query alone is prepared first)."""
        view = source if isinstance(source, View) else self.prepare(source, [query])
        p = view.plan(query)
        view.check(p)
        if query.limit == 0:  # DuckDB answers LIMIT 0 without evaluating anything
            empty = [np.zeros(0, dtype=np.int64)] * len(p.group_by)
            none: list[Any] = [None] * len(p.values)
            return finish(view.table, p, Groups(empty, np.zeros(0, dtype=np.int64), none, none,
                                                none))
        check_rows(view.table, p)
        with self._guard(query):
            groups = self._execute(view, p)
        return finish(view.table, p, groups)

    def sql(self, text: str, **tables: Any) -> QueryResult:
        """Answer the SQL ``text`` (:func:`~indexzoo.query.parse`'s subset) over the table
        its FROM names, given by keyword: ``engine.sql("SELECT ... FROM t", t=table)``; a
        prepared view may stand for the table."""
        from .sql import parse_with_table

        query, name = parse_with_table(text)
        if name not in tables:
            given = ", ".join(tables) or "none"
            raise InvalidInput(f"the query reads table {name!r}; pass it as {name}=... "
                               f"(tables given: {given})")
        return self.run(tables[name], query)

    @abc.abstractmethod
    def _prepare(self, table: Table, scan: list[str], group: list[str], values: list[Expr],
                 queries: list[Query], name: str) -> View: ...

    @abc.abstractmethod
    def _execute(self, view: View, p: Plan) -> Groups: ...


def floor_bytes(table: Table, query: Query) -> int:
    """The bandwidth floor of a query: one read of every column it needs."""
    return int(builtins.sum(table.column(c).nbytes for c in query.columns()))


def terms_array(e: Expr, columns: Sequence[str]) -> np.ndarray:
    """Plan value ``e`` as an (n_terms, 3) int64 array: coefficient, index of ``a`` and of
    ``b`` in ``columns`` (-1: none), for kernels."""
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


class EngineSpec(BaseModel):
    """``{"engine": NAME, "params": {...}, "device": "cpu"|"cuda"|"auto"}``: a query engine
    by configuration (:func:`indexzoo.query_engine`)."""

    model_config = ConfigDict(extra="forbid")
    engine: str
    params: dict[str, Any] = {}
    device: str = "auto"
