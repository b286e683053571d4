"""Plugin family ``lightweight``: the five schemes of "Is Binary Search Really All You Need?"
as presets (``ao-bs``, ``eo-bs``, ``ao-pb-bs``, ``eo-ks``, ``ao-pb-ks``) and ``lightweight``
with every option; :func:`recommend` is the paper's decision tree."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import PRESETS, LightweightIndex
from .recommend import recommend

__all__ = ["PRESETS", "LightweightIndex", "recommend"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(LightweightIndex)
    for cls in PRESETS.values():
        register(cls)
