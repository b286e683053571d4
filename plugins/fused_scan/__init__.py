"""Plugin ``fused-scan``: no index at all, one fused full scan of the key columns per lookup
(the CUDA-core baseline of RTScan's paper; Crystal's fused selection kernels).

Paper -> code: :mod:`.index` (the index: build is a copy, a lookup is a scan),
:mod:`.kernels` (Crystal's items-per-thread scan: one pass over every column, one packed bitmap
per lookup, CPU and GPU), :mod:`.params` (the GPU body: items per lane, unrolling).
"""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import FusedScanIndex
from .params import FusedScanParams

__all__ = ["FusedScanIndex", "FusedScanParams"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(FusedScanIndex)
