"""The lightweight sorted-array family of Henneberg & Schuhknecht, "Is Binary Search Really All
You Need? Supercharging Lightweight Database Indexing on GPUs" (digest
``papers/digests/004-binary-search.md``): AO+BS, EO+BS, AO+PB+BS, EO+KS, AO+PB+KS with every
optimisation the paper studies.

Paper -> code
-------------
* Build [§3.5]: radix sort of (key, rowID) pairs (:func:`indexzoo.native.sort.sort_pairs`, CUB
  radix sort through CuPy), then one gather kernel with one thread per output slot whose source
  position is computed in closed form: EO (:data:`indexzoo.native.eytzinger.EO_GATHER`) and the
  pivot buffer (:data:`indexzoo.native.pivots.PB_GATHER`). AO is the sorted array itself (AoS:
  interleaved by one strided copy).
* M1 AO+BS [§3.1]: the offset-based back-to-front binary search of Listing 1
  (``ao_bs_search``), with the step halved on every iteration (as printed it loops forever for
  n = 2^k). M2 EO+BS [§3.2]: binary Eytzinger with the leading empty slot, early exit on a
  match. M3 AO+PB+BS [§3.3]: binary pivot buffer, then binary search in the chunk. M4 EO+KS and
  M5 AO+PB+KS [§3.4]: K-ary nodes searched by groups of K-1 threads voting with ``ballot_sync``
  (:mod:`indexzoo.native.lightweight_cuda`); the CPU runs one-thread twins with the same results.
* Ranges: AO/PB find the lower bound of ``lo`` and scan; EO runs the paper's level-scan algorithm
  (``eo_scan``); ``multi_thread_scan`` is §5.7's warp switch (``RUNS_COOP``, ``EO_SCAN_COOP``).
* Optimisations [§4] on the GPU, by one generated driver kernel per configuration: static or
  dynamic scheduling, lookups per thread, pinning (steps/full), reordering (single/double), AoS
  or SoA. On the CPU they change nothing (one thread per lookup), by design: results are the same
  for every option on both devices.

Decisions where the paper is silent or ambiguous
------------------------------------------------
* [AMBIG] Listing 1's indentation: ``step >>= 1`` runs every iteration (else n = 2^k hangs).
* [AMBIG] The PB level sizes (§3.5's sentence counts chunks): level l has
  ceil(n / (C K^(l+1))) nodes of K-1 pivots, padding and pivots at positions >= n-1 are the key
  maximum, compared with ``pivot < x`` so they always send the search left.
* [AMBIG] K=2 "full" PB: chunks of 2 keys (Fig. 6, §5.4's 27 levels for 2^28), not 1.
* [AMBIG] K-ary EO pads no leading slot (Fig. 10); binary EO does (§3.2).
* [AMBIG] Steps vs full pinning for AO+BS: "full" fills the rest of the shared memory with keys
  of the next step (odd multiples of the next step size); no preset pins (it did not pay off
  on the H200).
* [AMBIG] Lookup order with R > 1: a tile of (T/G)·R lookups; without reordering lookup
  ``base + r·(T/G) + g`` goes to group g (coalesced loads); with reordering group g takes the
  sorted entries g·R .. g·R+R-1 (consecutive keys per group).
* [AMBIG] AO+PB+KS's K is not stated ("small K"). Both KS presets use K=5, the best of
  3..33 on the H200 (the paper's K=9 for EO+KS beyond L2: 0.83x of K=5's throughput there).
* Preset defaults are the H200's best settings, not the RTX 4090's: on the H200 one block per SM
  (132 blocks of 128 threads) leaves the SMs mostly idle (0.37x searchsorted for AO+BS), so
  ``blocks_per_sm`` extends static scheduling; interleaving R lookups per thread did not pay
  off there. Every paper setting remains a parameter.
* [AMBIG] Range results are not specified: every ``out`` mode is served; ``count`` is two rank
  searches (O(log n)), also for EO, whose closed-form build map gives a slot's rank.
* Duplicates: point lookups are ranges ``[x, x]`` for ``count``/``sum``/``rowids``; ``rowid``
  returns some matching rowID (EO's early exit finds any copy; AO/PB the smallest rowID).
* 64-bit keys (the paper ran 32-bit only): AoS interleaves 64-bit words (rowID widened), 16 B
  per entry, as a C struct of (uint64, uint32) pads; SoA stays 12 B.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams
from indexzoo.native import lightweight as lw
from indexzoo.native.csr import offsets_from_counts
from indexzoo.native.eytzinger import EO_GATHER, eo_shape
from indexzoo.native.pivots import PB_GATHER, chunk_for_levels, full_chunk, pb_plan
from indexzoo.native.sort import sort_pairs
from indexzoo.native.targets import values_arg

from .hardware import hardware
from .params import LightweightParams, preset_params

__all__ = ["PRESETS", "LightweightIndex"]

_RANK, _POINT, _FIRST = np.int64(1), np.int64(0), np.int64(2)


class LightweightState(BuildState):
    """One build of a lightweight scheme: the layout, the pivot buffer and their shapes."""

    keys: Any           # the layout's key words (SoA keys, or AoS pairs)
    rowids: Any         # rowIDs (a strided view of ``keys`` for AoS)
    stride: int         # 1 (SoA) or 2 (AoS)
    k: int              # arity K
    pad: int            # 1 for binary EO (the leading empty slot), else 0
    h: int              # EO shape (eo_shape)
    b: int
    step0: int          # AO+BS's first step: the largest power of two <= n
    pb: Any             # pivot buffer (a one-slot stand-in without one)
    pbo: Any            # pivot buffer level offsets
    levels: int
    chunk: int
    pivot_plan: Any     # pivots.PbPlan, or None
    pin: tuple[int, int, int]  # (pa, pbb, ps) of the GPU driver's pinning
    peak: int


class LightweightIndex(GpuIndex[LightweightState]):
    """The lightweight family with every option; presets name the paper's five schemes."""

    name: ClassVar[str] = "lightweight"
    Params: ClassVar[type[IndexParams]] = LightweightParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    params: LightweightParams

    # -------------------------------------------------------------- build
    def _build(self, st: LightweightState, keys: Any) -> None:
        xp, p = st.xp, self.params
        n = int(keys.shape[0])
        kdt = keys.dtype
        pairs = sort_pairs(keys, st.rowid_dtype)
        st.k = p.arity
        st.pad = 1 if (p.layout == "eo" and p.search == "binary") else 0
        wide = kdt == np.uint64 or st.rowid_dtype == np.uint64
        wdt = np.dtype(np.uint64 if wide else np.uint32)
        slots = n + st.pad
        st.stride = 1 if p.memory_layout == "soa" else 2
        st.h, st.b = eo_shape(n, st.k) if p.layout == "eo" else (0, 0)
        st.step0 = 1 << (n.bit_length() - 1) if n else 0
        if p.layout == "eo":
            if p.memory_layout == "soa":
                st.keys = xp.zeros(slots, dtype=kdt)
                st.rowids = xp.zeros(slots, dtype=st.rowid_dtype)
                dst_k, dst_r = st.keys, st.rowids
            else:
                st.keys = xp.zeros(2 * slots, dtype=wdt)
                st.rowids = st.keys[1:]
                dst_k, dst_r = st.keys, st.rowids
            if n:
                EO_GATHER(self.device, n, pairs.keys, pairs.rowids, dst_k, dst_r, st.stride,
                          st.pad, n, st.k, st.h, st.b,
                          threads_per_block=p.threads_per_block)
        elif p.memory_layout == "soa":
            st.keys, st.rowids = pairs.keys, pairs.rowids
        else:
            st.keys = xp.empty(2 * n, dtype=wdt)
            st.keys[0::2] = pairs.keys
            st.keys[1::2] = pairs.rowids
            st.rowids = st.keys[1:]
        self._pivots(st, pairs.keys, n)
        layout_bytes = int(st.keys.nbytes) + (0 if st.stride == 2 else int(st.rowids.nbytes))
        st.peak = pairs.peak_bytes + (layout_bytes if (p.layout == "eo" or st.stride == 2)
                                         else 0) + int(st.pb.nbytes)
        # the GPU driver's pinning (also on the CPU, where the simulator tests run the driver)
        st.pin = (0, 0, 0) if p.pinning == "none" else self._pin_sizes(st, self._tile_shape(st)[3])

    def _pivots(self, st: LightweightState, sorted_keys: Any, n: int) -> None:
        xp, p = st.xp, self.params
        st.pbo = xp.zeros(1, dtype=np.int64)
        st.pb = xp.zeros(1, dtype=sorted_keys.dtype)  # stand-in: kernels take it anyway
        st.levels, st.chunk = 0, max(n, 1)
        st.pivot_plan = None
        if p.pivot_buffer == "none":
            return
        if p.pivot_buffer == "full":
            chunk = full_chunk(st.k)
        elif p.pb_levels is None:  # chunks of one 128-byte line: keys (SoA) or pairs (AoS)
            entry = st.keys.dtype.itemsize * st.stride
            chunk = full_chunk(st.k)
            while chunk * st.k * entry <= 128:
                chunk *= st.k
        else:
            chunk = chunk_for_levels(n, st.k, p.pb_levels)
        plan = pb_plan(n, st.k, chunk)
        st.pivot_plan = plan
        st.levels, st.chunk = plan.levels, plan.chunk
        if plan.slots:
            st.pb = xp.empty(plan.slots, dtype=sorted_keys.dtype)
            st.pbo = xp.asarray(plan.offsets())
            sentinel = sorted_keys.dtype.type(np.iinfo(sorted_keys.dtype).max)
            PB_GATHER(self.device, plan.slots, sorted_keys, st.pb, st.pbo, plan.levels, n,
                      st.k, plan.chunk, sentinel, threads_per_block=p.threads_per_block)

    def _footprint(self, st: LightweightState) -> Footprint:
        if st.stride == 2:
            parts = {"pairs": int(st.keys.nbytes)}
        else:
            parts = {"keys": int(st.keys.nbytes), "rowids": int(st.rowids.nbytes)}
        if self.params.pivot_buffer != "none":
            parts["pivots"] = int(st.pb.nbytes) if st.levels else 0
        return Footprint(breakdown=parts, peak_build_bytes=st.peak)

    # -------------------------------------------------------------- locating
    @staticmethod
    def _layout(st: LightweightState) -> tuple[Any, ...]:
        return (st.keys, st.rowids, st.stride, st.n, st.pb, st.pbo,
                st.levels, st.k, st.chunk, st.pad, st.step0, st.h, st.b)

    def _locate(self, st: LightweightState, x: Any, mode: np.int64, dtype: Any) -> Any:
        """``locate`` of the scheme for every key of ``x`` (see native/lightweight.py)."""
        out = st.xp.empty(x.shape[0], dtype=dtype)
        if self.device == "cpu":
            empty = np.zeros(0, dtype=st.keys.dtype)
            lw.LOCATE_CPU[self.params.scheme]("cpu", int(x.shape[0]), x, out, st.miss, mode,
                                              *self._layout(st), empty, 0, 0, 0)
        else:
            self._drive(st, x, out, mode)
        return out

    def _tile_shape(self, st: LightweightState) -> tuple[int, int, np.dtype, int]:
        """(group, tile, pinned key dtype, shared bytes the reordering reserves) of the GPU
        driver."""
        p = self.params
        group = p.k - 1 if p.search == "kary" else 1
        tile = p.threads_per_block // group * p.lookups_per_thread
        kdt = self._pin_dtype(st)
        sort_bytes = 0 if p.reorder == "none" else tile * (kdt.itemsize + 4 + 8) + 16
        return group, tile, kdt, sort_bytes

    def _drive(self, st: LightweightState, x: Any, out: Any, mode: np.int64) -> None:
        from indexzoo.native.lightweight_cuda import driver

        p = self.params
        group, tile, kdt, _ = self._tile_shape(st)
        reorder = {"none": 0, "single": 1, "double": 2}[p.reorder]
        pa, pbb, ps = st.pin
        pin_bytes = _align((pa + pbb) * kdt.itemsize, 8)
        o_keys = pin_bytes // kdt.itemsize
        o_idx = _align(pin_bytes + tile * kdt.itemsize, 8) // 4
        o_res = _align(o_idx * 4 + tile * 4, 8) // 8
        shared = (o_res * 8 + tile * 8) if reorder else pin_bytes
        nq = int(x.shape[0])
        blocks = -(-nq // tile)
        if p.schedule == "static":
            blocks = min(blocks, hardware(self.device).sm_count * p.blocks_per_sm)
        kernel = driver(p.scheme, group, p.lookups_per_thread, reorder, bool(pa + pbb),
                        str(kdt))
        kernel(blocks, p.threads_per_block, nq, x, out, st.miss, mode, *self._layout(st), pa,
               pbb, ps, o_keys, o_idx, o_res, shared_mem=shared)

    def _pin_dtype(self, st: LightweightState) -> np.dtype:
        """dtype of the pinned keys: the pivot buffer's or the key array's words."""
        if self.params.pivot_buffer != "none":
            return np.dtype(st.pb.dtype)
        return np.dtype(st.keys.dtype)

    def _pin_sizes(self, st: LightweightState, reserved: int) -> tuple[int, int, int]:
        """(pa, pbb, ps) of the pinning (see ``ao_key``/``front_key``) for the shared memory
        left after ``reserved`` bytes."""
        p = self.params
        budget = p.pinning_bytes
        if budget is None:
            budget = hardware(self.device).shared_optin_bytes - reserved - 1024
        cap = max(budget, 0) // self._pin_dtype(st).itemsize
        n = st.n
        if cap <= 0 or n == 0:
            return (0, 0, 0)
        if p.pivot_buffer != "none":
            slots = int(st.pb.shape[0]) if st.levels else 0
            offsets = st.pivot_plan.offsets().tolist() if st.pivot_plan else [0]
            if p.pinning == "full":
                return (min(cap, slots), 0, 0)
            return (max([o for o in offsets if o <= min(cap, slots)], default=0), 0, 0)
        if p.layout == "eo":
            total = n + st.pad
            if p.pinning == "full":
                return (min(cap, total), 0, 0)
            k, full_levels = st.k, 0
            while st.pad + k ** (full_levels + 1) - 1 <= min(cap, total):
                full_levels += 1
            return (st.pad + k ** full_levels - 1 if full_levels else 0, 0, 0)
        # AO+BS: keys of the first M steps sit at n-1 - j * (step0 >> (M-1))
        log_step0 = st.step0.bit_length() - 1
        m = min(cap.bit_length() - 1, log_step0 + 1)
        ps = log_step0 - (m - 1)
        pa = 1 << m
        pbb = min(cap - pa, 1 << m) if (p.pinning == "full" and ps > 0) else 0
        return (pa, pbb, ps) if m >= 1 else (0, 0, 0)

    def pinned_keys(self) -> int:
        """How many keys the GPU lookups pin to shared memory per block (0 on the CPU)."""
        if self.device == "cpu" or self.params.pinning == "none":
            return 0
        pa, pbb, _ = self._live().pin
        return pa + pbb

    @property
    def pivot_plan(self) -> Any:
        """The pivot buffer's plan (levels, chunk, slots), or None without a pivot buffer."""
        return self._live().pivot_plan

    # -------------------------------------------------------------- ranges
    def _ranks(self, st: LightweightState, lo: Any, hi: Any) -> tuple[Any, Any]:
        """Sorted positions ``start .. stop-1`` of the keys in each ``[lo, hi]``."""
        xp = st.xp
        start = self._locate(st, lo, _RANK, np.int64)
        top = hi == np.iinfo(hi.dtype).max
        stop = self._locate(st, hi + hi.dtype.type(1), _RANK, np.int64)  # hi + 1 wraps at the top
        stop = xp.where(top, st.n, stop)
        return start, xp.maximum(stop, start)

    def _eo_scan(self, st: LightweightState, lo: Any, hi: Any, fill: bool, values: Any,
                 use_values: Any, offsets: Any, out: Any) -> None:
        q = int(lo.shape[0])
        args = (st.keys, st.rowids, st.stride, st.n, st.k, st.pad, lo, hi)
        tpb = self.params.threads_per_block
        if self.device == "cuda" and self.params.multi_thread_scan:
            from indexzoo.native.lightweight_cuda import EO_SCAN_COOP

            EO_SCAN_COOP(self.device, -(-q // 32) * 32, q, *args, values, use_values,
                         np.bool_(fill), offsets, out, threads_per_block=tpb)
        elif fill:
            lw.EO_SCAN_FILL(self.device, q, *args, offsets, out, threads_per_block=tpb)
        else:
            lw.EO_SCAN_SUM(self.device, q, *args, values, use_values, out, threads_per_block=tpb)

    def _runs(self, st: LightweightState, start: Any, stop: Any, fill: bool, values: Any,
              use_values: Any, offsets: Any, out: Any) -> None:
        q = int(start.shape[0])
        tpb = self.params.threads_per_block
        if self.device == "cuda" and self.params.multi_thread_scan:
            from indexzoo.native.lightweight_cuda import RUNS_COOP

            RUNS_COOP(self.device, -(-q // 32) * 32, q, st.rowids, st.stride, start, stop,
                      values, use_values, np.bool_(fill), offsets, out, threads_per_block=tpb)
        elif fill:
            lw.RUN_FILL(self.device, q, st.rowids, st.stride, start, offsets, out,
                        threads_per_block=tpb)
        else:
            lw.RUN_SUM(self.device, q, st.rowids, st.stride, start, stop, values,
                       use_values, out, threads_per_block=tpb)

    def _sum(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype=np.uint64)
        values, use_values = values_arg(st.values, st.xp)
        no_offsets = st.xp.zeros(1, dtype=np.int64)
        if self.params.layout == "eo":
            self._eo_scan(st, lo, hi, False, values, use_values, no_offsets, out)
        else:
            start, stop = self._ranks(st, lo, hi)
            self._runs(st, start, stop, False, values, use_values, no_offsets, out)
        return out

    def _rowids_csr(self, st: LightweightState, lo: Any, hi: Any) -> tuple[Any, Any]:
        start, stop = self._ranks(st, lo, hi)
        offsets = offsets_from_counts(stop - start)
        out = st.xp.empty(int(offsets[-1]), dtype=st.rowid_dtype)
        if out.shape[0]:
            values, use_values = values_arg(None, st.xp)
            if self.params.layout == "eo":
                self._eo_scan(st, lo, hi, True, values, use_values, offsets, out)
            else:
                self._runs(st, start, stop, True, values, use_values, offsets, out)
        return offsets, out

    def _count(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        start, stop = self._ranks(st, lo, hi)
        return (stop - start).astype(st.rowid_dtype)

    # -------------------------------------------------------------- hooks
    def _point_rowid(self, st: LightweightState, q: Any) -> Any:
        return self._locate(st, q, _POINT, st.rowid_dtype)

    def _point_count(self, st: LightweightState, q: Any) -> Any:
        return self._count(st, q, q)

    def _point_sum(self, st: LightweightState, q: Any) -> Any:
        return self._sum(st, q, q)

    def _point_rowids(self, st: LightweightState, q: Any) -> tuple[Any, Any]:
        return self._rowids_csr(st, q, q)

    def _range_rowid(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        first = self._locate(st, lo, _FIRST, st.rowid_dtype)
        start, stop = self._ranks(st, lo, hi)
        return st.xp.where(stop > start, first, st.miss).astype(st.rowid_dtype)

    def _range_count(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        return self._count(st, lo, hi)

    def _range_sum(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        return self._sum(st, lo, hi)

    def _range_rowids(self, st: LightweightState, lo: Any, hi: Any) -> tuple[Any, Any]:
        return self._rowids_csr(st, lo, hi)


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def _preset_class(preset: str, doc: str) -> type[LightweightIndex]:
    cls = type(f"Lightweight_{preset.replace('-', '_')}", (LightweightIndex,), {
        "name": preset, "Params": preset_params(preset), "__doc__": doc,
        "__module__": __name__,
    })
    return cls


PRESETS: dict[str, type[LightweightIndex]] = {
    "ao-bs": _preset_class("ao-bs", "M1 AO+BS: ascending order, offset-based binary search, "
                                    "block-local double reordering."),
    "eo-bs": _preset_class("eo-bs", "M2 EO+BS: Eytzinger order, binary search with early "
                                    "exit."),
    "ao-pb-bs": _preset_class("ao-pb-bs", "M3 AO+PB+BS: ascending order under a coarse binary "
                                          "pivot buffer (chunks of one 128-byte line), AoS."),
    "eo-ks": _preset_class("eo-ks", "M4 EO+KS: K-ary Eytzinger order searched by groups of K-1 "
                                    "threads (K=5), dynamic scheduling."),
    "ao-pb-ks": _preset_class("ao-pb-ks", "M5 AO+PB+KS: ascending order under a K-ary pivot "
                                          "buffer searched by groups of K-1 threads, AoS."),
}
