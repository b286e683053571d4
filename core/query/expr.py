"""What a query says: expressions over columns, filters on columns, aggregates, and the query
itself, built in Python (:func:`col`, :func:`sum`, :class:`Query`) or parsed from SQL
(:mod:`.sql`), and written back as SQL (DuckDB's dialect, every identifier quoted).

An :class:`Expr` is a tree: columns, integer literals, ``-x`` and ``+ - *``, kept as written,
since where a value overflows depends on the order DuckDB evaluates it in (``(a - b) * c``
need not overflow where ``a * c`` does). Engines read its polynomial form
(:attr:`Expr.terms`: a sum of integer multiples of products of at most two columns).
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import InvalidInput, Unsupported

__all__ = ["Agg", "AggOp", "Expr", "Filter", "Query", "avg", "col", "count", "lit", "max",
           "min", "quote", "sql_literal", "sum"]

AggOp = Literal["sum", "count", "min", "max", "avg"]

#: Filter kinds: a comparison with literals, or a test for NULL.
FILTER_KINDS = ("between", "not_between", "in", "not_in", "lt", "le", "gt", "ge", "is_null",
                "is_not_null", "or")

Term = tuple[int, "str | None", "str | None"]


class _KeptHash:
    """The hash of the frozen dataclasses a plan is looked up by (on every run): the hash of
    the fields, computed once and kept. A subclass names it in its body (``__hash__ =
    _KeptHash.__hash__``; a frozen dataclass replaces an inherited one). Pickles keep the
    fields alone: a kept hash is this process's alone, and so is what else it keeps
    (``_outputs``)."""

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            fields = dataclasses.fields(self)  # type: ignore[arg-type]  # (a dataclass's base)
            h = hash(tuple(getattr(self, f.name) for f in fields))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Expr(_KeptHash):
    """An integer expression: ``op`` is ``col`` (``args = (name,)``), ``lit`` (``(value,)``),
    ``neg`` (``(x,)``) or one of ``+ - *`` (``(x, y)``)."""

    op: str
    args: tuple[Any, ...]

    __hash__ = _KeptHash.__hash__  # kept: a plan is looked up by its query on every run

    # -- building
    def __add__(self, other: Expr | int) -> Expr:
        return Expr("+", (self, _expr(other)))

    def __radd__(self, other: Expr | int) -> Expr:
        return Expr("+", (_expr(other), self))

    def __sub__(self, other: Expr | int) -> Expr:
        return Expr("-", (self, _expr(other)))

    def __rsub__(self, other: Expr | int) -> Expr:
        return Expr("-", (_expr(other), self))

    def __mul__(self, other: Expr | int) -> Expr:
        return Expr("*", (self, _expr(other)))

    def __rmul__(self, other: Expr | int) -> Expr:
        return Expr("*", (_expr(other), self))

    def __neg__(self) -> Expr:
        if self.op == "lit":
            return lit(-self.args[0])
        return Expr("neg", (self,))

    # -- reading
    def columns(self) -> tuple[str, ...]:
        """The columns the expression reads, in order of first use."""
        if self.op == "col":
            return (self.args[0],)
        if self.op == "lit":
            return ()
        return tuple(dict.fromkeys(c for a in self.args for c in a.columns()))

    def column(self) -> str | None:
        """The column name when the expression is one plain column, else None."""
        return self.args[0] if self.op == "col" else None

    def poly(self) -> dict[tuple[str, ...], int]:
        """The polynomial: sorted column names of a monomial -> its integer coefficient."""
        return dict(_poly(self))

    @property
    def degree(self) -> int:
        return builtins.max((len(k) for k in self.poly()), default=0)

    @property
    def terms(self) -> tuple[Term, ...]:
        """The polynomial as ``(coef, a, b)``, ``a``/``b`` column names or None (1), for
        kernels: products of two columns at most."""
        out: list[Term] = []
        for names, c in self.poly().items():
            if len(names) > 2:
                raise Unsupported(f"{self.sql()}: kernels take products of two columns at most")
            padded = (*names, None, None)
            out.append((c, padded[0], padded[1]))
        return tuple(out)

    def sql(self) -> str:
        """The expression in SQL, its identifiers quoted."""
        text = self._sql()
        return text[1:-1] if self.op in ("+", "-", "*") else text

    def _sql(self) -> str:
        if self.op == "col":
            return quote(self.args[0])
        if self.op == "lit":
            v = self.args[0]
            return str(v) if v >= 0 else f"({v})"
        if self.op == "neg":
            return f"(-{self.args[0]._sql()})"
        return f"({self.args[0]._sql()} {self.op} {self.args[1]._sql()})"

    def __str__(self) -> str:
        return self.sql()

    def __repr__(self) -> str:
        return f"Expr({self.sql()})"

    # -- filters on a column
    def between(self, lo: Any, hi: Any) -> Filter:
        return Filter(self._name(), "between", (lo, hi))

    def not_between(self, lo: Any, hi: Any) -> Filter:
        return Filter(self._name(), "not_between", (lo, hi))

    def eq(self, value: Any) -> Filter:
        return Filter(self._name(), "in", (value,))

    def ne(self, value: Any) -> Filter:
        return Filter(self._name(), "not_in", (value,))

    def isin(self, values: Iterable[Any]) -> Filter:
        return Filter(self._name(), "in", tuple(values))

    def not_in(self, values: Iterable[Any]) -> Filter:
        return Filter(self._name(), "not_in", tuple(values))

    def lt(self, value: Any) -> Filter:
        return Filter(self._name(), "lt", (value,))

    def le(self, value: Any) -> Filter:
        return Filter(self._name(), "le", (value,))

    def gt(self, value: Any) -> Filter:
        return Filter(self._name(), "gt", (value,))

    def ge(self, value: Any) -> Filter:
        return Filter(self._name(), "ge", (value,))

    def is_null(self) -> Filter:
        return Filter(self._name(), "is_null", ())

    def is_not_null(self) -> Filter:
        return Filter(self._name(), "is_not_null", ())

    def _name(self) -> str:
        name = self.column()
        if name is None:
            raise Unsupported(f"filters are on columns, not on expressions ({self.sql()})")
        return name


def _poly(e: Expr) -> dict[tuple[str, ...], int]:
    if e.op == "col":
        return {(e.args[0],): 1}
    if e.op == "lit":
        return {(): e.args[0]} if e.args[0] else {}
    if e.op == "neg":
        return {k: -v for k, v in _poly(e.args[0]).items()}
    a, b = _poly(e.args[0]), _poly(e.args[1])
    out: dict[tuple[str, ...], int] = {}
    if e.op in ("+", "-"):
        sign = 1 if e.op == "+" else -1
        for k, v in a.items():
            out[k] = out.get(k, 0) + v
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
    else:
        for ka, va in a.items():
            for kb, vb in b.items():
                k = tuple(sorted(ka + kb))
                out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in sorted(out.items(), key=lambda kv: (len(kv[0]), kv[0])) if v}


def _expr(x: Expr | int) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return lit(int(x))
    raise InvalidInput(f"expressions combine columns and integers, got {x!r}")


def col(name: str) -> Expr:
    """The column ``name`` as an expression (and the subject of a filter)."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"a column name is a non-empty string, got {name!r}")
    return Expr("col", (name,))


def lit(value: int) -> Expr:
    """The integer literal ``value``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise InvalidInput(f"an expression's literals are integers, got {value!r}")
    return Expr("lit", (int(value),))


def polynomial(terms: Sequence[Term]) -> Expr:
    """The expression ``sum(coef * a * b)`` of ``terms`` (how engines receive a value)."""
    out: Expr | None = None
    for c, a, b in terms:
        factors = [col(n) for n in (a, b) if n is not None]
        t = factors[0] if factors and c == 1 else lit(c) * factors[0] if factors else lit(c)
        for f in factors[1:]:
            t = t * f
        out = t if out is None else out + t
    return out if out is not None else lit(0)


def sql_literal(x: Any) -> str:
    """A filter's literal in SQL."""
    if x is None:
        return "NULL"
    if isinstance(x, (bool, np.bool_)):
        return "TRUE" if x else "FALSE"
    if isinstance(x, str):
        return "'" + x.replace("'", "''") + "'"
    if isinstance(x, (bytes, np.bytes_)):
        return "'" + "".join(f"\\x{b:02X}" for b in x) + "'::BLOB"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return repr(f) if np.isfinite(f) else f"'{f}'::DOUBLE"
    if isinstance(x, np.datetime64):
        unit = np.datetime_data(x.dtype)[0]
        text = str(x)
        return f"DATE '{text}'" if unit in ("D", "W", "M", "Y") else f"TIMESTAMP '{text}'"
    if isinstance(x, datetime.datetime):
        return f"TIMESTAMP '{x.isoformat(sep=' ')}'"
    if isinstance(x, datetime.date):
        return f"DATE '{x.isoformat()}'"
    return str(x)


@dataclass(frozen=True)
class Filter:
    """A predicate on one column: ``kind`` is one of :data:`FILTER_KINDS`; ``values`` are
    literals in the column's own values (text for text columns; None is SQL's NULL), or for
    ``or`` the filters on the same column any of which a row passes (``f | g``)."""

    column: str
    kind: str
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if self.kind not in FILTER_KINDS:
            raise InvalidInput(f"unknown filter kind {self.kind!r}; kinds: "
                               f"{', '.join(FILTER_KINDS)}")

    def __or__(self, other: Filter) -> Filter:
        if not isinstance(other, Filter) or other.column != self.column:
            raise Unsupported(f"OR joins filters on one column; got {self.sql()} OR "
                              f"{other.sql() if isinstance(other, Filter) else other!r}")
        parts = [*(self.values if self.kind == "or" else (self,)),
                 *(other.values if other.kind == "or" else (other,))]
        return Filter(self.column, "or", tuple(parts))

    def sql(self, subject: str | None = None) -> str:
        c = subject if subject is not None else quote(self.column)
        if self.kind == "or":
            return "(" + " OR ".join(f.sql(subject) for f in self.values) + ")"
        v = [sql_literal(x) for x in self.values]
        if self.kind in ("between", "not_between"):
            neg = "NOT " if self.kind == "not_between" else ""
            return f"{c} {neg}BETWEEN {v[0]} AND {v[1]}"
        if self.kind in ("in", "not_in"):
            if len(v) == 1:
                return f"{c} {'=' if self.kind == 'in' else '<>'} {v[0]}"
            return f"{c} {'NOT ' if self.kind == 'not_in' else ''}IN ({', '.join(v)})"
        if self.kind == "is_null":
            return f"{c} IS NULL"
        if self.kind == "is_not_null":
            return f"{c} IS NOT NULL"
        op = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}[self.kind]
        return f"{c} {op} {v[0]}"


@dataclass(frozen=True)
class Agg:
    """An aggregate: ``op`` of ``expr`` (None for COUNT(*)), named ``alias``."""

    op: AggOp
    expr: Expr | None
    alias: str

    def call(self) -> str:
        """The aggregate in SQL, without its alias."""
        return f"{self.op}({'*' if self.expr is None else self.expr.sql()})"

    def sql(self) -> str:
        return f"{self.call()} AS {quote(self.alias)}"


def _agg(op: AggOp, expr: Expr | str | None, alias: str | None) -> Agg:
    e = col(expr) if isinstance(expr, str) else expr
    if op not in ("count",) and e is None:
        raise InvalidInput(f"{op} needs an expression")
    if e is not None and not isinstance(e, Expr):
        raise InvalidInput(f"{op} takes a column name or an expression, got {e!r}")
    if alias is None:
        alias = op if e is None else f"{op}_{e.column() or 'expr'}"
    return Agg(op, e, alias)


def sum(expr: Expr | str, alias: str | None = None) -> Agg:
    """SUM(expr), exact: int64 where every sum fits, Python integers otherwise."""
    return _agg("sum", expr, alias)


def count(expr: Expr | str | None = None, alias: str | None = None) -> Agg:
    """COUNT(*), or COUNT(expr): the rows where ``expr`` is not NULL."""
    return _agg("count", expr, alias)


def min(expr: Expr | str, alias: str | None = None) -> Agg:
    """MIN(expr) of an integer expression, or of a column of any type."""
    return _agg("min", expr, alias)


def max(expr: Expr | str, alias: str | None = None) -> Agg:
    """MAX(expr) of an integer expression, or of a column of any type."""
    return _agg("max", expr, alias)


def avg(expr: Expr | str, alias: str | None = None) -> Agg:
    """AVG(expr): the exact sum divided by the count, correctly rounded to float64."""
    return _agg("avg", expr, alias)


@dataclass(frozen=True)
class Query(_KeptHash):
    """SELECT output... FROM table WHERE AND(where) GROUP BY group_by HAVING AND(having)
    ORDER BY order_by LIMIT limit.

    ``select`` holds the aggregates; ``output`` the names the result shows, in order (None:
    the GROUP BY columns, then every aggregate): an aggregate left out of ``output`` is still
    computed for HAVING and ORDER BY. ``having`` filters name aggregate aliases
    (``col("revenue").gt(10**6)``); ``order_by`` names group columns or aggregate aliases;
    ``"-name"`` sorts descending. NULLs sort last, as in DuckDB."""

    where: Sequence[Filter] = ()
    group_by: Sequence[str] = ()
    select: Sequence[Agg] = ()
    order_by: Sequence[str] = ()
    limit: int | None = None
    having: Sequence[Filter] = ()
    name: str = ""
    output: Sequence[str] | None = None

    def __post_init__(self) -> None:
        for f in ("where", "group_by", "select", "order_by", "having"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        if self.output is not None:
            object.__setattr__(self, "output", tuple(self.output))
        if not self.select and not self.group_by:
            raise InvalidInput("a query selects at least one aggregate or groups by a column")
        if len(self.group_by) > 4:
            raise Unsupported(f"GROUP BY takes up to four columns, got {len(self.group_by)}")
        if len(set(self.group_by)) != len(self.group_by):
            raise InvalidInput(f"GROUP BY names a column twice: {', '.join(self.group_by)}")
        aliases = [a.alias for a in self.select]
        names = list(self.group_by) + aliases
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidInput(f"output names must be distinct; repeated: {', '.join(dup)}")
        if self.output is not None:
            unknown = [o for o in self.output if o not in names]
            if unknown or len(set(self.output)) != len(self.output):
                raise InvalidInput(f"output names {', '.join(self.output)}: each must be a "
                                   f"GROUP BY column or an aggregate, once")
        unknown = [o.lstrip("-") for o in self.order_by if o.lstrip("-") not in names]
        if unknown:
            raise InvalidInput(f"ORDER BY names {', '.join(unknown)}, which the query does not "
                               f"output (it outputs {', '.join(names)})")
        bad = [h.column for h in self.having if h.column not in aliases]
        if bad:
            raise InvalidInput(f"HAVING names {', '.join(bad)}; it filters the aggregates "
                               f"{', '.join(sorted(aliases)) or '(none)'}")
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 0):
            raise InvalidInput(f"LIMIT must be an integer >= 0, got {self.limit!r}")

    __hash__ = _KeptHash.__hash__  # kept: a plan is looked up by its query on every run

    @property
    def outputs(self) -> tuple[str, ...]:
        """The names the result shows, in order."""
        got = self.__dict__.get("_outputs")
        if got is None:
            got = tuple(self.output) if self.output is not None else \
                (*self.group_by, *(a.alias for a in self.select))
            object.__setattr__(self, "_outputs", got)
        return got

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
        """The query as SQL (DuckDB's dialect), every identifier quoted."""
        by_alias = {a.alias: a for a in self.select}
        items = [by_alias[o].sql() if o in by_alias else quote(o) for o in self.outputs]
        text = f"SELECT {', '.join(items)} FROM {quote(table)}"
        if self.where:
            text += " WHERE " + " AND ".join(f.sql() for f in self.where)
        if self.group_by:
            text += " GROUP BY " + ", ".join(map(quote, self.group_by))
        if self.having:
            text += " HAVING " + " AND ".join(h.sql(by_alias[h.column].call())
                                              for h in self.having)
        if self.order_by:
            shown = set(self.outputs)

            def key(o: str) -> str:
                name = o.lstrip("-")
                if name in shown:
                    return quote(name)
                return by_alias[name].call() if name in by_alias else quote(name)

            text += " ORDER BY " + ", ".join(
                f"{key(o)} {'DESC' if o.startswith('-') else 'ASC'}" for o in self.order_by)
        if self.limit is not None:
            text += f" LIMIT {self.limit}"
        return text
