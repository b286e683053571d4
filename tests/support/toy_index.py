"""The tests' toy index: :class:`Brute` compares every lookup with every key (points are the
ranges [q, q]), the smallest plugin that passes the contract. Tests derive their variants
from it (a hook added or left out, a capability changed, no state schema)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex

__all__ = ["Brute", "KeysState", "csr", "in_range"]


class KeysState(BuildState):
    keys: Any


def in_range(st: KeysState, lo: Any, hi: Any) -> Any:
    """(Q, N) bool: key ``j`` lies in ``[lo[i], hi[i]]``."""
    return (st.keys[None, :] >= lo[:, None]) & (st.keys[None, :] <= hi[:, None])


def csr(st: KeysState, hit: Any) -> tuple[Any, Any]:
    """``(offsets, rowids)`` of a (Q, N) bool hit matrix."""
    xp = st.xp
    q, r = xp.nonzero(hit)
    offsets = xp.zeros(hit.shape[0] + 1, dtype=np.int64)
    xp.cumsum(xp.bincount(q, minlength=hit.shape[0]), out=offsets[1:])
    return offsets, r.astype(st.rowid_dtype)


class Brute(GpuIndex[KeysState]):
    """Every lookup compared with every key; points are the ranges [q, q]."""

    name: ClassVar[str] = "test-brute"
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True)
    plugin_api: ClassVar[str] = "2.0"
    points_as_ranges: ClassVar[bool] = True

    def _build(self, st: KeysState, keys: Any) -> None:
        st.keys = keys

    def _footprint(self, st: KeysState) -> Footprint:
        return Footprint(breakdown={"keys": int(st.keys.nbytes)},
                         peak_build_bytes=int(st.keys.nbytes))

    def _range_rowids(self, st: KeysState, lo: Any, hi: Any) -> tuple[Any, Any]:
        return csr(st, in_range(st, lo, hi))
