"""Correct indexes that declare less than the contract allows: each narrows the capabilities
of a correct index (sorted-array, or the brute-force multi-column scan) to one lack, which a
plugin may have. The conformance suite must certify each with exactly the checks it cannot
take skipped (``tests/conformance/test_capability_skips.py``)."""

from __future__ import annotations

from typing import Any, ClassVar

from indexzoo import Capabilities
from indexzoo.plugins.sorted_array import SortedArrayIndex

from .column_indexes import ColumnScan

__all__ = ["NARROWED"]


def _narrowed(base: type, **lacks: Any) -> Capabilities:
    return base.capabilities.model_copy(update=lacks)  # type: ignore[attr-defined, no-any-return]


class RangesOnly(SortedArrayIndex):
    """sorted-array without point lookups."""

    name: ClassVar[str] = "test-ranges-only"
    narrows: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = _narrowed(SortedArrayIndex, point=False)


class CountsOnly(SortedArrayIndex):
    """sorted-array answering counts only."""

    name: ClassVar[str] = "test-counts-only"
    narrows: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = _narrowed(SortedArrayIndex, out_modes=("count",))


class BitmapsOnly(SortedArrayIndex):
    """sorted-array answering bitmaps only (derived from the rowIDs it lists)."""

    name: ClassVar[str] = "test-bitmaps-only"
    narrows: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = _narrowed(SortedArrayIndex, out_modes=("bitmap",))


class NarrowKeys(SortedArrayIndex):
    """sorted-array over uint32 keys only."""

    name: ClassVar[str] = "test-narrow-keys"
    capabilities: ClassVar[Capabilities] = _narrowed(SortedArrayIndex, key_dtypes=("uint32",))


class UniqueRowsScan(ColumnScan):
    """The multi-column scan without duplicate rows."""

    name: ClassVar[str] = "test-unique-rows-scan"
    capabilities: ClassVar[Capabilities] = _narrowed(ColumnScan, duplicates=False)


class NarrowColumnScan(ColumnScan):
    """The multi-column scan over columns of 32-bit keys only."""

    name: ClassVar[str] = "test-narrow-column-scan"
    capabilities: ClassVar[Capabilities] = _narrowed(ColumnScan, key_dtypes=("uint32",))


#: One correct index per lack.
NARROWED: tuple[type, ...] = (RangesOnly, CountsOnly, BitmapsOnly, NarrowKeys, UniqueRowsScan,
                              NarrowColumnScan)
