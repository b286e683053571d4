"""The OptiX engine behind the :class:`~indexzoo.native.rt.engine.Engine` interface: scenes by
``optixAccelBuild`` (:mod:`.accel`), query launches by ``optixLaunch`` with the layer's
programs and the index's CUDA C++ twins (:mod:`.pipeline`).

What OptiX cannot express here is refused with a clear error: generated geometry (OptiX's GAS
keeps its own primitives), launches with numba programs (OptiX takes CUDA C++), and numba
kernels that call ``optixTrace`` themselves (the in-kernel queries: an index that chains rays
on OptiX casts each link as a query launch instead). Nothing here imports ``optix`` or CuPy at
module level."""

from __future__ import annotations

from typing import Any

from indexzoo.errors import Unsupported

from ..engine import Engine, register_engine

__all__ = ["OptixEngine"]


class OptixEngine(Engine):
    """NVIDIA OptiX through ``pyoptix``, on the GPU: RT cores where the GPU has them."""

    name = "optix"
    generated_geometry = False
    in_kernel_queries = False
    numba_programs = False
    ordered_ties = False
    conservative_bounds = True
    saves_scenes = False
    shared_prims_only = True
    hardware_traversal = True

    def unavailable(self, device: str) -> str | None:
        if device != "cuda":
            return (f"engine='optix' runs on the GPU only; this index is on {device!r} (use "
                    "device='cuda', or engine='software')")
        from . import status

        got = status()
        return None if got.usable else f"engine='optix' cannot run here: {got.reason}"

    def build_gas(self, kind: int, data: Any, *, radius: float = 0.0, leaf_size: int = 4,
                  geometry: Any = None, compact: bool = True, keep_boxes: bool = False,
                  codes: Any = None) -> Any:
        # codes: OptiX builds its own BVH, over no order of ours
        if geometry is not None:
            raise Unsupported("OptiX has no generated geometry: its GAS keeps its own "
                              "primitives (use geometry='stored', or engine='software')")
        from .accel import build_gas

        return build_gas(kind, data, radius=radius, compact=compact, keep_boxes=keep_boxes)

    def build_ias(self, instances: Any) -> Any:
        from .accel import build_ias

        return build_ias(instances)

    def build_sliced_ias(self, kind: int, cuts: list[int], make: Any, radius: float = 0.0,
                         leaf_size: int = 4, *, geometry: Any = None, compact: bool = True,
                         held: int = 0, codes: Any = None) -> Any:
        """One OptiX GAS per slice, each built and compacted into its own buffer, under one
        IAS (instance ``i``: slice ``i``, identity transform, or a far slice's scaling one).
        Sphere scenes cannot be sliced (the layer's sphere program reads one GAS's centres by
        primitive index: :func:`.accel.build_ias` refuses them)."""
        from .accel import build_ias, instance_of

        if geometry is not None:
            raise Unsupported("OptiX has no generated geometry (use geometry='stored')")
        instances = []
        for i in range(len(cuts) - 1):
            gas = self.build_gas(kind, make(int(cuts[i]), int(cuts[i + 1])), radius=radius,
                                 compact=compact)
            instances.append(instance_of(gas, i))  # far slices under their scaling transform
        return build_ias(instances)

    def trace_query(self, scene: Any, programs: Any, op: int, params: Any, rays: Any,
                    n_rays: int, payload: Any, *, threads_per_block: int = 128,
                    device: str | None = None, hits: list[Any] | None = None) -> None:
        if hits is not None:
            raise Unsupported("per-ray closest hits (t, face) are not read back from OptiX")
        from .pipeline import launch_query

        launch_query(scene, programs.cuda, params, rays, n_rays, payload)

    def launch(self, scene: Any, n: int, programs: Any, *, flags: int = 0, payload: Any = None,
               params: tuple[Any, ...] = (), threads_per_block: int = 128,
               device: str | None = None) -> Any:
        raise Unsupported("OptiX launches take CUDA C++ programs through the query layer "
                          "(QueryPrograms.cuda), not numba programs")

    def closest_hit_query(self, kind: int, geometry: Any) -> Any:
        raise Unsupported("OptiX's optixTrace cannot be called from a numba kernel; cast the "
                          "rays as query launches (query.closest) on OptiX")

    def scene_query(self, kind: int, geometry: Any, two_level: bool, intersection: Any = None,
                    anyhit: Any = None) -> Any:
        raise Unsupported("OptiX's optixTrace cannot be called from a numba kernel; cast the "
                          "rays as query launches (query.closest) on OptiX")


register_engine(OptixEngine())
