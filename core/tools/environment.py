"""Where a result was measured: the commit, the device's name, the library versions.

``indexzoo bench``, ``indexzoo check``, ``indexzoo doctor`` and the pytest-benchmark suite
write these next to their figures, so every figure names its commit and device.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from indexzoo.envvars import COMMIT

__all__ = ["device_name", "environment", "git_commit"]


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
    }
    if device == "cuda":
        import cupy

        env["cupy"] = cupy.__version__
        env["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        env["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
        try:
            import numba_cuda

            env["numba_cuda"] = getattr(numba_cuda, "__version__", "?")
        except ImportError:
            pass
    return env
