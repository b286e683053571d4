"""OptiX's runtime objects for the query layer: the device context, one pipeline per program
source and primitive kind (module, program groups, stack sizes, shader binding table), and
the launch of a query's rays (:func:`launch_query`, which the query layer calls in place of
the software engine's ``trace``/``launch``).

A program source is assembled from four parts: OptiX's header, the launch-parameter struct
written from the launch record (:mod:`.record`), the index's programs (``iz_match``; for
AABB scenes ``__intersection__iz`` with ``IZ_HAS_INTERSECTION``, or else the layer's box test
over boxes the GAS keeps; for generated rays ``iz_raygen`` with ``IZ_HAS_RAYGEN``),
and the layer's programs in ``query.cu``. Pipelines are cached per source hash and kind;
creating one is serialised by a lock (lookups may run from several threads).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..geometry import AABBS, SPHERES, TRIANGLES
from .compiler import ptx
from .record import Layout, layout, pack
from .sdk import headers_dir, import_optix

__all__ = ["ENGINE_FIELDS", "Pipeline", "context", "launch_query", "pipeline"]

_LOCK = threading.RLock()
_CONTEXTS: dict[int, Any] = {}
_PIPELINES: dict[tuple[str, int], Pipeline] = {}

#: The engine's own fields, first in every launch struct (``iz_``: kept apart from the
#: record's names).
ENGINE_FIELDS = ("iz_handle", "iz_payload", "iz_n_rays", "iz_generated", "iz_origins",
                 "iz_directions", "iz_tmin", "iz_tmax", "iz_prims", "iz_radius")


def context() -> Any:
    """The OptiX device context of the current CUDA device (made once, on CuPy's context)."""
    import cupy

    dev = int(cupy.cuda.Device().id)
    with _LOCK:
        ctx = _CONTEXTS.get(dev)
        if ctx is None:
            optix = import_optix()
            cupy.cuda.runtime.free(0)  # make sure the device's CUDA context exists
            ctx = optix.deviceContextCreate(0, optix.DeviceContextOptions())
            _CONTEXTS[dev] = ctx
    return ctx


@functools.cache
def _layer_source() -> str:
    return importlib.resources.files(__package__).joinpath("query.cu").read_text()


def _arch() -> str:
    import cupy

    cc = cupy.cuda.Device().compute_capability  # e.g. "90"
    return f"compute_{cc}"


def _include() -> list[str]:
    import cupy

    where = headers_dir()
    assert where is not None  # status() checked it before any launch
    dirs = [os.path.join(where, "include")]
    cuda = os.path.join(cupy.cuda.get_cuda_path() or "", "include")
    if os.path.isdir(cuda):
        dirs.append(cuda)
    return dirs


@dataclass
class Pipeline:
    """A linked OptiX pipeline and its shader binding table (headers only: the programs read
    everything from the launch parameters)."""

    pipeline: Any
    sbt: Any
    records: Any  # the device buffer the SBT points into (kept alive with it)
    modules: Any


def source(lay: Layout, index_source: str, instanced: bool = False) -> str:
    """The whole program source of one launch struct and one index's programs (for an IAS:
    ``IZ_INSTANCED`` defined, so ``iz_match`` gets ``optixGetInstanceId()`` as ``inst``)."""
    return ("#include <optix.h>\n" + ("#define IZ_INSTANCED 1\n" if instanced else "")
            + lay.declaration + 'extern "C" { __constant__ Params params; }\n'
            + _layer_prelude() + index_source + "\n" + _layer_source())


def _layer_prelude() -> str:
    return ("#define IZ_FIRST 0\n#define IZ_COUNT 1\n#define IZ_SUM 2\n#define IZ_COLLECT 3\n"
            "#define IZ_CLOSEST 4\n#define IZ_BITMAP 5\n#define IZ_NO_MATCH (-1LL)\n")


def pipeline(src: str, kind: int, own_intersection: bool = False,
             digest: str | None = None, instanced: bool = False) -> Pipeline:
    """The pipeline of program source ``src`` for scenes of primitive ``kind`` (cached);
    ``own_intersection``: AABB hits by the index's ``__intersection__iz`` (else the layer's
    box test); ``instanced``: an IAS over GASes (else one GAS). The source decides both (it
    defines ``IZ_INSTANCED`` for an IAS), so the source's hash (``digest``, computed when not
    given) keys the cache."""
    key = (digest or hashlib.sha256(src.encode()).hexdigest(), int(kind))
    got = _PIPELINES.get(key)
    if got is not None:
        return got
    with _LOCK:
        got = _PIPELINES.get(key)
        if got is None:
            got = _make_pipeline(src, int(kind), own_intersection, instanced)
            _PIPELINES[key] = got
    return got


def _make_pipeline(src: str, kind: int, own_intersection: bool, instanced: bool) -> Pipeline:
    import cupy

    optix = import_optix()
    ctx = context()
    prims = optix.PRIMITIVE_TYPE_FLAGS_TRIANGLE if kind == TRIANGLES else \
        optix.PRIMITIVE_TYPE_FLAGS_CUSTOM
    pco = optix.PipelineCompileOptions(
        usesMotionBlur=False, numPayloadValues=1, numAttributeValues=2,
        traversableGraphFlags=int(optix.TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_LEVEL_INSTANCING
                                  if instanced else optix.TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_GAS),
        exceptionFlags=int(optix.EXCEPTION_FLAG_NONE), pipelineLaunchParamsVariableName="params",
        usesPrimitiveTypeFlags=prims)
    mco = optix.ModuleCompileOptions(maxRegisterCount=optix.COMPILE_DEFAULT_MAX_REGISTER_COUNT,
                                     optLevel=optix.COMPILE_OPTIMIZATION_DEFAULT,
                                     debugLevel=optix.COMPILE_DEBUG_LEVEL_DEFAULT)
    code = ptx(src, "indexzoo_query", _arch(), _include())
    module, _log = ctx.moduleCreate(mco, pco, code)

    def group(**kw: Any) -> Any:
        d = optix.ProgramGroupDesc()
        for k, v in kw.items():
            setattr(d, k, v)
        return ctx.programGroupCreate([d])[0][0]

    hit: dict[str, Any] = dict(hitgroupModuleAH=module, hitgroupEntryFunctionNameAH="__anyhit__iz",
                               hitgroupModuleCH=module,
                               hitgroupEntryFunctionNameCH="__closesthit__iz")
    if kind == SPHERES:
        hit.update(hitgroupModuleIS=module, hitgroupEntryFunctionNameIS="__intersection__iz_sphere")
    elif kind == AABBS:
        entry = "__intersection__iz" if own_intersection else "__intersection__iz_box"
        hit.update(hitgroupModuleIS=module, hitgroupEntryFunctionNameIS=entry)
    groups = [group(raygenModule=module, raygenEntryFunctionName="__raygen__iz"),
              group(missModule=module, missEntryFunctionName="__miss__iz"),
              group(**hit)]
    link = optix.PipelineLinkOptions()
    link.maxTraceDepth = 1
    pipe = ctx.pipelineCreate(pco, link, groups, "")
    sizes = optix.StackSizes()
    for g in groups:
        optix.util.accumulateStackSizes(g, sizes, pipe)
    pipe.setStackSize(*optix.util.computeStackSizes(sizes, 1, 0, 0), 2 if instanced else 1)
    size = int(optix.SBT_RECORD_HEADER_SIZE)
    host = np.zeros((3, size), np.uint8)
    for i, g in enumerate(groups):
        optix.sbtRecordPackHeader(g, host[i])
    records = cupy.asarray(host)
    base = int(records.data.ptr)
    sbt = optix.ShaderBindingTable(
        raygenRecord=base, missRecordBase=base + size, missRecordStrideInBytes=size,
        missRecordCount=1, hitgroupRecordBase=base + 2 * size,
        hitgroupRecordStrideInBytes=size, hitgroupRecordCount=1)
    return Pipeline(pipe, sbt, records, (module, groups))


_PREPARED: dict[tuple[Any, ...], tuple[Layout, str, str]] = {}


def prepared(index_source: str, names: tuple[str, ...], values: tuple[Any, ...],
             instanced: bool = False) -> tuple[Layout, str, str]:
    """The launch struct of these fields, the whole program source and its hash, cached per
    index source, field names and field types: a repeated launch writes no source again and
    hashes nothing (a benign race may prepare one twice)."""
    types = tuple(v.dtype.str if getattr(v, "ndim", 0) else type(v) for v in values)
    sig = (index_source, instanced, names, types)
    got = _PREPARED.get(sig)
    if got is None:
        lay = layout(names, values)
        src = source(lay, index_source, instanced)
        got = _PREPARED[sig] = (lay, src, hashlib.sha256(src.encode()).hexdigest())
    return got


_STAND_INS: dict[int, Any] = {}


def _float_stand_in() -> Any:
    import cupy

    dev = int(cupy.cuda.Device().id)
    got = _STAND_INS.get(dev)
    if got is None:
        got = cupy.zeros(3, dtype=np.float32)
        _STAND_INS[dev] = got
    return got


def launch_query(scene: Any, index_source: str | None, params: Any, rays: Any, n_rays: int,
                 payload: Any) -> None:
    """Trace ``n_rays`` rays of one query launch on OptiX: ``rays`` is the layer's ``Rays``
    (arrays) or ``Generated`` (made by the index's ``iz_raygen``), ``params`` the launch
    record (the layer's fields, then the index's), ``payload`` the (rays, 1) uint64 slots."""
    import cupy

    if index_source is None:
        raise NotImplementedError("this index supplies no OptiX programs (QueryPrograms.cuda); "
                                  "use engine='software'")
    if n_rays == 0 or scene.n == 0:
        return  # no ray, or an empty scene: every payload keeps its initial value
    stand = _float_stand_in()
    generated = hasattr(rays, "raygen")
    if generated and "IZ_HAS_RAYGEN" not in index_source:
        raise NotImplementedError("rays made by a ray-generation program need the index's "
                                  "iz_raygen in its OptiX programs")
    own = "IZ_HAS_INTERSECTION" in index_source
    if scene.kind == AABBS and scene.prims is None and not own:
        raise ValueError("an AABB scene on OptiX needs the index's intersection program "
                         "(IZ_HAS_INTERSECTION) or its boxes: build it with keep_boxes=True")
    if generated:
        o = d = tmin = tmax = stand
    else:
        o = cupy.ascontiguousarray(rays.origins, dtype=np.float32)
        d = cupy.ascontiguousarray(rays.directions, dtype=np.float32)
        tmin, tmax = (cupy.ascontiguousarray(cupy.broadcast_to(
            cupy.asarray(t, dtype=np.float32), (n_rays,))) for t in (rays.tmin, rays.tmax))
    prims = scene.prims if scene.prims is not None else stand
    engine = (np.uint64(scene.handle), payload, np.int64(n_rays), np.bool_(generated), o, d,
              tmin, tmax, prims, np.float32(scene.radius))
    names = ENGINE_FIELDS + tuple(params._fields)
    values = engine + tuple(params)
    instanced = bool(scene.instanced)
    lay, src, digest = prepared(index_source, names, values, instanced)
    pipe = pipeline(src, scene.kind, own, digest, instanced)
    optix = import_optix()
    host = pack(lay, values)
    dev = cupy.asarray(host)
    stream = cupy.cuda.get_current_stream()
    optix.launch(pipe.pipeline, stream.ptr, int(dev.data.ptr), int(host.nbytes), pipe.sbt,
                 int(n_rays), 1, 1)
    # the parameter buffer must outlive the launch: CuPy's pool reuses freed blocks in stream
    # order only on this stream, so releasing it after enqueueing is safe
    del dev
