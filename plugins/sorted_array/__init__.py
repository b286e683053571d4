"""Plugin ``sorted-array``: the SA baseline (sorted (key, rowID) pairs + naive binary search)
of the RX and lightweight-indexing papers.

Paper -> code (the details, with every decision, in :mod:`.index`'s docstring): the index
(radix-sorted pairs, lower bound, galloping to a run's end) in :mod:`.index`, its tunables in
:mod:`.params`, the point and range kernels (one numba source for the CPU and the GPU) in
:mod:`.kernels`; the sort and the binary search are shared ones (:mod:`indexzoo.native.sort`,
:mod:`indexzoo.native.search`).
"""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import SortedArrayIndex
from .params import SortedArrayParams

__all__ = ["SortedArrayIndex", "SortedArrayParams"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(SortedArrayIndex)
