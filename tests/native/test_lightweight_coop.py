"""The lightweight family's cooperative GPU code under numba's CUDA simulator, with the warp
intrinsics of ``tests/support/cudasim_warp.py``: the K-ary searches (EO+KS, AO+PB+KS: groups of K-1
threads voting, inside the lookup driver) through ``lightweight.locate`` with device "cuda",
and the multi-threaded range scans (one lane per range, the warp finishing long ranges) through
their ``GroupKernel``\\ s with ``group=WARP``; each against the CPU twin, which
``tests/plugins/lightweight/test_lightweight.py`` checks against a brute-force reference."""

from __future__ import annotations

import textwrap

import pytest
from support.helpers import agrees_in_the_simulator

SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    import indexzoo
    from indexzoo.plugins.lightweight import kernels as lw
    from indexzoo.native.csr import offsets_from_counts
    from indexzoo.native.targets import Slot

    FULL = {full}  # every K, key width and index; the default tier runs a representative part
    rng = np.random.default_rng(5)
    MODES = ((lw.RANK, "int64"), (lw.FIRST, "rowid"), (lw.POINT, "rowid"))


    def locate_both(index, q):
        st = index.state
        assert st.plan.group == index.params.k - 1
        for mode, kind in MODES:
            dt = np.int64 if kind == "int64" else index.rowid_dtype
            got, want = np.empty(q.shape[0], dt), np.empty(q.shape[0], dt)
            lw.locate("cuda", st.plan, st.layout, st.pins, q, got, st.miss, mode)
            lw.locate("cpu", st.plan, st.layout, st.pins, q, want, st.miss, mode)
            assert np.array_equal(got, want), (index.params, int(mode), got, want)
            if mode == lw.POINT:  # the bound launch of prepared point lookups: the same
                bound = np.empty(q.shape[0], dt)
                lw.bind_locate("cuda", st.plan, st.layout, st.pins, Slot(q.dtype), Slot(dt),
                               st.miss, mode)(q.shape[0], q, bound)
                assert np.array_equal(bound, want), (index.params, bound, want)


    # K-ary searches: every K (groups of 2 .. 32 threads), both key widths, SoA and AoS (the
    # simulator runs a thread per lane: fewer lookups for the wide groups)
    for dtype in (np.uint32, np.uint64) if FULL else (np.uint64,):
        keys = rng.integers(0, 400, 150).astype(dtype)  # duplicates and gaps
        keys[0] = np.iinfo(dtype).max
        q = np.concatenate([np.array([0, np.iinfo(dtype).max], dtype), keys[:18],
                            rng.integers(0, 420, 12).astype(dtype)])
        for name in ("eo-ks", "ao-pb-ks"):
            ks = (3, 5, 9, 17 if dtype == np.uint32 else 33) if FULL else (3, 9)
            for i, k in enumerate(ks):
                ml = ("soa", "aos")[(i + (dtype == np.uint64)) % 2]
                locate_both(indexzoo.create(name, device="cpu", k=k, threads_per_block=32,
                                            memory_layout=ml).build(keys), q[:12] if k > 9 else q)
            # the driver's options around the groups: R, reordering, pinning, static grid
            if FULL or name == "eo-ks":
                locate_both(indexzoo.create(name, device="cpu", k=5, threads_per_block=32,
                                            lookups_per_thread=2, reorder="double",
                                            pinning="full", pinning_bytes=64,
                                            schedule="static").build(keys), q)
        locate_both(indexzoo.create("ao-pb-ks", device="cpu", k=3, pivot_buffer="coarse",
                                    pb_levels=2, threads_per_block=32).build(keys), q)

    # multi-threaded range scans: short and long (> WARP entries) ranges, a partial warp
    keys = np.concatenate([np.arange(0, 1200, 2), np.full(70, 501)]).astype(np.uint64)
    rng.shuffle(keys)
    values = rng.integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64, endpoint=True)
    NQ = 45 if FULL else 15  # ranges per kernel
    lo = rng.integers(0, 1200, NQ).astype(np.uint64)
    hi = lo + rng.integers(0, 12, NQ).astype(np.uint64)
    hi[::3] = lo[::3] + rng.integers(100, 700, hi[::3].shape[0]).astype(np.uint64)
    lo[5], hi[5] = 501, 501  # one key, 71 copies
    lo[6], hi[6] = 9, 3  # inverted: empty
    scans = (("ao-bs", {}), ("ao-pb-ks", {"memory_layout": "aos"}), ("eo-bs", {}),
             ("eo-ks", {"k": 9, "memory_layout": "aos"}))
    for name, opts in scans if FULL else scans[::3]:
        index = indexzoo.create(name, device="cpu", **opts).build(keys, values)
        st, lay = index.state, index.state.layout
        start = np.empty(NQ, np.int64)
        stop = np.empty(NQ, np.int64)
        lw.locate("cpu", st.plan, lay, st.pins, lo, start, st.miss, lw.RANK)
        lw.locate("cpu", st.plan, lay, st.pins, hi + np.uint64(1), stop, st.miss, lw.RANK)
        stop = np.maximum(stop, start)
        assert (stop - start).max() > 3 * lw.WARP and (stop - start).min() == 0
        offsets = offsets_from_counts(stop - start)
        eo = name.startswith("eo")
        for use_values in (True, False):
            sums = []
            runs = (("cpu", 1), ("cuda", lw.WARP)) + ((("cuda", 1),) if use_values else ())
            for device, group in runs:
                out = np.empty(NQ, np.uint64)
                if eo:
                    lw.EO_SCAN_SUM(device, NQ, lay, lo, hi, values, np.bool_(use_values), out,
                                   group=group, threads_per_block=64)
                else:
                    lw.RUN_SUM(device, NQ, lay, start, stop, values, np.bool_(use_values), out,
                               group=group, threads_per_block=64)
                sums.append(out)
            assert np.array_equal(sums[0], sums[1]), (name, opts, "sum", sums[0], sums[1])
            assert np.array_equal(sums[0], sums[-1]), (name, opts, "sum, group 1")
        fills = []
        for device, group in (("cpu", 1), ("cuda", lw.WARP)):
            out = np.full(int(offsets[-1]), 7, st.rowid_dtype)
            if eo:
                lw.EO_SCAN_FILL(device, NQ, lay, lo, hi, offsets, out, group=group,
                                threads_per_block=64)
            else:
                lw.RUN_FILL(device, NQ, lay, start, offsets, out, group=group,
                            threads_per_block=64)
            fills.append(out)
        assert np.array_equal(fills[0], fills[1]), (name, opts, "fill")
    print("cooperative kernels agree")
""")


@pytest.mark.slow
@pytest.mark.exhaustive  # about 16 s of simulated threads: CI runs it after the README's tests
def test_cooperative_searches_and_scans_agree_with_the_cpu_twins_in_the_simulator() -> None:
    # K = 3 and 9 (groups of 2 and 8 threads) on 64-bit keys, the driver's options, and the
    # range scans of both orders (run sums and the Eytzinger scan)
    agrees_in_the_simulator(SCRIPT.replace("{full}", "False"), "cooperative kernels agree")


@pytest.mark.exhaustive
def test_every_cooperative_configuration_agrees_with_the_cpu_twins_in_the_simulator() -> None:
    agrees_in_the_simulator(SCRIPT.replace("{full}", "True"), "cooperative kernels agree")
