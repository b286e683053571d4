"""The pluggy hooks a plugin implements.

A plugin module (found through the ``indexzoo`` entry-point group) writes::

    import indexzoo

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register):
        register(MyIndex)

``register`` takes a :class:`~indexzoo.GpuIndex` subclass; call it once per index class.

A plugin whose indexes form a family with its own rule for choosing among them (a paper's
decision tree) may also answer :func:`indexzoo_suggest_indexes`: ``indexzoo recommend`` then
measures the family's suggested members instead of every member.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pluggy

from .config import IndexSpec

__all__ = ["SuggestQuestion", "Suggestion", "hookimpl", "hookspec", "indexzoo_register_indexes",
           "indexzoo_register_query_engines",
           "indexzoo_suggest_indexes"]

PROJECT = "indexzoo"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@dataclass(frozen=True)
class SuggestQuestion:
    """What a recommendation is for: ``n_keys`` keys of ``key_bytes`` bytes (4 or 8) on
    ``device``, looked up by ``kind`` (point or range lookups); ``ordered``: the user needs
    answers from an ascending array."""

    n_keys: int
    key_bytes: int
    kind: Literal["point", "range"]
    device: str
    ordered: bool = False


@dataclass(frozen=True)
class Suggestion:
    """A family's own picks for a :class:`SuggestQuestion`: ``family`` names the registered
    indexes they stand for, ``picks`` are (label, spec) pairs (e.g. ``("paper", spec)``), and
    ``note`` says where they come from (e.g. "lightweight decision tree")."""

    family: frozenset[str]
    picks: tuple[tuple[str, IndexSpec], ...]
    note: str


@hookspec
def indexzoo_register_indexes(register: Callable[[type[Any]], None]) -> None:
    """Register index classes by calling ``register(cls)`` for each."""


@hookspec
def indexzoo_suggest_indexes(question: SuggestQuestion) -> Suggestion | None:
    """The plugin's picks among its own indexes for ``question``, or None."""


@hookspec
def indexzoo_register_query_engines(register: Callable[[type[Any]], None]) -> None:
    """Register query engines (:class:`indexzoo.query.QueryEngine` subclasses) by calling
    ``register(cls)`` for each."""
