"""Plugin ``sorted-array``: the SA baseline (sorted (key, rowID) pairs + naive binary search)."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import SortedArrayIndex

__all__ = ["SortedArrayIndex"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(SortedArrayIndex)
