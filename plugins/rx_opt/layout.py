"""What an ``rx-opt`` build derives from its sorted keys alone: where runs of equal keys start
(duplicate compression, and the occupied rows), and the cuts of the primitive keys into the
partitions' slices (Alg. 5). The build lays its state out with them and a load checks a file's
state against them (:mod:`.saved`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import xp_of

__all__ = ["run_starts", "slice_cuts"]


def run_starts(xp: Any, sorted_values: Any) -> Any:
    """Positions where a run of equal values starts in a sorted array (int64)."""
    n = int(sorted_values.shape[0])
    if n == 0:
        return xp.zeros(0, dtype=np.int64)
    change = xp.empty(n, dtype=bool)
    change[0] = True
    change[1:] = sorted_values[1:] != sorted_values[:-1]
    return xp.nonzero(change)[0].astype(np.int64)


def slice_cuts(pkeys: Any, partitions: int, compressed: bool) -> list[int]:
    """Contiguous slices of the primitive keys (Alg. 5), moved to run starts without
    compression."""
    m = int(pkeys.shape[0])
    size = -(-m // partitions) if m else 1
    cuts = [*range(0, m, size), m]
    if not compressed and len(cuts) > 2:
        xp = xp_of(pkeys)
        inner = xp.searchsorted(pkeys, pkeys[xp.asarray(cuts[1:-1])], side="left")
        cuts = [0, *sorted({int(c) for c in inner.tolist()} - {0}), m]
    return cuts
