"""The query layer's programs: what the engines run for each hit operation of
:mod:`.query`, composed over an index's ``match`` (and its intersection program).

The engines build on this module (the software engine composes these programs per launch); the
query layer re-exports its public names, so an index reads them from :mod:`.query` as before.
See :mod:`.query` for the hit operations and the ``match`` program's contract.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from ..cpu_atomics import atomic_rmw
from .traversal import ACCEPT, IGNORE
from .traversal import Programs as EnginePrograms

__all__ = ["NO_MATCH", "Generated", "HitOp", "QueryPrograms", "bit_writers", "bitmap_programs",
           "clear_bit", "engine_programs"]

#: What a ``match`` program returns for a hit that is no match.
NO_MATCH = np.int64(-1)


class HitOp(enum.IntEnum):
    """What the layer's programs do with a match."""

    FIRST = 0
    COUNT = 1
    SUM = 2
    COLLECT = 3
    CLOSEST = 4
    BITMAP = 5


@dataclass(frozen=True)
class Generated:
    """Rays made inside the kernel: ``raygen(i, params)`` reads ``params.ray_data[i]``."""

    raygen: Any
    ray_data: Any


@dataclass(frozen=True)
class QueryPrograms:
    """The programs an index contributes: ``match`` (see the module docstring) and, for custom
    primitives, ``intersection`` (the engine's signature, reading the launch record)."""

    match: Any
    intersection: Any = None
    #: the same programs in CUDA C++ for the OptiX engine (``iz_match``, ``__intersection__iz``
    #: for AABB scenes, ``iz_raygen`` for generated rays; see ``optix/query.cu``), or None
    cuda: str | None = None


# the operations as plain ints: compile-time constants of the programs
_FIRST, _COUNT, _SUM, _CLOSEST = (int(HitOp.FIRST), int(HitOp.COUNT), int(HitOp.SUM),
                                  int(HitOp.CLOSEST))


@functools.cache
def _anyhit(match: Any) -> Any:
    """The layer's any-hit program over ``match``: one program serves every hit operation."""

    @register_jitable
    def anyhit(ray, inst, prim, t, front, payload, params):
        rowid = match(ray, inst, prim, t, front, params)
        if rowid < 0:
            return IGNORE
        op = params.op
        if op == _CLOSEST:  # the closest-hit program records the closest accepted match
            return ACCEPT
        if op == _FIRST:
            payload[ray, 0] = np.uint64(rowid)
            return ACCEPT
        if op == _COUNT:
            payload[ray, 0] += np.uint64(1)
        elif op == _SUM:
            if params.use_values:
                payload[ray, 0] += params.values[rowid]
            else:
                payload[ray, 0] += np.uint64(rowid)
        else:  # HitOp.COLLECT: the ray's offset plus its running count
            params.out[params.ray_offsets[ray] + np.int64(payload[ray, 0])] = rowid
            payload[ray, 0] += np.uint64(1)
        return IGNORE

    return anyhit


@functools.cache
def _closesthit(match: Any) -> Any:
    """The layer's closest-hit program (run for CLOSEST only): the closest match."""

    @register_jitable
    def closesthit(ray, inst, prim, t, front, payload, params):
        payload[ray, 0] = np.uint64(match(ray, inst, prim, t, front, params))

    return closesthit


@functools.cache
def engine_programs(programs: QueryPrograms, raygen: Any) -> EnginePrograms:
    return EnginePrograms(intersection=programs.intersection, anyhit=_anyhit(programs.match),
                          closesthit=_closesthit(programs.match), raygen=raygen)


# ------------------------------------------------------------------ BITMAP: bits set or cleared
@register_jitable
def clear_bit(rowid):
    """What a ``match`` program returns to clear bit ``rowid`` under ``BITMAP`` (``rowid``
    itself sets it, :data:`NO_MATCH` ignores the hit)."""
    return np.int64(-2) - np.int64(rowid)


#: numba.cuda, once :func:`bit_writers` made the GPU's writers (CPU programs never import it).
cuda: Any = None


@functools.cache
def bit_writers(device: str) -> tuple[Any, Any]:
    """``(set_bit, unset_bit)``: jitable ``f(words, base, r)`` that atomically set or clear bit
    ``r % 32`` of ``words[base + r // 32]`` (uint32 words), for ``device`` ("cpu": LLVM
    ``atomicrmw``; "cuda": ``cuda.atomic.or_`` / ``and_``, numba.cuda imported here only)."""
    one, full = np.uint32(1), np.uint32(0xFFFFFFFF)
    if device == "cpu":
        a_or, a_and = atomic_rmw("or"), atomic_rmw("and")

        @register_jitable
        def set_bit(words, base, r):
            a_or(words, base + (r >> 5), np.uint32(one << np.uint32(r & 31)))

        @register_jitable
        def unset_bit(words, base, r):
            a_and(words, base + (r >> 5), np.uint32(full ^ np.uint32(one << np.uint32(r & 31))))

        return set_bit, unset_bit
    global cuda
    if cuda is None:  # a module global (not a closure cell), as numba-cuda kernels read them
        from numba import cuda as numba_cuda

        cuda = numba_cuda

    @register_jitable
    def set_bit_cuda(words, base, r):
        cuda.atomic.or_(words, base + (r >> 5), np.uint32(one << np.uint32(r & 31)))

    @register_jitable
    def unset_bit_cuda(words, base, r):
        cuda.atomic.and_(words, base + (r >> 5),
                         np.uint32(full ^ np.uint32(one << np.uint32(r & 31))))

    return set_bit_cuda, unset_bit_cuda


@functools.cache
def _bitmap_anyhit(match: Any, device: str) -> Any:
    """``BITMAP``'s any-hit program: the match's bit set or cleared in the ray's bitmap row
    (``params.ray_offsets[ray]``: the row's first word in ``params.out``); every hit ignored,
    so the ray meets every primitive on its way."""
    set_bit, unset_bit = bit_writers(device)

    @register_jitable
    def anyhit(ray, inst, prim, t, front, payload, params):
        r = np.int64(match(ray, inst, prim, t, front, params))
        if r == NO_MATCH:
            return IGNORE
        base = np.int64(params.ray_offsets[ray])
        if r >= 0:
            set_bit(params.out, base, r)
        else:
            unset_bit(params.out, base, np.int64(-2) - r)
        return IGNORE

    return anyhit


@functools.cache
def bitmap_programs(programs: QueryPrograms, raygen: Any, device: str) -> EnginePrograms:
    return EnginePrograms(intersection=programs.intersection,
                          anyhit=_bitmap_anyhit(programs.match, device), raygen=raygen)
