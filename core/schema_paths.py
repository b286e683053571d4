"""Where a schema looks and what it computes: paths into a saved state and the small
expressions a schema states lengths and bounds with (:mod:`indexzoo.schema`).

A **path** names a value inside the saved state: attribute or dict-key names joined by dots
(``pairs.keys``, ``gas.bvh.order``), where ``name[*]`` stands for every item of a list or
tuple (or every value of a dict): ``groups[*].gas.data``.

An **expression** is a Python expression over integers, written as a string:
``"n"``, ``"n + 1"``, ``"len(pairs.keys)"``, ``"ht.n_windows * ht.group"``,
``"cdiv(n, 1 << params.bucket_log)"``. Names are paths to integer values of the state
(relative to the record the spec is nested in, then from the state's top), or one of the load's
own: ``n`` (rows held), ``n_rows`` (rows of the build), ``dims`` (key columns) and
``params.<field>`` (the index's parameters). Operators: ``+ - * // % ** << >>``, unary ``-``;
functions: ``len(path)`` (first dimension), ``size(path)`` (elements), ``shape(path, i)``,
``min``, ``max`` and ``cdiv(a, b)`` (division rounded up). The expression is parsed when the
schema is made, so a typo fails at import, not on a user's file.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["MISSING", "Expr", "Names", "resolve", "split_path"]

_SEGMENT = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)(?P<each>\[\*\])?")
_FUNCTIONS = frozenset({"len", "size", "shape", "min", "max", "cdiv"})
_BINARY: dict[type, Any] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
}
_MAX_SHIFT = 256  # no expression makes numbers wider than this many bits


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: What :func:`resolve` gives for a path the state does not have.
MISSING: Any = _Missing()


def split_path(path: str) -> list[tuple[str, bool]]:
    """``"a.b[*].c"`` -> ``[("a", False), ("b", True), ("c", False)]``; ValueError for
    anything else."""
    out = []
    for part in path.split("."):
        m = _SEGMENT.fullmatch(part)
        if m is None:
            raise ValueError(f"not a schema path: {path!r}")
        out.append((m["name"], m["each"] is not None))
    return out


def _child(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, MISSING)
    if obj is None or obj is MISSING or name not in _fields(obj):
        return MISSING
    try:
        return getattr(obj, name)
    except AttributeError:
        return MISSING


def _fields(obj: Any) -> tuple[str, ...]:
    """The fields a record (dataclass or named tuple) holds: only those are paths."""
    names = getattr(obj, "_fields", None)
    if isinstance(names, tuple):
        return names
    fields = getattr(type(obj), "__dataclass_fields__", None)
    return tuple(fields) if isinstance(fields, dict) else ()


def _items(obj: Any) -> list[tuple[str, Any]]:
    if isinstance(obj, (list, tuple)):
        return [(str(i), x) for i, x in enumerate(obj)]
    if isinstance(obj, dict):
        return [(str(k), x) for k, x in obj.items()]
    return []


def resolve(root: Any, path: str, where: str = "") -> Iterator[tuple[str, Any]]:
    """Every (concrete path, value) ``path`` names under ``root``: one pair for a path without
    ``[*]`` (the value MISSING if the state lacks it), one per item for each ``[*]``."""
    frontier: list[tuple[str, Any]] = [(where, root)]
    for name, each in split_path(path):
        nxt: list[tuple[str, Any]] = []
        for at, obj in frontier:
            here = f"{at}.{name}" if at else name
            value = _child(obj, name)
            if not each:
                nxt.append((here, value))
            elif value is not MISSING and value is not None:
                nxt.extend((f"{here}[{k}]", x) for k, x in _items(value))
        frontier = nxt
    yield from frontier


class Names(Protocol):
    """What an expression's names and functions are evaluated against (a schema scope)."""

    def number(self, name: str) -> int | float: ...

    def array(self, name: str) -> Any: ...


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


class Expr:
    """An integer expression of a schema (see the module docstring), parsed once."""

    def __init__(self, text: str | int) -> None:
        self.text = str(text)
        if isinstance(text, int):
            self._tree: ast.AST = ast.Constant(text)
        else:
            try:
                self._tree = ast.parse(text, mode="eval").body
            except SyntaxError as exc:
                raise ValueError(f"not a schema expression: {text!r} ({exc.msg})") from None
        self._check(self._tree)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return
        dotted = _dotted(node)
        if dotted is not None:
            split_path(dotted)  # plain names only: no private or special attribute
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            self._check(node.operand)
            return
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _FUNCTIONS and not node.keywords):
            if node.func.id in ("len", "size", "shape"):
                if not node.args or _dotted(node.args[0]) is None:
                    raise ValueError(f"{self.text!r}: {node.func.id}() takes a path")
                for extra in node.args[1:]:
                    self._check(extra)
            else:
                for arg in node.args:
                    self._check(arg)
            return
        raise ValueError(f"not a schema expression: {self.text!r} (at "
                         f"{ast.dump(node)[:60]})")

    def __call__(self, names: Names) -> int | float:
        return self._eval(self._tree, names)

    def _eval(self, node: ast.AST, names: Names) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        dotted = _dotted(node)
        if dotted is not None:
            return names.number(dotted)
        if isinstance(node, ast.BinOp):
            a, b = self._eval(node.left, names), self._eval(node.right, names)
            if isinstance(node.op, (ast.LShift, ast.Pow)) and not 0 <= b <= _MAX_SHIFT:
                raise ValueError(f"{self.text!r}: an exponent or shift of {b}")
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0:
                raise ValueError(f"{self.text!r}: a division by zero")
            return _BINARY[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp):
            return -self._eval(node.operand, names)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        fn = node.func.id
        if fn in ("len", "size", "shape"):
            arr = names.array(_dotted(node.args[0]) or "")
            if fn == "size":
                return int(arr.size)
            axis = int(self._eval(node.args[1], names)) if fn == "shape" else 0
            if not 0 <= axis < arr.ndim:
                raise ValueError(f"{self.text!r}: the array has {arr.ndim} dimensions")
            return int(arr.shape[axis])
        args = [self._eval(a, names) for a in node.args]
        if fn == "cdiv":
            if len(args) != 2 or args[1] == 0:
                raise ValueError(f"{self.text!r}: cdiv takes two numbers, the second not 0")
            return -(-args[0] // args[1])
        return min(args) if fn == "min" else max(args)
