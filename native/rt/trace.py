"""Geometry acceleration structures and ``trace``: the software ray-tracing pipeline, one numba
source for the CPU (``njit`` + ``prange``) and the GPU (``cuda.jit``), with OptiX's semantics.

OptiX -> here
-------------
* ``optixAccelBuild`` of a GAS over triangles, spheres or custom primitives (AABBs):
  :func:`build_gas` (a BVH over the primitives' bounds, :mod:`.bvh`); update builds:
  :meth:`Gas.refit`; ``optixAccelCompact``: ``compact=True`` (default) or :meth:`Gas.compact`.
  The GAS keeps its own copy of the primitives, in BVH order, as OptiX's does.
* Geometry generated on the fly: ``build_gas(kind, records, geometry=f)`` keeps compact
  per-primitive records (any numeric array, one row per primitive) and a numba function
  ``f(records, i)`` that returns row ``i``'s primitive (9 floats for a triangle, 3 for a
  sphere's centre, 6 for a box); traversal calls it where it would read a stored primitive, so
  answers are identical and memory is the records' instead of the primitives'.
* ``optixAccelBuild`` of an IAS (``OptixInstance``: transform, instanceId, visibilityMask,
  traversableHandle): :func:`build_ias` over :class:`Instance` objects; a ray is tested against
  an instance only when ``instance.mask & ray mask`` is non-zero, in the instance's object
  space (the inverse of its 3x4 transform applied to origin and direction, so ``t`` is the
  same along both). All GASes of an IAS share one primitive kind and geometry function.
* ``optixLaunch`` with a ``__raygen__`` program: :func:`launch` (``Programs(raygen=f)``,
  ``f(i, params)`` makes ray ``i`` inside the kernel: no ray arrays).
* ``optixTrace(handle, origin, direction, tmin, tmax, ..., rayFlags, ...)``: :func:`trace` with
  per-ray ``origins``, ``directions``, ``tmin``, ``tmax``; a hit counts only when
  ``tmin < t < tmax``. Ray flags (:data:`TERMINATE_ON_FIRST_HIT`, :data:`DISABLE_ANYHIT`,
  :data:`DISABLE_CLOSESTHIT`, :data:`CULL_BACK_FACING`, :data:`CULL_FRONT_FACING`) apply to the
  whole launch.
* Programs (``__intersection__``, ``__anyhit__``, ``__closesthit__``, ``__miss__``):
  :class:`Programs`, numba device functions (``register_jitable``), called with the ray index
  and the per-ray ``payload`` slots (a (rays, slots) uint64 array: OptiX's payload registers)::

      intersection(data, i, inst, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params)
          -> (t float32, front bool)
      anyhit(ray, inst, prim, t, front, payload, params) -> ACCEPT | IGNORE | TERMINATE
      closesthit(ray, inst, prim, t, front, payload, params)
      miss(ray, payload, params)

  ``data[i]`` is the primitive's stored row, ``prim`` its index in the build input, ``inst``
  the instance id (0 for a GAS traced directly), ``params`` the tuple passed to :func:`trace`
  (OptiX's launch parameters: arrays and scalars the programs read or write).

  Custom primitives (AABBs) use ``intersection`` (default: the ray's entry into the box).
  ``trace`` also returns the closest hit's ``t``, primitive and face for every ray.
* A primitive reaches any-hit at most once per ray (each sits in one BVH leaf and is tested
  once); any-hit runs only for hits closer than the closest accepted so far, as in OptiX; equal
  distances go to the smaller primitive index (the closest hit is then deterministic).
* Kernels are specialised per program set (the programs are compile-time constants of the
  generated kernel) and cached.

Traversal is stackless: the BVH's nodes are stored depth-first with escape indices, so a walk
is one increasing index (on a hit, the next record; on a miss, the escape index). No per-ray
stack array is needed, which keeps one source for both devices, and each record is visited at
most once, so each primitive reaches any-hit at most once.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.contract import Footprint
from indexzoo.devices import xp_of
from indexzoo.envvars import CPU_SERIAL_BELOW_RAYS
from indexzoo.errors import InvalidInput

from ..targets import Kernel, Slot
from .bvh import Bvh, build_bvh, refit, slab, slab_walk
from .geometry import AABBS, SPHERES, TRIANGLES, hit_box, hit_sphere_c, hit_triangle_v, prim_bounds

__all__ = [
    "ACCEPT", "CULL_BACK_FACING", "CULL_FRONT_FACING", "DISABLE_ANYHIT", "DISABLE_CLOSESTHIT",
    "IGNORE", "TERMINATE", "TERMINATE_ON_FIRST_HIT", "Gas", "Hits", "Ias", "Instance", "Programs",
    "bind_launch", "build_gas", "build_ias", "build_sliced_ias", "closest_hit_query", "launch",
    "scene_query", "trace",
]

#: CPU trace launches with fewer rays than this run on one core. A ray through the software
#: BVH costs several times a binary search (measured: ``docs/plugins/rx.md``), so the thread
#: pool's wake-up pays from far fewer items than the default threshold of cheap kernels
#: (:data:`indexzoo.native.targets.SERIAL_BELOW`).
RAYS_SERIAL_BELOW = CPU_SERIAL_BELOW_RAYS.value()

TERMINATE_ON_FIRST_HIT = 1
DISABLE_ANYHIT = 2
DISABLE_CLOSESTHIT = 4
CULL_BACK_FACING = 8
CULL_FRONT_FACING = 16
_ALL_FLAGS = 31

ACCEPT, IGNORE, TERMINATE = 0, 1, 2

_WIDTH = {TRIANGLES: 9, SPHERES: 3, AABBS: 6}


# --------------------------------------------------------------------------- geometry functions
@register_jitable
def triangle_rows(data, i):
    """Stored triangles: row ``i`` of a (N, 9) float32 array."""
    return (data[i, 0], data[i, 1], data[i, 2], data[i, 3], data[i, 4], data[i, 5],
            data[i, 6], data[i, 7], data[i, 8])


@register_jitable
def sphere_rows(data, i):
    """Stored sphere centres: row ``i`` of a (N, 3) float32 array."""
    return data[i, 0], data[i, 1], data[i, 2]


@register_jitable
def box_rows(data, i):
    """Stored boxes: row ``i`` of a (N, 6) float32 array (min xyz, max xyz)."""
    return data[i, 0], data[i, 1], data[i, 2], data[i, 3], data[i, 4], data[i, 5]


_STORED = {TRIANGLES: triangle_rows, SPHERES: sphere_rows, AABBS: box_rows}


@functools.cache
def _bounds_kernel(kind: int, geometry: Any) -> Kernel:
    """Bounds of generated primitives: ``geometry(records, i)`` evaluated for every ``i``."""
    if kind == TRIANGLES:
        @register_jitable
        def body(i, records, radius, lo, hi):
            g = geometry(records, i)
            for a in range(3):
                x, y, z = np.float32(g[a]), np.float32(g[a + 3]), np.float32(g[a + 6])
                lo[i, a] = min(x, y, z)
                hi[i, a] = max(x, y, z)
    elif kind == SPHERES:
        @register_jitable
        def body(i, records, radius, lo, hi):
            g = geometry(records, i)
            for a in range(3):
                lo[i, a] = np.float32(g[a]) - radius
                hi[i, a] = np.float32(g[a]) + radius
    else:
        @register_jitable
        def body(i, records, radius, lo, hi):
            g = geometry(records, i)
            for a in range(3):
                lo[i, a] = np.float32(g[a])
                hi[i, a] = np.float32(g[a + 3])
    return Kernel(body, name="rt_bounds")


def _generated_bounds(kind: int, geometry: Any, records: Any, radius: float) -> tuple[Any, Any]:
    xp = xp_of(records)
    n = int(records.shape[0])
    lo = xp.empty((n, 3), dtype=xp.float32)
    hi = xp.empty((n, 3), dtype=xp.float32)
    _bounds_kernel(kind, geometry)("cpu" if xp is np else "cuda", n, records, np.float32(radius), lo, hi)
    if n and not bool(xp.isfinite(lo).all() and xp.isfinite(hi).all()):
        raise InvalidInput("the geometry function produced non-finite coordinates")
    if kind == AABBS and n and not bool((lo <= hi).all()):
        raise InvalidInput("the geometry function produced a box with min > max")
    return lo, hi


# --------------------------------------------------------------------------- GAS
@dataclass(frozen=True)
class Gas:
    """A geometry acceleration structure: the primitives (or their records), in BVH order, and
    the BVH over them. ``data[i]`` is primitive ``bvh.order[i]`` of the build input."""

    kind: int
    data: Any  # stored: triangles (N, 9), sphere centres (N, 3) or boxes (N, 6), float32; else records
    radius: float
    bvh: Bvh
    geometry: Any = None  # None: stored primitives; else f(records, i) -> the primitive

    @property
    def n_prims(self) -> int:
        return self.bvh.n_prims

    @property
    def engine(self) -> Any:
        """The engine this scene runs on: the software engine."""
        from .engine import engine_named

        return engine_named("software")

    @property
    def instanced(self) -> bool:
        """Whether this is an IAS (rays reach the programs with an instance id)."""
        return isinstance(self, Ias)

    @property
    def generated(self) -> bool:
        return self.geometry is not None

    def footprint(self) -> Footprint:
        """Bytes held (primitives or records, BVH nodes with any uncompacted slack, the order)
        and the build's peak."""
        parts = {"records" if self.generated else "primitives": int(self.data.nbytes),
                 "bvh_nodes": int(self.bvh.nodes.nbytes), "bvh_order": int(self.bvh.order.nbytes)}
        return Footprint(breakdown=parts,
                         peak_build_bytes=2 * int(self.data.nbytes) + self.bvh.peak_build_bytes)

    @property
    def compacted(self) -> bool:
        return self.bvh.compacted

    def compact(self) -> Gas:
        """The same GAS with its node buffer cut to size (``optixAccelCompact``)."""
        return dataclasses.replace(self, bvh=self.bvh.compact())

    def query_args(self) -> tuple[Any, ...]:
        """The arrays and scalars a kernel hands to :func:`closest_hit_query`'s function
        before the ray: ``nodes, words, n_nodes, data, order, radius``."""
        b = self.bvh
        return (b.nodes, b.nodes.view(np.int32), np.int64(b.n_nodes), self.data, b.order,
                np.float32(self.radius))

    def refit(self, data: Any) -> Gas:
        """The same structure over moved primitives (same count, in build-input order): bounds
        recomputed, the tree kept (OptiX's update build)."""
        data = _check_data(self.kind, data, self.radius, self.geometry)
        if data.shape[0] != self.n_prims:
            raise InvalidInput(f"refit needs {self.n_prims} primitives, got {data.shape[0]}")
        lo, hi = _bounds(self.kind, data, self.radius, self.geometry)
        return dataclasses.replace(self, data=data[self.bvh.order], bvh=refit(self.bvh, lo, hi))


def _check_data(kind: int, data: Any, radius: float, geometry: Any) -> Any:
    if kind not in _WIDTH:
        raise InvalidInput(f"unknown primitive kind {kind!r}; use TRIANGLES, SPHERES or AABBS")
    if kind == SPHERES and not (np.isfinite(radius) and radius >= 0):
        raise InvalidInput(f"sphere radius must be finite and >= 0, got {radius}")
    xp = xp_of(data)
    if geometry is not None:
        arr = xp.ascontiguousarray(data)
        if arr.ndim not in (1, 2) or arr.dtype.kind not in "uif":
            raise InvalidInput(f"records must be a numeric (N,) or (N, W) array, got {arr.dtype} "
                               f"of shape {tuple(arr.shape)}")
        return arr
    arr = xp.ascontiguousarray(data, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != _WIDTH[kind]:
        raise InvalidInput(f"primitives of kind {kind} need shape (N, {_WIDTH[kind]}), "
                           f"got {tuple(arr.shape)}")
    if arr.shape[0] and not bool(xp.isfinite(arr).all()):
        raise InvalidInput("primitive coordinates must be finite")
    return arr


def _bounds(kind: int, data: Any, radius: float, geometry: Any) -> tuple[Any, Any]:
    if geometry is None:
        return prim_bounds(kind, data, radius)
    return _generated_bounds(kind, geometry, data, radius)


def build_gas(kind: int, data: Any, radius: float = 0.0, leaf_size: int = 4, *,
              geometry: Any = None, compact: bool = True, codes: Any = None) -> Gas:
    """Build a GAS over ``data`` (NumPy: on the CPU, CuPy: on the GPU).

    ``data``: the primitives (float32 (N, 9) triangles, (N, 3) sphere centres with ``radius``,
    (N, 6) boxes), or with ``geometry`` the records it turns into primitives (see the module
    docstring). ``compact=False`` keeps the BVH's worst-case node buffer. ``codes``: the
    primitives' sort codes for the BVH (:func:`~.bvh.build_bvh`; default: Morton codes).
    """
    data = _check_data(kind, data, radius, geometry)
    lo, hi = _bounds(kind, data, radius, geometry)
    bvh = build_bvh(lo, hi, leaf_size=leaf_size, compact=compact, codes=codes)
    del lo, hi
    return Gas(kind, data[bvh.order], float(radius), bvh, geometry)


# --------------------------------------------------------------------------- IAS
@dataclass(frozen=True)
class Instance:
    """One instance of a GAS (``OptixInstance``): a 3x4 object-to-world transform (row-major,
    ``None`` = identity), an id reported to the programs as ``inst``, and a visibility mask."""

    gas: Gas
    transform: Any = None
    instance_id: int = 0
    mask: int = 0xFF


@dataclass(frozen=True)
class Ias:
    """An instance acceleration structure: a BVH over the instances' world-space boxes and the
    instanced GASes pooled into shared buffers (each distinct GAS once)."""

    kind: int
    radius: float
    geometry: Any
    top: Bvh  # over instances, leaf size 1
    inst: Any  # (I, 16) float32: world-to-object 3x4, then int32 words node base, data base,
    #            node count, instance id (a float32 view), mask
    nodes: Any  # pooled GAS node records
    data: Any  # pooled primitives / records
    order: Any  # pooled primitive indices (local to each GAS)
    n_instances: int
    peak_build_bytes: int
    node_slack_bytes: int = 0  # pooled node records allocated beyond ``nodes`` (sliced IAS)

    @property
    def engine(self) -> Any:
        """The engine this scene runs on: the software engine."""
        from .engine import engine_named

        return engine_named("software")

    @property
    def instanced(self) -> bool:
        """Whether this is an IAS (rays reach the programs with an instance id)."""
        return isinstance(self, Ias)

    def query_args(self) -> tuple[Any, ...]:
        """The scene tuple of :func:`scene_query` (two-level): ``top, top_words, top_order,
        inst, inst_words, nodes, words, data, order, radius``."""
        top = self.top
        return (top.nodes, top.nodes.view(np.int32), top.order, self.inst,
                self.inst.view(np.int32), self.nodes, self.nodes.view(np.int32), self.data,
                self.order, np.float32(self.radius))

    def footprint(self) -> Footprint:
        parts = {"instances": int(self.inst.nbytes), "ias_nodes": int(self.top.nodes.nbytes),
                 "ias_order": int(self.top.order.nbytes), "gas_nodes": int(self.nodes.nbytes),
                 "gas_data": int(self.data.nbytes), "gas_order": int(self.order.nbytes)}
        if self.node_slack_bytes:
            parts["gas_node_headroom"] = int(self.node_slack_bytes)
        return Footprint(breakdown=parts, peak_build_bytes=self.peak_build_bytes)


def _affine(transform: Any) -> np.ndarray:
    if transform is None:
        return np.eye(3, 4, dtype=np.float64)
    m = np.asarray(transform.get() if hasattr(transform, "get") else transform, dtype=np.float64)
    if m.shape == (12,):
        m = m.reshape(3, 4)
    if m.shape != (3, 4) or not np.isfinite(m).all():
        raise InvalidInput(f"an instance transform must be a finite 3x4 matrix, got shape {m.shape}")
    if abs(np.linalg.det(m[:, :3])) < 1e-30:
        raise InvalidInput("an instance transform must be invertible")
    return m


def build_ias(instances: list[Instance] | tuple[Instance, ...]) -> Ias:
    """Build an IAS over ``instances`` (all on one device, one primitive kind, radius and
    geometry function)."""
    instances = list(instances)
    if not instances:
        raise InvalidInput("an IAS needs at least one instance")
    first = instances[0].gas
    xp = xp_of(first.data)
    for k, ins in enumerate(instances):
        g = ins.gas
        if not isinstance(g, Gas):
            raise InvalidInput(f"instance {k}: gas must be a Gas, got {type(g).__name__}")
        if (g.kind, g.radius, g.geometry) != (first.kind, first.radius, first.geometry):
            raise InvalidInput("all GASes of an IAS must share primitive kind, radius and geometry")
        if xp_of(g.data) is not xp:
            raise InvalidInput("all GASes of an IAS must be on one device")
        if not 0 <= int(ins.mask) <= 0xFF or not 0 <= int(ins.instance_id) < 2**23:
            raise InvalidInput(f"instance {k}: mask must be 0..255 and instance_id 0..2^23-1")
    pool: dict[int, int] = {}
    gases: list[Gas] = []
    for ins in instances:
        if id(ins.gas) not in pool:
            pool[id(ins.gas)] = len(gases)
            gases.append(ins.gas)
    node_base = np.cumsum([0] + [g.bvh.n_nodes for g in gases])
    data_base = np.cumsum([0] + [g.n_prims for g in gases])
    nodes = xp.concatenate([g.bvh.nodes[: g.bvh.n_nodes] for g in gases])
    data = xp.concatenate([g.data for g in gases]) if len(gases) > 1 else gases[0].data
    order = xp.concatenate([g.bvh.order.astype(np.int64) for g in gases])
    roots = [_root_box(g.bvh) for g in gases]
    entries = [(_affine(ins.transform), int(node_base[pool[id(ins.gas)]]),
                int(data_base[pool[id(ins.gas)]]), gases[pool[id(ins.gas)]].bvh.n_nodes,
                int(ins.instance_id), int(ins.mask), roots[pool[id(ins.gas)]])
               for ins in instances]
    top, table = _instance_table(xp, entries)
    peak = int(nodes.nbytes + data.nbytes + order.nbytes) + top.peak_build_bytes + table.nbytes
    return Ias(first.kind, first.radius, first.geometry, top, xp.asarray(table), nodes, data, order,
               len(instances), peak)


def _root_box(bvh: Bvh) -> np.ndarray:
    root = bvh.nodes[0, :6]
    return np.asarray(root.get() if hasattr(root, "get") else root, dtype=np.float64)


def _instance_table(xp: Any, entries: list[tuple[Any, ...]]) -> tuple[Bvh, np.ndarray]:
    """The top-level BVH over instances and their table, from one entry per instance:
    (3x4 transform, node base, data base, node count, instance id, mask, root box)."""
    n = len(entries)
    table = np.zeros((n, 16), dtype=np.float32)
    words = table.view(np.int32)
    lo = np.empty((n, 3), np.float32)
    hi = np.empty((n, 3), np.float32)
    for k, (m, node_base, data_base, n_nodes, instance_id, mask, root) in enumerate(entries):
        inv = np.linalg.inv(np.vstack([m, [0, 0, 0, 1]]))[:3]
        table[k, :12] = inv.reshape(12)
        words[k, 12] = node_base
        words[k, 13] = data_base
        words[k, 14] = n_nodes
        words[k, 15] = (instance_id << 8) | mask
        if not root[0] <= root[3]:  # an empty GAS: an empty box
            lo[k], hi[k] = np.inf, -np.inf
            continue
        corners = np.array([[root[0 + 3 * a], root[1 + 3 * b], root[2 + 3 * c], 1.0]
                            for a in (0, 1) for b in (0, 1) for c in (0, 1)])
        world = corners @ m.T
        lo[k] = np.nextafter(world.min(axis=0).astype(np.float32), np.float32(-np.inf))
        hi[k] = np.nextafter(world.max(axis=0).astype(np.float32), np.float32(np.inf))
    empty = ~(lo <= hi).all(axis=1)
    lo[empty], hi[empty] = 0, 0  # never reached: its node count is 0 below
    words[empty, 14] = 0
    return build_bvh(xp.asarray(lo), xp.asarray(hi), leaf_size=1), table


def build_sliced_ias(kind: int, cuts: list[int], make: Any, radius: float = 0.0,
                     leaf_size: int = 4, *, geometry: Any = None, compact: bool = True,
                     held: int = 0, codes: Any = None) -> Ias:
    """An IAS of one GAS per contiguous slice ``cuts[i] .. cuts[i+1]-1`` of the primitives,
    instance ``i`` (identity transform) over slice ``i``; ``make(s, e)`` returns the primitives
    (or, with ``geometry``, the records) of positions ``s .. e-1``, and ``codes(s, e)``, if
    given, their sort codes for the slice's BVH (:func:`~.bvh.build_bvh`).

    The GASes are built one after another straight into the pooled buffers, the way OptiX
    builds and compacts each sub-BVH into its own buffer and the IAS only references them: the
    build's peak holds the pooled scene and one slice's build, not every GAS twice. The node
    records go into one pool sized from the first slice's records per primitive (2% over; it
    grows if a later slice needs more), which keeps its headroom rather than be copied to size
    (``Ias.node_slack_bytes``, counted in the footprint).
    ``held``: bytes the caller keeps alive meanwhile, added to the peak. Primitive indices
    (``prim`` in programs) are local to the slice; ``inst`` names the slice.
    """
    if len(cuts) < 2 or any(b < a for a, b in itertools.pairwise(cuts)):
        raise InvalidInput(f"cuts must be at least two non-decreasing positions, got {cuts}")
    n = int(cuts[-1]) - int(cuts[0])
    data: Any = None
    order: Any = None
    pool: Any = None  # the pooled node records, filled slice by slice
    entries = []
    peak, node_base, xp = held, 0, None
    for i, (s, e) in enumerate(itertools.pairwise(cuts)):
        part = _check_data(kind, make(int(s), int(e)), radius, geometry)
        xp = xp_of(part)
        if data is None:  # the pooled buffers, filled slice by slice
            data = xp.empty((n, *part.shape[1:]), dtype=part.dtype)
            order = xp.empty(n, dtype=np.int64)
        lo, hi = _bounds(kind, part, radius, geometry)
        bvh = build_bvh(lo, hi, leaf_size=leaf_size, compact=compact,
                        codes=None if codes is None else codes(int(s), int(e)))
        del lo, hi
        base = int(s) - int(cuts[0])
        data[base:base + int(e) - int(s)] = part[bvh.order]
        order[base:base + int(e) - int(s)] = bvh.order
        rows = bvh.n_nodes
        if pool is None or node_base + rows > int(pool.shape[0]):
            pool = _grown(xp, pool, node_base, node_base + rows, bvh.nodes.shape[1:],
                          bvh.nodes.dtype, rows / max(int(e) - int(s), 1), n - int(e) + int(cuts[0]))
        pool[node_base:node_base + rows] = bvh.nodes[:rows]
        built = int(pool.nbytes) + int(data.nbytes) + int(order.nbytes)
        peak = max(peak, held + built + int(part.nbytes) * 2 + bvh.peak_build_bytes)
        entries.append((np.eye(3, 4, dtype=np.float64), node_base, base, rows, i, 0xFF,
                        _root_box(bvh)))
        node_base += rows
        del bvh, part
    assert xp is not None and data is not None and order is not None and pool is not None
    # the pool keeps its few percent of headroom: cutting it to size would copy every node
    # record, holding them twice, the peak that building the slices one by one avoids
    nodes = pool[:node_base]
    slack = int(pool.nbytes) - int(nodes.nbytes)
    pooled = int(pool.nbytes + data.nbytes + order.nbytes)
    top, table = _instance_table(xp, entries)
    peak = max(peak, held + pooled + top.peak_build_bytes + int(table.nbytes))
    return Ias(kind, float(radius), geometry, top, xp.asarray(table), nodes, data, order,
               len(entries), peak, slack)


def _grown(xp: Any, pool: Any, used: int, need: int, row_shape: tuple[int, ...], dtype: Any,
           per_prim: float, prims_left: int) -> Any:
    """A node pool that holds ``need`` records: the first (``pool`` None) sized for every slice
    from the first slice's records per primitive, 2% over; a later one (a slice needed more
    than the estimate) with room for the rest at the same rate, its first ``used`` records
    copied."""
    want = need + int(per_prim * prims_left * 1.02) + 64
    grown = xp.empty((want, *row_shape), dtype=dtype)
    if pool is not None and used:
        grown[:used] = pool[:used]
    return grown


# --------------------------------------------------------------------------- programs
@dataclass(frozen=True)
class Programs:
    """The programs of a launch; ``None`` = OptiX's default (accept, record, nothing)."""

    intersection: Any = None
    anyhit: Any = None
    closesthit: Any = None
    miss: Any = None
    raygen: Any = None  # for launch(): f(i, params) -> (ox, oy, oz, dx, dy, dz, tmin, tmax)


@dataclass(frozen=True)
class Hits:
    """Per ray: the closest accepted hit (``prim`` -1 and ``t`` inf on a miss), its front-face
    flag and instance id (0 for a GAS)."""

    t: Any
    prim: Any
    front: Any
    payload: Any
    inst: Any = None


@register_jitable
def _no_anyhit(ray, inst, prim, t, front, payload, params):
    return 0


@register_jitable
def _no_closesthit(ray, inst, prim, t, front, payload, params):
    return


@register_jitable
def _no_miss(ray, payload, params):
    return


@register_jitable
def _no_intersection(data, i, inst, prim, ox, oy, oz, dx, dy, dz, tmin, tmax, params):
    return np.float32(np.inf), False


@functools.cache
def _walker(kind: int, geometry: Any, intersection: Any, anyhit: Any) -> Any:
    """``walk(...)``: one ray through one GAS's records (specialised per kind and programs)."""
    has_anyhit = anyhit is not None
    custom = intersection is not None
    anyhit = anyhit or _no_anyhit
    intersection = intersection or _no_intersection

    @register_jitable
    def walk(i, inst, nodes, words, nbase, n_nodes, data, dbase, order, radius,
             ox, oy, oz, dx, dy, dz, tmin, tmax, flags, payload, params,
             best_t, best_p, best_f, best_i):
        inf = np.float32(np.inf)
        ix = np.float32(1.0) / dx if dx != 0 else inf
        iy = np.float32(1.0) / dy if dy != 0 else inf
        iz = np.float32(1.0) / dz if dz != 0 else inf
        done = False
        j = np.int64(0)
        while j < n_nodes:
            # cull with the closest hit so far, widened a little so that ties (same t, smaller
            # primitive index) are still visited
            cull = tmax if best_p < 0 else min(tmax, best_t + abs(best_t) * np.float32(1e-6)
                                                + np.float32(1e-30))
            # inner loop: skip and descend until a leaf the ray overlaps (the warp's threads
            # reconverge here before any of them tests primitives)
            leaf = np.int64(-1)
            while j < n_nodes:
                k = nbase + j
                hit = slab_walk(nodes, k, ox, oy, oz, ix, iy, iz, tmin, cull)
                c = words[k, 6]
                if c >= 0:  # inner node: first child on a hit, else the escape index
                    j = j + 1 if hit else np.int64(c)
                    continue
                j += 1
                if hit:
                    leaf = k
                    break
            if leaf < 0:
                break
            c = words[leaf, 6]
            start = dbase + np.int64(words[leaf, 7])
            for q in range(start, start - np.int64(c)):
                g = geometry(data, q)
                if kind == 0:
                    t, front = hit_triangle_v(g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8],
                                              ox, oy, oz, dx, dy, dz, tmin, tmax)
                elif kind == 1:
                    t, front = hit_sphere_c(g[0], g[1], g[2], radius, ox, oy, oz, dx, dy, dz,
                                            tmin, tmax)
                elif custom:
                    t, front = intersection(data, q, inst, np.int64(order[q]), ox, oy, oz, dx, dy,
                                            dz, tmin, tmax, params)
                else:
                    t, front = hit_box(g[0], g[1], g[2], g[3], g[4], g[5], ox, oy, oz, dx, dy, dz,
                                       tmin, tmax)
                if not (t < tmax):  # miss (inf) or outside the interval
                    continue
                if kind == 0 and ((front and (flags & 16) != 0) or
                                  (not front and (flags & 8) != 0)):
                    continue
                if t > best_t:
                    continue
                p = np.int64(order[q])
                if t == best_t and not (p < best_p or (p == best_p and inst < best_i)):
                    continue
                verdict = 0
                if has_anyhit and (flags & 2) == 0:
                    verdict = anyhit(i, inst, p, t, front, payload, params)
                if verdict == 1:
                    continue
                best_t, best_p, best_f, best_i = t, p, front, inst
                if verdict == 2 or (flags & 1) != 0:
                    done = True
                    break
            if done:
                break
        return best_t, best_p, best_f, best_i, done

    return walk


@functools.cache
def _ias_walker(kind: int, geometry: Any, intersection: Any, anyhit: Any) -> Any:
    """``walk_ias(...) -> (t, prim, front, inst)``: one ray through an IAS (the top-level BVH
    over instances, then each instance's GAS in its object space)."""
    walk = _walker(kind, geometry, intersection, anyhit)

    @register_jitable
    def walk_ias(i, top, top_words, top_order, inst, inst_words, nodes, words, data, order,
                 radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, mask, payload, params):
        inf = np.float32(np.inf)
        best_t = inf
        best_p = np.int64(-1)
        best_f = False
        best_i = np.int64(0)
        ix = np.float32(1.0) / dx if dx != 0 else inf
        iy = np.float32(1.0) / dy if dy != 0 else inf
        iz = np.float32(1.0) / dz if dz != 0 else inf
        n_top = top.shape[0]
        j = np.int64(0) if tmin < tmax else np.int64(n_top)
        while j < n_top:
            cull = tmax if best_p < 0 else min(tmax, best_t + abs(best_t) * np.float32(1e-6)
                                                + np.float32(1e-30))
            hit, _ = slab(top, j, ox, oy, oz, ix, iy, iz, tmin, cull)
            c = top_words[j, 6]
            if c >= 0:
                j = j + 1 if hit else np.int64(c)
                continue
            j += 1
            if not hit:
                continue
            done = False
            first = np.int64(top_words[j - 1, 7])
            for pos in range(first, first - np.int64(c)):
                s = np.int64(top_order[pos])
                w = inst_words[s, 15]
                if (w & mask & 0xFF) == 0:
                    continue
                m = inst
                # the ray in the instance's object space (t is the same along both)
                px = m[s, 0] * ox + m[s, 1] * oy + m[s, 2] * oz + m[s, 3]
                py = m[s, 4] * ox + m[s, 5] * oy + m[s, 6] * oz + m[s, 7]
                pz = m[s, 8] * ox + m[s, 9] * oy + m[s, 10] * oz + m[s, 11]
                qx = m[s, 0] * dx + m[s, 1] * dy + m[s, 2] * dz
                qy = m[s, 4] * dx + m[s, 5] * dy + m[s, 6] * dz
                qz = m[s, 8] * dx + m[s, 9] * dy + m[s, 10] * dz
                best_t, best_p, best_f, best_i, done = walk(
                    i, np.int64(w >> 8), nodes, words, np.int64(inst_words[s, 12]),
                    np.int64(inst_words[s, 14]), data, np.int64(inst_words[s, 13]), order, radius,
                    px, py, pz, qx, qy, qz, tmin, tmax, flags, payload, params,
                    best_t, best_p, best_f, best_i)
                if done:
                    break
            if done:
                break
        return best_t, best_p, best_f, best_i

    return walk_ias


@functools.cache
def closest_hit_query(kind: int, geometry: Any) -> Any:
    """``closest(nodes, words, n_nodes, data, order, radius, ox, oy, oz, dx, dy, dz, tmin,
    tmax) -> (t, prim, front)``: one closest-hit ray through a GAS, called from inside a kernel
    (``prim`` -1 and ``t`` inf on a miss; ties go to the smaller primitive index).

    This is ``optixTrace`` called from a ray-generation program with no any-hit or
    intersection program: a kernel that chains rays, each one's origin depending on the last
    one's hit (cgRX's successor search), casts them all in one thread and one launch instead of
    one launch per ray with the rays of every phase written to memory. The GAS's arrays come
    from :meth:`Gas.query_args`. Specialised per primitive kind and geometry function.
    """
    walk = _walker(kind, geometry if geometry is not None else _STORED[kind], None, None)

    @register_jitable
    def closest(nodes, words, n_nodes, data, order, radius, ox, oy, oz, dx, dy, dz, tmin, tmax):
        best_t = np.float32(np.inf)
        best_p = np.int64(-1)
        best_f = False
        if tmin < tmax:
            best_t, best_p, best_f, _, _ = walk(
                np.int64(0), np.int64(0), nodes, words, np.int64(0), n_nodes, data, np.int64(0),
                order, radius, ox, oy, oz, dx, dy, dz, tmin, tmax, np.int64(0), order, order,
                best_t, best_p, best_f, np.int64(0))
        return best_t, best_p, best_f

    return closest


@functools.cache
def scene_query(kind: int, geometry: Any, two_level: bool, intersection: Any = None,
                anyhit: Any = None) -> Any:
    """``query(scene, ray, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, params) -> (t, prim,
    front, inst)``: one ray through a GAS (``two_level`` False) or an IAS, traced from inside a
    kernel with an intersection program (custom primitives) and an any-hit program; the
    closest accepted hit (``prim`` -1 and ``t`` inf on a miss; ties go to the smaller primitive
    index, then instance). ``scene`` is :meth:`Gas.query_args` or :meth:`Ias.query_args`;
    ``flags`` as for :func:`trace` (:data:`TERMINATE_ON_FIRST_HIT` stops at the first accepted
    hit); ``params`` is handed to the programs, and ``ray`` to the any-hit program as its ray
    index. The any-hit program gets no payload array (a stand-in it must not touch): what it
    decides goes into its verdict.

    This is ``optixTrace`` from a ray-generation program with the index's own programs:
    optimized RX's range lookups cast their rays this way, one thread per lookup, without a
    launch per ray phase. Specialised per primitive kind, geometry function, scene level and
    programs.
    """
    geometry = geometry if geometry is not None else _STORED[kind]
    if two_level:
        walk_ias = _ias_walker(kind, geometry, intersection, anyhit)

        @register_jitable
        def query_ias(scene, ray, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, params):
            top, top_words, top_order, inst, inst_words, nodes, words, data, order, radius = scene
            return walk_ias(ray, top, top_words, top_order, inst, inst_words, nodes, words, data,
                            order, radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags,
                            np.int64(0xFF), order, params)

        return query_ias
    walk = _walker(kind, geometry, intersection, anyhit)

    @register_jitable
    def query_gas(scene, ray, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, params):
        nodes, words, n_nodes, data, order, radius = scene
        best_t = np.float32(np.inf)
        best_p = np.int64(-1)
        best_f = False
        best_i = np.int64(0)
        if tmin < tmax:
            best_t, best_p, best_f, best_i, _ = walk(
                ray, np.int64(0), nodes, words, np.int64(0), n_nodes, data, np.int64(0), order,
                radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, order, params, best_t, best_p,
                best_f, best_i)
        return best_t, best_p, best_f, best_i

    return query_gas


@register_jitable
def _no_raygen(i, params):
    z = np.float32(0)
    return z, z, z, z, z, z, z, z


@functools.cache
def _trace_kernel(kind: int, geometry: Any, two_level: bool, intersection: Any, anyhit: Any,
                  closesthit: Any, miss: Any, raygen: Any = None) -> Kernel:
    """The trace kernel for one scene type and program set (compiled on first use, per device)."""
    walk = _walker(kind, geometry, intersection, anyhit)
    closesthit = closesthit or _no_closesthit
    miss = miss or _no_miss
    generate = raygen is not None
    raygen = raygen or _no_raygen

    @register_jitable
    def ray(i, origins, dirs, tmins, tmaxs, params):
        """Ray ``i``: from the ray-generation program, or read from the arrays."""
        if generate:
            ox, oy, oz, dx, dy, dz, t0, t1 = raygen(i, params)
            return (np.float32(ox), np.float32(oy), np.float32(oz), np.float32(dx),
                    np.float32(dy), np.float32(dz), np.float32(t0), np.float32(t1))
        return (origins[i, 0], origins[i, 1], origins[i, 2], dirs[i, 0], dirs[i, 1], dirs[i, 2],
                tmins[i], tmaxs[i])

    @register_jitable
    def finish(i, best_t, best_p, best_f, best_i, flags, payload, params, out_t, out_p, out_f,
               out_i):
        out_t[i] = best_t
        out_p[i] = best_p
        out_f[i] = best_f
        out_i[i] = best_i
        if best_p >= 0:
            if (flags & 4) == 0:
                closesthit(i, best_i, best_p, best_t, best_f, payload, params)
        else:
            miss(i, payload, params)

    if not two_level:
        @register_jitable
        def gas_item(i, nodes, words, n_nodes, data, order, radius, origins, dirs, tmins,
                     tmaxs, flags, mask, payload, params, out_t, out_p, out_f, out_i):
            ox, oy, oz, dx, dy, dz, tmin, tmax = ray(i, origins, dirs, tmins, tmaxs, params)
            best_t = np.float32(np.inf)
            best_p = np.int64(-1)
            best_f = False
            best_i = np.int64(0)
            if tmin < tmax and (mask & 0xFF) != 0:
                best_t, best_p, best_f, best_i, _ = walk(
                    i, np.int64(0), nodes, words, np.int64(0), n_nodes, data, np.int64(0), order,
                    radius, ox, oy, oz, dx, dy, dz, tmin, tmax, flags, payload, params,
                    best_t, best_p, best_f, best_i)
            finish(i, best_t, best_p, best_f, best_i, flags, payload, params, out_t, out_p, out_f,
                   out_i)

        return Kernel(gas_item, name="rt_trace", serial_below=RAYS_SERIAL_BELOW)

    walk_ias = _ias_walker(kind, geometry, intersection, anyhit)

    @register_jitable
    def ias_item(i, top, top_words, top_order, inst, inst_words, nodes, words, data, order,
                 radius, origins, dirs, tmins, tmaxs, flags, mask, payload, params, out_t, out_p,
                 out_f, out_i):
        ox, oy, oz, dx, dy, dz, tmin, tmax = ray(i, origins, dirs, tmins, tmaxs, params)
        best_t, best_p, best_f, best_i = walk_ias(
            i, top, top_words, top_order, inst, inst_words, nodes, words, data, order, radius,
            ox, oy, oz, dx, dy, dz, tmin, tmax, flags, mask, payload, params)
        finish(i, best_t, best_p, best_f, best_i, flags, payload, params, out_t, out_p, out_f, out_i)

    return Kernel(ias_item, name="rt_trace_ias", serial_below=RAYS_SERIAL_BELOW)


def trace(scene: Gas | Ias, origins: Any, directions: Any, tmin: Any, tmax: Any,
          programs: Programs | None = None, flags: int = 0, payload: Any = None,
          params: tuple[Any, ...] = (), mask: int = 0xFF, threads_per_block: int = 128,
          device: str | None = None) -> Hits:
    """Trace one ray per row of ``origins``/``directions`` (float32, (R, 3)) with per-ray
    ``tmin``/``tmax`` (float32, (R,)) against ``scene`` (a GAS or an IAS); arrays on the GPU
    trace on the GPU.

    ``payload``: a (R, S) uint64 array the programs read and write (default: (R, 1) zeros).
    ``params``: a tuple (a ``NamedTuple`` for named fields) of arrays on the scene's device,
    scalars and nested tuples, handed to every program.
    ``mask``: the rays' visibility mask (0..255; an instance is visited when its mask shares a
    bit with it). ``device``: by default the arrays' own; ``"cuda"`` with NumPy arrays runs the
    GPU kernel under numba's CUDA simulator (tests only).
    """
    programs = programs or Programs()
    if programs.raygen is not None:
        raise InvalidInput("trace() takes rays as arrays; a ray-generation program goes to launch()")
    xp = _scene_xp(scene)
    o = xp.ascontiguousarray(origins, dtype=np.float32)
    d = xp.ascontiguousarray(directions, dtype=np.float32)
    r = int(o.shape[0]) if o.ndim == 2 else -1
    if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
        raise InvalidInput(f"origins and directions must both be (R, 3); got {tuple(o.shape)} and "
                           f"{tuple(d.shape)}")
    t0 = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(tmin, dtype=np.float32), (r,)))
    t1 = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(tmax, dtype=np.float32), (r,)))
    return _run(scene, r, (o, d, t0, t1), programs, flags, payload, params, mask, threads_per_block,
                device)


def launch(scene: Gas | Ias, n: int, programs: Programs, flags: int = 0, payload: Any = None,
           params: tuple[Any, ...] = (), mask: int = 0xFF, threads_per_block: int = 128,
           device: str | None = None) -> Hits:
    """``optixLaunch`` with a ray-generation program: ``programs.raygen(i, params)`` makes ray
    ``i`` (``ox, oy, oz, dx, dy, dz, tmin, tmax``) inside the kernel for ``i < n``, so no ray
    arrays are written or read; otherwise as :func:`trace`."""
    if programs.raygen is None:
        raise InvalidInput("launch() needs a ray-generation program (Programs(raygen=...))")
    if not 0 <= n < 2**62:
        raise InvalidInput(f"the number of rays must be >= 0, got {n}")
    xp = _scene_xp(scene)
    none = xp.zeros((1, 3), dtype=np.float32)
    one = xp.zeros(1, dtype=np.float32)
    return _run(scene, int(n), (none, none, one, one), programs, flags, payload, params, mask,
                threads_per_block, device)


def bind_launch(scene: Gas | Ias, most: int, programs: Programs, flags: int,
                params: tuple[Any, ...], threads_per_block: int = 128,
                device: str | None = None) -> Any:
    """:func:`launch` prepared for repeated calls of at most ``most`` rays over one scene: a
    function ``bound(n, payload, *open)`` that traces ``n <= most`` generated rays with the
    (n, 1) uint64 ``payload`` and the arrays of ``params``'s :class:`~indexzoo.native.targets.
    Slot` fields (in order) filled in, at the host cost of those arrays alone (see
    :meth:`~indexzoo.native.targets.Kernel.bind`). The per-ray closest hits go to scratch
    arrays of ``most`` rays that nobody reads: a caller reads the payload only."""
    if programs.raygen is None:
        raise InvalidInput("bind_launch() needs a ray-generation program (Programs(raygen=...))")
    xp = _scene_xp(scene)
    device = device or ("cpu" if xp is np else "cuda")
    none = xp.zeros((1, 3), dtype=np.float32)
    one = xp.zeros(1, dtype=np.float32)
    geometry = scene.geometry if scene.geometry is not None else _STORED[scene.kind]
    kernel = _trace_kernel(scene.kind, geometry, isinstance(scene, Ias), programs.intersection,
                           programs.anyhit, programs.closesthit, programs.miss, programs.raygen)
    tail = (np.float32(scene.radius), none, none, one, one, np.int64(flags), np.int64(0xFF),
            Slot(np.dtype(np.uint64), 2), params, xp.empty(most, dtype=np.float32),
            xp.empty(most, dtype=np.int64), xp.empty(most, dtype=np.bool_),
            xp.empty(most, dtype=np.int64))
    if isinstance(scene, Gas):
        b = scene.bvh
        return kernel.bind(device, b.nodes, b.nodes.view(np.int32), np.int64(b.n_nodes),
                           scene.data, b.order, *tail, threads_per_block=threads_per_block)
    top = scene.top
    return kernel.bind(device, top.nodes, top.nodes.view(np.int32), top.order, scene.inst,
                       scene.inst.view(np.int32), scene.nodes, scene.nodes.view(np.int32),
                       scene.data, scene.order, *tail, threads_per_block=threads_per_block)


def _scene_xp(scene: Any) -> Any:
    if not isinstance(scene, (Gas, Ias)):
        raise InvalidInput(f"trace needs a Gas or an Ias, got {type(scene).__name__}")
    return xp_of(scene.data)


def _run(scene: Gas | Ias, r: int, rays: tuple[Any, ...], programs: Programs, flags: int,
         payload: Any, params: tuple[Any, ...], mask: int, threads_per_block: int,
         device: str | None) -> Hits:
    xp = xp_of(scene.data)
    device = device or ("cpu" if xp is np else "cuda")
    if not 0 <= flags <= _ALL_FLAGS:
        raise InvalidInput(f"unknown ray flags {flags}")
    if not 0 <= mask <= 0xFF:
        raise InvalidInput(f"the ray mask must be 0..255, got {mask}")
    if programs.intersection is not None and scene.kind != AABBS:
        raise InvalidInput("intersection programs are for custom (AABB) primitives only")
    if payload is None:
        payload = xp.zeros((r, 1), dtype=np.uint64)
    elif payload.ndim != 2 or payload.shape[0] != r or payload.dtype != np.uint64:
        raise InvalidInput("payload must be a (R, S) uint64 array")
    out_t = xp.empty(r, dtype=np.float32)
    out_p = xp.empty(r, dtype=np.int64)
    out_f = xp.empty(r, dtype=np.bool_)
    out_i = xp.empty(r, dtype=np.int64)
    geometry = scene.geometry if scene.geometry is not None else _STORED[scene.kind]
    kernel = _trace_kernel(scene.kind, geometry, isinstance(scene, Ias), programs.intersection,
                           programs.anyhit, programs.closesthit, programs.miss, programs.raygen)
    tail = (np.float32(scene.radius), *rays, np.int64(flags), np.int64(mask), payload,
            params if isinstance(params, tuple) else tuple(params), out_t, out_p, out_f,
            out_i)
    if isinstance(scene, Gas):
        b = scene.bvh
        kernel(device, r, b.nodes, b.nodes.view(np.int32), np.int64(b.n_nodes), scene.data, b.order,
               *tail, threads_per_block=threads_per_block)
    else:
        top = scene.top
        kernel(device, r, top.nodes, top.nodes.view(np.int32), top.order, scene.inst,
               scene.inst.view(np.int32), scene.nodes, scene.nodes.view(np.int32), scene.data,
               scene.order, *tail, threads_per_block=threads_per_block)
    return Hits(out_t, out_p, out_f, payload, out_i)
