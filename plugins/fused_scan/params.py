"""The tunables of ``fused-scan``: the GPU body of the scan (the vector body, or the numba
body with its items per lane and unrolling)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from indexzoo.native.targets import KernelParams

__all__ = ["FusedScanParams"]


class FusedScanParams(KernelParams):
    """The GPU body of the scan (the CPU runs one thread per output word either way). The
    defaults are the fastest body measured against a plain read of the same columns
    (``docs/plugins/fused-scan.md``)."""

    body: Literal["vector", "numba"] = Field(
        default="vector", description="The GPU body: 'vector', CUDA C++ with 16-byte loads "
        "(uint32 and uint64 keys; the default, at the floor read on an H200); 'numba', the "
        "numba kernels of one source with the CPU's, shaped by items and unroll.")

    threads_per_block: int = Field(
        default=128, ge=32, le=1024, multiple_of=32,
        description="CUDA threads per block of the scan (ignored on the CPU).")
    items: Literal[1, 2, 4, 8, 16] = Field(
        default=4, description="body='numba': output words per warp: each lane holds this many "
        "rows of each column, their loads in flight together (1: one row per lane).")
    unroll: bool = Field(
        default=True, description="body='numba', up to four columns: a body written out for the "
        "column count: every column's loads first, no early exit (more loads in flight, "
        "nothing skipped); else a loop over the columns that stops once every row of a lane "
        "has failed.")
