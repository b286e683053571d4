"""The query layer of the ray-tracing family: lookups as batches of rays, hits reduced per
lookup.

Every RT index answers a batch of lookups the same way: each lookup casts some rays (RX casts
one per point lookup and one per occupied row of a range; others may cast none), the rays are
traced in launches of at most ``max_rays``, an any-hit program decides per hit whether it is a
match and which rowID it stands for, and the hits are reduced per lookup. This module is that
plumbing; an index supplies only what differs:

* a :class:`RayBatch`: how many rays each lookup casts (CSR ``starts``) and the rays of any
  slice of the flat ray list, as arrays or as a ray-generation program with its per-ray input;
* a ``match`` program, ``match(ray, inst, prim, t, front, params) -> rowID`` (``NO_MATCH`` to
  ignore the hit), and for custom primitives an intersection program;
* its own launch-parameter record (a ``NamedTuple`` of arrays and scalars), whose fields its
  programs read by name next to the layer's (OptiX's launch parameters).

The hit operations (:class:`HitOp`):

* ``FIRST``: some matching rowID per lookup (the ray terminates on its first match);
* ``COUNT``: matches per lookup (any-hit ignores every hit, so the ray finds all);
* ``SUM``: ``values[rowID]`` (or the rowID) summed per lookup, uint64 wrapping;
* ``COLLECT``: every match, as CSR (``offsets``, ``rowids``): a count pass, an exclusive scan
  of the per-ray counts, and a fill pass whose any-hit writes each rowID at its ray's offset
  plus the ray's running count;
* ``CLOSEST``: per lookup the match of the closest hit of its first ray that hits anything
  (any-hit accepts matches, the closest-hit program records the closest; equal distances go
  to the smaller primitive index): optimized RX's and cgRX's closest-hit lookups, whose
  "rowID" is then a position in sorted keys to scan from;
* ``BITMAP``: every match writes one bit of its lookup's row of a packed bitmap (rowID ``r`` is
  bit ``r % 32`` of word ``r // 32``): a ``match`` result ``r >= 0`` sets bit ``r`` (atomic OR),
  a result :func:`clear_bit` ``(r)`` clears it (atomic AND-NOT); repeated hits on one primitive
  write the same bit again, so the result does not depend on how many rays meet it (RTScan's
  refine, which writes ``bit := exact predicate`` over an approximate bitmap). The atomics are
  the device's (:func:`bit_writers`): numba-cuda's on the GPU, an LLVM ``atomicrmw`` on the CPU,
  whose kernels run in parallel threads too.

:func:`first`, :func:`count`, :func:`sum_values`, :func:`collect`, :func:`closest` and
:func:`mark_bits` run them. Every launch gets
one flat named record (:func:`launch_record`); with it, the launch takes the engine's fast (CuPy)
launch path on the GPU.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of

from ..csr import offsets_from_counts
from ..targets import Kernel, Slot, values_arg
from .programs import (
    NO_MATCH,
    Generated,
    HitOp,
    QueryPrograms,
    bit_writers,
    clear_bit,
)
from .trace import Gas, Ias

__all__ = ["MISS", "NO_MATCH", "FunctionBatch", "Generated", "HitOp", "QueryParams", "QueryPrograms",
           "RayBatch",
           "Rays", "Scene", "bit_writers", "clear_bit", "closest", "closest_rays", "collect", "count",
           "first", "launch_record", "mark_bits", "prepared_first", "sum_values"]

#: ``first`` reports lookups without a match with this value (uint64).
MISS = np.uint64(np.iinfo(np.uint64).max)

_U64 = np.uint64

#: What the layer traces: a scene of either engine (each carries its engine, ``scene.engine``).
#: At run time the scene classes a saved state may hold (the software engine's, saved as
#: arrays; an index saves no OptiX scene, a handle on one GPU); to the type checker ``Any``,
#: since an index reaches an engine's own parts (``query_args``, ``geometry``) only after
#: asking the scene's engine what it can do.
if TYPE_CHECKING:
    Scene = Any
else:
    Scene = Gas | Ias


_ONE_MATCH = (HitOp.FIRST, HitOp.CLOSEST)


class QueryParams(NamedTuple):
    """The layer's launch parameters, the first fields of every query launch's record.

    ``op`` (a :class:`HitOp`), ``values``/``use_values`` for SUM (a one-element stand-in and
    False when sums are of rowIDs), ``ray_offsets``/``out`` for COLLECT (one-element stand-ins
    otherwise) and ``ray_data`` (per-ray input of a ray-generation program, e.g. the lookup
    keys). The plugin's own fields follow (see :func:`launch_record`): numba's parallel CPU
    loops take flat tuples of arrays and scalars, not nested ones, so the record is one flat
    ``NamedTuple``.
    """

    op: Any
    values: Any
    use_values: Any
    ray_offsets: Any
    out: Any
    ray_data: Any


@functools.cache
def launch_record(index_record: Any) -> Any:
    """The launch-parameter record of an index: :class:`QueryParams`' fields followed by those
    of ``index_record`` (a ``NamedTuple`` class), read by name in the programs
    (``params.op``, ``params.keys``)."""
    fields = getattr(index_record, "_fields", None)
    if fields is None:
        raise TypeError(f"{index_record!r} is not a NamedTuple class")
    clash = sorted(set(fields) & set(QueryParams._fields))
    if clash:
        raise TypeError(f"{index_record.__name__} reuses the query layer's fields {clash}")
    import collections

    return collections.namedtuple(f"{index_record.__name__}Launch",
                                  (*QueryParams._fields, *fields))


@dataclass(frozen=True)
class Rays:
    """Rays as arrays: ``origins``/``directions`` (R, 3) float32, ``tmin``/``tmax`` (R,)."""

    origins: Any
    directions: Any
    tmin: Any
    tmax: Any


class RayBatch(abc.ABC):
    """The rays of a batch of ``n_queries`` lookups: lookup ``q`` casts rays ``starts[q] ..
    starts[q+1]-1`` of one flat list (possibly none: the lookup then has no match)."""

    n_queries: int
    starts: Any  # int64 (Q + 1)
    one_each: bool  # every lookup casts exactly one ray (ray i belongs to lookup i)

    @property
    def n_rays(self) -> int:
        return int(self.starts[-1])

    def owners(self, s: int, e: int) -> Any:
        """The lookup of each ray ``s .. e-1``."""
        xp = xp_of(self.starts)
        rays = xp.arange(s, e, dtype=np.int64)
        return rays if self.one_each else xp.searchsorted(self.starts[1:], rays, side="right")

    @abc.abstractmethod
    def rays(self, s: int, e: int) -> Rays | Generated:
        """Rays ``s .. e-1`` of the flat list."""

    @abc.abstractmethod
    def record(self, s: int, e: int) -> Any:
        """The plugin's launch-parameter record (a ``NamedTuple``) for rays ``s .. e-1``."""


@dataclass(frozen=True, eq=False)
class FunctionBatch(RayBatch):
    """A :class:`RayBatch` from functions: ``rays(s, e, owner)`` and ``record(s, e, owner)``
    for rays ``s .. e-1`` whose lookups are ``owner``. ``casts``: the number of rays of each
    lookup (int64), or None for one ray per lookup."""

    n_queries: int
    starts: Any
    one_each: bool
    make_rays: Any
    make_record: Any

    @classmethod
    def of(cls, casts: Any, rays: Any, record: Any, n_queries: int | None = None,
           xp: Any = None) -> FunctionBatch:
        if casts is None:
            assert n_queries is not None and xp is not None
            return cls(n_queries, xp.arange(n_queries + 1, dtype=np.int64), True, rays, record)
        xp = xp_of(casts)
        starts = xp.zeros(casts.shape[0] + 1, dtype=np.int64)
        xp.cumsum(casts, out=starts[1:])
        n = int(casts.shape[0])
        return cls(n, starts, int(starts[-1]) == n and bool((casts == 1).all()), rays, record)

    def rays(self, s: int, e: int) -> Rays | Generated:
        return self.make_rays(s, e, self.owners(s, e))

    def record(self, s: int, e: int) -> Any:
        return self.make_record(s, e, self.owners(s, e))


@dataclass(frozen=True)
class _Launch:
    """What every launch of one query shares."""

    scene: Scene
    batch: RayBatch
    programs: QueryPrograms
    values: Any
    max_rays: int
    threads_per_block: int
    rowid_dtype: Any
    device: str | None = None  # None: the arrays' own ("cuda" with NumPy: the simulator)

    @property
    def xp(self) -> Any:
        return xp_of(self.batch.starts)

    def chunks(self) -> Iterator[tuple[int, int]]:
        n, step = self.batch.n_rays, self.max_rays
        return ((s, min(s + step, n)) for s in range(0, n, step))

    def run(self, s: int, e: int, op: HitOp, ray_offsets: Any = None, out: Any = None,
            hits: list[Any] | None = None) -> Any:
        """Trace rays ``s .. e-1`` with operation ``op``; their payloads (uint64 per ray).
        ``hits``: a list that receives the engine's per-ray closest hits (t, front)."""
        xp, r = self.xp, e - s
        payload = xp.full((r, 1), MISS, dtype=_U64) if op in _ONE_MATCH else \
            xp.zeros((r, 1), dtype=_U64)
        values, use_values = values_arg(self.values, xp)
        stand_in = _stand_ins(xp, self.rowid_dtype)
        rays = self.batch.rays(s, e)
        record = self.batch.record(s, e)
        record_type: Any = type(record)
        params = launch_record(record_type)(
            np.int64(op), values, use_values,
            stand_in.offsets if ray_offsets is None else ray_offsets,
            stand_in.out if out is None else out,
            rays.ray_data if isinstance(rays, Generated) else stand_in.ray_data,
            *record)
        self.scene.engine.trace_query(self.scene, self.programs, int(op), params, rays, r,
                                      payload, threads_per_block=self.threads_per_block,
                                      device=self.device, hits=hits)
        return payload[:, 0]

    def segments(self, s: int, e: int) -> tuple[int, int, Any, Any]:
        """Lookups ``q0 .. q1-1`` own rays in ``s .. e-1``; their rays there are
        ``a[i] .. b[i]-1`` (chunk-local)."""
        xp, starts = self.xp, self.batch.starts
        ends = xp.searchsorted(starts, xp.asarray([s, e - 1], dtype=np.int64), side="right")
        q0, q1 = int(ends[0]) - 1, int(ends[1])
        a = xp.clip(starts[q0:q1] - s, 0, e - s)
        b = xp.clip(starts[q0 + 1:q1 + 1] - s, 0, e - s)
        return q0, q1, a, b

    def reduce(self, op: HitOp) -> Any:
        """Per lookup: the count (int64), the sum (uint64), or the match of its first ray that
        hits (FIRST, CLOSEST: uint64, MISS)."""
        xp, q = self.xp, self.batch.n_queries
        if op in _ONE_MATCH:
            res = xp.full(q, MISS, dtype=_U64)
        else:
            res = xp.zeros(q, dtype=np.int64 if op == HitOp.COUNT else _U64)
        for s, e in self.chunks():
            pay = self.run(s, e, op)
            if self.batch.one_each:  # ray i is lookup i: its payload is the answer
                res[s:e] = pay if op in _ONE_MATCH else pay.astype(res.dtype)
                continue
            q0, q1, a, b = self.segments(s, e)
            if op in _ONE_MATCH:
                hit = (pay != MISS).astype(np.int64)
                ch = xp.zeros(e - s + 1, dtype=np.int64)
                xp.cumsum(hit, out=ch[1:])
                has = ch[b] > ch[a]
                idx = xp.clip(xp.searchsorted(ch, ch[a] + 1, side="left") - 1, 0, e - s - 1)
                part = xp.where(has, pay[idx], MISS)
                res[q0:q1] = xp.where(res[q0:q1] == MISS, part, res[q0:q1])
            else:
                cs = xp.zeros(e - s + 1, dtype=res.dtype)
                xp.cumsum(pay.astype(res.dtype), out=cs[1:])
                res[q0:q1] += cs[b] - cs[a]  # uint64 differences wrap correctly
        return res

    def collect(self) -> tuple[Any, Any]:
        xp, q = self.xp, self.batch.n_queries
        chunks = list(self.chunks())
        single = None
        if len(chunks) == 1:  # one launch: keep its per-ray counts for the fill pass
            s, e = chunks[0]
            single = self.run(s, e, HitOp.COUNT)
            q0, q1, a, b = self.segments(s, e)
            cs = xp.zeros(e - s + 1, dtype=np.int64)
            xp.cumsum(single.astype(np.int64), out=cs[1:])
            counts = xp.zeros(q, dtype=np.int64)
            counts[q0:q1] = cs[b] - cs[a]
        else:
            counts = self.reduce(HitOp.COUNT)
        offsets = offsets_from_counts(counts)
        out = xp.empty(int(offsets[-1]), dtype=self.rowid_dtype)
        if out.shape[0] == 0:
            return offsets, out
        done = xp.zeros(q, dtype=np.int64)  # matches written per lookup so far
        for s, e in chunks:
            per_ray = single if single is not None else self.run(s, e, HitOp.COUNT)
            per_ray = per_ray.astype(np.int64)
            owner = self.batch.owners(s, e)
            q0, q1, a, b = self.segments(s, e)
            excl = xp.cumsum(per_ray) - per_ray
            seg0 = excl[xp.clip(a, 0, e - s - 1)]  # the exclusive sum at each lookup's first ray
            ray_off = offsets[owner] + done[owner] + excl - seg0[owner - q0]
            self.run(s, e, HitOp.COLLECT, ray_offsets=ray_off, out=out)
            cs = xp.zeros(e - s + 1, dtype=np.int64)
            xp.cumsum(per_ray, out=cs[1:])
            done[q0:q1] += cs[b] - cs[a]
        return offsets, out


class _StandIns(NamedTuple):
    offsets: Any
    out: Any
    ray_data: Any


_STAND_INS: dict[tuple[str, str], _StandIns] = {}


def _stand_ins(xp: Any, rowid_dtype: Any) -> _StandIns:
    """One-element arrays for the launch parameters an operation does not use (the kernels
    take them either way, so one kernel serves every operation)."""
    key = (xp.__name__, np.dtype(rowid_dtype).str)
    got = _STAND_INS.get(key)
    if got is None:  # a benign race: two threads may both make one
        got = _StandIns(xp.zeros(1, dtype=np.int64), xp.zeros(1, dtype=rowid_dtype),
                        xp.zeros(1, dtype=_U64))
        _STAND_INS[key] = got
    return got


def _query(scene: Scene, batch: RayBatch, programs: QueryPrograms, values: Any,
           max_rays: int, threads_per_block: int, rowid_dtype: Any = np.uint32,
           device: str | None = None) -> _Launch:
    return _Launch(scene, batch, programs, values, int(max_rays), int(threads_per_block),
                   np.dtype(rowid_dtype), device)


def first(scene: Scene, batch: RayBatch, programs: QueryPrograms, *, max_rays: int,
          threads_per_block: int = 128) -> Any:
    """Some matching rowID per lookup (uint64), :data:`MISS` for lookups without a match."""
    return _query(scene, batch, programs, None, max_rays, threads_per_block).reduce(HitOp.FIRST)


@register_jitable
def first_rowid_item(i, payload, miss, out):
    """``out[i]``: the match in ray ``i``'s payload, ``miss`` for :data:`MISS`."""
    m = payload[i, 0]
    out[i] = miss if m == MISS else m


FIRST_ROWID = Kernel(first_rowid_item)


def prepared_first(scene: Scene, programs: QueryPrograms, record: Any, raygen: Any,
                   ray_dtype: Any, rowid_dtype: Any, miss: Any, xp: Any, *, most: int,
                   threads_per_block: int = 128,
                   device: str | None = None) -> Callable[[Any], Any] | None:
    """Point lookups with one generated ray each, answered with :func:`first`'s match as
    ``rowid`` (``miss`` without one), prepared for repeated calls of at most ``most`` lookups
    (the small-batch path): ``q -> answer``. ``record``: the index's launch record
    (:func:`launch_record`'s fields after the layer's), fixed for every call; ``raygen`` makes
    ray ``i`` from ``params.ray_data[i]``, the lookups (``ray_dtype``). A call fills the
    payload, makes one bound trace launch and one bound launch that writes the answer. None
    where the engine has no bound launch (:meth:`~.engine.Engine.bind_query`). ``xp``: the
    scene's array module."""
    stand_in = _stand_ins(xp, rowid_dtype)
    values, use_values = values_arg(None, xp)
    record_type: Any = type(record)
    params = launch_record(record_type)(
        np.int64(HitOp.FIRST), values, use_values, stand_in.offsets, stand_in.out,
        Slot(np.dtype(ray_dtype)), *record)
    bound = scene.engine.bind_query(scene, programs, HitOp.FIRST, params, raygen, most,
                                    threads_per_block=threads_per_block, device=device)
    if bound is None:
        return None
    dtype = np.dtype(rowid_dtype)
    rowid_of = FIRST_ROWID.bind(device or ("cpu" if xp is np else "cuda"),
                                Slot(np.dtype(_U64), 2), dtype.type(miss), Slot(dtype),
                                threads_per_block=threads_per_block)
    empty = xp.empty
    on_gpu = xp is not np

    def answer(q: Any) -> Any:
        n = q.shape[0]
        payload = empty((n, 1), dtype=_U64)
        if on_gpu:  # MISS is every bit set: one memset, cheaper to issue than a fill kernel
            payload.data.memset_async(0xFF, 8 * n)
        else:
            payload.fill(MISS)
        bound(n, payload, q)
        res = empty(n, dtype)
        rowid_of(n, payload, res)
        return res

    return answer


def closest(scene: Scene, batch: RayBatch, programs: QueryPrograms, *, max_rays: int,
            threads_per_block: int = 128) -> Any:
    """Per lookup the match of the closest hit of its first ray (in ray order) that hits a
    match (uint64), :data:`MISS` for lookups whose rays hit no match."""
    return _query(scene, batch, programs, None, max_rays, threads_per_block).reduce(
        HitOp.CLOSEST)


def closest_rays(scene: Scene, batch: RayBatch, programs: QueryPrograms, *,
                 max_rays: int, threads_per_block: int = 128) -> tuple[Any, Any, Any]:
    """Per ray of a batch: the match of its closest hit (uint64, :data:`MISS` without one), the
    hit's distance ``t`` (float32, inf) and whether it hit a front face (bool): for indexes
    whose next ray depends on where and what the last one hit (cgRX's successor search)."""
    run = _query(scene, batch, programs, None, max_rays, threads_per_block)
    xp = run.xp
    matches, ts, fronts = [], [], []
    for s, e in run.chunks():
        got: list[Any] = []
        matches.append(run.run(s, e, HitOp.CLOSEST, hits=got))
        ts.append(got[0].t)
        fronts.append(got[0].front)
    if not matches:
        n = batch.n_rays
        return (xp.full(n, MISS, dtype=_U64), xp.full(n, np.inf, dtype=np.float32),
                xp.zeros(n, dtype=bool))
    return xp.concatenate(matches), xp.concatenate(ts), xp.concatenate(fronts)


def count(scene: Scene, batch: RayBatch, programs: QueryPrograms, *, max_rays: int,
          threads_per_block: int = 128) -> Any:
    """Matches per lookup (int64)."""
    return _query(scene, batch, programs, None, max_rays, threads_per_block).reduce(HitOp.COUNT)


def sum_values(scene: Scene, batch: RayBatch, programs: QueryPrograms, values: Any, *,
               max_rays: int, threads_per_block: int = 128) -> Any:
    """Per lookup the sum of ``values[rowID]`` over its matches (of the rowIDs themselves when
    ``values`` is None), uint64 wrapping."""
    return _query(scene, batch, programs, values, max_rays, threads_per_block).reduce(HitOp.SUM)


def collect(scene: Scene, batch: RayBatch, programs: QueryPrograms, *, rowid_dtype: Any,
            max_rays: int, threads_per_block: int = 128) -> tuple[Any, Any]:
    """Every match as CSR: int64 ``offsets`` (Q + 1) and ``rowids`` of ``rowid_dtype`` (any
    order within a lookup)."""
    return _query(scene, batch, programs, None, max_rays, threads_per_block,
                  rowid_dtype).collect()


def mark_bits(scene: Scene, batch: RayBatch, programs: QueryPrograms, words: Any, *,
              targets: Any = None, max_rays: int, threads_per_block: int = 128,
              device: str | None = None) -> None:
    """``BITMAP``: every match of lookup ``i`` sets (``match`` returns the rowID) or clears
    (``match`` returns :func:`clear_bit` of it) its bit in row ``targets[i]`` of ``words``
    (C-contiguous (rows, W) uint32 on the scene's device; ``targets``: int64 per lookup,
    default the lookup itself), in place. Several lookups may share a row; bits no match
    writes keep their value. ``device="cuda"`` with NumPy arrays runs numba's CUDA simulator
    (tests only)."""
    if words.ndim != 2 or words.dtype != np.uint32 or not words.flags.c_contiguous:
        raise TypeError("mark_bits needs a C-contiguous (rows, W) uint32 array of words")
    run = _query(scene, batch, programs, None, max_rays, threads_per_block, np.uint32, device)
    xp, width = run.xp, np.int64(words.shape[1])
    flat = words.reshape(-1)
    for s, e in run.chunks():
        owner = batch.owners(s, e)
        row = owner if targets is None else targets[owner]
        run.run(s, e, HitOp.BITMAP, ray_offsets=xp.ascontiguousarray(
            row.astype(np.int64) * width), out=flat)
