"""What the hardware does without any index, timed in the same run as the indexes.

``indexzoo bench`` states every index against two references on point-lookup workloads, so a
reader sees how close an index comes to the device:

* ``raw searchsorted``: the array library's own binary search (``numpy.searchsorted`` on the
  CPU, ``cupy.searchsorted`` on the GPU) over the sorted keys, positions only: no rowIDs, no
  hit check, no key map. The ``searchsorted`` index does all of that on top of this call.
* ``random gather``: one 8-byte (the keys' width) read per lookup from a table the size of
  the sorted keys, at the lookups' own positions (uniformly random for random lookups), the
  positions themselves read from an array. No index that needs one random access per lookup
  can beat it: it is the floor a hash table approaches.

Both run on the workload's batches, like the indexes, and are timed by the same interleaved
rounds; their inputs (the sorted table, the positions) are prepared untimed.

Range workloads get one reference:

* ``scan floor``: one plain read of every key (the array library's max of each key column,
  which reads each byte once and writes nothing): the least time any scan needs to answer
  one range lookup, since it reads every row. ``x scan`` states how many range lookups an
  index answers in the time of one such read; a scan-based index (``fused-scan``) can reach
  1 per query at best.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from indexzoo.devices import array_module

from .workloads import Dataset

__all__ = ["GATHER", "RAW", "SCAN", "lookups_per_call", "reference_calls"]

RAW = "raw searchsorted"
GATHER = "random gather"
SCAN = "scan floor"


def lookups_per_call(name: str, data: Dataset) -> int:
    """How many lookups one call of reference ``name`` stands for (the scan floor: one)."""
    return 1 if name == SCAN else data.n_lookups


def reference_calls(data: Dataset, device: str) -> dict[str, Callable[[], Any]]:
    """The reference calls for ``data``, ready to time."""
    xp = array_module(device)
    columns = data.keys if isinstance(data.keys, list) else [data.keys]
    if data.queries is None:
        if not columns or columns[0].shape[0] == 0:
            return {}

        def scan() -> list[Any]:
            return [c.max() for c in columns]

        return {SCAN: scan}
    if data.keys.shape[0] == 0:
        return {}
    table = xp.sort(data.keys)
    batches = [b[0] for b in data.batches()]
    top = table.shape[0] - 1
    positions = [xp.minimum(xp.searchsorted(table, q), top) for q in batches]

    def raw() -> list[Any]:
        return [xp.searchsorted(table, q) for q in batches]

    def gather() -> list[Any]:
        return [table[p] for p in positions]

    return {RAW: raw, GATHER: gather}
