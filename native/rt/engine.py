"""The engine interface of the ray-tracing family: what an RT index asks of a ray tracer, and
how ``engine="software" | "optix" | "auto"`` becomes one.

An :class:`Engine` builds scenes (a GAS over triangles, spheres or AABBs, an IAS over GASes,
a sliced IAS of one GAS per slice, refits) and traces them: a launch of the query layer's rays
with a hit operation (:meth:`Engine.trace_query`, what :mod:`.query` calls per launch), a
launch with the engine's own programs (:meth:`Engine.launch`), and the in-kernel queries that
optimized RX and cgRX chain in one thread (:meth:`Engine.closest_hit_query`,
:meth:`Engine.scene_query`: OptiX's ``optixTrace`` from a ray-generation program).

A scene carries its engine (``scene.engine``): the software engine's :class:`~.trace.Gas` and
:class:`~.trace.Ias`, OptiX's :class:`~.optix.accel.OptixGas` and its kin. An index picks
its engine once, at build, with :func:`.select.select_engine`, builds through it and then only asks
the scene; it never compares engine names.

What an engine can express is said by its attributes, so an index decides from them, not
from a name:

* ``generated_geometry``: primitives made from records during traversal;
* ``in_kernel_queries``: closest-hit and scene queries called from inside a numba kernel;
* ``numba_programs``: programs as numba functions (else CUDA C++, ``QueryPrograms.cuda``);
* ``ordered_ties``: equal closest-hit distances go to the smaller primitive index;
* ``conservative_bounds``: intersection programs may be called for boxes near the ray;
* ``saves_scenes``: a scene is plain arrays an index can save (else a handle on one GPU: the
  index saves its keys and builds the scene again on load);
* ``shared_prims_only``: instances of sphere scenes (and AABB scenes that keep their boxes)
  must share one GAS;
* ``hardware_traversal``: the driver traverses the scene, on RT cores where the GPU has them
  (an index whose method is built for RT cores, as RTScan's RT refine, picks it there).

``auto`` (:func:`.select.auto_engine`): OptiX where the GPU has RT cores (:func:`rt_core_generation`)
and OptiX is usable and takes the configuration; the software engine everywhere else.
"""

from __future__ import annotations

import abc
import importlib
from typing import Any, ClassVar

from indexzoo.errors import DeviceUnavailable

__all__ = ["ENGINES", "Engine", "engine_named", "register_engine", "rt_core_generation"]

#: The engine names an RT index's ``engine`` parameter takes, besides ``auto``.
ENGINES = ("software", "optix")


class Engine(abc.ABC):
    """A ray tracer behind the RT indexes (see the module docstring). Engines are singletons:
    :func:`engine_named` returns the one of a name, and a pickled engine comes back as it."""

    name: ClassVar[str]
    generated_geometry: ClassVar[bool]
    in_kernel_queries: ClassVar[bool]
    numba_programs: ClassVar[bool]
    ordered_ties: ClassVar[bool]
    conservative_bounds: ClassVar[bool]
    saves_scenes: ClassVar[bool]
    shared_prims_only: ClassVar[bool]
    hardware_traversal: ClassVar[bool]

    def __repr__(self) -> str:
        return f"<{self.name} engine>"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return engine_named, (self.name,)

    # ------------------------------------------------------------------ availability
    @abc.abstractmethod
    def unavailable(self, device: str) -> str | None:
        """Why this engine cannot run on ``device`` here, as a sentence naming the engine and
        what is missing (None: it can)."""

    def require(self, device: str) -> None:
        """Raise :class:`~indexzoo.DeviceUnavailable` saying what is missing unless this engine
        runs on ``device`` here."""
        why = self.unavailable(device)
        if why is not None:
            raise DeviceUnavailable(why)

    # ------------------------------------------------------------------ scenes
    @abc.abstractmethod
    def build_gas(self, kind: int, data: Any, *, radius: float = 0.0, leaf_size: int = 4,
                  geometry: Any = None, compact: bool = True, keep_boxes: bool = False,
                  codes: Any = None) -> Any:
        """A GAS over the primitive rows ``data`` (or, with ``geometry``, records it turns into
        primitives); ``keep_boxes``: AABB scenes keep their rows for the default box test where
        the engine needs them for it; ``codes``: uint64 sort codes of the primitives, an order
        that suits the caller's rays, for an engine that builds its BVH over sorted codes (the
        software engine; OptiX builds its own and ignores them)."""

    @abc.abstractmethod
    def build_ias(self, instances: Any) -> Any:
        """An IAS over :class:`~.trace.Instance` objects holding this engine's GASes."""

    @abc.abstractmethod
    def build_sliced_ias(self, kind: int, cuts: list[int], make: Any, radius: float = 0.0,
                         leaf_size: int = 4, *, geometry: Any = None, compact: bool = True,
                         held: int = 0, codes: Any = None) -> Any:
        """An IAS of one GAS per slice ``cuts[i] .. cuts[i+1]-1``, instance id ``i`` over slice
        ``i`` (primitive indices local to the slice); ``make(s, e)`` gives a slice's rows and
        ``codes(s, e)``, if given, their sort codes (as :meth:`build_gas`'s)."""

    def refit(self, gas: Any, data: Any) -> Any:
        """A GAS over the moved primitives ``data`` (as many as ``gas`` holds); ``gas`` stays
        readable."""
        return gas.refit(data)

    # ------------------------------------------------------------------ tracing
    @abc.abstractmethod
    def trace_query(self, scene: Any, programs: Any, op: int, params: Any, rays: Any,
                    n_rays: int, payload: Any, *, threads_per_block: int = 128,
                    device: str | None = None, hits: list[Any] | None = None) -> None:
        """One launch of the query layer: ``n_rays`` rays (``Rays`` or ``Generated``) traced
        through ``scene`` with hit operation ``op`` over the index's ``programs`` (a
        :class:`~.query.QueryPrograms`), the launch
        record ``params`` and the (rays, 1) uint64 ``payload``. ``hits``: a list that receives
        the per-ray closest hits (``t``, ``front``), where the engine reads them back."""

    @abc.abstractmethod
    def launch(self, scene: Any, n: int, programs: Any, *, flags: int = 0, payload: Any = None,
               params: tuple[Any, ...] = (), threads_per_block: int = 128,
               device: str | None = None) -> Any:
        """``optixLaunch`` with the index's own ray-generation, intersection and any-hit
        programs (:class:`~.trace.Programs`)."""

    def bind_query(self, scene: Any, programs: Any, op: int, params: Any, raygen: Any,
                   most: int, *, threads_per_block: int = 128,
                   device: str | None = None) -> Any:
        """Optional: :meth:`trace_query` of generated rays prepared for repeated small calls
        (see :func:`.trace.bind_launch`): ``bound(n, payload, *open)`` traces ``n <= most``
        rays, the arrays of ``params``'s :class:`~indexzoo.native.targets.Slot` fields filled
        in. None (the default): the engine has no such launch; call :meth:`trace_query`."""
        return None

    @abc.abstractmethod
    def closest_hit_query(self, kind: int, geometry: Any) -> Any:
        """The in-kernel closest-hit query of a GAS (see :func:`.trace.closest_hit_query`)."""

    @abc.abstractmethod
    def scene_query(self, kind: int, geometry: Any, two_level: bool, intersection: Any = None,
                    anyhit: Any = None) -> Any:
        """The in-kernel query of a GAS or IAS with programs (see :func:`.trace.scene_query`)."""


_ENGINES: dict[str, Engine] = {}

#: The module of each engine, imported when the engine is first named: the software tracer's
#: compiles numba kernels, and an index that is only listed, or runs on OptiX, needs none.
_MODULES = {"software": "indexzoo.native.rt.software", "optix": "indexzoo.native.rt.optix.engine"}


def register_engine(engine: Engine) -> Engine:
    """Make ``engine`` the one :func:`engine_named` returns for its name (each engine module
    registers its engine when imported; :func:`engine_named` imports it)."""
    _ENGINES[engine.name] = engine
    return engine


def engine_named(name: str) -> Engine:
    """The engine called ``name`` (``"software"`` or ``"optix"``), its module imported on
    first use."""
    got = _ENGINES.get(name)
    if got is None and name in _MODULES:
        importlib.import_module(_MODULES[name])  # registers it
        got = _ENGINES.get(name)
    if got is None:
        raise ValueError(f"unknown ray-tracing engine {name!r}; use one of {ENGINES} or 'auto'")
    return got


# ---------------------------------------------------------------------------- RT cores
#: Compute capabilities whose consumer and workstation parts have RT cores, and the cores'
#: generation. Datacenter parts of other capabilities (V100 7.0, A100/A30 8.0, H100/H200 9.0,
#: B200 10.0) and Jetson Orin (8.7) have none.
_RT_GENERATIONS = {(7, 5): "1st (Turing)", (8, 6): "2nd (Ampere)", (8, 9): "3rd (Ada)",
                   (12, 0): "4th (Blackwell)"}
#: Parts of those capabilities without RT cores (Turing's GTX 16 series and its T-series kin).
_NO_RT_NAMES = ("GTX 16", "MX4", "MX5", "T400", "T600", "T1000", "T1200", "T500", "T550")


def rt_core_generation(compute_capability: tuple[int, int] | str | None,
                       name: str = "") -> str:
    """The RT-core generation of a GPU from its compute capability (``(8, 9)`` or ``"89"``)
    and name: ``"1st (Turing)"`` ... ``"4th (Blackwell)"``, or ``"none"``."""
    if compute_capability is None:
        return "none"
    if isinstance(compute_capability, str):
        text = compute_capability.replace(".", "")
        if not text.isdigit() or len(text) < 2:
            return "none"
        cc = (int(text[:-1]), int(text[-1]))
    else:
        cc = (int(compute_capability[0]), int(compute_capability[1]))
    gen = _RT_GENERATIONS.get(cc)
    if gen is None or any(part in name for part in _NO_RT_NAMES):
        return "none"
    return gen
