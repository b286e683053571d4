"""The table of operations every index answers through: :data:`OPERATIONS`.

An operation is a lookup kind (``point``, ``range``) and an ``out`` mode (``rowid``, ``count``,
``sum``, ``rowids``, ``bitmap``). Each has one hook name and one signature::

    _point_<out>(self, st, q)          q: Q lookups of the native key dtype
    _range_<out>(self, st, lo, hi)     inclusive bounds; lo > hi is an empty range

A plugin implements the hooks of the operations it answers itself; the base derives the rest
(:mod:`indexzoo.hooks` resolves a class's hooks against this table when it is registered, and
``GpuIndex`` dispatches every lookup through the result). One method may answer several
operations that differ only in a parameter: mark it with :func:`answers`, and it is called as
``method(self, st, op, *arrays)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple, TypeVar

from .results import OUT_MODES, Out

__all__ = ["KINDS", "OPERATIONS", "Kind", "Operation", "answers", "marked_operations",
           "operation"]

F = TypeVar("F", bound=Callable[..., Any])

Kind = Literal["point", "range"]
KINDS: tuple[Kind, ...] = ("point", "range")


class Operation(NamedTuple):
    """One lookup kind with one out mode, e.g. ``Operation("range", "count")``."""

    kind: Kind
    out: Out

    @property
    def hook(self) -> str:
        """The hook's name: ``_range_count``."""
        return f"_{self.kind}_{self.out}"

    @property
    def arguments(self) -> tuple[str, ...]:
        """The lookup arrays the hook takes after ``st``."""
        return ("q",) if self.kind == "point" else ("lo", "hi")

    @property
    def signature(self) -> str:
        """``_range_count(self, st, lo, hi)``."""
        return f"{self.hook}(self, st, {', '.join(self.arguments)})"

    def __str__(self) -> str:
        return f"{self.kind} lookups with out={self.out!r}"


#: Every operation: both kinds times every out mode.
OPERATIONS: tuple[Operation, ...] = tuple(Operation(k, m) for k in KINDS for m in OUT_MODES)

_BY_PAIR: dict[tuple[str, str], Operation] = {(op.kind, op.out): op for op in OPERATIONS}


def operation(kind: str, out: str) -> Operation:
    """The operation of the table for ``kind`` and ``out`` (KeyError if there is none)."""
    return _BY_PAIR[(kind, out)]


_MARK = "__indexzoo_answers__"


def answers(kinds: Iterable[str], outs: Iterable[str]) -> Callable[[F], F]:
    """Mark a method as the answer to every operation of ``kinds`` x ``outs``, called as
    ``method(self, st, op, *arrays)`` with the :class:`Operation` it is asked for::

        @answers(kinds=("range",), outs=("rowid", "count", "sum", "rowids"))
        def _answer(self, st, op, lo, hi): ...

    A kind or out mode that is not in the table is a ValueError here, when the class body
    runs; the registry checks the rest (signature, capabilities, no operation answered twice).
    """
    ks, ms = tuple(kinds), tuple(outs)
    for k in ks:
        if k not in KINDS:
            raise ValueError(f"answers(): {k!r} is not a lookup kind; the kinds are "
                             f"{', '.join(KINDS)}")
    for m in ms:
        if m not in OUT_MODES:
            raise ValueError(f"answers(): {m!r} is not an out mode; the modes are "
                             f"{', '.join(OUT_MODES)}")
    ops = frozenset(_BY_PAIR[(k, m)] for k in ks for m in ms)

    def mark(fn: F) -> F:
        setattr(fn, _MARK, ops)
        return fn

    return mark


def marked_operations(fn: Any) -> frozenset[Operation]:
    """The operations :func:`answers` marked ``fn`` with (empty for an unmarked function)."""
    return getattr(fn, _MARK, frozenset())
