"""``indexzoo doctor`` (also ``indexzoo info --system``): what this machine offers indexzoo.

It prints the devices and whether each is usable (and why not), the NVIDIA driver and the
CUDA version it runs, the installed CuPy and numba-cuda (or "not installed") with the
command that installs the matching extra, OptiX (the ``pyoptix`` module and
``OptiX_INSTALL_DIR``), numba's threading layer for CPU kernels, and what each registered
index can use here. Every probe is a function of :mod:`indexzoo.devices` or of this module,
so tests replace them to fake a machine; none needs a GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import os
import platform
from typing import TextIO

import indexzoo
from indexzoo import devices, envvars
from indexzoo.display import shown
from indexzoo.errors import ConfigError
from indexzoo.registry import available, load_errors

from .environment import device_name

__all__ = ["SECTIONS", "THREADING_NOTE", "auto_engine_text", "environment_rows", "optix_engine",
           "optix_status", "package_version", "report", "rt_cores_text", "threading_layer"]

#: Why the workqueue layer matters (see indexzoo.native.targets).
THREADING_NOTE = (
    "the workqueue layer is not thread-safe, so indexzoo serialises concurrent CPU lookups "
    "on one lock (indexzoo.native.targets.WORKQUEUE_LOCK); install TBB (pip install tbb) or "
    "use OpenMP to run them concurrently")

_CUPY_DISTS = ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy")


def package_version(*dists: str) -> tuple[str, str] | None:
    """(distribution, version) of the first of ``dists`` that is installed (metadata only:
    nothing is imported), or None."""
    for d in dists:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return d, importlib.metadata.version(d)
    return None


def optix_status() -> tuple[bool, str, str | None]:
    """(NVIDIA's ``pyoptix`` bindings importable (the ``optix`` module), why not or the OptiX
    version they were built for, ``OptiX_INSTALL_DIR`` or None)."""
    where = os.environ.get("OptiX_INSTALL_DIR")  # noqa: SIM112 (OptiX's own spelling)
    try:
        mod = importlib.import_module("optix")
    except Exception as exc:  # ImportError, or a broken install's own error
        why = "not installed" if isinstance(exc, ModuleNotFoundError) and \
            exc.name == "optix" else f"{type(exc).__name__}: {devices.short_error(exc)}"
        return False, why, where
    try:
        version = "OptiX " + ".".join(str(v) for v in mod.version())
    except Exception:
        version = "version unknown"
    return True, version, where


def optix_engine() -> tuple[bool, str]:
    """Whether the ray-tracing indexes' OptiX engine can run here, and why (not)."""
    from indexzoo.native.rt import optix

    got = optix.status()
    return got.usable, got.reason


def rt_cores_text() -> str:
    """The current GPU's RT-core generation (from its compute capability and name), or why
    none is known."""
    from indexzoo.native.rt import current_gpu, rt_core_generation

    gpu = current_gpu()
    if gpu is None:
        return "none (no usable CUDA GPU)"
    name, cc = gpu
    return f"{rt_core_generation(cc, name)} ({name}, compute capability {cc[0]}.{cc[1]})"


def auto_engine_text(cuda_ok: bool) -> str:
    """What ``engine="auto"`` picks for an RT index on ``device="auto"`` here, and why."""
    from indexzoo.native.rt import auto_engine

    got = auto_engine("cuda" if cuda_ok else "cpu")
    return f"{got.engine} ({got.reason})"


def threading_layer() -> tuple[str, str]:
    """(numba's threading layer, as chosen when a parallel CPU kernel runs; how it was set)."""
    import numba

    @numba.njit(parallel=True)
    def _probe(n: int) -> int:  # pragma: no cover - compiled
        s = 0
        for i in numba.prange(n):
            s += i
        return s

    wanted = os.environ.get("NUMBA_THREADING_LAYER", "default")
    try:
        from indexzoo.native.targets import call_parallel  # a malformed variable: ConfigError

        call_parallel(_probe, 64)
        layer = str(numba.threading_layer())
    except Exception as exc:
        return f"unknown ({type(exc).__name__}: {devices.short_error(exc)})", wanted
    return layer, wanted


def _rows(rows: list[tuple[str, str]], out: TextIO, indent: str = "  ") -> None:
    w = max((len(k) for k, _ in rows), default=0)
    for k, v in rows:
        out.write(f"{indent}{k:<{w}}  {v}\n")


def environment_rows() -> list[tuple[str, str]]:
    """(name, value or why it is malformed) of each ``INDEXZOO_*`` variable that is set."""
    rows = []
    for var in envvars.VARIABLES:
        text = os.environ.get(var.name)
        if text is None:
            continue
        try:
            var.value()
        except ConfigError:
            rows.append((var.name, f"{shown(text, 40)}: malformed, must be {var.form}"))
        else:
            rows.append((var.name, shown(text, 60)))
    return rows or [("none set", "every INDEXZOO_* variable has its default")]


#: The report's sections: the JSON key and the heading of each.
SECTIONS = (("devices", "devices"), ("environment", "environment variables (docs/cli.md)"),
            ("nvidia_driver", "NVIDIA driver"), ("gpu_libraries", "GPU libraries"),
            ("optix", "OptiX"), ("cpu_kernels", "CPU kernels"))


def report(out: TextIO, as_json: bool = False) -> int:
    """Write the report to ``out`` (as one JSON object with ``as_json``: ``indexzoo``,
    ``python``, ``numpy``, ``numba``, ``platform``, ``cuda_usable``, one object per section of
    :data:`SECTIONS` mapping each row's name to its text, ``indexes`` and
    ``unusable_indexes``); returns 0."""
    import numba
    import numpy as np

    header = {"indexzoo": indexzoo.__version__, "python": platform.python_version(),
              "numpy": np.__version__, "numba": numba.__version__,
              "platform": platform.platform()}
    cuda_ok, cuda_why = devices.cuda_status()
    usable = ["cpu"] + (["cuda"] if cuda_ok else [])
    sections = _sections(cuda_ok, cuda_why)
    indexes: dict[str, tuple[tuple[str, ...], list[str]]] = {}
    unusable: dict[str, str] = {}
    none_loaded: str | None = None
    try:
        for name, cls in available().items():
            can: tuple[str, ...] = tuple(cls.capabilities.devices)
            indexes[name] = (can, [d for d in can if d in usable])
        unusable = dict(load_errors())
    except ConfigError as exc:  # a malformed variable read as plugins are imported
        none_loaded = str(exc)
    if as_json:
        got = {**header, "cuda_usable": cuda_ok,
               **{key: dict(rows) for key, rows in sections.items()},
               "indexes": {name: {"devices": list(devs), "usable_here": here}
                           for name, (devs, here) in indexes.items()},
               "unusable_indexes": dict(unusable)}
        if none_loaded is not None:
            got["indexes_error"] = none_loaded
        json.dump(got, out, indent=2)
        out.write("\n")
        return 0
    out.write(f"indexzoo {header['indexzoo']} (Python {header['python']}, numpy "
              f"{header['numpy']}, numba {header['numba']}) on {header['platform']}\n")
    for key, heading in SECTIONS:
        out.write(f"\n{heading}\n")
        _rows(sections[key], out)
    out.write("\nindexes (devices each can run on, and which of them are usable here)\n")
    if none_loaded is not None:
        out.write(f"  none loaded: {none_loaded}\n")
        return 0
    table = [("index", "devices", "usable here")]
    for name, (devs, here) in indexes.items():
        missing = [d for d in devs if d not in here]
        text = " ".join(here) if here else "none"
        if missing:
            text += f" (not {' '.join(missing)}: unusable here)"
        table.append((name, " ".join(devs), text))
    w0 = max(len(r[0]) for r in table)
    w1 = max(len(r[1]) for r in table)
    for a, b, c in table:
        out.write(f"  {a:<{w0}}  {b:<{w1}}  {c}\n")
    for name, why in unusable.items():
        out.write(f"  {name:<{w0}}  {'(failed to load)':<{w1}}  {why}\n")
    return 0


def _sections(cuda_ok: bool, cuda_why: str) -> dict[str, list[tuple[str, str]]]:
    """The rows of each section of :data:`SECTIONS`, by its key."""
    import numba

    env = os.environ.get(devices.ENV_VAR)
    try:
        chosen = envvars.DEVICE.value()
    except ConfigError as exc:
        auto = f"nothing: {exc}"
    else:
        if chosen == "auto":
            auto = ("cuda" if cuda_ok else "cpu") + f" ({devices.ENV_VAR} is not set)"
        else:
            auto = f"{chosen} ({devices.ENV_VAR}={shown(env, 40)})"
    out: dict[str, list[tuple[str, str]]] = {}
    out["devices"] = [("cpu", f"usable: {device_name('cpu')}"),
                      ("cuda", ("usable: " if cuda_ok else "not usable: ") + cuda_why),
                      ("auto", f"means {auto}")]
    out["environment"] = environment_rows()

    info = devices.nvidia_driver()
    if info.found:
        rows = [("found", ", ".join(info.evidence)),
                ("driver", info.driver_version or "version unknown"),
                ("CUDA", f"{info.cuda_text}" + (f" (from {info.cuda_source})"
                                                 if info.cuda_source else ""))]
        if info.gpus:
            rows.append(("GPUs", "; ".join(info.gpus)))
        out["nvidia_driver"] = rows
    else:
        out["nvidia_driver"] = [("not found", devices.NO_DRIVER_PROBES)]

    cupy = package_version(*_CUPY_DISTS)
    ncuda = package_version("numba-cuda")
    rows = [("CuPy", f"{cupy[1]} ({cupy[0]})" if cupy else "not installed"),
            ("numba-cuda", ncuda[1] if ncuda else "not installed")]
    if not cuda_ok:
        first = "" if info.found else "an NVIDIA driver first (none found), then "
        rows.append(("install", first + devices.install_command(info)))
    out["gpu_libraries"] = rows

    ok, why, where = optix_status()
    engine_ok, engine_why = optix_engine()
    out["optix"] = [
        ("pyoptix", f"importable ({why})" if ok else f"not importable ({why})"),
        ("OptiX_INSTALL_DIR", (where + ("" if os.path.isdir(where) else " (not a directory)"))
         if where else "not set"),
        ("engine", ("usable: " if engine_ok else "not usable: ") + engine_why),
        ("RT cores", rt_cores_text()),
        ("auto", auto_engine_text(cuda_ok)),
        ("note", "every ray-tracing index (rx, rx-opt, cgrx, rtscan) takes engine="
                 "'software', 'optix' or 'auto'; auto is OptiX where the GPU has RT cores "
                 "and OptiX is usable, else indexzoo's software ray tracer, which needs no "
                 "OptiX")]

    layer, wanted = threading_layer()
    rows = [("threading layer", f"{layer} (NUMBA_THREADING_LAYER={wanted})"),
            ("threads", str(numba.config.NUMBA_NUM_THREADS))]
    if layer == "workqueue":
        rows.append(("note", THREADING_NOTE))
    out["cpu_kernels"] = rows
    return out
