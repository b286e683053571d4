"""Plugin ``warpcore-hash``: open addressing with cooperative probing (WarpCore-style), the hash
table baseline of the RX and lightweight-indexing papers.

Paper / WarpCore -> code (the details, with every decision, in :mod:`.index`'s docstring):

* the index (two-pass multi-value build, moves to a smaller table, lookups): :mod:`.index`;
* the tunables (group size, load factor, aos/soa slots): :mod:`.params`;
* the table's layout and the CPU twin of every operation: :mod:`.kernels`;
* "cooperative probing: a group of threads probes neighbouring slots": :mod:`.kernels_cuda`;
* the hash (fmix64), the double-hashing probe sequence and the value-word markers: :mod:`.probing`;
* the saved form of a table, checked on load: :mod:`.saved`.
"""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .index import WarpcoreHashIndex
from .params import WarpcoreHashParams

__all__ = ["WarpcoreHashIndex", "WarpcoreHashParams"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(WarpcoreHashIndex)
