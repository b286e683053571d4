"""The tunables of ``sorted-array``: those of every kernel launch, nothing of its own."""

from __future__ import annotations

from indexzoo.native.targets import KernelParams

__all__ = ["SortedArrayParams"]


class SortedArrayParams(KernelParams):
    """Parameters of ``sorted-array``."""
