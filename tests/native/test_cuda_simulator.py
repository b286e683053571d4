"""The GPU launch path of the one-source kernels, run under numba's CUDA simulator (no GPU
needed): the same bodies give the same answers through ``cuda.jit`` as through ``njit``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np
    from indexzoo.native import sorted_lookup as k
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


def _agrees_in_the_simulator(script: str) -> None:
    """Run ``script`` in a fresh interpreter with numba's CUDA simulator switched on."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "simulator agrees" in res.stdout


def test_kernels_agree_between_njit_and_the_cuda_simulator() -> None:
    _agrees_in_the_simulator(SCRIPT)


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
    _agrees_in_the_simulator(RT_SCRIPT)
