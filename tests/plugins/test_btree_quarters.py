"""``btree``'s ``inner_layout="quarters"``: the same answers as the default tree (every out mode,
both key dtypes, partial nodes and quarters, duplicates, the dtype's maximum), the inner keys
laid out as documented, the footprint, the rejected combinations, and the GPU one-thread body
under numba's CUDA simulator. Its conformance suites (alone, and with the paired leaves) are
with the other variants' in ``test_btree.py``."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from helpers import agrees_in_the_simulator, assert_identical

import indexzoo
from indexzoo import OUT_MODES, ConfigError
from indexzoo.devices import to_numpy
from indexzoo.native import btree
from indexzoo.native.btree import QUARTERS_STRIDE, build_btree

#: an opt-in layout that measured slower than the default (docs/plugins/btree.md): its tests
#: run in CI's exhaustive tier, after the README's test command
pytestmark = pytest.mark.exhaustive

# partial inner nodes and quarters at every depth: one leaf, one partial leaf, a root of 2
# children, 2 inner levels with a last node of one child, 3 and 4 inner levels
SIZES = [1, 15, 16, 17, 255, 256, 257, 4097, 70000]


def _keys(dtype: type, n: int, rng: np.random.Generator, with_top: bool = True) -> np.ndarray:
    """n keys in random order: runs of 3, a run of 600 crossing leaves and inner nodes (when n
    allows), and the dtype's maximum 20 times (a run over the last leaves) if ``with_top``,
    else no key above ``top - 2`` (lookups of ``top - 1`` and ``top`` lie beyond every key:
    the root's own checks answer them)."""
    top = np.iinfo(dtype).max
    keys = np.sort(np.repeat(rng.integers(0, top - 2, n // 3 + 1, dtype=dtype), 3)[:n])
    if n > 2000:
        keys[1000:1600] = keys[1000]
    if with_top:
        keys[-min(n, 20):] = top
    return keys[rng.permutation(n)]


def _lookups(keys: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Hits, near misses, the extremes (below and above every key, the maximum itself), and
    ranges over them (strict and non-strict descents: count descends to > hi)."""
    dtype = keys.dtype.type
    top = np.iinfo(dtype).max
    uniq = np.unique(keys)
    some = rng.choice(uniq, min(uniq.shape[0], 60), replace=False)
    q = np.concatenate([some, some - dtype(1), some + dtype(1),
                        np.array([0, 1, top - 1, top], dtype=dtype)]).astype(dtype)
    lo = np.sort(rng.choice(q, 40))
    hi = np.maximum(lo, rng.choice(q, 40))
    lo = np.concatenate([lo, np.array([0, 0, top, top - 1, 0], dtype=dtype)])
    hi = np.concatenate([hi, np.array([top, 0, top, top - 1, uniq[0]], dtype=dtype)])
    return q, lo, hi


def _assert_like_the_default(keys: np.ndarray, params: dict[str, object],
                             rng: np.random.Generator) -> None:
    q, lo, hi = _lookups(keys, rng)
    default = indexzoo.create("btree", device="cpu").build(keys)
    quarters = indexzoo.create("btree", device="cpu", inner_layout="quarters", **params).build(
        keys)
    for m in OUT_MODES:
        label = f"n={keys.shape[0]} {keys.dtype} {m}"
        assert_identical(default.point(q, out=m), quarters.point(q, out=m), f"point {label}")
        assert_identical(default.range(lo, hi, out=m), quarters.range(lo, hi, out=m),
                         f"range {label}")


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_quarters_answers_like_the_default_tree(dtype: type) -> None:
    rng = np.random.default_rng(3)
    for n in SIZES:
        for with_top in (True, False):
            _assert_like_the_default(_keys(dtype, n, rng, with_top), {}, rng)


@pytest.mark.parametrize("layout, fill", [
    ("paired", 0.5), pytest.param("interleaved", 1.0, marks=pytest.mark.exhaustive)])
def test_quarters_with_the_record_leaf_layouts(layout: str, fill: float) -> None:
    """The split layout is above; the record layouts once each (each compiles its kernels)."""
    rng = np.random.default_rng(4)
    _assert_like_the_default(_keys(np.uint64, 4097, rng), {"leaf_layout": layout,
                                                           "leaf_fill": fill}, rng)


def test_quarters_inner_keys_are_laid_out_as_documented() -> None:
    n = 16 * 16 * 3 + 5  # 49 leaves: a root of 4 children over 4 nodes, the last of one child
    keys = np.arange(0, 2 * n, 2, dtype=np.uint64)
    rowids = np.arange(n, dtype=np.uint32)
    sorted_tree = build_btree(keys, rowids, 16, 1.0)
    tree = build_btree(keys, rowids, 16, 1.0, inner_layout="quarters")
    assert tree.inner_layout == "quarters" and tree.n_levels == sorted_tree.n_levels == 2
    ref = to_numpy(sorted_tree.inner_keys).reshape(-1, 16)
    got = to_numpy(tree.inner_keys).reshape(-1, QUARTERS_STRIDE)
    np.testing.assert_array_equal(got[:, :4], ref[:, 3::4])
    np.testing.assert_array_equal(got[:, 4:], ref)
    # the root by hand: pivots are its 4 children's largest keys, then padding (the maximum)
    top = np.iinfo(np.uint64).max
    pivots = [2 * (256 * c + 255) for c in range(3)] + [2 * (n - 1)]
    assert got[0].tolist() == [pivots[3], top, top, top, *pivots, *[top] * 12]
    # everything else as in the sorted tree
    for name in ("inner_child", "inner_count", "level_start", "leaf_keys", "leaf_rowids",
                 "leaf_count", "leaf_next"):
        np.testing.assert_array_equal(to_numpy(getattr(tree, name)),
                                      to_numpy(getattr(sorted_tree, name)), err_msg=name)


def test_quarters_footprint_counts_the_wider_inner_nodes() -> None:
    keys = np.arange(1 << 14, dtype=np.uint64)
    fp = {layout: indexzoo.create("btree", device="cpu", inner_layout=layout).build(
        keys).memory_footprint() for layout in ("sorted", "quarters")}
    nodes = 64 + 4 + 1  # 1024 leaves: 64 nodes above them, 4 above those, the root
    assert fp["sorted"].breakdown["inner_keys"] == nodes * 16 * 8
    assert fp["quarters"].breakdown["inner_keys"] == nodes * QUARTERS_STRIDE * 8
    assert {k: v for k, v in fp["quarters"].breakdown.items() if k != "inner_keys"} == {
        k: v for k, v in fp["sorted"].breakdown.items() if k != "inner_keys"}
    assert fp["quarters"].resident_bytes == fp["sorted"].resident_bytes + nodes * 4 * 8


@pytest.mark.parametrize("params, need", [
    ({"cooperative": True}, "cooperative=False"),
    ({"node_width": 8}, "node_width=16"),
    ({"node_width": 32, "descent": "scan"}, "node_width=16, descent='binary'"),
    ({"descent": "scan"}, "descent='binary'"),
])
def test_quarters_rejects_what_it_cannot_search(params: dict[str, object], need: str) -> None:
    with pytest.raises(ConfigError, match=f"inner_layout='quarters' needs {need}"):
        indexzoo.create("btree", device="cpu", inner_layout="quarters", **params)


def test_quarters_native_entry_points_reject_other_shapes() -> None:
    keys = np.arange(100, dtype=np.uint64)
    with pytest.raises(ValueError, match="needs width 16"):
        build_btree(keys, np.arange(100, dtype=np.uint32), 8, 1.0, inner_layout="quarters")
    with pytest.raises(ValueError, match="descent='binary' and width 16"):
        btree.operations("split", "scan", 16, "quarters")
    with pytest.raises(ValueError, match="inner layout"):
        btree.operations("split", "binary", 16, "halves")
    # the cooperative kernels read sorted nodes: quarters has only the one-thread body
    with pytest.raises(TypeError, match="no cooperative form"):
        btree.operations("split", "binary", 16, "quarters").FIND_ROWID.cooperative()


SIM_SCRIPT = textwrap.dedent("""
    import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from indexzoo.native import btree
    from indexzoo.native.csr import offsets_from_counts
    from indexzoo.native.sort import sort_pairs

    rng = np.random.default_rng(12)
    top = np.iinfo(np.uint64).max
    ops = btree.operations("split", "binary", 16, "quarters")
    q = 24
    # 700 keys: 44 leaves, two inner levels, a run of 300 over leaves and inner nodes, the
    # maximum as a key; 256 keys: one full root, nothing above 899, so lookups beyond every
    # key take the root's c == 4 exit (the simulator's arrays would raise past the node)
    for n in (700, 256):
        keys = rng.integers(0, 900, n).astype(np.uint64)
        if n == 700:
            keys[:300] = 500
            keys[-3:] = top
        pairs = sort_pairs(keys, np.uint32)
        tree = btree.build_btree(pairs.keys, pairs.rowids, 16, 1.0, "split", "quarters")
        assert tree.n_levels == (2 if n == 700 else 1)
        tree = tree.record()
        lo = rng.integers(0, 1000, q).astype(np.uint64)
        lo[:4] = [500, 0, 950, top]
        hi = lo + rng.integers(0, 30, q).astype(np.uint64)
        hi[1], hi[3] = top, top
        values = rng.integers(0, 2**63, n, dtype=np.uint64)

        def both(op, *args, out_at):
            outs = []
            for device in ("cpu", "cuda"):  # the CPU twin, the one-thread body via cuda.jit
                a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
                op(device, q, *a, group=1, threads_per_block=32)
                outs.append(a[out_at])
            assert np.array_equal(outs[0], outs[1]), (op, outs)
            return outs[0]

        both(ops.FIND_ROWID, tree, lo, hi, np.empty(q, np.uint32), np.uint32(2**32 - 1),
             out_at=3)
        counts = both(ops.COUNT, tree, lo, hi, np.empty(q, np.int64), out_at=3)
        assert counts[1] == n and counts[2] == 0 and counts[3] == (3 if n == 700 else 0), counts
        both(ops.SUM, tree, values, np.bool_(True), lo, hi, np.empty(q, np.uint64), out_at=5)
        offsets = offsets_from_counts(counts)
        sets = []
        for device in ("cpu", "cuda"):
            out = np.empty(int(offsets[-1]), np.uint32)
            ops.FILL(device, q, tree, lo, hi, offsets, out, group=1, threads_per_block=32)
            sets.append([sorted(out[offsets[i]:offsets[i + 1]]) for i in range(q)])
        assert sets[0] == sets[1]
    print("simulator agrees")
""")


def test_quarters_gpu_body_agrees_with_the_cpu_in_the_simulator() -> None:
    """The GPU group=1 path of the quarters descent (same source as the CPU twin, compiled by
    cuda.jit) under numba's CUDA simulator, like ``test_btree.py``'s quick simulator case."""
    agrees_in_the_simulator(SIM_SCRIPT)
