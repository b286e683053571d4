"""The OptiX backend of the ray-tracing engine: the same concepts as the software engine
(:mod:`indexzoo.native.rt.trace`), run by NVIDIA OptiX through NVIDIA's ``pyoptix`` bindings
(``import optix``).

* :mod:`.accel`: :class:`~.accel.OptixGas`, ``optixAccelBuild`` over triangles, spheres or
  AABBs, ``optixAccelCompact``, footprints from ``optixAccelComputeMemoryUsage``.
* :mod:`.pipeline`: one device context per GPU, modules and pipelines per program source,
  shader binding tables, ``optixLaunch``.
* :mod:`.record`: the launch-parameter struct, written from the query layer's launch record
  (the same named fields the software engine's programs read).
* :mod:`.compiler`: CUDA C++ to PTX with NVRTC, cached per device and source hash.
* ``query.cu``: the query layer's programs (ray generation, any-hit, closest-hit, miss, the
  sphere intersection); an index adds its ``iz_match`` (and, for AABBs, its intersection).

Nothing here imports ``optix`` (or CuPy) at module level: the package imports cleanly on a
machine without them, and :func:`status` says what is missing.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import threading
from dataclasses import dataclass

from indexzoo.errors import DeviceUnavailable

from .sdk import ENV, INSTALL_HINT, headers_dir, import_optix

__all__ = ["INSTALL_HINT", "OptixStatus", "headers_dir", "installed", "require", "rt_cores",
           "status"]

@dataclass(frozen=True)
class OptixStatus:
    """Whether the OptiX engine can run here: ``usable``, and ``reason`` (what is missing, or
    what was found)."""

    usable: bool
    reason: str


_LOCK = threading.Lock()
_PROBED: dict[int, OptixStatus] = {}


def installed() -> OptixStatus:
    """Whether the ``pyoptix`` bindings and the SDK headers are here, found without importing
    the bindings, CuPy or numba and without touching a GPU (what ``indexzoo list`` and
    ``info`` report; :func:`status` and ``indexzoo doctor`` go on to the device)."""
    if importlib.util.find_spec("optix") is None:
        return OptixStatus(False, f"pyoptix is not installed; {INSTALL_HINT}")
    if headers_dir() is None:
        where = os.environ.get(ENV)
        why = f"{ENV} is not set" if not where else f"{ENV}={where!r} holds no include/optix.h"
        return OptixStatus(False, f"the OptiX SDK headers are needed to compile the programs: "
                                  f"{why}; {INSTALL_HINT}")
    return OptixStatus(True, "pyoptix and the OptiX SDK headers are installed; `indexzoo "
                             "doctor` checks the GPU")


def status(probe_device: bool = True) -> OptixStatus:
    """What stands between this machine and the OptiX engine, checked in order: the
    ``pyoptix`` bindings, the SDK headers (``OptiX_INSTALL_DIR``), NVRTC (``cuda.bindings``), a
    usable CUDA device, and (``probe_device``) an OptiX device context on it, whose creation
    fails where the driver does not speak the bindings' OptiX ABI. The device probe is cached
    per process."""
    try:
        optix = import_optix()
    except Exception as exc:  # ImportError, or a broken build's own error
        why = "pyoptix is not installed" if isinstance(exc, ModuleNotFoundError) else \
            f"pyoptix cannot be imported ({type(exc).__name__}: {exc})"
        return OptixStatus(False, f"{why}; {INSTALL_HINT}")
    if headers_dir() is None:
        where = os.environ.get(ENV)
        why = f"{ENV} is not set" if not where else \
            f"{ENV}={where!r} holds no include/optix.h"
        return OptixStatus(False, f"the OptiX SDK headers are needed to compile the programs: "
                                  f"{why}; {INSTALL_HINT}")
    try:
        importlib.import_module("cuda.bindings.nvrtc")
    except Exception as exc:
        return OptixStatus(False, f"NVRTC from cuda.bindings is needed to compile the programs "
                                  f"({type(exc).__name__}: {exc}); pip install cuda-python")
    from indexzoo import devices  # NumPy: not for installed(), which `indexzoo list` calls

    ok, why = devices.cuda_status()
    if not ok:
        return OptixStatus(False, f"OptiX needs a usable CUDA device: {why}")
    version = ".".join(str(v) for v in optix.version())
    if not probe_device:
        return OptixStatus(True, f"pyoptix for OptiX {version}; device not probed")
    return _probe(version)


def _probe(version: str) -> OptixStatus:
    import cupy

    dev = int(cupy.cuda.Device().id)
    with _LOCK:
        got = _PROBED.get(dev)
        if got is None:
            try:
                from .pipeline import context

                ctx = context()
                cores = rt_cores()
                got = OptixStatus(True, f"OptiX {version}, "
                                  + ("RT cores" if cores else "no RT cores: the driver traverses "
                                     "in software") + f" ({ctx.__class__.__name__} ready)")
            except Exception as exc:
                got = OptixStatus(False, f"an OptiX device context could not be created "
                                         f"({type(exc).__name__}: {exc}); the driver may not "
                                         f"speak pyoptix's OptiX {version} ABI: build pyoptix "
                                         "against the SDK headers of the driver's OptiX version")
            _PROBED[dev] = got
    return got


@functools.cache
def rt_cores() -> bool:
    """Whether the current GPU has RT cores (OptiX's RT core version > 0)."""
    from .pipeline import context

    optix = import_optix()
    prop = getattr(optix, "DEVICE_PROPERTY_RTCORE_VERSION", None)
    if prop is None:
        return False
    return int(context().getProperty(prop)) > 0


def require() -> None:
    """Raise :class:`~indexzoo.DeviceUnavailable` saying what is missing unless the OptiX
    engine can run here."""
    got = status()
    if not got.usable:
        raise DeviceUnavailable(f"engine='optix' cannot run here: {got.reason}")
