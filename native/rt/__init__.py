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

Importing this package imports none of its modules: each name is imported from its module on
first use (PEP 562), so an index module can name ``rt.KeySceneIndex`` as its base and
``rt.query`` in its methods, and importing the index (as the registry does to list it)
compiles and imports no tracer. Each engine's module is imported when the engine is first
named (:func:`engine_named`).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers see them; at run time see _HOMES
    from . import query
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

#: The module of each name (the ``TYPE_CHECKING`` imports above, as data); ``module:name``
#: where the name differs from the module's own.
_HOMES = {
    "slab_box": "bvh",
    **dict.fromkeys(("ENGINES", "Engine", "engine_named", "rt_core_generation"), "engine"),
    **dict.fromkeys(("AABBS", "SPHERES", "TRIANGLES", "pick"), "geometry"),
    **dict.fromkeys(("EngineIndex", "KeySceneIndex"), "indexes"),
    **dict.fromkeys(("PART_LIMIT", "KeyCoder", "gaps_of_x"), "keymap"),
    **dict.fromkeys(("KIND", "SPHERE_RADIUS", "exact_key_box", "geometry_function",
                     "perpendicular_raygen", "point_function"), "keyprims"),
    "key_primitives": "keyprims:primitives",
    **dict.fromkeys(("occupied_row_rays", "occupied_rows", "perpendicular_rays", "row_rays"),
                    "keyrays"),
    **dict.fromkeys(("KeyGas", "key_codes", "key_gas"), "keyscene"),
    **dict.fromkeys(("EngineName", "EngineParams", "KeySceneParams", "SceneParams"), "params"),
    **dict.fromkeys(("MISS", "NO_MATCH", "FunctionBatch", "Generated", "HitOp", "QueryPrograms",
                     "RayBatch", "Rays", "Scene", "bit_writers", "clear_bit", "query"), "query"),
    **dict.fromkeys(("AutoChoice", "auto_engine", "current_gpu", "params_for_load",
                     "select_engine"), "select"),
    **dict.fromkeys(("ACCEPT", "CULL_BACK_FACING", "CULL_FRONT_FACING", "DISABLE_ANYHIT",
                     "DISABLE_CLOSESTHIT", "IGNORE", "RAYS_SERIAL_BELOW", "TERMINATE",
                     "TERMINATE_ON_FIRST_HIT", "Instance", "Programs"), "trace"),
}


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, imported from its module on first use and kept here; or a
    submodule (``rt.trace``), imported."""
    home = _HOMES.get(name)
    if home is None:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = home.partition(":")
    found = importlib.import_module(f"{__name__}.{module}")
    value = found if name == module else getattr(found, attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
