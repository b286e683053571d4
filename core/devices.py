"""Devices: choosing between ``cpu`` and ``cuda`` and moving arrays onto the chosen one.

* ``cpu`` holds NumPy arrays and runs numba ``njit`` kernels.
* ``cuda`` holds CuPy arrays and runs ``numba.cuda`` kernels.

``device="auto"`` reads the ``INDEXZOO_DEVICE`` environment variable when it is set, and
otherwise picks ``cuda`` when a GPU is usable and ``cpu`` when not. An explicit
``device="cuda"`` without a usable GPU raises :class:`~indexzoo.DeviceUnavailable` with the
reason. Nothing here imports CuPy or numba-cuda until a GPU is actually asked for, so
``import indexzoo`` works on a machine without either.

When ``auto`` falls back to the CPU although an NVIDIA driver is installed (``nvidia-smi`` on
the PATH, ``/proc/driver/nvidia/version``, or ``libcuda.so.1`` loadable) it says so once per
process, as a :class:`GpuSetupWarning` of one line naming the install command of the extra
that matches the driver (:func:`gpu_setup_hint`). The driver's CUDA version is read from
``nvidia-smi``'s header ("CUDA Version: 12.4"), else from ``cuDriverGetVersion`` of libcuda,
else derived from the driver version (NVIDIA's minor-version compatibility table: drivers
>= 580 run CUDA 13.x, >= 525 CUDA 12.x, >= 450 CUDA 11.x).
"""

from __future__ import annotations

import ctypes
import functools
import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import envvars
from .display import shown
from .errors import ConfigError, DeviceUnavailable

__all__ = [
    "DEVICES",
    "ENV_VAR",
    "NO_DRIVER_PROBES",
    "DriverInfo",
    "GpuSetupWarning",
    "array_module",
    "coerce",
    "cuda_extra",
    "cuda_status",
    "device_of",
    "gpu_setup_hint",
    "import_cupy",
    "install_command",
    "nvidia_driver",
    "resolve_device",
    "short_error",
    "to_device",
    "to_numpy",
    "xp_of",
]

DEVICES = ("cpu", "cuda")
ENV_VAR = envvars.DEVICE.name
#: What the three driver probes found when none found a driver (doctor's "not found" line).
NO_DRIVER_PROBES = ("no nvidia-smi on the PATH, no /proc/driver/nvidia/version, "
                    "libcuda.so.1 not loadable")


class GpuSetupWarning(UserWarning):
    """An NVIDIA driver is installed, but indexzoo cannot use the GPU (CuPy or numba-cuda
    missing or unusable): work runs on the CPU."""


# ---------------------------------------------------------------------- the NVIDIA driver
@dataclass(frozen=True)
class DriverInfo:
    """What this machine says about an NVIDIA driver, without CuPy or numba-cuda."""

    found: bool
    evidence: tuple[str, ...] = ()  # how it was found
    driver_version: str | None = None  # e.g. "550.54.14"
    cuda_version: tuple[int, int] | None = None  # the newest CUDA the driver runs, e.g. (12, 4)
    cuda_source: str = ""  # where cuda_version comes from
    gpus: tuple[str, ...] = ()  # GPU names nvidia-smi lists

    @property
    def cuda_text(self) -> str:
        return "unknown" if self.cuda_version is None else \
            f"{self.cuda_version[0]}.{self.cuda_version[1]}"


_PROC_VERSION = Path("/proc/driver/nvidia/version")


def _nvidia_smi(*args: str) -> str | None:
    """The output of ``nvidia-smi ARGS`` (None if it is not on the PATH or fails)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, *args], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def _nvidia_smi_on_path() -> bool:
    return shutil.which("nvidia-smi") is not None


def _proc_driver_version() -> str | None:
    """The text of /proc/driver/nvidia/version (None without the kernel module)."""
    try:
        return _PROC_VERSION.read_text(errors="replace")
    except OSError:
        return None


def _libcuda_version() -> int | None:
    """``cuDriverGetVersion`` of libcuda (e.g. 12040), 0 if libcuda loads but does not say,
    None if libcuda cannot be loaded."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    try:
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return int(version.value)
    except (AttributeError, OSError):
        pass
    return 0


def cuda_for_driver(driver_version: str) -> tuple[int, int] | None:
    """The CUDA major version a Linux driver runs, as (major, 0), from NVIDIA's minor-version
    compatibility table (>= 580: 13.x; >= 525: 12.x; >= 450: 11.x); None below or unparsable."""
    m = re.match(r"\s*(\d+)", driver_version)
    if not m:
        return None
    major = int(m.group(1))
    for floor, cuda in ((580, 13), (525, 12), (450, 11)):
        if major >= floor:
            return cuda, 0
    return None


@functools.cache
def nvidia_driver() -> DriverInfo:
    """Look for an NVIDIA driver (see the module docstring); cached per process."""
    evidence = []
    if _nvidia_smi_on_path():
        evidence.append("nvidia-smi on the PATH")
    proc = _proc_driver_version()
    if proc is not None:
        evidence.append(str(_PROC_VERSION))
    libcuda = _libcuda_version()
    if libcuda is not None:
        evidence.append("libcuda.so.1 loadable")
    if not evidence:
        return DriverInfo(False)
    driver = cuda = None
    source = ""
    gpus: tuple[str, ...] = ()
    header = _nvidia_smi() if _nvidia_smi_on_path() else None
    if header:
        m = re.search(r"CUDA Version\s*:\s*(\d+)\.(\d+)", header)
        if m:
            cuda, source = (int(m.group(1)), int(m.group(2))), "nvidia-smi"
        m = re.search(r"Driver Version\s*:\s*([0-9][0-9.]*)", header)
        if m:
            driver = m.group(1)
        listing = _nvidia_smi("--query-gpu=name", "--format=csv,noheader") or ""
        gpus = tuple(line.strip() for line in listing.splitlines() if line.strip())
    if driver is None and proc:
        m = re.search(r"Kernel Module(?: for \w+)?\s+([0-9][0-9.]*)", proc)
        if m:
            driver = m.group(1)
    if cuda is None and libcuda:
        cuda, source = (libcuda // 1000, (libcuda % 1000) // 10), "cuDriverGetVersion"
    if cuda is None and driver:
        cuda = cuda_for_driver(driver)
        source = f"driver {driver} (NVIDIA's compatibility table)" if cuda else ""
    return DriverInfo(True, tuple(evidence), driver, cuda, source, gpus)


def cuda_extra(info: DriverInfo | None = None) -> str | None:
    """``cuda12`` or ``cuda13``: the extra that matches the driver; None if unknown."""
    info = info or nvidia_driver()
    if not info.found or info.cuda_version is None:
        return None
    major = info.cuda_version[0]
    return "cuda13" if major >= 13 else "cuda12" if major == 12 else None


def install_command(info: DriverInfo | None = None) -> str:
    """The pip command that installs the GPU extra for this machine's driver (both choices
    when the driver's CUDA version is unknown): commands that work without a package registry
    (:func:`indexzoo.extras.install_line`)."""
    from .extras import install_line

    info = info or nvidia_driver()
    extra = cuda_extra(info)
    if extra:
        return install_line(extra)
    if info.found and info.cuda_version is not None:  # CUDA 11 or older
        return (f"the driver runs CUDA {info.cuda_text} only; indexzoo's GPU extras need a "
                f"driver >= 525 (CUDA 12), then {install_line('cuda12')}")
    return (f"{install_line('cuda12')} (CUDA 12 drivers) or {install_line('cuda13')} "
            "(CUDA 13 drivers)")


def gpu_setup_hint() -> str | None:
    """One line when an NVIDIA driver is here but the ``cuda`` device is not usable (CuPy or
    numba-cuda missing or broken): what is wrong and the command that fixes it. None when
    there is no driver or the GPU is usable."""
    info = nvidia_driver()
    if not info.found:
        return None
    usable, reason = cuda_status()
    if usable:
        return None
    found = f"an NVIDIA driver is installed ({', '.join(info.evidence)}"
    if info.driver_version:
        found += f"; driver {info.driver_version}"
    if info.cuda_version:
        found += f", CUDA {info.cuda_text} per {info.cuda_source}"
    found += ")"
    fix = install_command(info)
    why = reason.removesuffix(f"; {fix}")
    return f"{found} but indexzoo cannot use the GPU: {why}; running on the CPU. Fix: {fix}"


_hint_given: list[bool] = []


def _warn_gpu_setup_once() -> None:
    if _hint_given:
        return
    _hint_given.append(True)
    try:
        hint = gpu_setup_hint()
    except Exception:  # a probe that fails must never stop the CPU path
        return
    if hint:
        warnings.warn(hint, GpuSetupWarning, stacklevel=3)


# ---------------------------------------------------------------------- usability
@functools.cache
def cuda_status() -> tuple[bool, str]:
    """Whether the ``cuda`` device is usable here, and a sentence saying why (not)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken install's own errors
        problem = _import_problem("CuPy", "cupy", exc)
        if not nvidia_driver().found:
            step = "then CuPy" if problem == "CuPy is not installed" else f"then fix CuPy ({problem})"
            return False, _without_driver(f"with an NVIDIA GPU, install its driver, {step}: "
                                          f"{install_command()}")
        return False, f"{problem}; {install_command()}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # the CUDA runtime raises its own error types
        problem = f"the CUDA runtime found no usable GPU ({type(exc).__name__}: {exc})"
        if not nvidia_driver().found:
            return False, _without_driver(f"CuPy is installed, and {problem}")
        return False, problem
    if count == 0:
        return False, "no CUDA GPU is visible (cudaGetDeviceCount returned 0)"
    try:
        from numba import cuda
    except Exception as exc:
        return False, f"{_import_problem('numba-cuda', 'numba.cuda', exc)}; {install_command()}"
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


def _without_driver(then: str) -> str:
    """Why ``cuda`` is unusable on a machine without an NVIDIA driver: the missing driver
    first (the real cause: there is no GPU to use), then ``then`` (CuPy: the next step)."""
    return f"no NVIDIA driver or GPU found ({NO_DRIVER_PROBES}); {then}"


def short_error(exc: BaseException) -> str:
    """An exception's message on one line, cut to 120 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 120 else text[:117] + "..."


def _import_problem(what: str, module: str, exc: BaseException) -> str:
    """"CuPy is not installed", or "CuPy cannot be imported (...)" for a broken install."""
    if isinstance(exc, ModuleNotFoundError) and exc.name in (module, module.split(".")[0]):
        return f"{what} is not installed"
    return f"{what} cannot be imported ({type(exc).__name__}: {short_error(exc)})"


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
        env = envvars.DEVICE.value()
        if env != "auto":
            name, source = env, f"environment variable {ENV_VAR}"
        else:
            if cuda_status()[0]:
                return "cuda"
            _warn_gpu_setup_once()
            return "cpu"
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
            f"{purpose} needs CuPy, which is not installed; {install_command()}") from None
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
