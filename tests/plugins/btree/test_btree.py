"""``btree`` beyond the conformance suite: every node width and leaf fill, runs of duplicates
spanning leaves, the structure's invariants, and identical answers from the CPU twin and the
cooperative GPU kernels; the leaf layouts (conformance suites of their own, edge cases, and the
GPU bodies under numba's CUDA simulator)."""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np
import pytest
from support.helpers import agrees_in_the_simulator, assert_identical, assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES
from indexzoo.conformance import ConformanceSuite
from indexzoo.devices import to_numpy
from indexzoo.plugins.btree import kernels as btree
from indexzoo.plugins.btree.kernels import build_btree


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


def _cpu_and_gpu_agree(params: dict[str, Any], gpu_params: dict[str, Any], *, seed: int,
                       n: int, span: float) -> None:
    """The CPU twin and the GPU kernels of btree(``params``) answer alike in every out mode:
    ``n`` random 64-bit keys (a third of them repeated), ``n/8`` present and ``n/32`` random
    point lookups, ``n/64`` ranges ``span`` wide from a key."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    keys[::3] = rng.choice(keys, keys[::3].shape[0])
    q = np.concatenate([rng.choice(keys, n // 8), rng.integers(0, 2**64 - 1, n // 32,
                                                               dtype=np.uint64)])
    lo = rng.choice(keys, n // 64)
    hi = np.maximum(lo, np.minimum(lo.astype(np.float64) + span, 2.0**64 - 1).astype(np.uint64))
    cpu = indexzoo.create("btree", device="cpu", **params).build(keys)
    gpu = indexzoo.create("btree", device="cuda", **params, **gpu_params).build(keys)
    for m in OUT_MODES:
        assert_identical(cpu.point(q, out=m), gpu.point(q, out=m), f"point {m}")
        assert_identical(cpu.range(lo, hi, out=m), gpu.range(lo, hi, out=m), f"range {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("width, fill", [(8, 0.5), (16, 1.0), (32, 1.0)])
def test_cpu_twin_and_gpu_kernels_agree(width: int, fill: float) -> None:
    _cpu_and_gpu_agree({"node_width": width, "leaf_fill": fill}, {}, seed=5, n=1 << 18,
                       span=2.0**50)


# ---------------------------------------------------------------- leaf layouts
VARIANTS = [{"leaf_layout": "interleaved"}, {"leaf_layout": "paired"},
            {"leaf_layout": "paired", "node_width": 8, "leaf_fill": 0.5}]
#: the suite in the README's tier: the options combined; the others in the exhaustive tier
QUICK_VARIANTS = (VARIANTS[-1],)


def _label(params: dict[str, object]) -> str:
    return "_".join(str(v).replace(".", "") for v in params.values())


for _p in VARIANTS:
    _name = f"TestConformance_btree_{_label(_p)}"
    _cls = type(_name, (ConformanceSuite,), {"index": "btree", "params": _p,
                                             "__module__": __name__})
    globals()[_name] = _cls if _p in QUICK_VARIANTS else pytest.mark.exhaustive(_cls)

LAYOUTS = list(btree.LEAF_LAYOUTS)


def _shapes() -> list[Any]:
    """Every layout at node width 16 and uint64 keys, and two other shapes, in the README's
    test command; every combination with widths 8 (half-full leaves), 16 and 32 and both key
    dtypes in the exhaustive tier (each combination compiles its own kernels)."""
    quick = {(lay, 16, 1.0, np.uint64) for lay in LAYOUTS}
    quick |= {("paired", 8, 0.5, np.uint32), ("interleaved", 32, 1.0, np.uint32)}
    out = []
    for lay in LAYOUTS:
        for width, fill in ((8, 0.5), (16, 1.0), (32, 1.0)):
            for dtype in (np.uint32, np.uint64):
                case = (lay, width, fill, dtype)
                out.append(case if case in quick else pytest.param(
                    *case, marks=pytest.mark.exhaustive))
    return out


@pytest.mark.parametrize("layout, width, fill, dtype", _shapes())
def test_layouts_answer_like_the_reference(layout: str, width: int, fill: float, dtype: type,
                                           device: str) -> None:
    """Duplicates spanning leaves, misses below and above every key (and the dtype's extremes,
    which are also the padding value), ranges over many leaves, every out mode."""
    rng = np.random.default_rng(width)
    top = np.iinfo(dtype).max
    n = 40 * width + 7  # several inner levels at width 8, a partial last leaf and node
    keys = np.sort(rng.integers(10, top - 10, n, dtype=dtype)).astype(dtype)
    keys[100:100 + 3 * width + 1] = keys[100]  # a run over more than three leaves
    keys[-5:] = top - 5  # a run in the last leaf
    keys = keys[rng.permutation(n)]
    values = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    uniq = np.unique(keys)
    q = np.concatenate([uniq, uniq - 1, uniq + 1,  # hits and near misses
                        np.array([0, 1, 9, top - 4, top - 1, top], dtype=dtype)]).astype(dtype)
    lo = np.concatenate([np.array([0, 0, top - 4, top, 0], dtype=dtype), rng.choice(keys, 40),
                         uniq[::50]])
    span = lo[5:45] + np.minimum(top - lo[5:45], dtype(top // 8))  # about n/8 keys each
    hi = np.concatenate([np.array([top, 9, top, top, 0], dtype=dtype), span, uniq[::50] + 1])
    index = indexzoo.create("btree", device=device, node_width=width, leaf_fill=fill,
                            leaf_layout=layout).build(keys, values)
    assert index.height >= (2 if width == 8 else 1)
    miss = int(index.miss)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES}, reference(keys, q, q, values),
                   miss)
    assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                   reference(keys, lo, hi, values), miss)
    # rowid is the first match in key order (stable sort), as with the default tree
    default = indexzoo.create("btree", device=device, node_width=width,
                              leaf_fill=fill).build(keys, values)
    assert_identical(default.point(q, out="rowid"), index.point(q, out="rowid"))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [0, 1, 5, 16, 17])
def test_layouts_on_tiny_and_empty_indexes(layout: str, n: int) -> None:
    keys = np.arange(3, 3 + 2 * n, 2, dtype=np.uint64)
    index = indexzoo.create("btree", device="cpu", leaf_layout=layout).build(keys)
    q = np.array([0, 3, 4, 3 + 2 * n, 2**64 - 1, *keys.tolist()], dtype=np.uint64)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES}, reference(keys, q, q),
                   int(index.miss))
    lo, hi = np.array([0, 4, 0], np.uint64), np.array([2**64 - 1, 2 * n, 2], np.uint64)
    assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES}, reference(keys, lo, hi),
                   int(index.miss))


@pytest.mark.parametrize("layout", ["interleaved", "paired"])
@pytest.mark.parametrize("key_dtype, rowid_dtype", [(np.uint64, np.uint32), (np.uint32, np.uint32),
                                                    (np.uint32, np.uint64), (np.uint64, np.uint64)])
def test_record_layouts_widen_to_the_wider_dtype(layout: str, key_dtype: type,
                                                 rowid_dtype: type) -> None:
    n, width = 1000, 16
    rng = np.random.default_rng(1)
    keys = np.sort(rng.integers(0, np.iinfo(key_dtype).max, n, dtype=key_dtype))
    rowids = rng.permutation(n).astype(rowid_dtype)
    if rowid_dtype == np.uint64:
        rowids += np.uint64(2**40)  # beyond 32 bits: must survive the record
    tree = build_btree(keys, rowids, width, 1.0, layout)
    split = build_btree(keys, rowids, width, 1.0)
    item = max(np.dtype(key_dtype).itemsize, np.dtype(rowid_dtype).itemsize)
    assert tree.leaf_keys is tree.leaf_rowids and tree.leaf_keys.dtype == np.dtype(f"u{item}")
    leaves = -(-n // width)
    rec = to_numpy(tree.leaf_keys).reshape(leaves, 2 * width)
    if layout == "interleaved":
        k, r = rec[:, :width], rec[:, width:]
    else:
        k, r = rec[:, 0::2], rec[:, 1::2]
    np.testing.assert_array_equal(k, to_numpy(split.leaf_keys).reshape(leaves, width))
    np.testing.assert_array_equal(r, to_numpy(split.leaf_rowids).reshape(leaves, width))
    assert tree.breakdown()["leaf_records"] == leaves * width * 2 * item
    assert "leaf_keys" not in tree.breakdown()
    # the kernels read the records: find every key's rowID (the first of equal keys)
    ops = btree.operations(layout)
    out = np.empty(n, rowid_dtype)
    ops.FIND_ROWID("cpu", n, tree.record(), keys, keys, out, rowid_dtype(0))
    first = np.searchsorted(keys, keys)
    np.testing.assert_array_equal(out, rowids[first])


def test_record_layout_footprint_counts_the_records_once() -> None:
    n = 1 << 14
    keys = np.arange(n, dtype=np.uint64)
    split = indexzoo.create("btree", device="cpu").build(keys).memory_footprint().breakdown
    for layout in ("interleaved", "paired"):
        fp = indexzoo.create("btree", device="cpu", leaf_layout=layout).build(
            keys).memory_footprint().breakdown
        assert fp["leaf_records"] == n * 16  # uint64 keys, rowIDs widened to 8 bytes
        assert {k: v for k, v in fp.items() if k != "leaf_records"} == {
            k: v for k, v in split.items() if k not in ("leaf_keys", "leaf_rowids")}


SIM_SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from indexzoo.plugins.btree import kernels as btree
    from indexzoo.native.csr import offsets_from_counts
    from indexzoo.native.sort import sort_pairs

    rng = np.random.default_rng(11)
    cases = CASES
    for dtype_name, width, layout in cases:
        dtype = np.dtype(dtype_name).type
        keys = rng.integers(0, 90, 300).astype(dtype)
        keys[:40] = 50  # a run over several leaves
        pairs = sort_pairs(keys, np.uint32)
        tree = btree.build_btree(pairs.keys, pairs.rowids, width, 1.0, layout).record()
        ops = btree.operations(layout)
        lo = rng.integers(0, 100, 24).astype(dtype)
        lo[:3] = [50, 0, 95]
        hi = lo + rng.integers(0, 6, 24).astype(dtype)
        hi[1] = 99
        values = rng.integers(0, 2**63, 300, dtype=np.uint64)
        miss = np.uint32(2**32 - 1)

        def all_agree(op, *args, out_at):
            outs = []
            # the CPU, the one-thread body through cuda.jit, the cooperative body
            for device, group in (("cpu", 1), ("cuda", 1), ("cuda", width)):
                a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
                op(device, 24, *a, group=group, threads_per_block=32)
                outs.append(a[out_at])
            for o in outs[1:]:
                assert np.array_equal(outs[0], o), (op, dtype, layout, outs)
            return outs[0]

        all_agree(ops.FIND_ROWID, tree, lo, hi, np.empty(24, np.uint32), miss, out_at=3)
        counts = all_agree(ops.COUNT, tree, lo, hi, np.empty(24, np.int64), out_at=3)
        assert counts[0] >= 40 and counts[1] == 300, counts
        all_agree(ops.SUM, tree, values, np.bool_(True), lo, hi, np.empty(24, np.uint64),
                  out_at=5)
        offsets = offsets_from_counts(counts)
        total = int(offsets[-1])
        sets = []
        for device, group in (("cpu", 1), ("cuda", 1), ("cuda", width)):
            out = np.empty(total, np.uint32)
            ops.FILL(device, 24, tree, lo, hi, offsets, out, group=group, threads_per_block=32)
            sets.append([sorted(out[offsets[i]:offsets[i + 1]]) for i in range(24)])
        assert sets[0] == sets[1] == sets[2]
    print("simulator agrees")
""")


SIM_CASES = [("uint32", 8, "paired")]
SIM_CASES_MORE = [("uint32", 8, "interleaved"), ("uint64", 16, "paired"),
                  ("uint64", 8, "split")]


def test_layouts_agree_with_the_cpu_in_the_simulator() -> None:
    """The one-thread bodies through cuda.jit and the cooperative bodies, per leaf layout,
    under numba's CUDA simulator (one case here, three more in the exhaustive tier: the
    simulator runs every thread in Python)."""
    agrees_in_the_simulator(SIM_SCRIPT.replace("CASES", repr(SIM_CASES)))


@pytest.mark.exhaustive
def test_more_layouts_agree_with_the_cpu_in_the_simulator() -> None:
    """The same for 64-bit keys, node width 16 and the split layout."""
    agrees_in_the_simulator(SIM_SCRIPT.replace("CASES", repr(SIM_CASES_MORE)))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("cooperative", [False, True])
def test_layouts_agree_between_cpu_and_gpu(layout: str, cooperative: bool) -> None:
    _cpu_and_gpu_agree({"leaf_layout": layout}, {"cooperative": cooperative}, seed=9,
                       n=1 << 16, span=2.0**52)
