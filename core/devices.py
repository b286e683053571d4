"""Devices: choosing between ``cpu`` and ``cuda`` and moving arrays onto the chosen one.

* ``cpu`` holds NumPy arrays and runs numba ``njit`` kernels.
* ``cuda`` holds CuPy arrays and runs ``numba.cuda`` kernels.

``device="auto"`` reads the ``INDEXZOO_DEVICE`` environment variable when it is set, and
otherwise picks ``cuda`` when a GPU is usable and ``cpu`` when not. An explicit
``device="cuda"`` without a usable GPU raises :class:`~indexzoo.DeviceUnavailable` with the
reason. Nothing here imports CuPy or numba-cuda until a GPU is actually asked for, so
``import indexzoo`` works on a machine without either.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

import numpy as np

from .display import shown
from .errors import ConfigError, DeviceUnavailable

__all__ = [
    "DEVICES",
    "ENV_VAR",
    "array_module",
    "coerce",
    "cuda_status",
    "device_of",
    "import_cupy",
    "resolve_device",
    "to_device",
    "to_numpy",
    "xp_of",
]

DEVICES = ("cpu", "cuda")
ENV_VAR = "INDEXZOO_DEVICE"
_CUDA_EXTRA_HINT = "pip install 'indexzoo[cuda12]' or 'indexzoo[cuda13]' (match your CUDA driver)"


@functools.cache
def cuda_status() -> tuple[bool, str]:
    """Whether the ``cuda`` device is usable here, and a sentence saying why (not)."""
    try:
        import cupy
    except ImportError:
        return False, f"CuPy is not installed; {_CUDA_EXTRA_HINT}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # the CUDA runtime raises its own error types
        return False, f"the CUDA runtime found no usable GPU ({type(exc).__name__}: {exc})"
    if count == 0:
        return False, "no CUDA GPU is visible (cudaGetDeviceCount returned 0)"
    try:
        from numba import cuda
    except ImportError:
        return False, f"numba-cuda is not installed; {_CUDA_EXTRA_HINT}"
    try:
        usable = cuda.is_available()
    except Exception as exc:
        return False, f"numba.cuda cannot use the GPU ({type(exc).__name__}: {exc})"
    if not usable:
        return False, "numba.cuda cannot use the GPU (numba.cuda.is_available() is False)"
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    if isinstance(name, bytes):
        name = name.decode()
    return True, f"{count} CUDA GPU(s) visible; using device 0, {name}"


def resolve_device(device: str = "auto") -> str:
    """Turn ``"auto"``, ``"cpu"`` or ``"cuda"`` into ``"cpu"`` or ``"cuda"``.

    Raises ConfigError for an unknown name and DeviceUnavailable for ``cuda`` without a GPU.
    """
    if not isinstance(device, str):
        raise ConfigError(
            f"argument 'device': expected one of 'auto', 'cpu', 'cuda', got {shown(device)} "
            f"of type {type(device).__name__}"
        )
    name = device.strip().lower()
    source = "argument 'device'"
    if name == "auto":
        env = os.environ.get(ENV_VAR, "").strip().lower()
        if env and env != "auto":
            name, source = env, f"environment variable {ENV_VAR}"
        else:
            return "cuda" if cuda_status()[0] else "cpu"
    if name not in DEVICES:
        raise ConfigError(f"{source}: unknown device {shown(name, 40)}; allowed: 'auto', 'cpu', 'cuda'")
    if name == "cuda":
        usable, reason = cuda_status()
        if not usable:
            raise DeviceUnavailable(f"device 'cuda' was asked for ({source}) but {reason}")
    return name


def import_cupy(purpose: str = "the 'cuda' device") -> ModuleType:
    """CuPy, or DeviceUnavailable naming the extra that installs it."""
    try:
        import cupy
    except ImportError:
        raise DeviceUnavailable(
            f"{purpose} needs CuPy, which is not installed; {_CUDA_EXTRA_HINT}") from None
    return cupy


def array_module(device: str) -> ModuleType:
    """``numpy`` for ``cpu``, ``cupy`` for ``cuda``."""
    return np if device == "cpu" else import_cupy()


def _is_cupy(arr: Any) -> bool:
    return type(arr).__module__.startswith("cupy")


def xp_of(arr: Any) -> ModuleType:
    """The array module (numpy or cupy) of an ndarray."""
    if isinstance(arr, np.ndarray):
        return np
    return import_cupy("a GPU array")


def device_of(arr: Any) -> str:
    """``cuda`` for CuPy arrays and ``__cuda_array_interface__`` producers, else ``cpu``."""
    return "cuda" if _is_cupy(arr) or hasattr(arr, "__cuda_array_interface__") else "cpu"


def coerce(obj: Any) -> Any:
    """An ndarray view of ``obj`` on the device where it already lives.

    NumPy arrays, lists and scalars become NumPy arrays; CuPy arrays stay; other
    ``__cuda_array_interface__`` producers become CuPy arrays (zero-copy); DLPack producers
    become NumPy or CuPy arrays depending on where their memory is.
    """
    if isinstance(obj, np.ndarray) or _is_cupy(obj):
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        return import_cupy("an input with __cuda_array_interface__").asarray(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        kind = int(obj.__dlpack_device__()[0])
        if kind in (1, 3):  # kDLCPU, kDLCUDAHost
            return np.from_dlpack(obj)
        return import_cupy("a DLPack input in GPU memory").from_dlpack(obj)
    return np.asarray(obj)


def to_device(arr: Any, device: str) -> Any:
    """Move an already coerced array to ``device`` (no copy if it is there already)."""
    if device == "cpu":
        return to_numpy(arr)
    cp = import_cupy()
    return arr if isinstance(arr, cp.ndarray) else cp.asarray(arr)


def to_numpy(arr: Any) -> np.ndarray:
    """A NumPy array with the contents of ``arr`` (copied from the GPU if needed)."""
    arr = coerce(arr)
    return arr if isinstance(arr, np.ndarray) else arr.get()
