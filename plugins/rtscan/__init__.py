"""Plugin ``rtscan``: RTScan (uniform encoding, data sieving, Matrix RT Refine; digest 003),
with the paper's variants as presets of their own: ``rtc1``, ``rtc3``, ``rtscan-noenc``,
``rtscan-nosieve`` and ``rtscan-direct`` (the CUDA-core refine)."""

from __future__ import annotations

from typing import Any

from pydantic import create_model
from pydantic.fields import FieldInfo

from indexzoo.hookspecs import hookimpl

from .index import RtscanIndex, RtscanState
from .params import PRESETS, RtscanParams
from .profile import StageTimes

__all__ = ["PRESETS", "PRESET_CLASSES", "RtscanIndex", "RtscanParams", "RtscanState",
           "StageTimes"]

_DOCS = {
    "rtc1": "RTc1 (paper §2.3): one column per RT job, no encoding, no sieving; the columns' "
            "bitmaps ANDed.",
    "rtc3": "RTc3 (paper §3.1): three columns per RT job, no encoding, no sieving, one long "
            "ray per grid point of the XY plane, along z.",
    "rtscan-noenc": "RTScan without uniform encoding (the values are the coordinates; paper "
                    "§5.6).",
    "rtscan-nosieve": "RTScan without data sieving (the whole query box is refined).",
    "rtscan-direct": "RTScan with the direct refine: each uncertain slab's rows gathered by "
                     "rank and checked on CUDA cores, no BVH.",
}


def _preset(name: str, values: dict[str, object]) -> type[RtscanIndex]:
    """An index class named ``name`` whose parameters default to ``values`` (bounds and
    descriptions kept)."""
    base = RtscanParams.model_fields
    fields: dict[str, Any] = {k: (base[k].annotation, FieldInfo.merge_field_infos(base[k],
                                                                                  default=v))
                              for k, v in values.items()}
    params = create_model(f"{name.title().replace('-', '')}Params", __base__=RtscanParams,
                          **fields)
    attrs: dict[str, Any] = {"name": name, "Params": params, "__doc__": _DOCS[name],
                             "__module__": __name__}
    cls: type[RtscanIndex] = type(f"Rtscan_{name.replace('-', '_')}", (RtscanIndex,), attrs)
    return cls


PRESET_CLASSES: dict[str, type[RtscanIndex]] = {n: _preset(n, v) for n, v in PRESETS.items()}


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(RtscanIndex)
    for cls in PRESET_CLASSES.values():
        register(cls)
