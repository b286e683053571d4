"""Plugin ``warpcore-hash``: open addressing with cooperative probing (WarpCore-style)."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import WarpcoreHashIndex

__all__ = ["WarpcoreHashIndex"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(WarpcoreHashIndex)
