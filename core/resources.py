"""Memory a run needs, checked against what is available before anything is allocated.

``indexzoo run`` and ``indexzoo bench`` estimate the bytes a workload needs and compare them
with the memory available on the device that will hold the data (the host for ``cpu``, the
GPU for ``cuda``); a run that cannot fit stops with :class:`~indexzoo.ResourceError` before
its first allocation, instead of dying halfway with a MemoryError (or being killed by the
kernel's OOM killer, which gives no message at all).

The estimate is deliberately conservative (per key and per lookup, bytes):

=====================  ==============================================================
keys                   the key dtype's size (4 or 8)
index allowance        64 per key: no built-in index holds more than this per key
key generation         32 per key: hashes, permutations and sorted copies made while
                       generating keys and the lookups' hits (or loading a key file)
lookups                the key size, twice for ranges (``lo`` and ``hi``)
lookup generation      32 per lookup: hashes and permutations made while generating them
results                rowid/count 4 or 8, sum 8, rowids and bitmap 8 (offsets); plus 4 or 8
                       per match where a lookup can match several keys (ranges, duplicates:
                       modes are derived from every match) or for rowids and bitmaps; plus
                       8 (answer checks)
bitmaps                ``4 * ceil(n_keys / 32)`` for ``out: bitmap`` (a row of bits a lookup)
batches                1024 per batch: the Python objects of a batch and of its answer,
                       twice (a timed call's answers live while the next call runs)
=====================  ==============================================================

Available memory: ``MemAvailable`` of ``/proc/meminfo`` (else ``os.sysconf``), lowered to
what a cgroup memory limit leaves; on ``cuda`` the free memory of the GPU
(``cudaMemGetInfo``) plus what CuPy's memory pool holds unused. ``INDEXZOO_MEMORY_CHECK=0``
turns the check off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import envvars
from .errors import ResourceError

__all__ = ["BYTES_PER_BATCH", "ENV_VAR", "INDEX_BYTES_PER_KEY", "MemoryEstimate",
           "available_memory", "check_fits", "estimate_workload"]

ENV_VAR = envvars.MEMORY_CHECK.name
INDEX_BYTES_PER_KEY = 64
GEN_BYTES_PER_KEY = 32
GEN_BYTES_PER_LOOKUP = 32
BYTES_PER_BATCH = 1024


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run needs, by purpose."""

    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))

    def describe(self) -> str:
        return ", ".join(f"{k} {_gb(v)}" for k, v in self.parts.items() if v)


def _gb(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def estimate_workload(workload: Any, out: str | None = None, *, n_keys: int | None = None,
                      key_bytes: int | None = None) -> MemoryEstimate:
    """The estimate (see the module docstring) for an :class:`~indexzoo.tools.workloads.Workload`;
    ``n_keys`` and ``key_bytes`` override the workload's (keys from a file)."""
    n = int(workload.n_keys if n_keys is None else n_keys)
    kb = int(workload.key_dtype.itemsize if key_bytes is None else key_bytes)
    q = int(workload.n_lookups)
    ranges = workload.range_hits is not None
    mode = out or ("count" if ranges else "rowid")
    rid = 4 if n < (1 << 32) - 1 else 8
    per_query = (workload.range_hits or 1) * workload.multiplicity  # matches of one hit
    every_match = mode in ("rowids", "bitmap")
    result = q * (8 if mode == "sum" or every_match else rid)
    if every_match or per_query > 1:  # the CSR of every match, where modes derive from it
        result += q * per_query * rid
    return MemoryEstimate({
        "keys": n * kb,
        "index allowance": n * INDEX_BYTES_PER_KEY,
        "key generation": n * GEN_BYTES_PER_KEY,
        "lookups": q * kb * (2 if ranges else 1),
        "lookup generation": q * GEN_BYTES_PER_LOOKUP,
        "results": result + q * 8,
        # one row of ceil(n / 32) words per lookup, whatever it matches
        "bitmaps": q * 4 * (-(-n // 32)) if mode == "bitmap" else 0,
        "batches": int(workload.batches) * BYTES_PER_BATCH,
    })


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isdigit() else None


def _host_available() -> tuple[int, str] | None:
    found: list[tuple[int, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"))
                break
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
            if pages > 0 and size > 0:
                found.append((pages * size, "free physical pages (sysconf)"))
        except (OSError, ValueError, AttributeError):
            pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, used = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and used is not None and limit < (1 << 60):
            found.append((max(limit - used, 0), f"cgroup limit {limit_file}"))
            break
    return min(found) if found else None


def _gpu_available() -> tuple[int, str] | None:
    try:
        import cupy

        free, _total = cupy.cuda.runtime.memGetInfo()
        pool = int(cupy.get_default_memory_pool().free_bytes())
    except Exception:  # no CuPy, no GPU: resolve_device reports those itself
        return None
    return int(free) + pool, "free GPU memory (cudaMemGetInfo)"


def available_memory(device: str) -> tuple[int, str] | None:
    """(bytes available on ``device``, where the figure comes from), or None if unknown."""
    return _gpu_available() if device == "cuda" else _host_available()


def check_fits(estimate: MemoryEstimate, device: str, what: str) -> None:
    """ResourceError if ``estimate`` exceeds the memory available on ``device``."""
    if not envvars.MEMORY_CHECK.value():
        return
    avail = available_memory(device)
    if avail is None or estimate.total <= avail[0]:
        return
    where = "GPU" if device == "cuda" else "host"
    raise ResourceError(
        f"{what} needs about {_gb(estimate.total)} of {where} memory ({estimate.describe()}), "
        f"but only {_gb(avail[0])} is available ({avail[1]}); use fewer keys or lookups, or "
        f"set {ENV_VAR}=0 to skip this estimate"
    )
