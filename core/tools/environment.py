"""Where a result was measured: the commit, the device's name, the library versions and, on
the GPU, the state that changes its figures (clocks, power limit, ECC).

``indexzoo bench``, ``indexzoo check``, ``indexzoo doctor`` and the pytest-benchmark suite
write these next to their figures, so every figure names its commit and device.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from indexzoo.envvars import COMMIT

__all__ = ["device_name", "environment", "git_commit", "gpu_state", "parse_gpu_query", "rt_cores"]


def git_commit() -> str:
    """The commit measured: $INDEXZOO_COMMIT if set (a copied tree without git history),
    else ``git rev-parse HEAD`` with ``-dirty`` for uncommitted changes."""
    named = COMMIT.value()
    if named:
        return named
    try:
        root = Path(__file__).resolve().parents[2]
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5)
        if head.returncode:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=5).stdout
        return head.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str) -> str:
    if device == "cuda":
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} threads)"


def rt_cores(name: str) -> str:
    """The current GPU's RT-core generation, ``"1st (Turing)"`` ... or ``"none"``: from its
    compute capability and ``name`` (:func:`indexzoo.native.rt.rt_core_generation`)."""
    import cupy

    from indexzoo.native.rt import rt_core_generation

    return rt_core_generation(str(cupy.cuda.Device().compute_capability), name)


def environment(device: str) -> dict[str, Any]:
    """Where a result was measured: commit, device, library versions."""
    import numba
    import pydantic

    env: dict[str, Any] = {
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "device_name": device_name(device),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "pydantic": pydantic.__version__,
        "platform": platform.platform(),
        "rt_cores": "none",  # the GPU's RT-core generation (see rt_core_generation)
    }
    if device == "cuda":
        import cupy

        env["rt_cores"] = rt_cores(env["device_name"])
        env["cupy"] = cupy.__version__
        env["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        env["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
        try:
            import numba_cuda

            env["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
        except ImportError:
            pass
        env.update(gpu_state(_bus_id()))
    return env


#: What ``nvidia-smi --query-gpu`` is asked for, in this order (see :func:`parse_gpu_query`).
GPU_QUERY = ("pci.bus_id", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem",
             "power.limit", "ecc.mode.current")
_NO_GPU_STATE: dict[str, Any] = {"gpu_clocks": None, "power_limit_w": None, "ecc": "unknown"}


def gpu_state(bus_id: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """The GPU's clocks (SM and memory, current and maximum, MHz), power limit (W) and ECC
    mode, from ``nvidia-smi``, for the GPU at PCI address ``bus_id`` (the only one if None).
    Read when called: an idle GPU may show lowered current clocks. Whatever cannot be read
    (no nvidia-smi, a timeout, a field the GPU does not report) is None, or ``"unknown"`` for
    ECC; this never raises."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return dict(_NO_GPU_STATE)
    try:
        res = subprocess.run([exe, f"--query-gpu={','.join(GPU_QUERY)}",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return dict(_NO_GPU_STATE)
    if res.returncode:
        return dict(_NO_GPU_STATE)
    return parse_gpu_query(res.stdout, bus_id)


def parse_gpu_query(text: str, bus_id: str | None = None) -> dict[str, Any]:
    """``gpu_clocks``, ``power_limit_w`` and ``ecc`` from the output of ``nvidia-smi
    --query-gpu=<GPU_QUERY> --format=csv,noheader,nounits``: the row of the GPU at ``bus_id``
    (compared without the PCI domain, which nvidia-smi and CUDA write with 8 and 4 digits),
    or the only row when ``bus_id`` is None. No such row: every value unknown."""
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) == len(GPU_QUERY)]
    if bus_id is not None:
        rows = [r for r in rows if _pci_slot(r[0]) == _pci_slot(bus_id)]
    if len(rows) != 1:
        return dict(_NO_GPU_STATE)
    _, sm, sm_max, mem, mem_max, power, ecc = rows[0]
    return {"gpu_clocks": {"sm_mhz": _mhz(sm), "sm_max_mhz": _mhz(sm_max),
                           "mem_mhz": _mhz(mem), "mem_max_mhz": _mhz(mem_max)},
            "power_limit_w": _number(power),
            "ecc": {"enabled": "enabled", "disabled": "disabled"}.get(ecc.lower(), "unknown")}


def _pci_slot(bus_id: str) -> str:
    """``3B:00.0`` of ``00000000:3B:00.0`` or ``0000:3b:00.0``."""
    return bus_id.strip().lower().split(":", 1)[-1] if bus_id.count(":") == 2 else \
        bus_id.strip().lower()


def _number(text: str) -> float | None:
    """A figure of nvidia-smi's; None for ``[N/A]``, ``N/A``, ``[Not Supported]`` and the like."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # not NaN


def _mhz(text: str) -> int | None:
    value = _number(text)
    return None if value is None else round(value)


def _bus_id() -> str | None:
    """The PCI address of the GPU CuPy uses (None if it cannot be read)."""
    try:
        import cupy

        return str(cupy.cuda.Device().pci_bus_id)
    except Exception:
        return None
