"""Plugin ``rx-opt``: optimized RX (sorted keys, closest hit + scan, compressed duplicates,
sub-BVHs under an IAS, sorted probes, inverse mapping) on the RT query layer."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import RxOptIndex
from .params import PRESETS, RxOptParams

__all__ = ["PRESETS", "RxOptIndex", "RxOptParams"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(RxOptIndex)
