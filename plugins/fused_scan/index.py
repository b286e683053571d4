"""``fused-scan``: no index at all, a fused full scan of the key columns per lookup.

The CUDA-core baseline of RTScan's paper and of a GPU database's selection (Crystal's fused
kernels): every lookup reads every row of every column once, tests its conjunction of range
predicates and writes one packed bitmap. The CPU runs the numba body of
:mod:`indexzoo.plugins.fused_scan.kernels`; the GPU by default the CUDA C++ body of
:mod:`indexzoo.plugins.fused_scan.vector` (16-byte loads, which numba cannot issue), over the
keys laid out so that every column starts on a 16-byte boundary (``params.body="numba"``:
the numba warp bodies). Registered as an index
so that it answers through the same contract as the indexes it is compared with, in
``indexzoo bench`` and in the benchmark scripts, and is certified by the same suite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, Operation
from indexzoo.native.lazy import lazy_module
from indexzoo.persist import Array, StateSchema

from .params import FusedScanParams

if TYPE_CHECKING:
    from . import kernels, vector
else:  # imported when a scan runs: the registry lists the class without them
    kernels = lazy_module("indexzoo.plugins.fused_scan.kernels")
    vector = lazy_module("indexzoo.plugins.fused_scan.vector")

__all__ = ["FusedScanIndex", "ScanState"]


class ScanState(BuildState):
    keys: Any  # (N, d) native keys, Fortran order
    #: the vector body's (ld, d) table whose first N rows ``keys`` views (None: no vector body)
    table: Any = None
    #: the vector body's scans of ``table``, bound on first use, by threads a block (a dict:
    #: filled after the state is sealed)
    scans: dict[int, Callable[[Any, Any], Any]]


class FusedScanIndex(GpuIndex[ScanState]):
    """Full scan per lookup: one fused kernel tests every row of every column and writes a
    bitmap (the CUDA-core peer of RTScan; Crystal-style selection). No build work but a copy."""

    name: ClassVar[str] = "fused-scan"
    #: Rows a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22 rows
    #: (benchmarks/results/cpu/2026-11-29-build-rates/); no GPU figure.
    build_rate: ClassVar[dict[str, float]] = {"cpu": 2e8}
    Params: ClassVar[type[FusedScanParams]] = FusedScanParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, dims=64)
    full_scan: ClassVar[bool] = True
    plugin_api: ClassVar[str] = "2.0"
    #: the columns the scan reads: n rows of ``dims`` native keys
    state_schema: ClassVar[StateSchema] = StateSchema(
        Array("keys", dtype="native", shape=("n", "dims")))
    params: FusedScanParams

    def _vector(self) -> bool:
        return self.device != "cpu" and self.params.body == "vector"

    def _build(self, st: ScanState, keys: Any) -> None:
        if keys.ndim == 1:  # one column
            keys = keys.reshape(-1, 1)
        st.table = None
        st.scans = {}
        if self._vector():
            st.table, keys = vector.vector_table(keys)
        st.keys = keys

    def _save_state(self, st: ScanState) -> dict[str, Any]:
        return {"keys": st.keys}  # the table is this device's layout of them

    def _load_state(self, st: ScanState, saved: dict[str, Any]) -> None:
        self._build(st, saved["keys"])

    def _footprint(self, st: ScanState) -> Footprint:
        held = st.table if st.table is not None else st.keys
        return Footprint(breakdown={"keys": int(held.nbytes)},
                         peak_build_bytes=int(held.nbytes) + int(st.keys.nbytes))

    def _vector_scan(self, st: ScanState) -> Callable[[Any, Any], Any]:
        """The vector body's scan of this build under the current threads a block, bound
        (its kernel compiled, its launch set up) once: ``(lo, hi) -> bitmaps`` for (Q, d)
        C-contiguous bounds of the table's dtype. Two threads binding at once bind twice,
        and either scan is right."""
        threads = self.params.threads_per_block
        scan = st.scans.get(threads)
        if scan is None:
            scan = vector.bind_vector_scan(st.table, int(st.keys.shape[0]),
                                           threads_per_block=threads)
            st.scans[threads] = scan
        return scan

    def _range_bitmap(self, st: ScanState, lo: Any, hi: Any) -> Any:
        p = self.params
        if self.device == "cpu":
            return kernels.scan_bitmaps(st.keys, lo, hi, device="cpu",
                                        threads_per_block=p.threads_per_block)
        if st.table is not None:
            xp, d = self.xp, int(st.keys.shape[1])
            return self._vector_scan(st)(xp.ascontiguousarray(lo.reshape(-1, d)),
                                         xp.ascontiguousarray(hi.reshape(-1, d)))
        return kernels.scan_bitmaps(st.keys, lo, hi, device=self.device, items=p.items,
                                    unroll=p.unroll, threads_per_block=p.threads_per_block)

    def _prepared_range(self, st: ScanState, op: Operation) -> Callable[[Any, Any], Any] | None:
        """GPU bitmaps with the columns bound into the launch: a call allocates the bitmaps
        and launches (the CPU calls the hook)."""
        if op.out != "bitmap" or self.device == "cpu":
            return None
        if st.table is not None:  # the bounds arrive as the body takes them: (Q, d), C order
            return self._vector_scan(st)
        p = self.params
        return kernels.bind_scan(st.keys, items=p.items, unroll=p.unroll,
                                 threads_per_block=p.threads_per_block)

    def _point_bitmap(self, st: ScanState, q: Any) -> Any:
        return self._range_bitmap(st, q, q)
