"""``btree`` beyond the conformance suite: every node width and leaf fill, runs of duplicates
spanning leaves, the structure's invariants, and identical answers from the CPU twin and the
cooperative GPU kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_identical, assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES
from indexzoo.devices import to_numpy
from indexzoo.native.btree import build_btree


def _workload(dtype: type, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    keys = np.repeat(rng.integers(0, top, n // 4 + 1, dtype=dtype, endpoint=True), 4)[:n]
    keys[:3] = [0, top, top]
    keys = keys[rng.permutation(n)]
    q = np.concatenate([keys[:150], rng.integers(0, top, 50, dtype=dtype, endpoint=True),
                        np.array([0, 1, top - 1, top], dtype=dtype)])
    lo = np.sort(rng.choice(keys, 80))
    hi = np.concatenate([lo[1:], np.array([top], dtype=dtype)])
    return keys, q, lo, hi


@pytest.mark.parametrize("width", [8, 16, 32])
@pytest.mark.parametrize("fill", [0.5, 1.0])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_every_width_and_fill_answers_like_the_reference(width: int, fill: float, dtype: type,
                                                         device: str) -> None:
    keys, q, lo, hi = _workload(dtype, 2000 + width, seed=width)
    values = np.random.default_rng(2).integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64,
                                               endpoint=True)
    index = indexzoo.create("btree", device=device, node_width=width, leaf_fill=fill).build(
        keys, values)
    miss = int(index.miss)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES}, reference(keys, q, q, values),
                   miss)
    assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                   reference(keys, lo, hi, values), miss)


@pytest.mark.parametrize("width", [8, 32])
def test_runs_of_duplicates_spanning_many_leaves(width: int, device: str) -> None:
    keys = np.concatenate([np.full(5 * width + 3, 7, np.uint64), np.arange(100, 400, dtype=np.uint64)])
    index = indexzoo.create("btree", device=device, node_width=width, leaf_fill=0.5).build(keys)
    rows = index.point([7], out="rowids").to_host()
    np.testing.assert_array_equal(np.sort(rows.rowids), np.arange(5 * width + 3))
    assert index.point([7], out="rowid").to_host().rowid.tolist() == [0]
    assert index.range([0], [150], out="count").to_host().count.tolist() == [5 * width + 3 + 51]


@pytest.mark.parametrize("width, fill", [(8, 0.5), (16, 1.0), (32, 1.0)])
def test_structure_invariants(width: int, fill: float) -> None:
    n = 10_000
    keys = np.sort(np.random.default_rng(0).integers(0, 2**40, n, dtype=np.uint64))
    tree = build_btree(keys, np.arange(n, dtype=np.uint32), width, fill)
    m = width if fill == 1.0 else width // 2
    leaves = math.ceil(n / m)
    lk = to_numpy(tree.leaf_keys).reshape(leaves, width)
    lc = to_numpy(tree.leaf_count)
    assert tree.fill == m and (lc[:-1] == m).all() and lc.sum() == n
    np.testing.assert_array_equal(np.concatenate([lk[j, :lc[j]] for j in range(leaves)]), keys)
    assert to_numpy(tree.leaf_next).tolist() == [*range(1, leaves), -1]
    assert tree.n_levels == math.ceil(math.log(leaves, width))
    starts = to_numpy(tree.level_start)
    assert starts[1] - starts[0] == 1  # one root
    # every pivot is the largest key under its child
    ik, ic, cnt = (to_numpy(a) for a in (tree.inner_keys, tree.inner_child, tree.inner_count))
    last = starts[-2]  # the level just above the leaves
    for node in range(starts[-1] - last):
        for s in range(cnt[last + node]):
            child = ic[(last + node) * width + s]
            assert ik[(last + node) * width + s] == lk[child, lc[child] - 1]


def test_footprint_accounts_leaves_and_inner_nodes() -> None:
    n = 1 << 14
    index = indexzoo.create("btree", device="cpu").build(np.arange(n, dtype=np.uint64))
    fp = index.memory_footprint().breakdown
    assert fp["leaf_keys"] == n * 8 and fp["leaf_rowids"] == n * 4
    assert 0 < fp["inner_keys"] < n * 8 // 8
    assert index.height == 3  # 2^14 keys / 16 per leaf = 1024 leaves = 16^2.5


@pytest.mark.gpu
@pytest.mark.parametrize("width, fill", [(8, 0.5), (16, 1.0), (32, 1.0)])
def test_cpu_twin_and_gpu_kernels_agree(width: int, fill: float) -> None:
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**64 - 1, 1 << 18, dtype=np.uint64, endpoint=True)
    keys[::3] = rng.choice(keys, keys[::3].shape[0])
    q = np.concatenate([rng.choice(keys, 1 << 15), rng.integers(0, 2**64 - 1, 1 << 13,
                                                                dtype=np.uint64)])
    lo = rng.choice(keys, 1 << 12)
    hi = np.minimum(lo.astype(np.float64) + 2.0**50, 2.0**64 - 1).astype(np.uint64)
    hi = np.maximum(hi, lo)
    params = {"node_width": width, "leaf_fill": fill}
    cpu = indexzoo.create("btree", device="cpu", **params).build(keys)
    gpu = indexzoo.create("btree", device="cuda", **params).build(keys)
    for m in OUT_MODES:
        assert_identical(cpu.point(q, out=m), gpu.point(q, out=m), f"point {m}")
        assert_identical(cpu.range(lo, hi, out=m), gpu.range(lo, hi, out=m), f"range {m}")
