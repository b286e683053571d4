"""Plugin ``rx``: RTIndeX, database indexing as ray tracing (Henneberg & Schuhknecht), with every
configuration of the paper as a parameter; the defaults are the paper's selection."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import RxIndex
from .params import PAPER_DEFAULT, PRESETS, RxParams

__all__ = ["PAPER_DEFAULT", "PRESETS", "RxIndex", "RxParams"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(RxIndex)
