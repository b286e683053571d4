"""How an index's ``engine`` parameter (``software`` | ``optix`` | ``auto``) becomes an
:class:`~.engine.Engine` on a device, and the ``auto`` rule (documented in docs/rt-engine.md,
shown by ``indexzoo doctor``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .engine import Engine, engine_named, rt_core_generation

__all__ = ["AutoChoice", "auto_engine", "current_gpu", "params_for_load", "select_engine"]


def current_gpu() -> tuple[str, tuple[int, int]] | None:
    """(name, compute capability) of the current CUDA device, or None without a usable one."""
    from indexzoo import devices

    ok, _ = devices.cuda_status()
    if not ok:
        return None
    try:
        import cupy

        dev = cupy.cuda.Device()
        cc = str(dev.compute_capability)
        name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return name, (int(cc[:-1]), int(cc[-1]))
    except Exception:
        return None


@dataclass(frozen=True)
class AutoChoice:
    """What ``engine="auto"`` picks on a device, and why."""

    engine: str
    reason: str


def auto_engine(device: str, *, optix_takes: str | None = None) -> AutoChoice:
    """``engine="auto"`` on ``device``: OptiX where (1) the device is the GPU, (2) the GPU has RT
    cores (:func:`rt_core_generation` of its compute capability and name), (3) OptiX is usable
    (:func:`indexzoo.native.rt.optix.status`) and (4) the index's configuration is one OptiX
    takes (``optix_takes``: None, or why not); else the software engine. Without RT cores the
    OptiX driver traverses in software, which measured no faster than the software engine
    (docs/rt-engine.md), while the software engine holds less memory."""
    if device != "cuda":
        return AutoChoice("software", f"the index is on {device!r}; OptiX runs on the GPU only")
    gpu = current_gpu()
    if gpu is None:
        return AutoChoice("software", "no usable CUDA GPU")
    name, cc = gpu
    gen = rt_core_generation(cc, name)
    if gen == "none":
        return AutoChoice("software", f"{name} (compute capability {cc[0]}.{cc[1]}) has no RT "
                                      "cores")
    from . import optix

    got = optix.status()
    if not got.usable:
        return AutoChoice("software", f"{name} has {gen} RT cores, but OptiX is not usable: "
                                      f"{got.reason}")
    if optix_takes is not None:
        return AutoChoice("software", f"{name} has {gen} RT cores, but OptiX does not take "
                                      f"this configuration: {optix_takes}")
    return AutoChoice("optix", f"{name} has {gen} RT cores and OptiX is usable")


def select_engine(want: str, device: str, *, optix_takes: str | None = None) -> Engine:
    """The engine of an index's ``engine`` parameter on ``device``: ``software``; ``optix``,
    raising :class:`~indexzoo.DeviceUnavailable` that says what is missing where it cannot
    run (or :class:`~indexzoo.Unsupported` where it cannot take the configuration,
    ``optix_takes``); ``auto``: :func:`auto_engine`."""
    if want == "auto":
        return engine_named(auto_engine(device, optix_takes=optix_takes).engine)
    engine = engine_named(want)
    engine.require(device)
    if optix_takes is not None and want == "optix":
        from indexzoo.errors import Unsupported

        raise Unsupported(f"engine='optix' does not take this configuration: {optix_takes}; "
                          "use engine='software'")
    return engine


def params_for_load(params: Any, device: str) -> Any:
    """Saved params of an RT index as an index loaded onto ``device`` takes them:
    ``engine="optix"`` runs on the GPU only, so an index saved (or pickled) with it and loaded
    onto the CPU takes ``engine="auto"`` there (the software engine on the CPU; loaded onto a
    GPU again, OptiX where the GPU has RT cores). The scenes are built again on load in
    either case: OptiX's are never saved. Every RT index uses it. The configuration changes
    with the engine: ``rowid`` among duplicate keys (any one match) and the order of
    ``rowids`` may then differ from the OptiX-built index's, while counts, sums and the sets
    of rowIDs stay the same."""
    if device == "cpu" and isinstance(params, dict) and params.get("engine") == "optix":
        return {**params, "engine": "auto"}
    return params
