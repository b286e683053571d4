"""The paper's decision tree (§6.1) for picking a lightweight index, with the device's real L2.

    "If ascending order is not a strict requirement, or if we need to ensure the smallest
    possible memory footprint, always use Eytzinger search. If the input size exceeds L2 size,
    a larger K (K = 9) as well as multi-threaded lookups improve performance. If ascending order
    is absolutely required, or the workload consists of many small range lookups, or we need
    short rebuild times, use the optimized binary search, and switch to a PB approach once the
    input becomes too large. [...] if your workload includes range lookups, always choose AoS
    [...] never use PB in combination with BS."

[AMBIG] "switch to a PB approach" next to "never use PB with BS" is read as: switch to AO+PB+KS.
"Too large" and "exceeds L2" are read as: the index's bytes (keys + 4-byte rowIDs, or 8-byte
rowIDs beyond 2^32 keys) exceed the L2.
"""

from __future__ import annotations

from typing import Literal

from indexzoo import ConfigError, IndexSpec
from indexzoo.devices import resolve_device

from .hardware import hardware

__all__ = ["recommend"]

Workload = Literal["point", "range", "mixed"]


def recommend(n: int, key_bytes: int = 4, workload: Workload = "point", device: str = "auto", *,
              ordered: bool = False, fast_rebuild: bool = False,
              l2_bytes: int | None = None) -> IndexSpec:
    """The lightweight index the paper's decision tree picks, as an :class:`IndexSpec`
    (``indexzoo.create(spec)`` builds it). ``workload``: ``point`` lookups only, many small
    ``range`` lookups, or ``mixed``. ``ordered``: results must come from an ascending array.
    ``l2_bytes`` overrides the device's L2 size.

    >>> recommend(1 << 20, 4, "point", "cpu", l2_bytes=50 << 20).index
    'eo-bs'
    """
    if n < 0:
        raise ConfigError(f"n must be >= 0, got {n}")
    if key_bytes not in (4, 8):
        raise ConfigError(f"key_bytes must be 4 or 8, got {key_bytes}")
    if workload not in ("point", "range", "mixed"):
        raise ConfigError(f"workload must be 'point', 'range' or 'mixed', got {workload!r}")
    dev = resolve_device(device)
    l2 = l2_bytes if l2_bytes is not None else hardware(dev).l2_bytes
    size = n * (key_bytes + (4 if n < (1 << 32) - 1 else 8))
    large = size > l2
    params: dict[str, object] = {}
    if ordered or fast_rebuild or workload == "range":
        name = "ao-pb-ks" if large else "ao-bs"
    else:
        name = "eo-ks" if large else "eo-bs"
        if large:
            params["k"] = 9
    if workload != "point":
        params["memory_layout"] = "aos"
    return IndexSpec(index=name, params=params, device=dev)
