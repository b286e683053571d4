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

Range workloads get the scan floor:

* ``scan floor``: one plain read of every key, the least time any scan needs to answer one
  range lookup, since it reads every row. ``x scan`` states how many range lookups an index
  answers in the time of one such read; a scan-based index (``fused-scan``) can reach 1 per
  query at best. On the CPU it is NumPy's max of each key column. On the GPU two reads are
  timed and the faster is the floor: ``scan floor (vector read)``, a CUDA C++ kernel that
  reads the key columns with 16-byte loads and writes one word per block
  (:class:`indexzoo.tools.floor_kernel.VectorRead`), and ``scan floor (reduction)``, CuPy's
  max of each key column (CUB's reduction: the floor before the kernel). Neither read is
  assumed the faster: :func:`scan_floor` picks the faster of the run, the record names it
  (``scan_floor_reference``) and keeps both (``scan_references``). Key columns the kernel
  cannot read in place (not contiguous, or of another width than 4 or 8 bytes) get the
  reduction alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from indexzoo.devices import array_module
from indexzoo.errors import InvalidInput

from .workloads import Dataset

__all__ = ["GATHER", "RAW", "SCAN", "SCANS", "SCAN_REDUCTION", "SCAN_VECTOR", "lookups_per_call",
           "reference_calls", "scan_floor"]

RAW = "raw searchsorted"
GATHER = "random gather"
SCAN = "scan floor"
SCAN_VECTOR = "scan floor (vector read)"
SCAN_REDUCTION = "scan floor (reduction)"
#: Every reference that reads each key once: the scan floor is the fastest of those timed.
SCANS = (SCAN, SCAN_VECTOR, SCAN_REDUCTION)


def lookups_per_call(name: str, data: Dataset) -> int:
    """How many lookups one call of reference ``name`` stands for (a read of the keys: one)."""
    return 1 if name in SCANS else data.n_lookups


def scan_floor(throughputs: dict[str, float]) -> tuple[str | None, float | None]:
    """The scan floor of a run: the fastest of the plain reads of the keys timed (reads per
    second by reference name, the other references ignored), and its name; (None, None) where
    none was timed."""
    reads = {k: v for k, v in throughputs.items() if k in SCANS and v > 0}
    if not reads:
        return None, None
    best = max(reads, key=lambda k: reads[k])
    return best, reads[best]


def reference_calls(data: Dataset, device: str) -> dict[str, Callable[[], Any]]:
    """The reference calls for ``data``, ready to time."""
    xp = array_module(device)
    columns = data.keys if isinstance(data.keys, list) else [data.keys]
    if data.queries is None:
        if not columns or columns[0].shape[0] == 0:
            return {}

        def scan() -> list[Any]:
            return [c.max() for c in columns]

        if device == "cpu":
            return {SCAN: scan}
        from .floor_kernel import VectorRead

        try:
            read = VectorRead(columns)
        except InvalidInput:
            return {SCAN_REDUCTION: scan}
        return {SCAN_VECTOR: read, SCAN_REDUCTION: scan}
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
