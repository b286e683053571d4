"""Plugin ``cgrx``: coarse-granular RX (one triangle per bucket of sorted keys, row and plane
markers, at most five closest-hit rays, a search and collaborative scan in the bucket), with
the thesis's configurations ``cgrx-5x4`` and ``cgrx-8x4`` as presets."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl
from indexzoo.presets import preset_class

from .index import CgrxIndex
from .params import PRESETS, CgrxParams

__all__ = ["PRESETS", "PRESET_CLASSES", "CgrxIndex", "CgrxParams"]


def _doc(name: str, values: dict[str, int]) -> str:
    return (f"cgRX with 2^{values['bucket_log']}-key buckets and "
            f"{1 << int(values['scan_group_log'])}-thread scan groups (the thesis's "
            f"{name.replace('cgrx-', 'cgRX')}).")


PRESET_CLASSES: dict[str, type[CgrxIndex]] = {
    n: preset_class(CgrxIndex, n, v, _doc(n, v), __name__) for n, v in PRESETS.items()}


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(CgrxIndex)
    for cls in PRESET_CLASSES.values():
        register(cls)
