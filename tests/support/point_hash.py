"""A correct point-only index, as a hash table is: no range lookups, no duplicate keys, no
``sum`` (nor ``bitmap``) out mode, CPU only. It certifies with the checks it cannot take
skipped, each with its reason (``tests/conformance/test_capability_skips.py``).

:class:`PointHash` is open addressing with linear probing over a power-of-two table of
rowIDs (``n`` marks an empty slot), vectorised in NumPy; :class:`NarrowPointHash` is the same
table over uint32 keys only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex
from indexzoo.persist import Array, Check, Scope, StateSchema

__all__ = ["NarrowPointHash", "PointHash"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class HashState(BuildState):
    keys: Any   # the build's keys, by rowID
    slots: Any  # int64: the rowID held by each slot, n for an empty slot


def _home(keys: np.ndarray, mask: int) -> np.ndarray:
    """Each key's first slot (multiplicative hashing; the product wraps modulo 2^64)."""
    mixed = keys.astype(np.uint64) * _GOLDEN
    return (mixed >> np.uint64(32)).astype(np.int64) & np.int64(mask)


def _table_is_probeable(scope: Scope) -> str | None:
    """A power-of-two table with an empty slot, so that every probe sequence ends."""
    slots, n = scope.get("slots"), scope.ctx.n
    size = int(slots.shape[0])
    if size < 2 or size & (size - 1):
        return f"holds {size} slots, not a power of two of at least 2"
    if not bool((slots == n).any()):
        return "has no empty slot"
    return None


class PointHash(GpuIndex[HashState]):
    """Point lookups in a linear-probing hash table of unique keys (no ranges, no sums)."""

    name: ClassVar[str] = "test-point-hash"
    capabilities: ClassVar[Capabilities] = Capabilities(
        point=True, range=False, duplicates=False, devices=("cpu",),
        out_modes=("rowid", "count", "rowids"))
    plugin_api: ClassVar[str] = "2.4"
    state_schema: ClassVar[StateSchema] = StateSchema(
        Array("keys", dtype="native", shape=("n",)),
        Array("slots", dtype="int64", shape=(None,), at_least=0, below="n + 1"),
        Check(_table_is_probeable, "slots"))

    def _build(self, st: HashState, keys: Any) -> None:
        n = int(keys.shape[0])
        size = max(2, 1 << (2 * n - 1).bit_length()) if n else 2  # at most half full
        slots = np.full(size, n, dtype=np.int64)
        rowid = np.arange(n, dtype=np.int64)
        pos = _home(keys, size - 1)
        while rowid.shape[0]:
            free = np.flatnonzero(slots[pos] == n)
            _, first = np.unique(pos[free], return_index=True)
            won = free[first]  # one key per free slot
            slots[pos[won]] = rowid[won]
            left = np.ones(rowid.shape[0], dtype=bool)
            left[won] = False
            rowid, pos = rowid[left], (pos[left] + 1) & (size - 1)  # their slot is taken now
        st.keys, st.slots = keys, slots

    def _footprint(self, st: HashState) -> Footprint:
        held = {"keys": int(st.keys.nbytes), "slots": int(st.slots.nbytes)}
        return Footprint(breakdown=held, peak_build_bytes=sum(held.values()))

    def _point_rowid(self, st: HashState, q: Any) -> Any:
        size = int(st.slots.shape[0])
        found = np.full(q.shape[0], st.miss, dtype=st.rowid_dtype)
        todo = np.arange(q.shape[0], dtype=np.int64)
        pos = _home(q, size - 1)
        for _ in range(size if st.n else 0):  # a probe sequence never passes the whole table
            if not todo.shape[0]:
                break
            held = st.slots[pos]
            empty = held == st.n
            hit = ~empty & (st.keys[np.minimum(held, st.n - 1)] == q[todo])
            found[todo[hit]] = held[hit]
            go_on = ~empty & ~hit
            todo, pos = todo[go_on], (pos[go_on] + 1) & (size - 1)
        return found

    def _point_rowids(self, st: HashState, q: Any) -> tuple[Any, Any]:
        rowid = self._point_rowid(st, q)
        hit = rowid != st.miss
        offsets = np.zeros(q.shape[0] + 1, dtype=np.int64)
        np.cumsum(hit, out=offsets[1:])
        return offsets, rowid[hit]


class NarrowPointHash(PointHash):
    """:class:`PointHash` over uint32 keys only."""

    name: ClassVar[str] = "test-point-hash-32"
    capabilities: ClassVar[Capabilities] = PointHash.capabilities.model_copy(
        update={"key_dtypes": ("uint32",)})
