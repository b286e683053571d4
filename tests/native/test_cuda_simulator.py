"""The GPU launch path of the one-source kernels, run under numba's CUDA simulator (no GPU
needed): the same bodies give the same answers through ``cuda.jit`` as through ``njit``."""

from __future__ import annotations

import textwrap

import pytest
from support.helpers import agrees_in_the_simulator

SCRIPT = textwrap.dedent("""
    import numpy as np
    from indexzoo.plugins.sorted_array import kernels as k
    from indexzoo.native.csr import GATHER_RUNS, offsets_from_counts

    rng = np.random.default_rng(5)
    for dtype in (np.uint32, np.uint64):
        keys = np.sort(rng.integers(0, 60, 150).astype(dtype))
        rowids = rng.permutation(150).astype(np.uint32)
        values = rng.integers(0, 2**63, 150, dtype=np.uint64) * np.uint64(3)
        q = rng.integers(0, 70, 45).astype(dtype)
        hi = q + rng.integers(0, 5, 45).astype(dtype)
        miss = np.uint32(2**32 - 1)
        runs = [
            (k.POINT_ROWID, lambda: (keys, rowids, q, np.empty(45, np.uint32), miss), 3),
            (k.RANGE_ROWID, lambda: (keys, rowids, q, hi, np.empty(45, np.uint32), miss), 4),
            (k.COUNT, lambda: (keys, q, hi, np.empty(45, np.uint32)), 3),
            (k.BOUNDS, lambda: (keys, q, hi, np.empty(45, np.int64), np.empty(45, np.int64)), 3),
            (k.SUM, lambda: (keys, rowids, values[:1], np.bool_(False), q, hi,
                             np.empty(45, np.uint64)), 6),
            (k.SUM, lambda: (keys, rowids, values, np.bool_(True), q, hi,
                             np.empty(45, np.uint64)), 6),
        ]
        for kernel, make, out_at in runs:
            a, b = make(), make()
            kernel("cpu", 45, *a)
            kernel("cuda", 45, *b, threads_per_block=32)
            outs = [out_at] + ([out_at + 1] if kernel is k.BOUNDS else [])
            for j in outs:
                assert np.array_equal(a[j], b[j]), (kernel, dtype)
        counts = rng.integers(0, 4, 20)
        start = rng.integers(0, 140, 20)
        offsets = offsets_from_counts(counts)
        outs = [np.empty(int(offsets[-1]), np.uint32) for _ in range(2)]
        GATHER_RUNS("cpu", 20, rowids, start, offsets, outs[0])
        GATHER_RUNS("cuda", 20, rowids, start, offsets, outs[1], threads_per_block=32)
        assert np.array_equal(outs[0], outs[1])
    print("simulator agrees")
""")




def test_kernels_agree_between_njit_and_the_cuda_simulator() -> None:
    agrees_in_the_simulator(SCRIPT)


RT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba.extending import register_jitable
    from indexzoo.native.rt import geometry as geo
    from indexzoo.native.rt.trace import Instance, Programs, build_gas, build_ias, launch, trace

    @register_jitable
    def count(ray, inst, prim, t, front, payload, params):
        payload[ray, 0] += np.uint64(1)
        return 1

    @register_jitable
    def box_of(cells, i):
        x = np.float32(cells[i] % 16)
        y = np.float32(cells[i] // 16)
        return x, y, np.float32(0), x + np.float32(1), y + np.float32(1), np.float32(20)

    rng = np.random.default_rng(3)
    tri = (rng.integers(0, 20, (60, 1, 3)) + rng.uniform(-2, 2, (60, 3, 3))).reshape(60, 9)
    tri = tri.astype(np.float32)
    o = rng.uniform(-3, 23, (24, 3)).astype(np.float32)
    d = (rng.uniform(0, 20, (24, 3)) - o).astype(np.float32)
    shift = np.eye(3, 4)
    shift[:, 3] = [5, 0, 0]
    gas = build_gas(geo.TRIANGLES, tri, leaf_size=2)
    boxes = build_gas(geo.AABBS, np.arange(40), geometry=box_of)
    scenes = [(gas, None), (boxes, None), (build_ias([Instance(gas), Instance(gas, shift, 3)]), None),
              (gas, Programs(anyhit=count))]
    for scene, programs in scenes:
        a = trace(scene, o, d, 0.0, np.inf, programs, payload=np.zeros((24, 1), np.uint64))
        b = trace(scene, o, d, 0.0, np.inf, programs, payload=np.zeros((24, 1), np.uint64),
                  device="cuda", threads_per_block=32)
        assert np.array_equal(a.prim, b.prim) and np.array_equal(a.inst, b.inst)
        assert np.array_equal(a.t, b.t) and np.array_equal(a.payload, b.payload)
        assert (a.prim >= 0).any() if programs is None else (a.payload > 0).any()  # something hit
    @register_jitable
    def along_x(i, params):
        return -1.0, params[0][i], 0.5, 1.0, 0.0, 0.0, 0.0, 100.0

    ys = np.arange(16).astype(np.float32) + np.float32(0.5)
    a = launch(boxes, 16, Programs(raygen=along_x), params=(ys,))
    b = launch(boxes, 16, Programs(raygen=along_x), params=(ys,), device="cuda", threads_per_block=32)
    assert np.array_equal(a.prim, b.prim) and (a.prim >= 0).any()
    print("simulator agrees")
""")


def test_ray_tracing_kernels_agree_between_njit_and_the_cuda_simulator() -> None:
    """GAS (stored and generated), IAS, an any-hit program and a ray-generation launch through
    ``cuda.jit``."""
    agrees_in_the_simulator(RT_SCRIPT)


HASH_SCRIPT = textwrap.dedent('''
    import collections
    import time
    import warnings

    from support import cudasim_warp
    import numpy as np
    from numba import cuda
    from numba.cuda.simulator import kernelapi

    from indexzoo.plugins.warpcore_hash import kernels as hashing
    from indexzoo.native.csr import offsets_from_counts
    from indexzoo.plugins.warpcore_hash.index import build_table

    warnings.filterwarnings("ignore", category=RuntimeWarning)  # uint64 wrap-around in Python
    cudasim_warp.install()  # warp votes and shuffles
    cuda.atomic = kernelapi.FakeCUDAAtomic()  # for the bodies' module-level `cuda`, too

    # Widen the race window of the build's compare-and-swap, so that groups of one block lose
    # races to their own key and to other keys (both must happen below).
    RACES = collections.Counter()
    plain_cas = kernelapi.FakeCUDAAtomic.cas

    def racy_cas(self, array, index, old, val):
        time.sleep(0.002)
        got = plain_cas(self, array, index, old, val)
        RACES["won" if got == old else "own key" if got == val else "other key"] += 1
        return got

    kernelapi.FakeCUDAAtomic.cas = racy_cas
    TPB = 64

    class SimPasses:  # the cooperative build kernels (table arrays inside the record are
        def insert(self, tab, counts, keys, vals):  # used in place by the simulator)
            hashing.insert_or_count("cuda", tab.record(), counts, keys, vals, TPB)

        def place(self, tab, keys, rowids):
            hashing.place_rows("cuda", tab.record(), keys, rowids, TPB)

    class CpuTwin:  # the CPU twins' bodies run as Python (the plugin tests run them compiled)
        def insert(self, tab, counts, keys, vals):
            t = tab.record()
            hashing.insert_or_count_cpu.py_func(t.tkeys, t.tvals, t.stride, counts, keys, vals,
                                                t.n_windows, t.group, t.empty)

        def place(self, tab, keys, rowids):
            t = tab.record()
            hashing.place_rows_cpu.py_func(t.tkeys, t.tvals, t.stride, t.overflow, t.flag, keys,
                                           rowids, t.n_windows, t.group, t.empty)

    def lookups(tab, device, q, values, miss):
        nq, rec = q.shape[0], tab.record()
        if device == "cuda":
            def run(op, *args):
                op("cuda", nq, rec, *args, group=int(tab.group), threads_per_block=TPB)
        else:
            def run(op, *args):
                for i in range(nq):
                    op.scalar.body(i, rec, *args)
        rowid, count = np.empty(nq, np.uint32), np.empty(nq, np.int64)
        run(hashing.FIND_ROWID, q, rowid, miss)
        run(hashing.COUNT, q, count)
        sums = []
        for vals, use in ((values, np.bool_(True)), (values[:1], np.bool_(False))):
            sums.append(np.empty(nq, np.uint64))
            run(hashing.SUM, vals, use, q, sums[-1])
        offsets = offsets_from_counts(count)
        rows = np.empty(int(offsets[-1]), np.uint32)
        run(hashing.FILL, q, offsets, rows)
        return rowid, count, sums, [rows[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]

    rng = np.random.default_rng(11)

    def rows(mult, unique):
        return np.concatenate([np.repeat(rng.integers(0, 1 << 40, len(mult)), mult),
                               rng.integers(0, 1 << 40, unique)])

    # mean multiplicity below 2 (the pass-1 table stays) and above (the keys move to a table
    # sized for them); runs shorter and longer than a group; G = 32 on fewer rows (slow here)
    mixed, heavy = rows([2, 5, 31, 33, 1], 90), rows([70, 66, 2, 1], 0)
    mixed32, heavy32 = rows([2, 33], 40), rows([33, 2, 1], 10)
    cases = [(1, "soa", np.uint64, mixed), (4, "aos", np.uint32, heavy),
             (8, "soa", np.uint32, heavy), (32, "aos", np.uint64, mixed32),
             (1, "aos", np.uint64, heavy), (4, "soa", np.uint64, mixed),
             (8, "aos", np.uint64, mixed), (32, "soa", np.uint32, heavy32)]
    miss = np.uint32(2**32 - 1)
    for case, (g, layout, dtype, base) in enumerate(cases):
        keys = rng.permutation(base).astype(dtype)
        n = keys.shape[0]
        word = np.dtype(dtype) if layout == "aos" else np.dtype(np.uint32)
        values = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
        hits, misses = (24, 6) if g < 32 else (10, 3)
        q = np.concatenate([rng.choice(keys, hits), rng.integers(0, 1 << 40, misses).astype(dtype),
                            np.array([np.iinfo(dtype).max], dtype)])
        tabs = [build_table(np, keys, np.arange(n, dtype=np.uint32), group=g, load_factor=0.8,
                            layout=layout, word_dtype=word, passes=p)
                for p in (CpuTwin(), SimPasses())]
        mult = np.unique(keys, return_counts=True)[1]
        for tab in tabs:
            assert tab.n_distinct == mult.shape[0], case
            assert tab.capacity == tabs[0].capacity, case
            assert tab.overflow.shape[0] == (mult[mult > 1] + 1).sum(), case
        cpu = lookups(tabs[0], "cpu", q, values, miss)
        twin_on_gpu_table = lookups(tabs[1], "cpu", q, values, miss)
        gpu = lookups(tabs[1], "cuda", q, values, miss)
        assert cpu[3] == [np.nonzero(keys == x)[0].tolist() for x in q], case  # in rowID order
        for got in (gpu, twin_on_gpu_table):
            assert np.array_equal(got[1], cpu[1]), case                          # counts
            assert all(np.array_equal(a, b) for a, b in zip(got[2], cpu[2])), case  # sums
            assert [sorted(s) for s in got[3]] == cpu[3], case                    # rowID sets
            hit = got[1] > 0
            assert np.all(got[0][~hit] == miss), case                             # rowid
            assert np.all(keys[got[0][hit].astype(np.int64)] == q[hit]), case
        assert np.array_equal(gpu[0], twin_on_gpu_table[0]), case  # one table, one answer
    assert RACES["own key"] and RACES["other key"], RACES
    print("simulator agrees")
''')


@pytest.mark.exhaustive  # about 40 s of simulated threads: CI runs it after the README's tests
def test_cooperative_hash_kernels_agree_with_the_cpu_twin_in_the_simulator() -> None:
    """warpcore-hash: both build passes and the four lookups of the cooperative kernels (warp
    intrinsics from ``tests/support/cudasim_warp.py``) against the CPU twin, for G = 1, 4, 8, 32, both
    layouts, with and without the move to a table for the distinct keys; the build's
    compare-and-swap races are widened so both lost-race paths run."""
    agrees_in_the_simulator(HASH_SCRIPT)
