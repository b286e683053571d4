"""Plugin ``cgrx``: coarse-granular RX (one triangle per bucket of sorted keys, row and plane
markers, at most five closest-hit rays, a search and collaborative scan in the bucket), with
the thesis's configurations ``cgrx-5x4`` and ``cgrx-8x4`` as presets."""

from __future__ import annotations

from typing import Any

from pydantic import Field, create_model

from indexzoo.hookspecs import hookimpl

from .index import CgrxIndex
from .params import PRESETS, CgrxParams

__all__ = ["PRESETS", "PRESET_CLASSES", "CgrxIndex", "CgrxParams"]


def _preset(name: str, values: dict[str, int]) -> type[CgrxIndex]:
    fields: dict[str, Any] = {
        k: (int, Field(default=v, description=CgrxParams.model_fields[k].description))
        for k, v in values.items()}
    params = create_model(f"{name.title().replace('-', '')}Params", __base__=CgrxParams,
                          **fields)
    doc = (f"cgRX with 2^{values['bucket_log']}-key buckets and "
           f"{1 << int(values['scan_group_log'])}-thread scan groups (the thesis's "
           f"{name.replace('cgrx-', 'cgRX')}).")
    attrs: dict[str, Any] = {"name": name, "Params": params, "__doc__": doc,
                             "__module__": __name__}
    cls: type[CgrxIndex] = type(f"Cgrx_{name.replace('-', '_')}", (CgrxIndex,), attrs)
    return cls


PRESET_CLASSES: dict[str, type[CgrxIndex]] = {n: _preset(n, v) for n, v in PRESETS.items()}


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(CgrxIndex)
    for cls in PRESET_CLASSES.values():
        register(cls)
