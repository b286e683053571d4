"""An expression as DuckDB evaluates it: bound to SQL types (:func:`bind`), then rewritten
by the rules of DuckDB's optimizer that change which steps are evaluated, so that a query
raises an out-of-range error exactly where DuckDB does (read off DuckDB 2.0's optimizer and
checked against it by the tests):

* constant folding: a step over literals alone becomes its value, where it stays in its
  type (where it does not, it stays a step, evaluated on every row);
* constant order normalization: a chain of ``+`` (or of ``*``) of one type with two or more
  constants not already in front is rebuilt with the constants first, then folded:
  ``(x + 1) + 1`` is evaluated as ``2 + x``;
* arithmetic simplification: ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1`` and ``1 * x`` are
  ``x``;
* the SUM rewrite, in a query without GROUP BY: ``SUM(x + C)`` (or ``SUM(C + x)``) of a
  SMALLINT, INTEGER or BIGINT addition is ``SUM(x) + C * COUNT(x)``, so the addition is
  never evaluated (:func:`sum_parts`).

The rules run top-down and again until nothing changes, as DuckDB's expression rewriter does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Unsupported
from . import sqltypes
from .expr import Expr, col, lit

__all__ = ["Node", "bind", "rewrite", "sum_parts"]

#: Types whose SUM DuckDB takes without a cast (the SUM rewrite needs the addition directly
#: under the SUM).
NATIVE_SUM = frozenset({"i16", "i32", "i64"})
SMALL = frozenset({"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})


@dataclass(frozen=True)
class Node:
    """A bound step: ``op`` (``col``, ``lit``, ``neg``, ``+``, ``-``, ``*``), ``args`` (the
    column name, the literal's value, or child nodes) and its SQL ``type``."""

    op: str
    args: tuple[Any, ...]
    type: str

    @property
    def foldable(self) -> bool:
        """No column under it."""
        if self.op == "col":
            return False
        if self.op == "lit":
            return True
        return all(a.foldable for a in self.args)

    def columns(self) -> tuple[str, ...]:
        return self.expr().columns()

    def key(self) -> str:
        """The node's text with the type of every step (derived columns are named by it)."""
        if self.op in ("col", "lit"):
            return f"{self.sql()}:{self.type}"
        inner = ",".join(a.key() for a in self.args)
        return f"{self.op}({inner}):{self.type}"

    def expr(self) -> Expr:
        """The node as an expression (its polynomial is the node's; its types are not kept)."""
        if self.op == "col":
            return col(self.args[0])
        if self.op == "lit":
            return lit(self.args[0])
        if self.op == "neg":
            return -self.args[0].expr()
        a, b = self.args[0].expr(), self.args[1].expr()
        return a + b if self.op == "+" else a - b if self.op == "-" else a * b

    def sql(self) -> str:
        """The node in SQL (without its types)."""
        return self.expr().sql()


def bind(e: Expr, column_type: Any) -> Node:
    """``e`` with the SQL type of every step (``column_type(name)`` gives a column's)."""
    if e.op == "col":
        return Node("col", e.args, column_type(e.args[0]))
    if e.op == "lit":
        return Node("lit", e.args, sqltypes.literal_type(e.args[0]))
    if e.op == "neg":
        x = bind(e.args[0], column_type)
        return Node("neg", (x,), x.type)
    a, b = e.args
    if a.op == "lit" and b.op == "lit":
        t = sqltypes.arithmetic(sqltypes.literal_type(a.args[0]),
                                sqltypes.literal_type(b.args[0]))
        return Node(e.op, (Node("lit", a.args, t), Node("lit", b.args, t)), t)
    if a.op == "lit":
        y = bind(b, column_type)
        t = sqltypes.with_literal(y.type, a.args[0])
        return Node(e.op, (Node("lit", a.args, t), y), t)
    if b.op == "lit":
        x = bind(a, column_type)
        t = sqltypes.with_literal(x.type, b.args[0])
        return Node(e.op, (x, Node("lit", b.args, t)), t)
    x, y = bind(a, column_type), bind(b, column_type)
    return Node(e.op, (x, y), sqltypes.arithmetic(x.type, y.type))


def _value(n: Node) -> int | None:
    """The exact value of a foldable node, None where a step leaves its type."""
    if n.op == "lit":
        return n.args[0]
    vals = [_value(a) for a in n.args]
    if any(v is None for v in vals):
        return None
    if n.op == "neg":
        out = -vals[0]  # type: ignore[operator]
    elif n.op == "+":
        out = vals[0] + vals[1]  # type: ignore[operator]
    elif n.op == "-":
        out = vals[0] - vals[1]  # type: ignore[operator]
    else:
        out = vals[0] * vals[1]  # type: ignore[operator]
    return out if sqltypes.fits(out, n.type) else None


def _chain(n: Node, op: str, t: str) -> list[Node]:
    """The leaves of the chain of ``op`` of type ``t`` under ``n`` (n included)."""
    if n.op == op and n.type == t:
        return _chain(n.args[0], op, t) + _chain(n.args[1], op, t)
    return [n]


def _normalize(n: Node) -> Node | None:
    if n.op not in ("+", "*"):
        return None
    leaves = _chain(n, n.op, n.type)
    consts = [i for i, x in enumerate(leaves) if x.foldable]
    if len(consts) <= 1 or consts[-1] == len(consts) - 1:
        return None
    ordered = [leaves[i] for i in consts] + [x for x in leaves if not x.foldable]
    out = ordered[0]
    for x in ordered[1:]:
        out = Node(n.op, (out, x), n.type)
    return out


def _fold(n: Node) -> Node | None:
    if n.op == "lit" or not n.foldable:
        return None
    v = _value(n)
    return None if v is None else Node("lit", (v,), n.type)


def _simplify(n: Node) -> Node | None:
    if n.op not in ("+", "-", "*"):
        return None
    a, b = n.args
    for i, c in ((0, a), (1, b)):
        if c.op != "lit":
            continue
        other = n.args[1 - i]
        if n.op == "+" and c.args[0] == 0:
            return other
        if n.op == "-" and i == 1 and c.args[0] == 0:
            return other
        if n.op == "*" and c.args[0] == 1:
            return other
    return None


_RULES = (_normalize, _fold, _simplify)


def _apply(n: Node, changed: list[bool]) -> Node:
    for rule in _RULES:
        got = rule(n)
        if got is not None:
            changed[0] = True
            return _apply(got, changed)
    if n.op in ("col", "lit"):
        return n
    return Node(n.op, tuple(_apply(a, changed) for a in n.args), n.type)


def rewrite(n: Node) -> Node:
    """``n`` as DuckDB's expression rewriter leaves it."""
    for _ in range(64):
        changed = [False]
        n = _apply(n, changed)
        if not changed[0]:
            return n
    raise Unsupported(f"the expression {n.sql()} does not settle under DuckDB's rewrite rules")


def sum_parts(n: Node) -> tuple[Node, int] | None:
    """``(x, C)`` where DuckDB sums ``n`` as ``SUM(x) + C * COUNT(x)`` (a query without GROUP
    BY), else None."""
    if n.op != "+" or n.type not in NATIVE_SUM:
        return None
    a, b = n.args
    if a.op == "lit" and a.type in SMALL:
        return b, a.args[0]
    if b.op == "lit" and b.type in SMALL:
        return a, b.args[0]
    return None
