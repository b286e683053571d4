"""The pivot buffer (PB) of AO+PB+BS and AO+PB+KS: an implicit K-ary tree of pivots over a
sorted array, with no pointers.

Paper: Henneberg & Schuhknecht, "Is Binary Search Really All You Need?", §3.3, §3.4, §3.5 and
§4.5.

The sorted (key, rowID) array of ``n`` entries stays as it is and is cut into *chunks* of ``C``
keys (the last one may be shorter). The PB holds keys only, level by level, the root first:

* levels are numbered bottom-up, ``l = 0`` just above the chunks up to ``l = L-1`` (the root);
* level ``l`` has ``N_l = ceil(n / (C*K^(l+1)))`` nodes of ``K-1`` slots; node ``j`` covers the
  sorted positions ``[j*C*K^(l+1), (j+1)*C*K^(l+1))`` as ``K`` blocks of ``C*K^l`` keys;
* the levels stop at the first ``l`` with ``N_l == 1`` (the root); if ``n <= C`` there is no
  level at all (``L = 0``) and the single chunk ``[0, C)`` covers everything;
* slot ``c`` of node ``j`` at level ``l`` holds the last key of block ``j*K + c``, the key at
  ``p = (j*K + c + 1) * C * K^l - 1``, or the SENTINEL (the key dtype's maximum) when
  ``p >= n - 1``. For ``C = K-1`` and the intra-level slot index ``i = j*(K-1) + c`` this is the
  paper's ``p_{l,i} = K^l (K-1)(1 + i + floor(i/(K-1))) - 1``.

Lookup (:func:`pb_chunk_of`): from the root down, ``c`` = the number of the node's pivots that
are ``< x`` (strictly), ``node = node*K + c``; after the bottom level ``node`` is the chunk, and
the lower bound of ``x`` (the first position with key ``>= x``, or ``n``) lies in
``[node*C, min(node*C + C, n)]`` (it may equal the chunk's end). Every root-to-chunk path has
the same length ``L``; there is no early exit (the PB has no rowIDs).

Build (:data:`PB_GATHER`, paper §3.5): one thread per pivot slot ``t`` finds its level as the
rightmost prefix-sum entry ``<= t`` (the level sizes, top first, in a small int64 array, see
:meth:`PivotPlan.offsets`), computes ``p`` (:func:`pb_source`) and copies one key or writes
the sentinel.

Decisions where the paper is ambiguous [AMBIG]:

* Level sizes: the paper's sentence ("the bottom level has ceil(n/(K-1)) entries, each level
  above 1/K of the one below") counts chunks, not pivots; the self-consistent definition above,
  which gives the paper's own ``p_{l,i}`` formula, is used instead.
* Missing right children and padding of partial nodes are stored as the sentinel. Because the
  comparison is ``pivot < x``, a sentinel always sends the search left, even for ``x`` equal to
  the dtype maximum, and a real key equal to the dtype maximum behaves the same way, so such
  keys need no special case. A slot with ``p = n - 1`` (the last key) is a sentinel too: its
  right block would be empty.
* K = 2: the formula with ``C = K-1 = 1`` would materialise ~all keys; the paper's "full"
  binary PB (Fig. 6, and "27 levels" for 2^28 keys in §5.4) stops at chunks of 2, so
  :func:`full_chunk` is 2 for K = 2 and ``K-1`` otherwise.
* Coarse PB (§4.5): only the top levels are materialised; a PB with chunk ``C*K^s`` is exactly
  the full PB without its ``s`` bottom levels (same pivots, same slots). The paper tunes the
  *number of levels* (24 for 2^28 keys, K = 2: 2^24-1 pivots = 64 MB, chunks of 16), so
  :func:`chunk_for_levels` maps a level count to the chunk size; ``levels <= 0`` means "drop
  ``-levels`` bottom levels" (0 = the full PB), clamped to keep at least one level whenever the
  full PB has one; a count above the full PB's gives the full PB.

:func:`pb_reference` is an independent construction from the definition, for tests only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.search import lower_bound
from indexzoo.native.targets import Kernel

__all__ = ["PB_GATHER", "PivotPlan", "chunk_for_levels", "full_chunk", "levels_for_chunk",
           "pb_chunk_of", "pb_gather_item", "pb_lower_bound", "pb_plan", "pb_reference",
           "pb_sentinel", "pb_source"]


@dataclass(frozen=True)
class PivotPlan:
    """The shape of a PB: ``level_nodes`` is the number of nodes per level, the root first."""

    n: int
    k: int
    chunk: int
    level_nodes: tuple[int, ...]

    @property
    def levels(self) -> int:
        """``L``, the number of materialised levels."""
        return len(self.level_nodes)

    @property
    def slots(self) -> int:
        """The number of pivot slots (sentinels included)."""
        return sum(self.level_nodes) * (self.k - 1)

    @property
    def chunks(self) -> int:
        """The number of chunks of the sorted array, ``ceil(n / chunk)``."""
        return -(-self.n // self.chunk)

    def offsets(self) -> np.ndarray:
        """Where each level starts in the PB, the root first, plus the end (int64, ``L + 1``)."""
        out = np.zeros(self.levels + 1, dtype=np.int64)
        np.cumsum(np.asarray(self.level_nodes, dtype=np.int64) * (self.k - 1), out=out[1:])
        return out

    def nbytes(self, key_bytes: int) -> int:
        """The PB's footprint in bytes for keys of ``key_bytes`` bytes (the sorted array apart)."""
        return self.slots * key_bytes


def pb_plan(n: int, k: int, chunk: int) -> PivotPlan:
    """The PB of ``n`` sorted keys with fan-out ``k`` over chunks of ``chunk`` keys."""
    if k < 2:
        raise ValueError(f"the fan-out K must be at least 2, got {k}")
    if chunk < 1:
        raise ValueError(f"the chunk size must be at least 1, got {chunk}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    bottom_up: list[int] = []
    if n > chunk:
        span = chunk * k  # C*K^(l+1): the keys under one node of level l
        while True:
            nodes = -(-n // span)
            bottom_up.append(nodes)
            if nodes == 1:
                break
            span *= k
    return PivotPlan(n=n, k=k, chunk=chunk, level_nodes=tuple(reversed(bottom_up)))


def full_chunk(k: int) -> int:
    """The chunk size of the "full" PB: ``K-1``, but 2 for K = 2 (see the module docstring)."""
    if k < 2:
        raise ValueError(f"the fan-out K must be at least 2, got {k}")
    return 2 if k == 2 else k - 1


def levels_for_chunk(n: int, k: int, chunk: int) -> int:
    """The number of levels of the PB of ``n`` keys over chunks of ``chunk`` keys."""
    return pb_plan(n, k, chunk).levels


def chunk_for_levels(n: int, k: int, levels: int) -> int:
    """The chunk size ``full_chunk(k) * K^s`` whose PB of ``n`` keys keeps the top ``levels``
    levels of the full PB.

    ``levels`` at or above the full PB's count gives :func:`full_chunk`; ``levels <= 0`` drops
    ``-levels`` bottom levels (0: the full PB). At least one level is kept when the full PB has
    any.
    """
    full_levels = levels_for_chunk(n, k, full_chunk(k))
    drop = -levels if levels <= 0 else full_levels - levels
    drop = max(0, min(drop, full_levels - 1))
    return full_chunk(k) * k**drop


def pb_sentinel(dtype: Any) -> Any:
    """The PB's +infinity for keys of ``dtype``: its maximum (``inf`` for floats)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return dt.type(np.inf)
    return dt.type(np.iinfo(dt).max)


@register_jitable
def pb_source(t, offsets, levels, n, k, chunk):
    """The sorted position of the key in PB slot ``t``, or -1 for the sentinel.

    ``offsets`` is :meth:`PivotPlan.offsets` (level starts, root first); the level of ``t`` is
    the rightmost entry ``<= t``.
    """
    lv = 0
    while lv + 1 < levels and offsets[lv + 1] <= t:
        lv += 1
    r = t - offsets[lv]
    j = r // (k - 1)  # node within the level
    c = r - j * (k - 1)  # slot within the node
    block = chunk  # C*K^l, l = levels-1-lv counted bottom-up
    for _ in range(levels - 1 - lv):
        block *= k
    p = (j * k + c + 1) * block - 1
    if p >= n - 1:
        return -1
    return p


@register_jitable
def pb_gather_item(t, src_keys, pb, offsets, levels, n, k, chunk,
                   sentinel):
    """PB slot ``t``: one load of the sorted array and one store, or the sentinel."""
    p = pb_source(t, offsets, levels, n, k, chunk)
    if p < 0:
        pb[t] = sentinel
    else:
        pb[t] = src_keys[p]


#: ``PB_GATHER(device, plan.slots, src_keys, pb, plan.offsets(), plan.levels, n, k, chunk,
#: sentinel)``: one item per pivot slot.
PB_GATHER = Kernel(pb_gather_item)


@register_jitable
def pb_chunk_of(pb, offsets, levels, k, x):
    """The chunk index (int64) whose range holds the lower bound of ``x``: the root-to-chunk
    walk with ``c`` = the number of pivots ``< x`` per node. One thread."""
    node = 0
    for lv in range(levels):
        base = offsets[lv] + node * (k - 1)
        c = 0
        while c < k - 1 and pb[base + c] < x:  # pivots ascend within a node
            c += 1
        node = node * k + c
    return node


@register_jitable
def pb_lower_bound(keys, pb, offsets, levels, k, chunk, x):
    """The first position ``p`` with ``keys[p] >= x``, or ``len(keys)``: :func:`pb_chunk_of`,
    then a binary search in the chunk."""
    start = pb_chunk_of(pb, offsets, levels, k, x) * chunk
    stop = min(start + chunk, keys.shape[0])
    return start + lower_bound(keys[start:stop], x)


def pb_reference(sorted_keys: np.ndarray, k: int, chunk: int) -> np.ndarray:
    """The PB straight from the definition (nested loops over levels, nodes, slots), without
    :func:`pb_plan` or :func:`pb_source`; for tests."""
    keys = np.asarray(sorted_keys)
    n = len(keys)
    sentinel = pb_sentinel(keys.dtype)
    levels_bottom_up: list[list[Any]] = []
    if n > chunk:
        level = 0
        while True:
            block = chunk * k**level
            nodes = -(-n // (block * k))
            pivots = []
            for j in range(nodes):
                for c in range(k - 1):
                    p = (j * k + c + 1) * block - 1
                    pivots.append(keys[p] if p < n - 1 else sentinel)
            levels_bottom_up.append(pivots)
            if nodes == 1:
                break
            level += 1
    flat = [key for pivots in reversed(levels_bottom_up) for key in pivots]
    return np.array(flat, dtype=keys.dtype)
