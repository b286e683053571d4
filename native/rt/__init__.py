"""The ray-tracing engine of the RT indexes: one interface (:class:`Engine`) over indexzoo's
software tracer and NVIDIA OptiX, the query layer that turns lookups into ray batches, and the
RX family's shared parts (key maps, key primitives, key rays, key scenes). What an index needs
is exported here, engine-neutral; docs/rt-engine.md documents it.

* Engines: :func:`select_engine` (``software`` | ``optix`` | ``auto``), :func:`auto_engine`
  (the ``auto`` rule and why), :func:`rt_core_generation`; every scene carries its engine
  (``scene.engine``), which builds (``build_gas``, ``build_ias``, ``build_sliced_ias``,
  ``refit``) and traces (``trace_query``, ``launch``, the in-kernel ``closest_hit_query`` and
  ``scene_query``).
* Scenes: the primitive kinds :data:`TRIANGLES`, :data:`SPHERES`, :data:`AABBS`, and
  :class:`Instance`; programs (:class:`Programs`) and their verdicts and ray flags.
* The query layer: :mod:`.query` (``query.first``, ``.count``, ``.sum_values``, ``.collect``,
  ``.closest``, ``.mark_bits``), with :class:`QueryPrograms`, :class:`RayBatch`,
  :class:`FunctionBatch`, :class:`Rays`, :class:`Generated`.
* The RX family: :class:`KeyCoder` (key -> coordinates), key primitives and rays,
  :func:`key_gas`, and the parameter models :class:`EngineParams`, :class:`SceneParams`,
  :class:`KeySceneParams`.
* Index mixins: :class:`EngineIndex` (every RT index), :class:`KeySceneIndex` (the RX family).

The engines' own modules (:mod:`.trace` and :mod:`.bvh` of the software tracer, :mod:`.optix`)
stay importable for the engine's tests and benchmarks; indexes use what is exported here.
"""

from __future__ import annotations

from . import query
from . import software as _software  # registers the software engine
from .bvh import slab_box
from .engine import ENGINES, Engine, engine_named, rt_core_generation
from .geometry import AABBS, SPHERES, TRIANGLES, pick
from .indexes import EngineIndex, KeySceneIndex
from .keymap import PART_LIMIT, KeyCoder, gaps_of_x
from .keyprims import (
    KIND,
    SPHERE_RADIUS,
    exact_key_box,
    geometry_function,
    perpendicular_raygen,
    point_function,
)
from .keyprims import primitives as key_primitives
from .keyrays import occupied_row_rays, occupied_rows, perpendicular_rays, row_rays
from .keyscene import KeyGas, key_codes, key_gas
from .optix import engine as _optix_engine  # registers the OptiX engine (imports no OptiX)
from .params import EngineName, EngineParams, KeySceneParams, SceneParams
from .query import (
    MISS,
    NO_MATCH,
    FunctionBatch,
    Generated,
    HitOp,
    QueryPrograms,
    RayBatch,
    Rays,
    Scene,
    bit_writers,
    clear_bit,
)
from .select import AutoChoice, auto_engine, current_gpu, params_for_load, select_engine
from .trace import (
    ACCEPT,
    CULL_BACK_FACING,
    CULL_FRONT_FACING,
    DISABLE_ANYHIT,
    DISABLE_CLOSESTHIT,
    IGNORE,
    RAYS_SERIAL_BELOW,
    TERMINATE,
    TERMINATE_ON_FIRST_HIT,
    Instance,
    Programs,
)

del _optix_engine, _software

__all__ = [
    "AABBS", "ACCEPT", "CULL_BACK_FACING", "CULL_FRONT_FACING", "DISABLE_ANYHIT",
    "DISABLE_CLOSESTHIT", "ENGINES", "IGNORE", "KIND", "MISS", "NO_MATCH", "PART_LIMIT",
    "RAYS_SERIAL_BELOW", "SPHERES", "SPHERE_RADIUS", "TERMINATE", "TERMINATE_ON_FIRST_HIT",
    "TRIANGLES", "AutoChoice", "Engine", "EngineIndex", "EngineName", "EngineParams", "FunctionBatch",
    "Generated", "HitOp", "Instance", "KeyCoder", "KeyGas", "KeySceneIndex", "KeySceneParams", "Programs",
    "QueryPrograms", "RayBatch", "Rays", "Scene", "SceneParams", "auto_engine",
    "bit_writers", "clear_bit", "current_gpu", "engine_named", "exact_key_box", "gaps_of_x",
    "geometry_function", "key_codes", "key_gas", "key_primitives", "occupied_row_rays", "occupied_rows",
    "params_for_load", "perpendicular_raygen", "perpendicular_rays", "pick", "point_function",
    "query", "row_rays", "rt_core_generation", "select_engine", "slab_box",
]
