"""What several groups of conformance checks share."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo import (
    GpuIndex,
    persist,
)
from indexzoo.registry import available, load

from ..context import Context
from ..data import make_keys


def key_set(ctx: Context, family: str, n: int, seed: int, *, unique: str | None = None
            ) -> np.ndarray:
    """About ``n`` keys of ``family`` (:func:`~indexzoo.conformance.data.make_keys`) that the
    index under test takes: of the family ``unique`` instead where it takes no duplicate keys,
    and as uint32 where it takes no uint64 keys (for families whose keys then stay distinct)."""
    if unique is not None and not ctx.caps.duplicates:
        family = unique
    keys = make_keys(family, n, seed, duplicates=ctx.caps.duplicates).keys
    return keys if ctx.wide else keys.astype(np.uint32)


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


def load_index(index: GpuIndex, path: str, device: str) -> GpuIndex:
    """``indexzoo.load`` where the registry names the index's class; the class's own
    ``from_saved`` for a class the registry does not hold (a test's subclass)."""
    if available().get(index.name) is type(index):
        return load(path, device=device)
    return type(index).from_saved(persist.read(path), device=device)
