"""Plugin ``rtscan``: RTScan (Lv et al., PVLDB 17(6), 2024: uniform encoding, data sieving,
Matrix RT Refine), with the paper's variants as presets of their own: ``rtscan-rt`` (the
paper's RTScan), ``rtc1``, ``rtc3``, ``rtscan-noenc``, ``rtscan-nosieve``,
``rtscan-direct`` (the CUDA-core refine) and ``rtscan-paper`` (the paper's layout). ``rtscan``
itself refines on RT cores where the engine is OptiX and directly elsewhere
(``refine="auto"``), and holds the compact layout (``layout="compact"``, a two-level sieve).
The decisions where the paper is ambiguous, and the layout's, are listed in :mod:`.index`."""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl
from indexzoo.presets import preset_class

from .index import RtscanIndex, RtscanState
from .params import PRESETS, RtscanParams
from .profile import StageTimes

__all__ = ["PRESETS", "PRESET_CLASSES", "RtscanIndex", "RtscanParams", "RtscanState",
           "StageTimes"]

_DOCS = {
    "rtscan-rt": "The paper's RTScan on any engine: uniform encoding, data sieving and Matrix "
                 "RT Refine (cubes in a BVH, a grid of short rays); in the compact layout "
                 "(layout='paper', sieve_vectors=128, sieve_fine=0: the paper's too).",
    "rtc1": "RTc1 (paper §2.3): one column per RT job, no encoding, no sieving; the columns' "
            "bitmaps ANDed.",
    "rtc3": "RTc3 (paper §3.1): three columns per RT job, no encoding, no sieving, one long "
            "ray per grid point of the XY plane, along z.",
    "rtscan-noenc": "RTScan without uniform encoding (the values are the coordinates; paper "
                    "§5.6).",
    "rtscan-nosieve": "RTScan without data sieving (the whole query box is refined).",
    "rtscan-direct": "RTScan with the direct refine: each uncertain slab's rows gathered by "
                     "rank and checked on CUDA cores, no BVH.",
    "rtscan-paper": "RTScan with the paper's layout (codes, mapping tables, 127 sieve vectors "
                    "a column: 7.97x a table of uint32 columns) in place of the compact one "
                    "(3.95x); refined as rtscan.",
}


PRESET_CLASSES: dict[str, type[RtscanIndex]] = {
    n: preset_class(RtscanIndex, n, v, _DOCS[n], __name__) for n, v in PRESETS.items()}


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(RtscanIndex)
    for cls in PRESET_CLASSES.values():
        register(cls)
