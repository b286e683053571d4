"""The tunables of ``fused-scan``: the GPU body of the scan (items per lane, unrolling)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from indexzoo.native.targets import KernelParams

__all__ = ["FusedScanParams"]


class FusedScanParams(KernelParams):
    """The GPU body of the scan (the CPU runs one thread per output word either way). The
    defaults are the fastest body measured against a plain read of the same columns
    (``docs/plugins/fused-scan.md``)."""

    threads_per_block: int = Field(
        default=128, ge=32, le=1024, multiple_of=32,
        description="CUDA threads per block of the scan (ignored on the CPU).")
    items: Literal[1, 2, 4, 8, 16] = Field(
        default=4, description="Output words per warp: each lane holds this many rows of "
        "each column, their loads in flight together (1: one row per lane).")
    unroll: bool = Field(
        default=True, description="With up to four columns, a body written out for the "
        "column count: every column's loads first, no early exit (more loads in flight, "
        "nothing skipped); else a loop over the columns that stops once every row of a lane "
        "has failed.")
