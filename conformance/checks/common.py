"""What several groups of conformance checks share."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo import (
    GpuIndex,
)


def snapshot(index: GpuIndex, points: np.ndarray, rng: tuple[np.ndarray, np.ndarray] | None,
              ) -> list[np.ndarray]:
    """Every result array of every mode, on the host, for bit-exact comparisons."""
    out = []
    for mode in index.capabilities.out_modes:
        results = [index.point(points, out=mode)] if index.capabilities.point else []
        if rng is not None and index.capabilities.range:
            results.append(index.range(rng[0], rng[1], out=mode))
        for r in results:
            out += host_arrays(r)
    return out


def host_arrays(result: Any) -> list[np.ndarray]:
    """The arrays of one lookup result, on the host."""
    h = result.to_host()
    return [a for a in (h.rowid, h.count, h.sum, h.offsets, h.rowids, h.bitmap) if a is not None]


