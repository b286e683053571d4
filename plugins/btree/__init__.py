"""Plugin ``btree``: a bulk-loaded GPU B+-tree with cooperative node search and linked leaves."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import BTreeIndex

__all__ = ["BTreeIndex"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(BTreeIndex)
