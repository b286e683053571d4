"""The one door from the rtcudb engine to a ray-tracing engine: scene build, launch, the
any-hit verdict and the scene's bytes. Everything the plugin needs of ``indexzoo.native.rt``
is imported here and nowhere else, so the engine can be pointed at another ray-tracing
engine (OptiX, or an engine interface) by changing this module alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import array_module
from indexzoo.native.rt.geometry import TRIANGLES
from indexzoo.native.rt.trace import IGNORE, Programs, build_gas, trace

__all__ = ["IGNORE", "build_triangles", "cast", "scene_bytes"]


def build_triangles(tri: Any) -> Any:
    """A geometry acceleration structure over ``tri`` ((N, 9) float32 triangles)."""
    return build_gas(TRIANGLES, tri)


def cast(scene: Any, origins: Any, tmax: Any, anyhit: Any, params: tuple[Any, ...],
         device: str) -> None:
    """Rays from ``origins`` along +Z with tmin 0 and per-ray ``tmax``; every hit goes to
    ``anyhit(ray, inst, prim, t, front, payload, params)``, which ignores it (so traversal
    reports every primitive on the ray)."""
    xp = array_module(device)
    r = int(origins.shape[0])
    if r == 0:
        return
    d = xp.zeros((r, 3), dtype=np.float32)
    d[:, 2] = 1
    trace(scene, origins, d, xp.zeros(r, dtype=np.float32), tmax,
          programs=Programs(anyhit=anyhit), params=params)


def scene_bytes(scene: Any) -> dict[str, int]:
    """The scene's bytes by part (primitives, BVH nodes, order)."""
    return dict(scene.footprint().breakdown)
