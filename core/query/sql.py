"""SQL text in: :func:`parse` reads one SELECT over one table into the :class:`Query` the
builder makes, through sqlglot (DuckDB's dialect; the ``sql`` extra: ``pip install 'sqlglot>=25'``).

The subset the engines run:

* ``SELECT`` GROUP BY columns and aggregates, each with or without ``AS alias``:
  ``sum``, ``avg``, ``min``, ``max`` of expressions of columns and integer literals with
  ``+ - *`` and parentheses, ``count(*)`` and ``count(expr)``;
* ``FROM`` one table (an alias is allowed, and columns qualified by it);
* ``WHERE`` an AND of comparisons of a column with literals: ``= <> < <= > >=``, ``[NOT]
  BETWEEN``, ``[NOT] IN (...)``, ``IS [NOT] NULL``, and ORs of those on one column;
  literals are integers, decimals, text, ``TRUE``/``FALSE``, ``NULL``, ``DATE '...'`` and
  ``TIMESTAMP '...'``;
* ``GROUP BY`` columns (or positions of the select list), ``HAVING`` an AND of comparisons
  of aggregates (or their aliases) with literals, ``ORDER BY`` outputs, aggregates or
  positions, ``ASC``/``DESC`` (NULLs last, DuckDB's default), ``LIMIT n``.

Anything else (joins, subqueries, DISTINCT, OFFSET, window functions, CASE, division,
functions, comparisons between columns, ...) is refused with :class:`~indexzoo.Unsupported`
in one line naming the construct. Identifiers are case-sensitive, as written.
"""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np

from ..errors import InvalidInput, MissingDependency, Unsupported
from .expr import Agg, Expr, Filter, Query, col, lit

__all__ = ["parse", "parse_with_table"]

_ALLOWED = {"expressions", "from", "from_", "where", "group", "having", "order", "limit"}
_NAMES = {"distinct": "DISTINCT", "joins": "JOIN", "with": "WITH", "with_": "WITH",
          "offset": "OFFSET", "qualify": "QUALIFY", "windows": "WINDOW", "laterals": "LATERAL",
          "sample": "SAMPLE", "pivots": "PIVOT", "into": "INTO", "kind": "SELECT kind",
          "hint": "a hint", "locks": "FOR UPDATE", "prewhere": "PREWHERE",
          "connect": "CONNECT BY", "match": "MATCH_RECOGNIZE", "settings": "SETTINGS",
          "format": "FORMAT", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY",
          "sort": "SORT BY", "options": "OPTIONS", "operation_modifiers": "a modifier"}


def _sqlglot() -> Any:
    try:
        import sqlglot
    except ImportError:
        raise MissingDependency("sqlglot", "sql", "SQL text") from None
    return sqlglot


def _refuse(what: str, instead: str = "") -> Unsupported:
    return Unsupported(f"SQL: {what} is not supported" + (f"; {instead}" if instead else ""))


def parse(text: str) -> Query:
    """The :class:`Query` of the SQL ``text`` (see the module docstring for the subset)."""
    return parse_with_table(text)[0]


def parse_with_table(text: str) -> tuple[Query, str]:
    """The query of ``text`` and the name of the table its FROM reads."""
    sqlglot = _sqlglot()
    from sqlglot import exp

    if not isinstance(text, str):
        raise InvalidInput(f"SQL text is a string, got {type(text).__name__}")
    try:
        trees = sqlglot.parse(text, read="duckdb")
    except sqlglot.errors.SqlglotError as e:
        raise InvalidInput(f"SQL: cannot parse: {str(e).splitlines()[0]}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise Unsupported(f"SQL: one statement at a time, got {len(trees)}")
    tree = trees[0]
    if not isinstance(tree, exp.Select):
        raise _refuse(type(tree).__name__.upper(), "only SELECT is")
    return _Reader(exp).select(tree)


class _Reader:
    def __init__(self, exp: Any):
        self.exp = exp
        self.aliases: set[str] = set()
        self.table = ""

    # -- the statement
    def select(self, s: Any) -> tuple[Query, str]:
        exp = self.exp
        for key, v in s.args.items():
            if v and key not in _ALLOWED:
                raise _refuse(_NAMES.get(key, key.upper()))
        src = s.args.get("from") or s.args.get("from_")
        if src is None:
            raise _refuse("a SELECT without FROM")
        t = src.this
        if not isinstance(t, exp.Table) or t.args.get("db") or t.args.get("catalog"):
            raise _refuse(f"FROM {t.sql('duckdb')}", "FROM one table by name is")
        self.table = t.name
        self.aliases = {t.name} | ({t.alias} if t.alias else set())
        group = [self.group_column(g, s.expressions) for g in
                 (s.args["group"].expressions if s.args.get("group") else [])]
        aggs: list[Agg] = []
        output: list[str] = []
        for item in s.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Column):
                name = self.column(node)
                if name not in group:
                    raise InvalidInput(f"SQL: column {name!r} must appear in GROUP BY or in an "
                                       f"aggregate")
                if alias and alias != name:
                    raise _refuse(f"renaming a GROUP BY column ({name} AS {alias})")
                output.append(name)
                continue
            agg = self.aggregate(node, alias)
            aggs.append(agg)
            output.append(agg.alias)
        where = self.conjuncts(s.args["where"].this) if s.args.get("where") else []
        filters = [self.filter(c) for c in where]
        having = [self.having(c, aggs) for c in
                  (self.conjuncts(s.args["having"].this) if s.args.get("having") else [])]
        order = [self.order(o, aggs, output) for o in
                 (s.args["order"].expressions if s.args.get("order") else [])]
        limit = None
        if s.args.get("limit"):
            n = s.args["limit"].expression
            if not (isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit()):
                raise _refuse(f"LIMIT {n.sql('duckdb')}", "LIMIT takes an integer")
            limit = int(n.this)
        default = [*group, *(a.alias for a in aggs if a.alias in output)]
        hidden = [a.alias for a in aggs if a.alias not in output]
        out = None if output == default and not hidden else tuple(output)
        return Query(where=filters, group_by=group, select=aggs, order_by=order, limit=limit,
                     having=having, output=out), self.table

    def position(self, node: Any, clause: str, n: int) -> int | None:
        """The 0-based select-list item a positional ``GROUP BY 2`` / ``ORDER BY 2`` names."""
        exp = self.exp
        if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
            return None
        k = int(node.this)
        if not 1 <= k <= n:
            raise InvalidInput(f"SQL: {clause} {k}: the select list has {n} items")
        return k - 1

    def group_column(self, g: Any, items: list[Any]) -> str:
        exp = self.exp
        k = self.position(g, "GROUP BY", len(items))
        if k is not None:
            g = items[k].this if isinstance(items[k], exp.Alias) else items[k]
        if not isinstance(g, exp.Column):
            raise _refuse(f"GROUP BY {g.sql('duckdb')}", "GROUP BY takes columns")
        return self.column(g)

    # -- pieces
    def column(self, c: Any) -> str:
        if c.table and c.table not in self.aliases:
            raise InvalidInput(f"SQL: {c.sql('duckdb')} names table {c.table!r}; the query "
                               f"reads {self.table!r}")
        return str(c.name)

    def conjuncts(self, node: Any) -> list[Any]:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.conjuncts(node.this)
        if isinstance(node, exp.And):
            return self.conjuncts(node.this) + self.conjuncts(node.expression)
        return [node]

    def expr(self, node: Any) -> Expr:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.expr(node.this)
        if isinstance(node, exp.Column):
            return col(self.column(node))
        if isinstance(node, exp.Literal) and not node.is_string:
            v = self.number(node)
            if not isinstance(v, int):
                raise _refuse(f"the non-integer literal {node.sql('duckdb')} in an expression",
                              "expressions take integer literals")
            return lit(v)
        if isinstance(node, exp.Neg):
            return -self.expr(node.this)
        ops = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
        for cls, op in ops.items():
            if isinstance(node, cls):
                a, b = self.expr(node.this), self.expr(node.expression)
                return a + b if op == "+" else a - b if op == "-" else a * b
        raise _refuse(f"{self.construct(node)} in an expression",
                      "expressions are +, - and * of columns and integer literals")

    def construct(self, node: Any) -> str:
        exp = self.exp
        names = {exp.Div: "division (/)", exp.IntDiv: "integer division (//)",
                 exp.Mod: "modulo (%)", exp.Case: "CASE", exp.Cast: "CAST",
                 exp.Subquery: "a subquery", exp.Star: "*", exp.Window: "a window function",
                 exp.Null: "NULL", exp.Boolean: "a boolean"}
        for cls, name in names.items():
            if isinstance(node, cls):
                return name
        if isinstance(node, exp.Func):
            return f"the function {node.sql('duckdb').split('(')[0]}()"
        return f"{node.sql('duckdb')}"

    def number(self, node: Any) -> int | decimal.Decimal:
        text = node.this
        try:
            return int(text)
        except ValueError:
            try:
                return decimal.Decimal(text)
            except decimal.InvalidOperation:
                raise InvalidInput(f"SQL: {text!r} is not a number") from None

    def literal(self, node: Any) -> Any:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.literal(node.this)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            return str(node.this) if node.is_string else self.number(node)
        if isinstance(node, exp.Neg):
            v = self.literal(node.this)
            if isinstance(v, (int, decimal.Decimal)):
                return -v
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) \
                and node.this.is_string:
            kind = node.to.this
            try:
                if kind == exp.DataType.Type.DATE:
                    return np.datetime64(node.this.this, "D")
                if kind in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATETIME):
                    return np.datetime64(node.this.this.replace(" ", "T"))
            except ValueError:
                raise InvalidInput(f"SQL: {node.sql('duckdb')} is not a valid date or "
                                   f"time") from None
        raise _refuse(f"{self.construct(node)} where a literal is expected")

    def filter(self, node: Any) -> Filter:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.filter(node.this)
        if isinstance(node, exp.Or):
            parts = [self.filter(node.this), self.filter(node.expression)]
            if parts[0].column != parts[1].column:
                raise _refuse(f"OR across columns ({node.sql('duckdb')})")
            return parts[0] | parts[1]
        negated = isinstance(node, exp.Not)
        inner = node.this if negated else node
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Between):
            f = self.subject(inner.this).between(self.literal(inner.args["low"]),
                                                 self.literal(inner.args["high"]))
            return Filter(f.column, "not_between", f.values) if negated else f
        if isinstance(inner, exp.In):
            if inner.args.get("query") or inner.args.get("unnest"):
                raise _refuse("IN with a subquery")
            f = self.subject(inner.this).isin([self.literal(v) for v in inner.expressions])
            return Filter(f.column, "not_in", f.values) if negated else f
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            s = self.subject(inner.this)
            return s.is_not_null() if negated else s.is_null()
        if negated:
            raise _refuse(f"NOT {inner.sql('duckdb')}", "NOT BETWEEN, NOT IN and IS NOT NULL are")
        ops = {exp.EQ: ("eq", "eq"), exp.NEQ: ("ne", "ne"), exp.LT: ("lt", "gt"),
               exp.LTE: ("le", "ge"), exp.GT: ("gt", "lt"), exp.GTE: ("ge", "le")}
        for cls, (op, flipped) in ops.items():
            if isinstance(node, cls):
                left, right = node.this, node.expression
                if isinstance(left, exp.Column) and not isinstance(right, exp.Column):
                    return getattr(self.subject(left), op)(self.literal(right))
                if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
                    return getattr(self.subject(right), flipped)(self.literal(left))
                raise _refuse(f"the comparison {node.sql('duckdb')}",
                              "filters compare a column with literals")
        raise _refuse(f"{self.construct(node)} in WHERE")

    def subject(self, node: Any) -> Expr:
        if not isinstance(node, self.exp.Column):
            raise _refuse(f"a filter on {node.sql('duckdb')}", "filters are on columns")
        return col(self.column(node))

    def aggregate(self, node: Any, alias: str | None) -> Agg:
        exp = self.exp
        kinds = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
                 exp.Count: "count"}
        for cls, op in kinds.items():
            if isinstance(node, cls):
                arg = node.this
                if isinstance(arg, exp.Distinct):
                    raise _refuse(f"{op.upper()}(DISTINCT ...)")
                if node.expressions:
                    raise _refuse(f"{op.upper()} of several arguments")
                if op == "count" and (arg is None or isinstance(arg, exp.Star)):
                    return Agg("count", None, alias or "count_star()")
                name = alias or f"{op}({arg.sql('duckdb')})"  # DuckDB's name of the column
                if isinstance(arg, exp.Star):
                    raise _refuse(f"{op.upper()}(*)")
                return Agg(op, self.expr(arg), name)  # type: ignore[arg-type]
        raise _refuse(f"{self.construct(node)} in the select list",
                      "it takes GROUP BY columns and aggregates")

    def agg_ref(self, node: Any, aggs: list[Agg]) -> str:
        """The alias of the aggregate ``node`` names (an alias, or an aggregate of the select
        list; another aggregate is added, computed but not shown)."""
        exp = self.exp
        if isinstance(node, exp.Column) and not node.table and node.name in \
                {a.alias for a in aggs}:
            return str(node.name)
        found = self.aggregate(node, None)
        for a in aggs:
            if (a.op, a.expr) == (found.op, found.expr):
                return a.alias
        aggs.append(found)
        return found.alias

    def having(self, node: Any, aggs: list[Agg]) -> Filter:
        exp = self.exp
        node = node.this if isinstance(node, exp.Paren) else node
        negated = isinstance(node, exp.Not)
        inner = node.this if negated else node
        if isinstance(inner, exp.Between):
            name = self.agg_ref(inner.this, aggs)
            return Filter(name, "not_between" if negated else "between",
                          (self.literal(inner.args["low"]), self.literal(inner.args["high"])))
        if isinstance(inner, exp.In):
            name = self.agg_ref(inner.this, aggs)
            return Filter(name, "not_in" if negated else "in",
                          tuple(self.literal(v) for v in inner.expressions))
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return Filter(self.agg_ref(inner.this, aggs),
                          "is_not_null" if negated else "is_null", ())
        ops = {exp.EQ: ("in", "in"), exp.NEQ: ("not_in", "not_in"), exp.LT: ("lt", "gt"),
               exp.LTE: ("le", "ge"), exp.GT: ("gt", "lt"), exp.GTE: ("ge", "le")}
        for cls, (op, flipped) in ops.items():
            if isinstance(node, cls):
                left, right = node.this, node.expression
                literal_right = not isinstance(right, (exp.Column, exp.AggFunc))
                if literal_right:
                    return Filter(self.agg_ref(left, aggs), op, (self.literal(right),))
                return Filter(self.agg_ref(right, aggs), flipped, (self.literal(left),))
        raise _refuse(f"{self.construct(node)} in HAVING")

    def order(self, o: Any, aggs: list[Agg], output: list[str]) -> str:
        exp = self.exp
        if o.args.get("nulls_first"):
            raise _refuse("NULLS FIRST", "NULLs sort last, as DuckDB sorts them by default")
        node = o.this
        k = self.position(node, "ORDER BY", len(output))
        if k is not None:
            name = output[k]
        elif isinstance(node, exp.Column):
            name = str(node.name)
        else:
            name = self.agg_ref(node, aggs)
        return f"-{name}" if o.args.get("desc") else name
