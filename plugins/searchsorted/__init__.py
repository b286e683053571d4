"""Plugin ``searchsorted``: the peer a user would reach for (numpy/cupy.searchsorted)."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import SearchsortedIndex

__all__ = ["SearchsortedIndex"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(SearchsortedIndex)
