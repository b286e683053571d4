"""The software engine behind the :class:`~.engine.Engine` interface: indexzoo's own tracer
(:mod:`.trace`, one numba source for the CPU and the GPU), with the query layer's programs
composed over an index's ``match`` (:mod:`.programs`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .engine import Engine, register_engine
from .programs import Generated, HitOp, bitmap_programs, engine_programs
from .trace import DISABLE_CLOSESTHIT, TERMINATE_ON_FIRST_HIT, Gas, Ias
from .trace import bind_launch as sw_bind_launch
from .trace import build_gas as sw_build_gas
from .trace import build_ias as sw_build_ias
from .trace import build_sliced_ias as sw_build_sliced_ias
from .trace import closest_hit_query as sw_closest_hit_query
from .trace import launch as sw_launch
from .trace import scene_query as sw_scene_query
from .trace import trace as sw_trace

__all__ = ["SoftwareEngine"]


class SoftwareEngine(Engine):
    """indexzoo's ray tracer: CUDA cores or the CPU, every configuration."""

    name = "software"
    generated_geometry = True
    in_kernel_queries = True
    numba_programs = True
    ordered_ties = True
    conservative_bounds = False
    saves_scenes = True
    shared_prims_only = False
    hardware_traversal = False

    def unavailable(self, device: str) -> str | None:
        return None  # runs wherever the index's device does

    def build_gas(self, kind: int, data: Any, *, radius: float = 0.0, leaf_size: int = 4,
                  geometry: Any = None, compact: bool = True, keep_boxes: bool = False,
                  codes: Any = None) -> Gas:
        # the software GAS always keeps its rows: keep_boxes is implied
        return sw_build_gas(kind, data, radius=radius, leaf_size=leaf_size, geometry=geometry,
                            compact=compact, codes=codes)

    def build_ias(self, instances: Any) -> Ias:
        return sw_build_ias(instances)

    def build_sliced_ias(self, kind: int, cuts: list[int], make: Any, radius: float = 0.0,
                         leaf_size: int = 4, *, geometry: Any = None, compact: bool = True,
                         held: int = 0, codes: Any = None) -> Ias:
        return sw_build_sliced_ias(kind, cuts, make, radius, leaf_size, geometry=geometry,
                                   compact=compact, held=held, codes=codes)

    def trace_query(self, scene: Any, programs: Any, op: int, params: Any, rays: Any,
                    n_rays: int, payload: Any, *, threads_per_block: int = 128,
                    device: str | None = None, hits: list[Any] | None = None) -> None:
        assert isinstance(scene, (Gas, Ias))
        flags = 0 if op == HitOp.CLOSEST else \
            DISABLE_CLOSESTHIT | (TERMINATE_ON_FIRST_HIT if op == HitOp.FIRST else 0)
        generated = isinstance(rays, Generated)
        raygen = rays.raygen if generated else None
        if op == HitOp.BITMAP:
            xp_cpu = isinstance(payload, np.ndarray)
            programs = bitmap_programs(programs, raygen,
                                             device or ("cpu" if xp_cpu else "cuda"))
        else:
            programs = engine_programs(programs, raygen)
        if generated:
            got = sw_launch(scene, n_rays, programs, flags=flags, payload=payload, params=params,
                            threads_per_block=threads_per_block, device=device)
        else:
            got = sw_trace(scene, rays.origins, rays.directions, rays.tmin, rays.tmax,
                           programs=programs, flags=flags, payload=payload, params=params,
                           threads_per_block=threads_per_block, device=device)
        if hits is not None:
            hits.append(got)

    def bind_query(self, scene: Any, programs: Any, op: int, params: Any, raygen: Any,
                   most: int, *, threads_per_block: int = 128,
                   device: str | None = None) -> Any:
        if op in (HitOp.BITMAP, HitOp.CLOSEST):  # (no caller needs them bound)
            return None
        flags = DISABLE_CLOSESTHIT | (TERMINATE_ON_FIRST_HIT if op == HitOp.FIRST else 0)
        return sw_bind_launch(scene, most, engine_programs(programs, raygen), flags,
                              params, threads_per_block=threads_per_block, device=device)

    def launch(self, scene: Any, n: int, programs: Any, *, flags: int = 0, payload: Any = None,
               params: tuple[Any, ...] = (), threads_per_block: int = 128,
               device: str | None = None) -> Any:
        return sw_launch(scene, n, programs, flags=flags, payload=payload, params=params,
                         threads_per_block=threads_per_block, device=device)

    def closest_hit_query(self, kind: int, geometry: Any) -> Any:
        return sw_closest_hit_query(kind, geometry)

    def scene_query(self, kind: int, geometry: Any, two_level: bool, intersection: Any = None,
                    anyhit: Any = None) -> Any:
        return sw_scene_query(kind, geometry, two_level, intersection, anyhit)


register_engine(SoftwareEngine())
