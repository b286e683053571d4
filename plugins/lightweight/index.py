"""The lightweight sorted-array family of Henneberg & Schuhknecht, "Is Binary Search Really All
You Need? Supercharging Lightweight Database Indexing on GPUs": AO+BS, EO+BS, AO+PB+BS, EO+KS,
AO+PB+KS with every optimisation the paper studies.

Paper -> code
-------------
* Build [§3.5]: radix sort of (key, rowID) pairs (:func:`indexzoo.native.sort.sort_pairs`, CUB
  radix sort through CuPy), then one gather kernel with one thread per output slot whose source
  position is computed in closed form: EO (:data:`indexzoo.plugins.lightweight.eytzinger.EO_GATHER`) and the
  pivot buffer (:data:`indexzoo.plugins.lightweight.pivots.PB_GATHER`). AO is the sorted array itself (AoS:
  interleaved by one strided copy).
* M1 AO+BS [§3.1]: the offset-based back-to-front binary search of Listing 1
  (``ao_bs_search``), with the step halved on every iteration (as printed it loops forever for
  n = 2^k). M2 EO+BS [§3.2]: binary Eytzinger with the leading empty slot, early exit on a
  match. M3 AO+PB+BS [§3.3]: binary pivot buffer, then binary search in the chunk. M4 EO+KS and
  M5 AO+PB+KS [§3.4]: K-ary nodes searched by groups of K-1 threads voting with ``ballot_sync``
  (:mod:`indexzoo.plugins.lightweight.kernels_cuda`); the CPU runs one-thread twins with the same results.
* Ranges: AO/PB find the lower bound of ``lo`` and scan; EO runs the paper's level-scan algorithm
  (``eo_scan``); ``multi_thread_scan`` is §5.7's warp switch (the cooperative bodies of
  ``RUN_SUM``/``RUN_FILL``/``EO_SCAN_SUM``/``EO_SCAN_FILL``, run with ``group=WARP``).
* Optimisations [§4] on the GPU, by one generated driver kernel per configuration: static or
  dynamic scheduling, lookups per thread, pinning (steps/full), reordering (single/double), AoS
  or SoA. On the CPU they change nothing (one thread per lookup), by design: results are the same
  for every option on both devices.

Kernels and records
-------------------
``_build`` fills the state with three things the lookups hand to :mod:`indexzoo.plugins.lightweight.kernels`
unchanged: the :class:`~indexzoo.plugins.lightweight.search.LayoutRecord` (the arrays and shapes,
one kernel argument), the :class:`~indexzoo.plugins.lightweight.search.PinRecord` (the driver's
pinning) and the :class:`~indexzoo.plugins.lightweight.search.DriverPlan` (scheme, group, R,
reordering, grid cap).
Every lookup is one device-agnostic call: ``lw.locate(device, plan, layout, pins, q, out, miss,
mode)`` (the CPU twin or the GPU driver) and the scans ``OP(device, n, layout, ...,
group=WARP or 1, threads_per_block=T)``; the index never picks a kernel per device.

Decisions where the paper is silent or ambiguous
------------------------------------------------
* [AMBIG] Listing 1's indentation: ``step >>= 1`` runs every iteration (else n = 2^k hangs).
* [AMBIG] The PB level sizes (§3.5's sentence counts chunks): level l has
  ceil(n / (C K^(l+1))) nodes of K-1 pivots, padding and pivots at positions >= n-1 are the key
  maximum, compared with ``pivot < x`` so they always send the search left.
* [AMBIG] K=2 "full" PB: chunks of 2 keys (Fig. 6, §5.4's 27 levels for 2^28), not 1.
* [AMBIG] K-ary EO pads no leading slot (Fig. 10); binary EO does (§3.2).
* [AMBIG] Steps vs full pinning for AO+BS: "full" fills the rest of the shared memory with keys
  of the next step (odd multiples of the next step size); no preset pins: it helped only with
  one block per SM, and once the SMs are full the shared memory it takes lowers occupancy
  (measured: ``docs/plugins/lightweight.md``).
* [AMBIG] Lookup order with R > 1: a tile of (T/G)·R lookups; without reordering lookup
  ``base + r·(T/G) + g`` goes to group g (coalesced loads); with reordering group g takes the
  sorted entries g·R .. g·R+R-1 (consecutive keys per group).
* [AMBIG] AO+PB+KS's K is not stated ("small K"). Both KS presets use K=5, the fastest K
  measured, ahead of the paper's K=9 for EO+KS beyond L2: the K-ary group kernels are bound by
  the instructions their K-1 lanes issue (measured: ``docs/plugins/lightweight.md``).
* Preset defaults are the settings that measured best on an H200, not the paper's RTX 4090's:
  with many more SMs, one block per SM (the paper's static scheduling) leaves them mostly idle,
  so ``blocks_per_sm`` extends static scheduling, and interleaving R lookups per thread did not
  pay off (measured: ``docs/plugins/lightweight.md``). Every paper setting remains a parameter;
  choose them to reproduce the paper's configuration.
* [AMBIG] Range results are not specified: every ``out`` mode is served; ``count`` is two rank
  searches (O(log n)), also for EO, whose closed-form build map gives a slot's rank.
* Duplicates: point lookups are ranges ``[x, x]`` for ``count``/``sum``/``rowids``; ``rowid``
  returns some matching rowID (EO's early exit finds any copy; AO/PB the smallest rowID).
* [AMBIG] ``lightweight`` without options (``configuration="auto"``) builds the scheme the
  decision tree (§6.1, :mod:`.recommend`; on the GPU the tree corrected by our measurements)
  picks for its keys, as the paper's §6.1 advises a user to choose, with that preset's
  configuration; the tree's input is taken as point lookups. The pick is saved with the index
  (``built_options``), so a loaded index keeps it on any device.
* 64-bit keys (the paper ran 32-bit only): AoS interleaves 64-bit words (rowID widened), 16 B
  per entry, as a C struct of (uint64, uint32) pads; SoA stays 12 B.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams, Operation
from indexzoo.native.lazy import lazy_module
from indexzoo.native.sort import sort_pairs
from indexzoo.native.targets import Slot, one_per_item, values_arg
from indexzoo.persist import StateSchema

from .hardware import hardware
from .params import PRESET_PARAMS, LightweightParams, preset_params
from .saved import LIGHTWEIGHT_SCHEMA

if TYPE_CHECKING:
    from indexzoo.native import csr

    from . import eytzinger, layout, pivots
    from . import kernels as lw
else:  # imported when an index is built or loaded: the registry lists the classes without them
    csr = lazy_module("indexzoo.native.csr")
    eytzinger = lazy_module("indexzoo.plugins.lightweight.eytzinger")
    layout = lazy_module("indexzoo.plugins.lightweight.layout")
    pivots = lazy_module("indexzoo.plugins.lightweight.pivots")
    lw = lazy_module("indexzoo.plugins.lightweight.kernels")

__all__ = ["PRESETS", "AoBs", "AoPbBs", "AoPbKs", "EoBs", "EoKs", "LightweightIndex"]

#: Shared memory per block left unpinned below the device's opt-in maximum.
PIN_HEADROOM_BYTES = 1024
#: The kernels' reordering of each ``reorder`` option.
_REORDER = {"none": "NO_REORDER", "single": "REORDER_SINGLE", "double": "REORDER_DOUBLE"}


class LightweightState(BuildState):
    """One build of a lightweight scheme: what the kernels read and how the GPU runs them."""

    layout: lw.LayoutRecord  # the arrays and shapes (one kernel argument)
    pins: lw.PinRecord       # the keys the GPU driver pins in shared memory
    plan: lw.DriverPlan      # the GPU driver's configuration
    pivot_plan: pivots.PivotPlan | None
    peak: int
    config: str              # the options built (JSON): the params, or the decision's pick
    options: LightweightParams  # the same, parsed (made again on load, not saved)


class LightweightIndex(GpuIndex[LightweightState]):
    """The lightweight family with every option, by default the scheme its decision tree picks
    at build; presets name the paper's five schemes."""

    name: ClassVar[str] = "lightweight"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-26-defaults-c90bde0/: 10.6 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 4e6, "cuda": 6.3e9}
    Params: ClassVar[type[IndexParams]] = LightweightParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: 2: the kernels moved from indexzoo.native into this plugin, and a saved file names its
    #: records (LayoutRecord, PinRecord, DriverPlan, PivotPlan) by module, so files of
    #: version 1 are built again
    state_version: ClassVar[int] = 2
    #: a point lookup q is the range [q, q], but for rowid (one search for the key itself)
    points_as_ranges: ClassVar[bool] = True
    #: the layout, exactly what its options make for n keys (see saved.py)
    state_schema: ClassVar[StateSchema] = LIGHTWEIGHT_SCHEMA
    params: LightweightParams

    # -------------------------------------------------------------- build
    def _decide(self, n: int, key_dtype: Any) -> LightweightParams:
        """The options a build of ``n`` keys uses: the params, or under
        ``configuration="auto"`` the scheme the decision tree picks for ``n`` keys of this
        width on this device (:func:`.recommend.recommend`, point lookups), with its preset's
        configuration."""
        p = self.params
        if p.configuration == "given":
            return p
        from .recommend import recommend

        spec = recommend(n, np.dtype(key_dtype).itemsize, "point", self.device)
        common = {f: getattr(p, f) for f in IndexParams.model_fields}  # max_batch, ...
        return LightweightParams(**{**common, **PRESET_PARAMS[spec.index], **spec.params,
                                    "configuration": "given"})

    @property
    def built_options(self) -> LightweightParams:
        """The options of the build: the params, or the decision tree's pick under
        ``configuration="auto"`` (its ``scheme`` names it, e.g. ``ao-pb-bs``)."""
        return self._live().options

    def _save_state(self, st: LightweightState) -> dict[str, Any]:
        saved = super()._save_state(st)
        del saved["options"]  # a pydantic model: saved as its JSON, ``config``
        return saved

    def _load_state(self, st: LightweightState, saved: dict[str, Any]) -> None:
        super()._load_state(st, saved)
        st.options = LightweightParams.model_validate_json(st.config)
        self._drive(st)

    def _build(self, st: LightweightState, keys: Any) -> None:
        xp = st.xp
        n = int(keys.shape[0])
        p = st.options = self._decide(n, keys.dtype)
        st.config = p.model_dump_json()
        pairs = sort_pairs(keys, st.rowid_dtype)
        shape = layout.layout_shape(p, n, keys.dtype, st.rowid_dtype)
        k, pad, stride = shape.k, shape.pad, shape.stride
        if shape.eo:
            keys_w = xp.zeros(shape.keys_length, dtype=shape.keys_dtype)
            rowids = keys_w[1:] if stride == 2 else xp.zeros(shape.rowids_length,
                                                              dtype=shape.rowids_dtype)
            if n:
                eytzinger.EO_GATHER(self.device, n, pairs.keys, pairs.rowids, keys_w, rowids, stride, pad,
                                    n, k, shape.h, shape.b, threads_per_block=p.threads_per_block)
        elif stride == 1:
            keys_w, rowids = pairs.keys, pairs.rowids
        else:
            keys_w = xp.empty(shape.keys_length, dtype=shape.keys_dtype)
            keys_w[0::2] = pairs.keys
            keys_w[1::2] = pairs.rowids
            rowids = keys_w[1:]
        st.pivot_plan = shape.pivots
        pb, pbo = layout.pivot_buffer(self.device, shape, pairs.keys, p.threads_per_block)
        i64 = np.int64
        st.layout = lw.LayoutRecord(keys_w, rowids, i64(stride), i64(n), pb, pbo,
                                    i64(shape.pivots.levels if shape.pivots else 0), i64(k),
                                    i64(shape.chunk), i64(pad), i64(shape.step0), i64(shape.h),
                                    i64(shape.b))
        layout_bytes = int(keys_w.nbytes) + (0 if stride == 2 else int(rowids.nbytes))
        st.peak = pairs.peak_bytes + (layout_bytes if (shape.eo or stride == 2)
                                         else 0) + int(pb.nbytes)
        self._drive(st)

    def _drive(self, st: LightweightState) -> None:
        """The GPU driver's configuration and pinning for this device (also on the CPU, where
        the simulator tests run the driver): made at build, and again at load (they depend on
        the device's multiprocessors and shared memory, not on the file)."""
        p, lay = st.options, st.layout
        static = p.schedule == "static"
        st.plan = lw.DriverPlan(
            scheme=p.scheme, group=int(lay.k) - 1 if p.search == "kary" else 1,
            per_thread=p.lookups_per_thread, reorder=getattr(lw, _REORDER[p.reorder]),
            threads_per_block=p.threads_per_block,
            max_blocks=hardware(self.device).sm_count * p.blocks_per_sm if static else 0,
            pin_dtype=str(lay.pb.dtype if p.pivot_buffer != "none" else lay.keys.dtype))
        st.pins = lw.NO_PINNING if p.pinning == "none" else self._pinning(st, st.plan.sort_bytes)

    def _footprint(self, st: LightweightState) -> Footprint:
        lay = st.layout
        if lay.stride == 2:
            parts = {"pairs": int(lay.keys.nbytes)}
        else:
            parts = {"keys": int(lay.keys.nbytes), "rowids": int(lay.rowids.nbytes)}
        if st.options.pivot_buffer != "none":
            parts["pivots"] = int(lay.pb.nbytes) if lay.levels else 0
        return Footprint(breakdown=parts, peak_build_bytes=st.peak)

    # -------------------------------------------------------------- locating
    def _locate(self, st: LightweightState, x: Any, mode: np.int64, dtype: Any) -> Any:
        """The scheme's locate result for every key of ``x`` (see plugins/lightweight/kernels.py)."""
        out = st.xp.empty(x.shape[0], dtype=dtype)
        lw.locate(self.device, st.plan, st.layout, st.pins, x, out, st.miss, mode)
        return out

    def _pinning(self, st: LightweightState, reserved: int) -> lw.PinRecord:
        """The pinning (see ``ao_key``/``front_key``) for the shared memory left after
        ``reserved`` bytes."""
        p, lay = st.options, st.layout
        budget = p.pinning_bytes
        if budget is None:
            budget = hardware(self.device).shared_optin_bytes - reserved - PIN_HEADROOM_BYTES
        cap = max(budget, 0) // np.dtype(st.plan.pin_dtype).itemsize
        n = st.n
        if cap <= 0 or n == 0:
            return lw.NO_PINNING
        if p.pivot_buffer != "none":
            slots = int(lay.pb.shape[0]) if lay.levels else 0
            offsets = st.pivot_plan.offsets().tolist() if st.pivot_plan else [0]
            if p.pinning == "full":
                return _pins(min(cap, slots))
            return _pins(max([o for o in offsets if o <= min(cap, slots)], default=0))
        pad, k = int(lay.pad), int(lay.k)
        if p.layout == "eo":
            total = n + pad
            if p.pinning == "full":
                return _pins(min(cap, total))
            full_levels = 0
            while pad + k ** (full_levels + 1) - 1 <= min(cap, total):
                full_levels += 1
            return _pins(pad + k ** full_levels - 1 if full_levels else 0)
        # AO+BS: keys of the first M steps sit at n-1 - j * (step0 >> (M-1))
        log_step0 = int(lay.step0).bit_length() - 1
        m = min(cap.bit_length() - 1, log_step0 + 1)
        ps = log_step0 - (m - 1)
        pa = 1 << m
        pbb = min(cap - pa, 1 << m) if (p.pinning == "full" and ps > 0) else 0
        return _pins(pa, pbb, ps) if m >= 1 else lw.NO_PINNING

    @property
    def pivot_plan(self) -> Any:
        """The pivot buffer's plan (levels, chunk, slots), or None without a pivot buffer."""
        return self._live().pivot_plan

    # -------------------------------------------------------------- ranges
    def _ranks(self, st: LightweightState, lo: Any, hi: Any) -> tuple[Any, Any]:
        """Sorted positions ``start .. stop-1`` of the keys in each ``[lo, hi]``."""
        xp = st.xp
        start = self._locate(st, lo, lw.RANK, np.int64)
        top = hi == np.iinfo(hi.dtype).max
        stop = self._locate(st, hi + hi.dtype.type(1), lw.RANK, np.int64)  # hi + 1 wraps at the top
        stop = xp.where(top, st.n, stop)
        return start, xp.maximum(stop, start)

    def _scan(self, st: LightweightState, op: Any, q: int, *args: Any) -> None:
        """Run a range scan: one thread per range, or on the GPU with ``multi_thread_scan``
        one warp serving 32 ranges together (§5.7)."""
        p = st.options
        op(self.device, q, *args, group=lw.WARP if p.multi_thread_scan else 1,
           threads_per_block=p.threads_per_block)

    def _range_sum(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        q = int(lo.shape[0])
        out = st.xp.empty(q, dtype=np.uint64)
        values, use_values = values_arg(st.values, st.xp)
        if st.options.layout == "eo":
            self._scan(st, lw.EO_SCAN_SUM, q, st.layout, lo, hi, values, use_values, out)
        else:
            start, stop = self._ranks(st, lo, hi)
            self._scan(st, lw.RUN_SUM, q, st.layout, start, stop, values, use_values, out)
        return out

    def _range_rowids(self, st: LightweightState, lo: Any, hi: Any) -> tuple[Any, Any]:
        q = int(lo.shape[0])
        start, stop = self._ranks(st, lo, hi)
        offsets = csr.offsets_from_counts(stop - start)
        out = st.xp.empty(int(offsets[-1]), dtype=st.rowid_dtype)
        if out.shape[0]:
            if st.options.layout == "eo":
                self._scan(st, lw.EO_SCAN_FILL, q, st.layout, lo, hi, offsets, out)
            else:
                self._scan(st, lw.RUN_FILL, q, st.layout, start, offsets, out)
        return offsets, out

    def _range_count(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        start, stop = self._ranks(st, lo, hi)
        return (stop - start).astype(st.rowid_dtype)

    def _prepared_point(self, st: LightweightState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups with the layout, the driver's plan and pinning bound into the
        launch: a call allocates the answer and launches (the small-batch path)."""
        if op.out != "rowid":
            return None
        launch = lw.bind_locate(self.device, st.plan, st.layout, st.pins, Slot(st.native_dtype),
                                Slot(st.rowid_dtype), st.miss, lw.POINT)
        return one_per_item(launch, st.xp, st.rowid_dtype)

    def _point_rowid(self, st: LightweightState, q: Any) -> Any:
        return self._locate(st, q, lw.POINT, st.rowid_dtype)

    def _range_rowid(self, st: LightweightState, lo: Any, hi: Any) -> Any:
        first = self._locate(st, lo, lw.FIRST, st.rowid_dtype)
        start, stop = self._ranks(st, lo, hi)
        return st.xp.where(stop > start, first, st.miss).astype(st.rowid_dtype)


def _pins(pa: int, pbb: int = 0, ps: int = 0) -> lw.PinRecord:
    return lw.PinRecord(np.int64(pa), np.int64(pbb), np.int64(ps))


class AoBs(LightweightIndex):
    """M1 AO+BS: ascending order, offset-based binary search, block-local double reordering."""

    name: ClassVar[str] = "ao-bs"
    Params: ClassVar[type[IndexParams]] = preset_params("ao-bs")


class EoBs(LightweightIndex):
    """M2 EO+BS: Eytzinger order, binary search with early exit."""

    name: ClassVar[str] = "eo-bs"
    Params: ClassVar[type[IndexParams]] = preset_params("eo-bs")


class AoPbBs(LightweightIndex):
    """M3 AO+PB+BS: ascending order under a coarse binary pivot buffer (chunks of one
    128-byte line), AoS."""

    name: ClassVar[str] = "ao-pb-bs"
    Params: ClassVar[type[IndexParams]] = preset_params("ao-pb-bs")


class EoKs(LightweightIndex):
    """M4 EO+KS: K-ary Eytzinger order searched by groups of K-1 threads (K=5), dynamic
    scheduling."""

    name: ClassVar[str] = "eo-ks"
    Params: ClassVar[type[IndexParams]] = preset_params("eo-ks")


class AoPbKs(LightweightIndex):
    """M5 AO+PB+KS: ascending order under a K-ary pivot buffer searched by groups of K-1
    threads, AoS."""

    name: ClassVar[str] = "ao-pb-ks"
    Params: ClassVar[type[IndexParams]] = preset_params("ao-pb-ks")


#: The paper's five schemes, by registered name: module-level classes, so that pickle finds
#: them by their qualified names.
PRESETS: dict[str, type[LightweightIndex]] = {
    cls.name: cls for cls in (AoBs, EoBs, AoPbBs, EoKs, AoPbKs)}
