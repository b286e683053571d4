"""A third-party indexzoo plugin: ``linear-scan``, which compares every lookup with every key.

It is deliberately tiny: it implements only the ``"rowids"`` hooks and lets the base class
derive ``"rowid"``, ``"count"`` and ``"sum"``. It runs on both devices because it only uses
array operations that NumPy and CuPy share (``self.xp``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

import indexzoo
from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.persist import Array, StateSchema

__all__ = ["LinearScanIndex"]


class LinearScanParams(IndexParams):
    block: int = Field(default=64, ge=1, le=1 << 20,
                       description="Lookups compared with all keys at once (memory: block x n).")


class LinearScanState(BuildState):
    """One build: the index's copy of the keys, in rowID order."""

    keys: Any


class LinearScanIndex(GpuIndex[LinearScanState]):
    """Brute force: every lookup compared with every key (a correctness reference, O(n) each)."""

    name: ClassVar[str] = "linear-scan"
    Params: ClassVar[type[IndexParams]] = LinearScanParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True)
    plugin_api: ClassVar[str] = "2.4"   # the indexzoo plugin API this class is written for
    points_as_ranges: ClassVar[bool] = True  # a point lookup q is the range [q, q]
    # what a saved index holds, checked on every load before a lookup reads it: the keys, one
    # per row, of the native dtype (docs/plugin-authors.md, "Saved state")
    state_schema: ClassVar[StateSchema] = StateSchema(
        Array("keys", dtype="native", shape=("n",)))
    params: LinearScanParams

    def _build(self, st: LinearScanState, keys: Any) -> None:
        st.keys = keys  # the base hands over the index's own copy

    def _footprint(self, st: LinearScanState) -> Footprint:
        return Footprint(breakdown={"keys": int(st.keys.nbytes)},
                         peak_build_bytes=int(st.keys.nbytes))

    def _range_rowids(self, st: LinearScanState, lo: Any, hi: Any) -> tuple[Any, Any]:
        xp, step = st.xp, self.params.block
        counts, rowids = [], []
        for s in range(0, lo.shape[0], step):
            hit = (st.keys[None, :] >= lo[s:s + step, None]) & \
                  (st.keys[None, :] <= hi[s:s + step, None])
            q, r = xp.nonzero(hit)  # row-major: grouped by lookup, in order
            counts.append(xp.bincount(q, minlength=hit.shape[0]))
            rowids.append(r.astype(st.rowid_dtype))
        counts_all = xp.concatenate(counts)
        offsets = xp.zeros(lo.shape[0] + 1, dtype="int64")
        xp.cumsum(counts_all, out=offsets[1:])
        return offsets, xp.concatenate(rowids)


@indexzoo.hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(LinearScanIndex)
