"""The one door from the rtcudb engine to a ray-tracing engine: scene build, launch, the
any-hit verdict and the scene's bytes. Everything the plugin needs of ``indexzoo.native.rt``
is imported here and nowhere else, so the engine can be pointed at another ray-tracing
engine (OptiX, or an engine interface) by changing this module alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import array_module
from indexzoo.native.rt.geometry import TRIANGLES
from indexzoo.native.rt.trace import IGNORE, Programs, build_gas, launch

__all__ = ["IGNORE", "build_triangles", "cast", "scene_bytes"]


def build_triangles(tri: Any, codes: Any = None) -> Any:
    """A geometry acceleration structure over ``tri`` ((N, 9) float32 triangles); ``codes``:
    the triangles' sort codes for the BVH (None: the engine's Morton codes)."""
    return build_gas(TRIANGLES, tri, codes=codes)


def cast(scene: Any, n_rays: int, raygen: Any, anyhit: Any, params: tuple[Any, ...],
         device: str) -> None:
    """Launch ``n_rays`` rays made by ``raygen(i, params)`` in the kernel; every hit goes to
    ``anyhit(ray, inst, prim, t, front, payload, params)``, which ignores it (so traversal
    reports every primitive on the ray)."""
    if n_rays > 0:
        launch(scene, n_rays, Programs(raygen=raygen, anyhit=anyhit), params=params,
               payload=array_module(device).zeros((n_rays, 1), dtype=np.uint64), device=device)


def scene_bytes(scene: Any) -> dict[str, int]:
    """The scene's bytes by part (primitives, BVH nodes, order)."""
    return dict(scene.footprint().breakdown)
