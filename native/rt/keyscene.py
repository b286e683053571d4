"""A geometry acceleration structure over keys as primitives: what every RT index of the RX
family builds (RX over its key column in rowID order, optimized RX over each slice of its sorted
distinct keys), with the build's accounted peak.

``stored`` geometry (OptiX's: the GAS keeps its own copy of the primitives) converts the keys
to primitive rows first; ``generated`` keeps the keys as the engine's records and makes each
primitive during traversal (same float32 values, same answers, 8 bytes per key).

``engine="optix"`` builds the same primitive rows into an OptiX GAS
(:class:`~indexzoo.native.rt.optix.accel.OptixGas`; stored geometry only: OptiX has no
generated geometry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .keymap import KeyCoder
from .keyprims import KIND, SPHERE_RADIUS, geometry_function, primitives
from .trace import Gas, build_gas

if TYPE_CHECKING:
    from .optix.accel import OptixGas, OptixScaledGas

__all__ = ["KeyGas", "key_gas"]


@dataclass(frozen=True)
class KeyGas:
    """The GAS over ``n`` keys (primitive ``i`` = the ``i``-th key given) and the most bytes
    held at once while building or refitting it, the input keys included."""

    gas: Gas | OptixGas | OptixScaledGas
    peak_bytes: int


def key_gas(coder: KeyCoder, primitive: str, geometry: str, keys: Any, *, leaf_size: int,
            compact: bool, refit: Gas | OptixGas | OptixScaledGas | None = None,
            engine: str = "software") -> KeyGas:
    """Build (or, given the current ``refit`` GAS over as many keys, refit) the GAS of
    ``keys`` (uint32/uint64, held by ``coder``'s mode) on ``engine`` ("software" or
    "optix"). ``refit`` is left unchanged."""
    n, kb = int(keys.shape[0]), int(keys.nbytes)
    wide = 0 if keys.dtype == np.uint64 else 8 * n  # the uint64 copy of uint32 keys
    if geometry == "generated":  # the engine makes the primitives from the keys (its records)
        data, fn, peak = keys, geometry_function(coder, primitive), kb
    else:
        data, fn = primitives(coder, primitive, keys), None
        # conversion: the uint64 x and high parts, the float32 columns, the stacked rows
        peak = kb + wide + 16 * n + 2 * int(data.nbytes)
    radius = SPHERE_RADIUS if primitive == "sphere" else 0.0
    if engine == "optix":
        if fn is not None:
            raise ValueError("OptiX has no generated geometry: use geometry='stored'")
        from .optix.accel import build_gas as optix_build_gas

        og = optix_build_gas(KIND[primitive], data, radius=radius, compact=compact) \
            if refit is None else refit.refit(data)
        return KeyGas(og, max(peak, kb + og.footprint().peak_build_bytes))
    if refit is None:
        gas = build_gas(KIND[primitive], data, radius=radius, leaf_size=leaf_size, geometry=fn,
                        compact=compact)
    else:
        assert isinstance(refit, Gas)
        gas = refit.refit(data)  # a new Gas
    # the engine's build or refit (its peak counts the primitives or records)
    return KeyGas(gas, max(peak, kb + gas.footprint().peak_build_bytes))
