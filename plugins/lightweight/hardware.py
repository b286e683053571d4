"""What the lightweight family reads off the device: SMs (static scheduling), opt-in shared
memory per block (pinning) and the L2 size (the decision tree). Never hard-coded: the paper's
128 blocks and 100 KB are the RTX 4090's."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

__all__ = ["Hardware", "hardware"]


@dataclass(frozen=True)
class Hardware:
    name: str
    sm_count: int
    shared_optin_bytes: int  # dynamic shared memory one block may opt in to
    l2_bytes: int


@functools.cache
def hardware(device: str) -> Hardware:
    """The current CUDA device's figures; for ``cpu``, the host's core count and the size of
    its largest cache (sysfs; 32 MiB if unreadable) standing in for the L2."""
    if device == "cuda":
        import cupy

        dev = cupy.cuda.Device()
        attrs = dev.attributes
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return Hardware(name=name, sm_count=int(attrs["MultiProcessorCount"]),
                        shared_optin_bytes=int(attrs["MaxSharedMemoryPerBlockOptin"]),
                        l2_bytes=int(attrs["L2CacheSize"]))
    return Hardware(name="cpu", sm_count=os.cpu_count() or 1, shared_optin_bytes=0,
                    l2_bytes=_host_cache_bytes())


def _host_cache_bytes() -> int:
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                best = max(best, int(digits) * mult)
    except OSError:
        pass
    return best or (32 << 20)
