"""A geometry acceleration structure over keys as primitives: what every RT index of the RX
family builds (RX over its key column in rowID order, optimized RX over each slice of its sorted
distinct keys), with the build's accounted peak.

``stored`` geometry (OptiX's: the GAS keeps its own copy of the primitives) converts the keys
to primitive rows first; ``generated`` keeps the keys as the engine's records and makes each
primitive during traversal (same float32 values, same answers, 8 bytes per key).

The GAS is built by the ``engine`` given (:mod:`.engine`; the software engine by default), or
refitted by the engine of the GAS given; OptiX's holds stored geometry only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .engine import Engine, engine_named
from .keymap import KeyCoder
from .keyprims import KIND, SPHERE_RADIUS, geometry_function, primitives

__all__ = ["KeyGas", "key_codes", "key_gas"]


def key_codes(keys: Any) -> Any:
    """The BVH sort codes of a key scene: the keys themselves (uint64). In every key mode a
    key's bits hold its row (z, then y: the high part) above its x part, so key order is row
    order, then x: the tree splits rows before x, and a ray along one row (RX's ranges, optimized
    RX's closest-hit rays) enters only the subtrees of that row. Morton codes of the same points
    split x near the root, and such a ray enters both children of every x split (measured:
    ``docs/rt-engine.md``, ``benchmarks/studies/rt_walk_profile.py``)."""
    return keys if keys.dtype == np.uint64 else keys.astype(np.uint64)


@dataclass(frozen=True)
class KeyGas:
    """The GAS over ``n`` keys (primitive ``i`` = the ``i``-th key given) and the most bytes
    held at once while building or refitting it, the input keys included."""

    gas: Any  # the engine's GAS (``gas.engine`` names it)
    peak_bytes: int


def key_gas(coder: KeyCoder, primitive: str, geometry: str, keys: Any, *, leaf_size: int,
            compact: bool, refit: Any = None, engine: Engine | None = None) -> KeyGas:
    """Build on ``engine`` (default: the software engine) or, given the current ``refit`` GAS
    over as many keys, refit on its engine, the GAS of ``keys`` (uint32/uint64, held by
    ``coder``'s mode). ``refit`` is left unchanged."""
    n, kb = int(keys.shape[0]), int(keys.nbytes)
    wide = 0 if keys.dtype == np.uint64 else 8 * n  # the uint64 copy of uint32 keys
    if geometry == "generated":  # the engine makes the primitives from the keys (its records)
        data, fn, peak = keys, geometry_function(coder, primitive), kb + wide
    else:
        data, fn = primitives(coder, primitive, keys), None
        # conversion: the uint64 x and high parts, the float32 columns, the stacked rows
        peak = kb + wide + 16 * n + 2 * int(data.nbytes)
    radius = SPHERE_RADIUS if primitive == "sphere" else 0.0
    if refit is not None:
        gas = refit.engine.refit(refit, data)  # a new GAS
    else:
        eng = engine or engine_named("software")
        gas = eng.build_gas(KIND[primitive], data, radius=radius, leaf_size=leaf_size,
                            geometry=fn, compact=compact, codes=key_codes(keys))
    # the engine's build or refit (its peak counts the primitives or records)
    return KeyGas(gas, max(peak, kb + gas.footprint().peak_build_bytes))
