"""Plugin ``btree``: a bulk-loaded GPU B+-tree (Awad et al.) with cooperative node search and
linked leaves, the B+ baseline of the RX and lightweight-indexing papers.

Paper -> code (the details, with every decision, in :mod:`.index`'s docstring):

* the index (bulk load by radix sort, lookups, ``count`` by two descents): :mod:`.index`;
* the tunables (node width, groups of threads, leaf fill, leaf layout): :mod:`.params`;
* the tree's arrays, the bottom-up build and the CPU twin of every traversal: :mod:`.kernels`;
* "traverses in groups of 16 threads, using warp intrinsics": :mod:`.kernels_cuda`;
* the leaf layouts and the in-node search both devices compile in: :mod:`.nodes`;
* the saved form of a tree, checked on load: :mod:`.saved`.
"""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import BTreeIndex
from .params import BTreeParams

__all__ = ["BTreeIndex", "BTreeParams"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(BTreeIndex)
