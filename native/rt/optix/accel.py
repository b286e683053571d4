"""``optixAccelBuild`` for the query layer: :class:`OptixGas`, a GAS over triangles, spheres or
AABBs (the software engine's :data:`~indexzoo.native.rt.geometry.TRIANGLES`,
:data:`~indexzoo.native.rt.geometry.SPHERES`, :data:`~indexzoo.native.rt.geometry.AABBS` rows,
primitive ``i`` = row ``i``), with compaction (``optixAccelCompact``) and the byte counts
OptiX reports.

* Triangles: the (N, 9) rows are OptiX's vertex buffer (three float3 per triangle, no index
  buffer); the GAS keeps its own copy, so the rows are not held after the build.
* AABBs: the (N, 6) rows (min xyz, max xyz) are OptiX's ``OptixAabb`` buffer; the index's
  intersection program decides hits, or, with ``keep_boxes=True``, the layer's box test (the
  software engine's default) over the rows the GAS then keeps.
* Spheres: the (N, 3) centres and one radius. pyoptix binds no sphere build input, so each
  sphere is a custom primitive (its box, centre -+ radius) whose intersection program is the
  layer's sphere test; the GAS keeps the centres, as OptiX's sphere GAS keeps its own.

Far custom primitives: OptiX's traversal missed every custom-primitive box with a coordinate
of magnitude 2^41 or more (boxes one ulp to X/4 wide, rays along each axis; triangles at the
same coordinates are found: ``benchmarks/studies/optix_far_boxes.py``; the GPU, driver and OptiX
version it was seen on are in ``docs/rt-engine.md``). rx's extended mode puts keys there (x up to 1.7e38). An
AABB scene with a coordinate beyond :data:`FAR` is therefore built scaled down per axis by a
power of two (exact for normal floats) and traced through one instance whose transform scales
it back (:class:`OptixScaledGas`): rays reach the programs in object space, so an index's
intersection program sees that axis scaled (rx's reads the key, and y and z, which stay).
The same boxes scaled under an instance were all found, up to 2^125. (Coordinates that the
scaling would push below float32's normal range, under 2^(e - 126) on an axis scaled by 2^-e,
lose precision; rx's smallest is 0.5.) Sphere scenes that far
are refused (the layer's sphere test would need its radius in object space too; no index puts
spheres there).

Every input carries ``OPTIX_GEOMETRY_FLAG_REQUIRE_SINGLE_ANYHIT_CALL``: a primitive reaches
any-hit at most once per ray, as on the software engine (counts and sums depend on it).

Updates: OptiX refits a GAS in place (``OPTIX_BUILD_OPERATION_UPDATE``), while an index must
keep its old structure readable for lookups running meanwhile (an update builds a new state
beside the old one). :meth:`OptixGas.refit` therefore builds a new GAS over the moved
primitives: the same answers, a build's time instead of a refit's.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.contract import Footprint
from indexzoo.errors import InvalidInput

from ..engine import engine_named
from ..geometry import AABBS, SPHERES, TRIANGLES
from ..scene import Instance
from .pipeline import context
from .sdk import import_optix

__all__ = ["FAR", "OptixGas", "OptixIas", "OptixScaledGas", "build_gas", "build_ias", "instance_of"]

_WIDTH = {TRIANGLES: 9, SPHERES: 3, AABBS: 6}

#: Custom-primitive coordinates of larger magnitude are built scaled (see the module docstring).
FAR = 2.0 ** 40
#: ... so that the largest magnitude on each scaled axis lies below 2^_NEAR.
_NEAR = 30


@dataclass(frozen=True, eq=False)
class OptixGas:
    """A GAS on OptiX: its traversable ``handle`` and the device ``buffer`` holding it."""

    kind: int
    n: int
    handle: int
    buffer: Any            # CuPy uint8: the (compacted) acceleration structure
    prims: Any             # rows the programs read: sphere centres (N, 3), kept boxes (N, 6)
    radius: float
    compacted: bool
    output_bytes: int      # optixAccelComputeMemoryUsage's output size
    temp_bytes: int        # ... and its temporary size
    peak_bytes: int        # the most held at once while building (input rows included)

    @property
    def engine(self) -> Any:
        """The engine this scene runs on: OptiX."""
        return engine_named("optix")

    instanced = False

    def footprint(self) -> Footprint:
        parts = {"gas": int(self.buffer.nbytes)}
        if self.prims is not None:
            parts["sphere_centres" if self.kind == SPHERES else "boxes"] = int(self.prims.nbytes)
        return Footprint(breakdown=parts, peak_build_bytes=self.peak_bytes)

    def refit(self, data: Any) -> OptixGas | OptixScaledGas:
        """A GAS over the moved primitives ``data`` (as many as before): built anew, see the
        module docstring."""
        if int(data.shape[0]) != self.n:
            raise InvalidInput(f"refit needs {self.n} primitives, got {int(data.shape[0])}")
        return build_gas(self.kind, data, radius=self.radius, compact=self.compacted,
                         keep_boxes=self.kind == AABBS and self.prims is not None)


def _emit_desc(optix: Any, ptr: int) -> Any:
    return optix.AccelEmitDesc(result=ptr, type=optix.PROPERTY_TYPE_COMPACTED_SIZE)


def build_gas(kind: int, data: Any, *, radius: float = 0.0, compact: bool = True,
              keep_boxes: bool = False) -> OptixGas | OptixScaledGas:
    """A GAS over the rows of ``data`` (CuPy float32, (N, 9), (N, 3) or (N, 6) by ``kind``).
    ``keep_boxes``: AABB scenes keep their rows for the layer's default box test (needed when
    the index supplies no intersection program). AABBs beyond :data:`FAR` come back as an
    :class:`OptixScaledGas`; spheres that far are refused (see the module docstring)."""
    import cupy

    if kind not in _WIDTH:
        raise InvalidInput(f"unknown primitive kind {kind!r}")
    data = cupy.ascontiguousarray(data, dtype=np.float32)
    n = int(data.shape[0])
    if data.ndim != 2 or data.shape[1] != _WIDTH[kind]:
        raise InvalidInput(f"primitive rows of kind {kind} must be (N, {_WIDTH[kind]}), "
                           f"got {data.shape}")
    if kind != TRIANGLES and n:
        exps = _far_exponents(data, radius if kind == SPHERES else 0.0)
        if any(exps):
            if kind == SPHERES:
                raise InvalidInput(
                    f"OptiX misses custom primitives with coordinates beyond {FAR:.0e} (spheres "
                    "are custom primitives here); trace these spheres on the software engine")
            scale = cupy.asarray(np.tile(np.ldexp(np.float32(1), [-e for e in exps]), 2),
                                 dtype=np.float32)
            inner = _build_gas(kind, data * scale, radius, compact, keep_boxes)
            return OptixScaledGas(inner, exps, build_ias([_instance(inner, exps)]),
                                  inner.peak_bytes + int(data.nbytes))
    return _build_gas(kind, data, radius, compact, keep_boxes)


def _far_exponents(data: Any, radius: float) -> tuple[int, int, int]:
    """Per axis, the power of two to scale the rows' coordinates down by (0 where every
    magnitude stays within :data:`FAR`)."""
    big = np.abs(data.reshape(data.shape[0], -1, 3)).max(axis=(0, 1)).get() + np.float32(radius)
    return tuple(max(0, int(np.ceil(np.log2(float(b)))) - _NEAR) if b > FAR else 0
                 for b in big)  # type: ignore[return-value]


def _instance(gas: OptixGas, exps: tuple[int, int, int], instance_id: int = 0) -> Any:
    t = np.zeros((3, 4), np.float32)
    for k, e in enumerate(exps):
        t[k, k] = np.ldexp(np.float32(1), e)
    # Instance is typed for the software engine
    return Instance(typing.cast(Any, gas), t, instance_id)


def instance_of(gas: OptixGas | OptixScaledGas, instance_id: int) -> Any:
    """An instance (identity transform, ``instance_id``) of ``gas`` for an IAS: a far GAS's
    inner GAS under its scaling transform, so that its boxes stay within OptiX's reach."""
    if isinstance(gas, OptixScaledGas):
        return _instance(gas.gas, gas.exponents, instance_id)
    return Instance(typing.cast(Any, gas), None, instance_id)


def _build_gas(kind: int, data: Any, radius: float, compact: bool,
               keep_boxes: bool) -> OptixGas:
    import cupy

    n = int(data.shape[0])
    prims = data if kind == SPHERES or (kind == AABBS and keep_boxes) else None
    if n == 0:  # nothing to build: launches over an empty scene are skipped (every ray misses)
        return OptixGas(kind, 0, 0, cupy.zeros(0, np.uint8), prims, float(radius), compact,
                        0, 0, int(data.nbytes))
    optix = import_optix()
    ctx = context()
    flags = [optix.GEOMETRY_FLAG_REQUIRE_SINGLE_ANYHIT_CALL]
    boxes = None
    if kind == TRIANGLES:
        inp = optix.BuildInputTriangleArray()
        inp.vertexFormat = optix.VERTEX_FORMAT_FLOAT3
        inp.numVertices = 3 * n
        inp.vertexBuffers = [int(data.data.ptr)]
        inp.flags = flags
        inp.numSbtRecords = 1
    else:
        if kind == SPHERES:
            r = np.float32(radius)
            boxes = cupy.concatenate([data - r, data + r], axis=1)
        else:
            boxes = data
        inp = optix.BuildInputCustomPrimitiveArray(
            aabbBuffers=[int(boxes.data.ptr)], numPrimitives=n, flags=flags, numSbtRecords=1)
    build_flags = int(optix.BUILD_FLAG_PREFER_FAST_TRACE)
    if compact:
        build_flags |= int(optix.BUILD_FLAG_ALLOW_COMPACTION)
    opts = optix.AccelBuildOptions(buildFlags=build_flags, operation=optix.BUILD_OPERATION_BUILD)
    need = ctx.accelComputeMemoryUsage([opts], [inp])
    temp_b, out_b = int(need.tempSizeInBytes), int(need.outputSizeInBytes)
    temp = cupy.empty(max(temp_b, 1), np.uint8)
    out = cupy.empty(max(out_b, 1), np.uint8)
    size = cupy.zeros(1, np.uint64)
    stream = cupy.cuda.get_current_stream().ptr
    emit = [_emit_desc(optix, int(size.data.ptr))] if compact else []
    handle = ctx.accelBuild(stream, [opts], [inp], int(temp.data.ptr), temp_b,
                            int(out.data.ptr), out_b, emit)
    held = int(data.nbytes) + (0 if boxes is None or boxes is data else int(boxes.nbytes))
    peak = held + temp_b + out_b
    del temp
    if compact:
        small = int(size.get()[0])  # waits for the build
        if 0 < small < out_b:
            packed = cupy.empty(small, np.uint8)
            handle = ctx.accelCompact(stream, handle, int(packed.data.ptr), small)
            peak = max(peak, held + out_b + small)
            out = packed
    return OptixGas(kind, n, int(handle), out, prims, float(radius), compact, out_b, temp_b,
                    peak)


@dataclass(frozen=True, eq=False)
class OptixIas:
    """An IAS on OptiX over instances of :class:`OptixGas` (``optixAccelBuild`` of an
    ``OptixInstance`` array): the software engine's :class:`~indexzoo.native.rt.trace.Instance`
    objects (3x4 row-major object-to-world transform, instance id reported to the programs as
    ``inst``, visibility mask) over GASes of one primitive kind."""

    kind: int
    n: int                 # instances
    handle: int
    buffer: Any            # CuPy uint8: the IAS
    instances: Any         # CuPy uint8: the OptixInstance records
    gases: tuple[OptixGas, ...]  # the distinct GASes (kept alive with the IAS)
    prims: Any             # the one GAS's rows the programs read (spheres, kept boxes), or None
    radius: float
    peak_bytes: int

    @property
    def engine(self) -> Any:
        """The engine this scene runs on: OptiX."""
        return engine_named("optix")

    instanced = True

    def footprint(self) -> Footprint:
        parts = {"ias": int(self.buffer.nbytes), "instances": int(self.instances.nbytes),
                 "gas": sum(int(g.buffer.nbytes) for g in self.gases)}
        if self.prims is not None:
            parts["sphere_centres" if self.kind == SPHERES else "boxes"] = int(self.prims.nbytes)
        return Footprint(breakdown=parts, peak_build_bytes=max(self.peak_bytes,
                                                               sum(parts.values())))


def build_ias(instances: Any) -> OptixIas:
    """An IAS over ``instances`` (:class:`~indexzoo.native.rt.trace.Instance` objects whose
    ``gas`` is an :class:`OptixGas`; one primitive kind and radius). Sphere scenes and AABB
    scenes that keep their boxes need every instance to share one GAS: the layer's programs
    read that GAS's rows by primitive index."""
    import cupy

    instances = list(instances)
    if not instances:
        raise InvalidInput("an IAS needs at least one instance")
    first = instances[0].gas
    distinct: dict[int, OptixGas] = {}
    for k, ins in enumerate(instances):
        g = ins.gas
        if not isinstance(g, OptixGas):
            raise InvalidInput(f"instance {k}: gas must be an OptixGas, got {type(g).__name__}")
        if (g.kind, g.radius) != (first.kind, first.radius):
            raise InvalidInput("all GASes of an IAS must share primitive kind and radius")
        if not 0 <= int(ins.mask) <= 0xFF or not 0 <= int(ins.instance_id) < 2**23:
            raise InvalidInput(f"instance {k}: mask must be 0..255 and instance_id 0..2^23-1")
        distinct.setdefault(id(g), g)
    gases = tuple(distinct.values())
    if first.prims is not None and len(gases) > 1:
        raise InvalidInput("instances of sphere scenes or of AABB scenes that keep their boxes "
                           "must share one GAS (the programs read its rows by primitive index)")
    optix = import_optix()
    ctx = context()
    records = []
    for ins in instances:
        t = np.eye(3, 4, dtype=np.float32) if ins.transform is None else \
            np.asarray(ins.transform.get() if hasattr(ins.transform, "get") else ins.transform,
                       dtype=np.float32).reshape(3, 4)
        records.append(optix.Instance(
            transform=[float(v) for v in t.reshape(-1)], flags=int(optix.INSTANCE_FLAG_NONE),
            instanceId=int(ins.instance_id), sbtOffset=0, visibilityMask=int(ins.mask),
            traversableHandle=int(ins.gas.handle)))
    host = np.frombuffer(optix.getDeviceRepresentation(records), dtype=np.uint8)
    dev = cupy.asarray(host)
    inp = optix.BuildInputInstanceArray(instances=int(dev.data.ptr), numInstances=len(records))
    opts = optix.AccelBuildOptions(buildFlags=int(optix.BUILD_FLAG_PREFER_FAST_TRACE),
                                   operation=optix.BUILD_OPERATION_BUILD)
    need = ctx.accelComputeMemoryUsage([opts], [inp])
    temp_b, out_b = int(need.tempSizeInBytes), int(need.outputSizeInBytes)
    temp = cupy.empty(max(temp_b, 1), np.uint8)
    out = cupy.empty(max(out_b, 1), np.uint8)
    stream = cupy.cuda.get_current_stream().ptr
    handle = ctx.accelBuild(stream, [opts], [inp], int(temp.data.ptr), temp_b,
                            int(out.data.ptr), out_b, [])
    peak = int(dev.nbytes) + temp_b + out_b
    return OptixIas(first.kind, len(records), int(handle), out, dev, gases, first.prims,
                    first.radius, peak)


@dataclass(frozen=True, eq=False)
class OptixScaledGas:
    """A GAS of far custom primitives (see the module docstring): ``gas`` holds the rows scaled
    down by ``2^-exponents[k]`` on axis ``k``, ``ias`` one instance of it whose transform
    scales them back. The layer traces it like a GAS: ``prims`` (kept boxes) are in the
    GAS's (scaled) space, where the programs see the rays."""

    gas: OptixGas
    exponents: tuple[int, int, int]
    ias: OptixIas
    build_peak: int  # the GAS's build peak with the unscaled rows beside their scaled copy

    @property
    def engine(self) -> Any:
        """The engine this scene runs on: OptiX."""
        return engine_named("optix")

    instanced = True

    @property
    def kind(self) -> int:
        return self.gas.kind

    @property
    def n(self) -> int:
        return self.gas.n

    @property
    def handle(self) -> int:
        return self.ias.handle

    @property
    def prims(self) -> Any:
        return self.gas.prims

    @property
    def radius(self) -> float:
        return self.gas.radius

    @property
    def compacted(self) -> bool:
        return self.gas.compacted

    def footprint(self) -> Footprint:
        fp = self.ias.footprint()
        return Footprint(breakdown=fp.breakdown,
                         peak_build_bytes=max(fp.peak_build_bytes, self.build_peak))

    def refit(self, data: Any) -> OptixGas | OptixScaledGas:
        """A GAS over the moved primitives ``data`` (unscaled, as many as before): built
        anew as the inner GAS would be, so scaled again if they are still far."""
        return self.gas.refit(data)
