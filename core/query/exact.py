"""Exact values of an integer expression as DuckDB evaluates it (:mod:`.rewrite`): bounds
of its values from the columns' ranges (:func:`bounds`), its value on every row
(:func:`evaluate_exact`), and the rows where one of its steps leaves its SQL type, where
DuckDB raises (:func:`explain` says which step).

Values are int64 arrays while every value fits int64, and arrays of Python integers where
one does not: no step wraps. A step over int64 arrays is checked in float64 first (a product
or sum below 2^62 in float64 is below 2^63 exactly) and redone in Python integers only where
that check fails.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Unsupported
from . import sqltypes
from .expr import Expr
from .rewrite import Node, bind, rewrite
from .table import I64_MAX, I64_MIN, Table

__all__ = ["Bounds", "Evaluated", "bounds", "evaluate_exact", "explain", "typed"]

_OPS: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub,
                                              "*": operator.mul}
_VERB = {"+": "addition", "-": "subtraction", "*": "multiplication", "neg": "negation"}


def column_type(table: Table, name: str) -> str:
    t = table.info[name].sqltype
    if t not in sqltypes.RANGE:
        raise Unsupported(f"column {name!r} holds {t} values; arithmetic and SUM/AVG take "
                          f"integer columns")
    return t


def typed(table: Table, e: Expr) -> Node:
    """``e`` bound to SQL types and rewritten as DuckDB's optimizer does (kept per table)."""
    return table.cached(("typed", e), lambda: rewrite(bind(e, lambda c: column_type(table, c))))


@dataclass(frozen=True)
class Bounds:
    """What the columns' ranges tell of ``e``: its type, bounds of its values and whether
    some step may leave its type (``may_raise``); ``kernel_safe``: the polynomial form
    evaluated in int64 (each term, then their running sum) never wraps."""

    sqltype: str
    lo: int
    hi: int
    may_raise: bool
    kernel_safe: bool


def bounds(table: Table, node: Node) -> Bounds:
    """Interval bounds of every step of ``node`` over the non-NULL values of its columns."""
    raise_flag = [False]

    def walk(x: Node) -> tuple[int, int]:
        if x.op == "col":
            lo, hi = table.value_range(x.args[0])
            return (lo, hi) if lo <= hi else (0, 0)
        if x.op == "lit":
            return x.args[0], x.args[0]
        if x.op == "neg":
            lo, hi = walk(x.args[0])
            out = (-hi, -lo)
        else:
            (alo, ahi), (blo, bhi) = walk(x.args[0]), walk(x.args[1])
            if x.op == "+":
                out = (alo + blo, ahi + bhi)
            elif x.op == "-":
                out = (alo - bhi, ahi - blo)
            else:
                ps = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
                out = (builtins.min(ps), builtins.max(ps))
        if not (sqltypes.fits(out[0], x.type) and sqltypes.fits(out[1], x.type)):
            raise_flag[0] = True
        return out

    lo, hi = walk(node)
    e = node.expr()
    safe = not raise_flag[0] and e.degree <= 2 and all(
        table.info[c].dictionary is None and not table.info[c].base for c in e.columns())
    if safe:
        running = 0
        for coef, a, b in e.terms:
            m = abs(coef)
            for n in (a, b):
                if n is not None:
                    clo, chi = table.value_range(n)
                    m *= builtins.max(abs(clo), abs(chi), 0)
            running += m
            if m > I64_MAX or running > I64_MAX:
                safe = False
    return Bounds(node.type, lo, hi, raise_flag[0], safe)


@dataclass(frozen=True)
class Evaluated:
    """``e`` on every row: ``values`` (int64, or Python integers in an object array; 0 on the
    rows not ``good``), ``valid`` (no column NULL; None: every row), ``bad`` (a row where a
    step leaves its type; None: none), the exact range ``lo``..``hi`` of the good rows (``lo >
    hi``: none) and the type."""

    values: np.ndarray
    valid: np.ndarray | None
    bad: np.ndarray | None
    lo: int
    hi: int
    sqltype: str
    always: bool = False  # a step over literals alone leaves its type: every row raises

    @property
    def good(self) -> np.ndarray | None:
        """Rows with a value: valid and not bad (None: every row)."""
        if self.valid is None and self.bad is None:
            return None
        g = np.ones(len(self.values), dtype=bool) if self.valid is None else self.valid.copy()
        if self.bad is not None:
            g &= ~self.bad
        return g


def _is_object(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype == object


def _as_object(v: Any) -> Any:
    return v.astype(object) if isinstance(v, np.ndarray) and v.dtype != object else v


def _small(v: Any) -> Any:
    """An object array as int64 where every value fits."""
    if _is_object(v) and v.size and builtins.min(v) >= I64_MIN and builtins.max(v) <= I64_MAX:
        return v.astype(np.int64)
    if _is_object(v) and not v.size:
        return v.astype(np.int64)
    return v


def _apply(op: str, a: Any, b: Any) -> Any:
    """``a op b`` exactly (int64 arrays, object arrays or Python integers)."""
    f = _OPS[op]
    if not _is_object(a) and not _is_object(b):
        scalars_fit = all(I64_MIN <= x <= I64_MAX for x in (a, b) if isinstance(x, int))
        if scalars_fit:
            with np.errstate(over="ignore", invalid="ignore"):
                est = f(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
            if np.all(np.abs(est) < 2.0 ** 62):
                ai = a if isinstance(a, np.ndarray) else np.int64(a)
                bi = b if isinstance(b, np.ndarray) else np.int64(b)
                return f(ai, bi)
    return _small(f(_as_object(a), _as_object(b)))


def _outside(v: Any, t: str) -> np.ndarray | bool:
    """Rows of ``v`` outside type ``t``."""
    lo, hi = sqltypes.RANGE[t]
    if not isinstance(v, np.ndarray):
        return not (lo <= v <= hi)
    if v.dtype != object and lo <= I64_MIN and hi >= I64_MAX:
        return np.zeros(len(v), dtype=bool)
    if v.dtype != object:
        lo, hi = builtins.max(lo, I64_MIN), builtins.min(hi, I64_MAX)
    return np.asarray((v < lo) | (v > hi), dtype=bool)


def evaluate_exact(table: Table, node: Node) -> Evaluated:
    """``node`` on every row of ``table``, exactly (kept per table and node)."""
    return table.cached(("exact-node", node), lambda: _evaluate(table, node))


def _evaluate(table: Table, node: Node) -> Evaluated:
    n = table.n_rows
    bad = np.zeros(n, dtype=bool)
    always = [False]

    def walk(x: Node) -> Any:
        if x.op == "col":
            return table.exact(x.args[0])
        if x.op == "lit":
            return x.args[0]
        if x.op == "neg":
            out = _apply("-", 0, walk(x.args[0]))
        else:
            out = _apply(x.op, walk(x.args[0]), walk(x.args[1]))
        off = _outside(out, x.type)
        if isinstance(off, np.ndarray):
            bad[...] |= off
        elif off:
            always[0] = True
        return out

    values = walk(node)
    if not isinstance(values, np.ndarray):
        values = np.full(n, values if not always[0] else 0,
                         dtype=np.int64 if I64_MIN <= values <= I64_MAX else object)
    valid = None
    for c in node.columns():
        nulls = table.nulls(c)
        if nulls is not None:
            valid = ~nulls if valid is None else valid & ~nulls
    if valid is not None:
        bad &= valid
    if always[0]:
        bad[:] = True
    good = np.ones(n, dtype=bool) if valid is None else valid.copy()
    good &= ~bad
    values = values.copy()
    values[~good] = 0
    kept = values[good]
    lo, hi = (int(builtins.min(kept)), int(builtins.max(kept))) if kept.size else (0, -1)
    return Evaluated(_small(values), valid, bad if bad.any() else None, lo, hi, node.type,
                     always[0])


def explain(table: Table, node: Node, row: int) -> str:
    """The first step of ``node`` that leaves its type at ``row``, in the words of DuckDB's
    error: ``Out of range: overflow in multiplication of BIGINT (4611686018427387904 * 4) in
    "a" * "b", row 17``."""
    found: list[str] = []

    def walk(x: Node) -> int:
        if x.op == "col":
            return int(table.exact(x.args[0])[row])
        if x.op == "lit":
            return x.args[0]
        if x.op == "neg":
            v = walk(x.args[0])
            out, shown = -v, f"-{v}"
        else:
            a, b = walk(x.args[0]), walk(x.args[1])
            out, shown = _OPS[x.op](a, b), f"{a} {x.op} {b}"
        if not found and not sqltypes.fits(out, x.type):
            found.append(f"Out of range: overflow in {_VERB[x.op]} of "
                         f"{sqltypes.SQL_NAME[x.type]} ({shown}) in {x.sql()}, row {row}")
        return out

    walk(node)
    return found[0] if found else f"Out of range in {node.sql()}, row {row}"
