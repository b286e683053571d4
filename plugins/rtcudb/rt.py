"""The one door from the rtcudb engine to a ray-tracing engine: the engine a view runs on,
scene build, launch (the software engine's own launch with numba programs, or the query
layer's launch with CUDA C++ twins on OptiX), the any-hit verdict and the scene's bytes.
Everything the plugin needs of ``indexzoo.native.rt`` is imported here and nowhere else."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import array_module
from indexzoo.native.rt.geometry import TRIANGLES
from indexzoo.native.rt.params import EngineParams
from indexzoo.native.rt.query import NO_MATCH, FunctionBatch, Generated, QueryPrograms, count
from indexzoo.native.rt.select import select_engine
from indexzoo.native.rt.trace import IGNORE, Programs, launch

__all__ = ["IGNORE", "NO_MATCH", "EngineParams", "QueryPrograms", "build_triangles", "cast",
           "cast_layer", "engine_for", "on_layer", "on_layer_engine", "scene_bytes"]


def engine_for(want: str, device: str, per_operator: bool) -> Any:
    """The engine of ``engine=want`` on ``device``; OptiX runs the fused pipeline only."""
    return select_engine(want, device, optix_takes=(
        "pipeline='per-operator' (its programs are numba's only)" if per_operator else None))


def build_triangles(tri: Any, codes: Any, engine: Any) -> Any:
    """A geometry acceleration structure over ``tri`` ((N, 9) float32 triangles) on
    ``engine``; ``codes``: the triangles' sort codes for the software engine's BVH (None: its
    Morton codes; OptiX builds its own)."""
    return engine.build_gas(TRIANGLES, tri, codes=codes)


def on_layer(scene: Any) -> bool:
    """Whether ``scene``'s engine takes the query layer's launch with CUDA C++ programs (OptiX)
    instead of a launch with numba programs."""
    return on_layer_engine(scene.engine)


def on_layer_engine(engine: Any) -> bool:
    """:func:`on_layer` of an engine: one whose programs are not numba functions."""
    return not engine.numba_programs


def cast(scene: Any, n_rays: int, raygen: Any, anyhit: Any, params: tuple[Any, ...],
         device: str) -> None:
    """Launch ``n_rays`` rays made by ``raygen(i, params)`` in the kernel; every hit goes to
    ``anyhit(ray, inst, prim, t, front, payload, params)``, which ignores it (so traversal
    reports every primitive on the ray)."""
    if n_rays > 0:
        launch(scene, n_rays, Programs(raygen=raygen, anyhit=anyhit), params=params,
               payload=array_module(device).zeros((n_rays, 1), dtype=np.uint64), device=device)


def cast_layer(scene: Any, n_rays: int, programs: QueryPrograms, raygen: Any, record: Any,
               max_rays: int, device: str) -> None:
    """The same rays as one lookup of the query layer's ``COUNT``: ``raygen(i, params)`` makes
    ray ``params.ray_base + i``, ``programs.match`` does the work of a hit and ignores it.
    ``record(base)``: the launch record of the rays from ``base`` on."""
    if n_rays <= 0:
        return
    xp = array_module(device)
    stand_in = xp.zeros(1, dtype=np.uint64)
    batch = FunctionBatch.of(xp.asarray(np.array([n_rays], dtype=np.int64)),
                             lambda s, e, owner: Generated(raygen, stand_in),
                             lambda s, e, owner: record(s))
    count(scene, batch, programs, max_rays=max_rays)


def scene_bytes(scene: Any) -> dict[str, int]:
    """The scene's bytes by part (primitives, BVH nodes, order)."""
    return dict(scene.footprint().breakdown)
