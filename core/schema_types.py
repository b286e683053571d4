"""Whether a loaded value is of the type its annotation declares: the check every saved state
goes through before its schema's (:mod:`indexzoo.schema`), for every plugin.

A file's JSON can put a string where the code declares ``n_nodes: int``, or a list where it
declares a record; the code would fail on it later, in a lookup, with a TypeError.
:func:`mismatch` walks a value along its annotation (``int``, ``float``, ``str``, ``bool``,
``None``, unions, ``Literal``, ``tuple[...]``, ``list[...]``, ``dict[...]``, ``np.ndarray``,
``np.dtype`` and record classes, whose fields it walks with their own annotations) and names
the first place where they differ. ``Any`` (and anything it cannot read) constrains nothing:
a plugin's schema states what such a value must be.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import numpy as np

from .flatten import class_hints, is_record, record_fields

__all__ = ["mismatch"]

_MAX_ITEMS = 1 << 20  # items of one container walked (a file's lists are bounded anyway)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_float(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) or _is_int(v)


_SIMPLE: dict[Any, Any] = {
    int: _is_int,
    float: _is_float,
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, (bool, np.bool_)),
    type(None): lambda v: v is None,
    None: lambda v: v is None,
    np.dtype: lambda v: isinstance(v, np.dtype),
    np.ndarray: lambda v: isinstance(v, np.ndarray),
}


def _a(name: str) -> str:
    """``an int``, ``a list``: ``name`` with its article."""
    return f"{'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"


def _kind(v: Any) -> str:
    return _a(type(v).__name__)


def mismatch(value: Any, hint: Any, where: str) -> tuple[str, str] | None:
    """None if ``value`` is of type ``hint``, else (the path inside ``where`` where it is not,
    what was found there)."""
    if hint is Any or hint is object or isinstance(hint, (typing.TypeVar, str)):
        return None
    check = _SIMPLE.get(hint)
    if check is not None:
        return None if check(value) else (where, f"{_kind(value)}, not {_a(_hint_name(hint))}")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        if any(mismatch(value, a, where) is None for a in args):
            return None
        return where, f"{_kind(value)}, not any of {_hint_name(hint)}"
    if origin is typing.Literal:
        return None if value in args else (where, f"{str(value)[:40]!r}, not one of {list(args)}")
    if origin in (tuple, list, set, frozenset):
        return _items(value, origin, args, where)
    if origin is dict:
        if not isinstance(value, dict):
            return where, f"{_kind(value)}, not a dict"
        kh, vh = args if len(args) == 2 else (Any, Any)
        for k, v in list(value.items())[:_MAX_ITEMS]:
            got = mismatch(k, kh, f"{where}.key") or mismatch(v, vh, f"{where}[{k!r}]")
            if got:
                return got
        return None
    if isinstance(hint, type):
        if not isinstance(value, hint):
            return where, f"{_kind(value)}, not {_a(hint.__qualname__)}"
        if is_record(hint):
            return _record(value, where)
        return None
    return None  # an annotation this walk does not read: no constraint


def _items(value: Any, origin: Any, args: tuple[Any, ...], where: str) -> tuple[str, str] | None:
    if not isinstance(value, origin):
        return where, f"{_kind(value)}, not {_a(origin.__name__)}"
    items = list(value)[:_MAX_ITEMS]
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if args == ((),):
            args = ()
        if len(items) != len(args):
            return where, f"a tuple of {len(items)} items, not of {len(args)}"
        hints = list(args)
    else:
        hints = [args[0] if args else Any] * len(items)
    for i, (x, h) in enumerate(zip(items, hints, strict=True)):
        got = mismatch(x, h, f"{where}[{i}]")
        if got:
            return got
    return None


def _record(value: Any, where: str) -> tuple[str, str] | None:
    hints = class_hints(type(value))
    for name in record_fields(value):
        got = mismatch(getattr(value, name), hints.get(name, Any), f"{where}.{name}")
        if got:
            return got
    return None


def _hint_name(hint: Any) -> str:
    if hint is None or hint is type(None):
        return "None"
    if isinstance(hint, type):
        return hint.__qualname__
    args = typing.get_args(hint)
    if args and typing.get_origin(hint) in (typing.Union, getattr(types, "UnionType", None)):
        return " | ".join(_hint_name(a) for a in args)
    return str(hint)
