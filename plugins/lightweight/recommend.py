"""The paper's decision tree (§6.1) for picking a lightweight index, with the device's real L2,
and the same tree corrected where our GPU measurements contradict it.

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

``tree="paper"`` walks that tree as written. ``tree="measured"`` changes the branches beyond
the L2 where our GPU measurements (``docs/plugins/lightweight.md``) contradict it:

* unordered point lookups beyond L2: ``ao-pb-bs``, not ``eo-ks`` with K=9, which looked up
  several times slower;
* ordered lookups, short rebuilds and mixed workloads beyond L2: ``ao-pb-bs``, not ``ao-pb-ks``
  (faster point lookups; builds and short ranges equal);
* many small range lookups beyond L2: stay with ``ao-bs``, whose sums over long runs were
  faster than ``ao-pb-ks``'s (short ranges equal).

Within the L2 both trees agree (eo-bs, the measured winner at 2^22 keys; ao-bs for order and
ranges). ``tree="auto"`` (the default) takes the measured tree on ``cuda`` and the paper's on
the CPU, where the K-ary schemes are one-thread emulations and the GPU measurements say
nothing (``indexzoo recommend`` measures instead of trusting either).
"""

from __future__ import annotations

from typing import Literal

from indexzoo import ConfigError, IndexSpec
from indexzoo.devices import resolve_device

from .hardware import hardware

__all__ = ["TREES", "recommend"]

Workload = Literal["point", "range", "mixed"]
Tree = Literal["auto", "paper", "measured"]
TREES = ("auto", "paper", "measured")


def recommend(n: int, key_bytes: int = 4, workload: Workload = "point", device: str = "auto", *,
              ordered: bool = False, fast_rebuild: bool = False,
              l2_bytes: int | None = None, tree: Tree = "auto") -> IndexSpec:
    """The lightweight index the decision tree picks, as an :class:`IndexSpec`
    (``indexzoo.create(spec)`` builds it). ``workload``: ``point`` lookups only, many small
    ``range`` lookups, or ``mixed``. ``ordered``: results must come from an ascending array.
    ``l2_bytes`` overrides the device's L2 size. ``tree``: ``paper`` (§6.1 as written),
    ``measured`` (corrected beyond the L2 by our H200 measurements, see the module docstring)
    or ``auto`` (measured on ``cuda``, paper on the CPU).

    >>> recommend(1 << 20, 4, "point", "cpu", l2_bytes=50 << 20).index
    'eo-bs'
    >>> recommend(1 << 26, 8, "point", "cpu", l2_bytes=50 << 20, tree="measured").index
    'ao-pb-bs'
    """
    if n < 0:
        raise ConfigError(f"n must be >= 0, got {n}")
    if key_bytes not in (4, 8):
        raise ConfigError(f"key_bytes must be 4 or 8, got {key_bytes}")
    if workload not in ("point", "range", "mixed"):
        raise ConfigError(f"workload must be 'point', 'range' or 'mixed', got {workload!r}")
    if tree not in TREES:
        raise ConfigError(f"tree must be one of {', '.join(map(repr, TREES))}, got {tree!r}")
    dev = resolve_device(device)
    measured = tree == "measured" or (tree == "auto" and dev == "cuda")
    l2 = l2_bytes if l2_bytes is not None else hardware(dev).l2_bytes
    size = n * (key_bytes + (4 if n < (1 << 32) - 1 else 8))
    large = size > l2
    params: dict[str, object] = {}
    if measured and large:
        name = "ao-bs" if workload == "range" else "ao-pb-bs"
    elif ordered or fast_rebuild or workload == "range":
        name = "ao-pb-ks" if large else "ao-bs"
    else:
        name = "eo-ks" if large else "eo-bs"
        if large:
            params["k"] = 9
    if workload != "point":
        params["memory_layout"] = "aos"
    return IndexSpec(index=name, params=params, device=dev)
