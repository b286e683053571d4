"""The software engine's scenes: geometry acceleration structures (:class:`Gas`, over triangles,
spheres or custom primitives, stored or generated from records) and instance acceleration
structures (:class:`Ias`, plain or sliced), built on the BVH of :mod:`.bvh`.

This is the build stage of the pipeline :mod:`.trace` describes (``optixAccelBuild``,
``optixAccelCompact``, update builds); :mod:`.traversal` walks what it builds.
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
from indexzoo.errors import InvalidInput

from ..targets import Kernel
from .bvh import Bvh, build_bvh, refit
from .engine import engine_named
from .geometry import AABBS, SPHERES, TRIANGLES, prim_bounds

__all__ = ["STORED", "Gas", "Ias", "Instance", "box_rows", "build_gas", "build_ias",
           "build_sliced_ias", "geometry_of", "sphere_rows", "triangle_rows"]

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


#: The geometry function of stored primitives, per kind.
STORED = {TRIANGLES: triangle_rows, SPHERES: sphere_rows, AABBS: box_rows}


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
class _SoftwareScene:
    """What the software engine's scenes (:class:`Gas`, :class:`Ias`) share; each says in
    ``instanced`` whether it is an IAS (rays reach the programs with an instance id)."""

    @property
    def engine(self) -> Any:
        """The engine this scene runs on: the software engine."""
        return engine_named("software")


@dataclass(frozen=True)
class Gas(_SoftwareScene):
    """A geometry acceleration structure: the primitives (or their records), in BVH order, and
    the BVH over them. ``data[i]`` is primitive ``bvh.order[i]`` of the build input."""

    kind: int
    data: Any  # stored: triangles (N, 9), sphere centres (N, 3) or boxes (N, 6), float32; else records
    radius: float
    bvh: Bvh
    geometry: Any = None  # None: stored primitives; else f(records, i) -> the primitive

    instanced = False

    @property
    def n_prims(self) -> int:
        return self.bvh.n_prims

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
class Ias(_SoftwareScene):
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

    instanced = True

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


def geometry_of(scene: Gas | Ias) -> Any:
    """The geometry function the walk calls for ``scene``'s primitives: its own for generated
    geometry, else the one reading its stored rows."""
    return scene.geometry if scene.geometry is not None else STORED[scene.kind]
