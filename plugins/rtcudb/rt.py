"""The one door from the rtcudb engine to a ray-tracing engine: the engine a view runs on,
scene build, launch (the software engine's own launch with numba programs, or the query
layer's launch with CUDA C++ twins on OptiX), the any-hit verdict and the scene's bytes.
Everything the plugin needs of ``indexzoo.native.rt`` is imported here and nowhere else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import array_module
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt.layout import TRIANGLES
from indexzoo.native.rt.params import EngineParams
from indexzoo.native.rt.select import select_engine

if TYPE_CHECKING:
    from indexzoo.native.rt import query, trace
    from indexzoo.native.rt.query import NO_MATCH, QueryPrograms
    from indexzoo.native.rt.trace import IGNORE
else:  # the tracer's numba modules: imported when a view is prepared or traced
    query = lazy_module("indexzoo.native.rt.query")
    trace = lazy_module("indexzoo.native.rt.trace")

__all__ = ["IGNORE", "NO_MATCH", "EngineParams", "QueryPrograms", "build_triangles", "cast",
           "cast_layer", "engine_for", "on_layer", "on_layer_engine", "scene_bytes"]

#: The names of :data:`__all__` read from the tracer's modules on first use (PEP 562).
_LATER = {"IGNORE": trace, "NO_MATCH": query, "QueryPrograms": query}


def __getattr__(name: str) -> Any:
    if name in _LATER:
        return getattr(_LATER[name], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        trace.launch(scene, n_rays, trace.Programs(raygen=raygen, anyhit=anyhit), params=params,
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
    batch = query.FunctionBatch.of(xp.asarray(np.array([n_rays], dtype=np.int64)),
                                   lambda s, e, owner: query.Generated(raygen, stand_in),
                                   lambda s, e, owner: record(s))
    query.count(scene, batch, programs, max_rays=max_rays)


def scene_bytes(scene: Any) -> dict[str, int]:
    """The scene's bytes by part (primitives, BVH nodes, order)."""
    return dict(scene.footprint().breakdown)
