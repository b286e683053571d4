"""The linear BVH of indexzoo.native.rt.bvh on the CPU: tree invariants on ordinary and
degenerate scenes, refit, Morton codes, and the slab test against a float64 reference."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from numba import njit
from support.helpers import agrees_in_the_simulator

from indexzoo import InvalidInput
from indexzoo.native.rt.bvh import MORTON_BITS, Bvh, build_bvh, morton_codes, refit, slab


def random_boxes(n: int, seed: int = 0, scale: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lo = (rng.random((n, 3)) * scale).astype(np.float32)
    hi = lo + (rng.random((n, 3)) * scale * 0.02).astype(np.float32)
    return lo, hi


def walk_tree(bvh: Bvh) -> list[tuple[int, int, int, int]]:
    """``(record, depth, first, count)`` of every leaf, found by following child links from the
    root (left child = next record, right child = the left child's escape index)."""
    w = bvh.words()
    out = []
    stack = [(0, 1)]
    while stack:
        j, depth = stack.pop()
        if w[j, 6] < 0:
            out.append((j, depth, int(w[j, 7]), int(-w[j, 6])))
            continue
        left = j + 1
        right = left + 1 if w[left, 6] < 0 else int(w[left, 6])
        assert int(w[j, 6]) > right  # the escape index lies past both children
        stack += [(right, depth + 1), (left, depth + 1)]
    return out


def check_invariants(bvh: Bvh, lo: np.ndarray, hi: np.ndarray) -> None:
    n, ls = lo.shape[0], bvh.leaf_size
    assert bvh.n_prims == n
    m = bvh.n_nodes
    assert bvh.nodes.dtype == np.float32 and bvh.nodes.shape[1] == 8 and bvh.nodes.shape[0] >= m
    assert bvh.order.dtype == np.int32 and bvh.order.shape == (n,)
    np.testing.assert_array_equal(np.sort(bvh.order), np.arange(n))  # each primitive once
    nodes, w = bvh.nodes[:m], bvh.words()
    if n == 0:
        assert m == 1 and (nodes[0, :3] == np.inf).all() and (nodes[0, 3:6] == -np.inf).all()
        return
    assert not np.isnan(nodes[:, :6]).any()
    leaves = walk_tree(bvh)
    # every record is reached once, in pre-order; leaves partition the sorted positions in order
    assert len(leaves) == int((w[:, 6] < 0).sum()) and 2 * len(leaves) - 1 == m
    firsts = [f for _, _, f, _ in sorted(leaves)]
    counts = [c for _, _, _, c in sorted(leaves)]
    assert firsts == list(np.cumsum([0, *counts[:-1]])) and sum(counts) == n
    assert all(1 <= c <= ls for c in counts)
    assert max(d for _, d, _, _ in leaves) == bvh.depth
    inner = np.flatnonzero(w[:, 6] >= 0)
    # escape = index + subtree size, so a subtree is a contiguous run of records
    assert (w[inner, 6] <= m).all() and (w[inner, 6] > inner + 2).all()
    # inner boxes are exactly the union of their children's
    left = inner + 1
    right = np.where(w[left, 6] < 0, left + 1, w[left, 6])
    np.testing.assert_array_equal(nodes[inner, :3], np.minimum(nodes[left, :3], nodes[right, :3]))
    np.testing.assert_array_equal(nodes[inner, 3:6], np.maximum(nodes[left, 3:6], nodes[right, 3:6]))
    # leaves are exactly the union of their primitives' bounds
    slo, shi = lo[bvh.order], hi[bvh.order]
    for j, _, f, c in leaves:
        np.testing.assert_array_equal(nodes[j, :3], slo[f:f + c].min(axis=0))
        np.testing.assert_array_equal(nodes[j, 3:6], shi[f:f + c].max(axis=0))
    np.testing.assert_array_equal(nodes[0, :3], lo.min(axis=0))
    np.testing.assert_array_equal(nodes[0, 3:6], hi.max(axis=0))
    assert bvh.nbytes == bvh.nodes.nbytes + bvh.order.nbytes
    assert bvh.peak_build_bytes >= bvh.nbytes


def test_siblings_split_at_the_highest_differing_morton_bit() -> None:
    lo, hi = random_boxes(5000, seed=4)
    bvh = build_bvh(lo, hi, leaf_size=4)
    codes = morton_codes(lo, hi)[bvh.order]
    w = bvh.words()

    def span(j: int) -> tuple[int, int]:  # sorted positions under record j
        end = int(w[j, 6]) if w[j, 6] >= 0 else j + 1
        sub = w[j:end]
        leaf = sub[:, 6] < 0
        return int(sub[leaf, 7].min()), int((sub[leaf, 7] - sub[leaf, 6]).max())

    for j in np.flatnonzero(w[:, 6] >= 0)[:300]:
        f, stop = span(j)
        left_stop = span(j + 1)[1]
        a, b = int(codes[f]), int(codes[stop - 1])
        if a == b:
            continue
        h = (a ^ b).bit_length() - 1
        # the left child holds exactly the codes with bit h clear
        assert all(not (int(c) >> h) & 1 for c in codes[f:left_stop])
        assert all((int(c) >> h) & 1 for c in codes[left_stop:stop])


def test_uncompacted_builds_keep_the_worst_case_buffer() -> None:
    lo, hi = random_boxes(3000, seed=5)
    full = build_bvh(lo, hi, leaf_size=4, compact=False)
    tight = build_bvh(lo, hi, leaf_size=4)
    assert full.nodes.shape[0] == 2 * 3000 - 1 and not full.compacted and tight.compacted
    assert full.compacted_nbytes == tight.nbytes < full.nbytes
    np.testing.assert_array_equal(full.compact().nodes, tight.nodes)
    check_invariants(full, lo, hi)


@pytest.mark.parametrize("leaf_size", [1, 4, 7])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 4096, 10000])
def test_build_invariants(n: int, leaf_size: int) -> None:
    lo, hi = random_boxes(n, seed=n + leaf_size)
    bvh = build_bvh(lo, hi, leaf_size=leaf_size)
    check_invariants(bvh, lo, hi)
    # leaves follow Morton order
    codes = morton_codes(lo, hi)
    assert (np.diff(codes[bvh.order].astype(np.float64)) >= 0).all()


def _degenerate_scenes() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    same_lo = np.tile(np.float32([1, 2, 3]), (5000, 1))
    plane_lo, plane_hi = random_boxes(3000, seed=3)
    plane_lo[:, 2] = 0
    plane_hi[:, 2] = 0
    big_lo = rng.integers(0, 2**23 - 1024, (4000, 3)).astype(np.float32)
    big_hi = big_lo + rng.integers(0, 1024, (4000, 3)).astype(np.float32)
    big_lo[0], big_hi[-1] = 0, 2**23
    line_lo = np.zeros((1000, 3), np.float32)
    line_lo[:, 1] = np.arange(1000)
    huge_lo = np.float32([[-3e38, -3e38, 0], [3e38, 0, 0], [0, 3e38, 1]])
    return {
        "identical": (same_lo, same_lo + np.float32(0.5)),
        "identical-points": (same_lo, same_lo.copy()),
        "plane-z0": (plane_lo, plane_hi),
        "coords-2^23": (big_lo, big_hi),
        "line-y": (line_lo, line_lo.copy()),
        "single": (np.float32([[1, 1, 1]]), np.float32([[2, 3, 4]])),
        "single-point": (np.float32([[-5, 0, 5]]), np.float32([[-5, 0, 5]])),
        "huge": (huge_lo, huge_lo.copy()),
    }


@pytest.mark.parametrize("leaf_size", [1, 4, 7])
@pytest.mark.parametrize("name", list(_degenerate_scenes()))
def test_degenerate_scenes(name: str, leaf_size: int) -> None:
    lo, hi = _degenerate_scenes()[name]
    with np.errstate(all="raise"):  # no division by zero, no invalid (NaN) operations
        codes = morton_codes(lo, hi)
        bvh = build_bvh(lo, hi, leaf_size=leaf_size)
    assert codes.dtype == np.uint64 and int(codes.max()) < 2**63
    check_invariants(bvh, lo, hi)
    if name.startswith("identical"):
        assert (codes == 0).all()
        np.testing.assert_array_equal(bvh.order, np.arange(lo.shape[0]))  # stable sort
        assert bvh.depth <= 2 + int(np.log2(lo.shape[0]))  # equal codes split in halves by position


@pytest.mark.parametrize("n, leaf_size", [(0, 4), (1, 1), (5, 4), (4096, 7), (10000, 4)])
def test_refit(n: int, leaf_size: int) -> None:
    lo, hi = random_boxes(n, seed=11)
    bvh = build_bvh(lo, hi, leaf_size=leaf_size)
    old = bvh.nodes.copy()
    rng = np.random.default_rng(12)
    move = (rng.normal(size=(n, 3)) * 10).astype(np.float32)
    grow = (rng.random((n, 3)) * 3).astype(np.float32)
    lo2, hi2 = lo + move, hi + move + grow
    new = refit(bvh, lo2, hi2)
    assert new.order is bvh.order
    assert (new.n_nodes, new.depth, new.leaf_size) == (bvh.n_nodes, bvh.depth, bvh.leaf_size)
    np.testing.assert_array_equal(new.words()[:, 6:], bvh.words()[:, 6:])  # same topology
    check_invariants(new, lo2, hi2)
    np.testing.assert_array_equal(bvh.nodes, old)  # the old BVH is untouched
    with pytest.raises(InvalidInput):
        refit(bvh, lo2[: max(n - 1, 0)] if n else np.zeros((1, 3), np.float32),
              hi2[: max(n - 1, 0)] if n else np.zeros((1, 3), np.float32))


def test_bytes_and_validation() -> None:
    lo, hi = random_boxes(1000)
    b32 = build_bvh(lo, hi)
    b64 = build_bvh(lo.astype(np.float64), hi.astype(np.float64))
    np.testing.assert_array_equal(b32.nodes, b64.nodes)
    assert b64.peak_build_bytes == b32.peak_build_bytes + lo.nbytes + hi.nbytes  # float32 copies
    assert b32.peak_build_bytes >= 32 * 1000
    for bad in (0, 33, 2.5, True):
        with pytest.raises(InvalidInput):
            build_bvh(lo, hi, leaf_size=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        build_bvh(lo[:, :2], hi[:, :2])
    with pytest.raises(InvalidInput):
        build_bvh(lo, hi[:-1])


def _interleave(x: int, y: int, z: int) -> int:
    code = 0
    for k in range(MORTON_BITS):
        code |= ((x >> k) & 1) << (3 * k + 2) | ((y >> k) & 1) << (3 * k + 1) | ((z >> k) & 1) << (3 * k)
    return code


def test_morton_bit_interleave() -> None:
    top = 2**MORTON_BITS - 1
    rng = np.random.default_rng(1)
    q = rng.integers(0, top + 1, (300, 3))
    q[0], q[1] = 0, top + 1  # centroid bounds [0, 2**21]: one cell per unit, the maximum clamped
    c = q.astype(np.float32)  # exact below 2**24
    codes = morton_codes(c, c)
    q[1] = top
    assert codes.dtype == np.uint64
    assert [int(v) for v in codes] == [_interleave(*map(int, row)) for row in q]
    assert int(codes[0]) == 0 and int(codes[1]) == 2**63 - 1


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_morton_increases_along_each_axis(axis: int) -> None:
    t = np.linspace(-50, 50, 2000, dtype=np.float32)
    lo = np.full((t.size, 3), 3, np.float32)
    lo[:, axis] = t
    hi = lo + np.float32(1)
    codes = morton_codes(lo, hi)
    assert (np.diff(codes.astype(np.float64)) > 0).all()
    assert int(codes[0]) == 0 and int(codes[-1]) == _interleave(*[2**MORTON_BITS - 1 if a == axis else 0
                                                                  for a in range(3)])


@njit
def _slab_records(nodes, o, inv, tmin, tmax):  # type: ignore[no-untyped-def]
    n = nodes.shape[0]
    hit = np.empty(n, np.bool_)
    tnear = np.empty(n, np.float32)
    for k in range(n):
        hit[k], tnear[k] = slab(nodes, k, o[k, 0], o[k, 1], o[k, 2],
                                inv[k, 0], inv[k, 1], inv[k, 2], tmin[k], tmax[k])
    return hit, tnear


def _slab_all(lo, hi, o, inv, tmin, tmax):  # type: ignore[no-untyped-def]
    nodes = np.zeros((lo.shape[0], 8), np.float32)
    nodes[:, :3], nodes[:, 3:6] = lo, hi
    return _slab_records(nodes, o, inv, tmin, tmax)


def _slab_reference(lo, hi, o, inv, tmin, tmax):  # type: ignore[no-untyped-def]
    """float64 slab test; also how far each decision is from a tie."""
    lo, hi, o, inv = (a.astype(np.float64) for a in (lo, hi, o, inv))
    tmin, tmax = tmin.astype(np.float64), tmax.astype(np.float64)
    zero = np.isinf(inv)
    inside = (lo <= o) & (o <= hi)
    with np.errstate(invalid="ignore", over="ignore"):
        t0, t1 = (lo - o) * inv, (hi - o) * inv
    tlo = np.where(zero, np.where(inside, -np.inf, np.inf), np.minimum(t0, t1))
    thi = np.where(zero, np.where(inside, np.inf, -np.inf), np.maximum(t0, t1))
    tn, tf = tlo.max(axis=1), thi.min(axis=1)
    empty = (lo > hi).any(axis=1)
    hit = ~empty & (tn <= tf) & (tn < tmax) & (tf > tmin)

    def gap(a, b):  # type: ignore[no-untyped-def]
        fin = np.isfinite(a) & np.isfinite(b)
        with np.errstate(invalid="ignore"):
            return np.where(fin, np.abs(a - b) / (1 + np.abs(a) + np.abs(b)), np.inf)

    margin = np.minimum(np.minimum(gap(tn, tf), gap(tn, tmax)), gap(tf, tmin))
    return hit, np.maximum(tn, tmin), np.where(empty, np.inf, margin)


def test_slab_matches_float64_reference() -> None:
    rng = np.random.default_rng(3)
    n = 20000
    lo = rng.uniform(-2, 2, (n, 3)).astype(np.float32)
    hi = lo + rng.uniform(0, 1.5, (n, 3)).astype(np.float32)
    flat = rng.random((n, 3)) < 0.1  # zero-thickness slabs
    hi[flat] = lo[flat]
    o = rng.uniform(-3, 3, (n, 3)).astype(np.float32)
    inner = rng.random(n) < 0.2  # rays starting inside the box
    o[inner] = ((lo[inner] + hi[inner]) / 2).astype(np.float32)
    d = rng.normal(size=(n, 3)).astype(np.float32)
    d[rng.random((n, 3)) < 0.3] = 0  # axis-parallel rays (some with d == 0 entirely)
    on_face = (d == 0) & (rng.random((n, 3)) < 0.3)  # zero-direction origin exactly on a face
    o[on_face] = np.where(rng.random(on_face.sum()) < 0.5, lo[on_face], hi[on_face])
    empty = rng.random(n) < 0.1
    lo[empty, 0], hi[empty, 0] = hi[empty, 0] + 1, lo[empty, 0]  # inverted on one axis
    padding = np.flatnonzero(empty)[:100]
    lo[padding], hi[padding] = np.inf, -np.inf  # the padding box
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(np.inf)).astype(np.float32)
    tmin = np.where(rng.random(n) < 0.5, 0, rng.uniform(-1, 1, n)).astype(np.float32)
    tmax = np.where(rng.random(n) < 0.5, np.inf, tmin + rng.uniform(0, 3, n)).astype(np.float32)
    hit, tnear = _slab_all(lo, hi, o, inv, tmin, tmax)
    ref_hit, ref_tnear, margin = _slab_reference(lo, hi, o, inv, tmin, tmax)
    clear = margin > 1e-5  # decisions within float32 rounding of a tie may go either way
    assert clear.mean() > 0.95
    np.testing.assert_array_equal(hit[clear], ref_hit[clear])
    assert 0.1 < ref_hit.mean() < 0.9 and not hit[empty].any()
    both = clear & ref_hit
    np.testing.assert_allclose(tnear[both], ref_tnear[both], rtol=1e-5, atol=1e-5)
    start = both & inner  # starting inside: entered at t <= 0
    assert start.any() and (tnear[start] <= np.maximum(tmin[start], 0)).all()


def test_slab_exact_cases() -> None:
    inf = np.float32(np.inf)
    box_lo = np.float32([[0, 0, 0]])
    box_hi = np.float32([[1, 1, 1]])

    def one(o, d, tmin=0.0, tmax=np.inf, lo=box_lo, hi=box_hi):  # type: ignore[no-untyped-def]
        inv = np.float32([1 / c if c != 0 else inf for c in d])
        h, t = _slab_all(lo, hi, np.float32([o]), inv[None], np.float32([tmin]), np.float32([tmax]))
        return bool(h[0]), float(t[0])

    assert one([-1, 0.5, 0.5], [1, 0, 0]) == (True, 1.0)  # axis-parallel through the box
    assert one([-1, 1, 0.5], [1, 0, 0]) == (True, 1.0)  # grazing the face y = 1
    assert one([-1, 1, 1], [1, 0, 0]) == (True, 1.0)  # along an edge
    assert one([-1, 1.0001, 0.5], [1, 0, 0])[0] is False  # just outside the slab
    assert one([-1, -1, 0.5], [1, 1, 0]) == (True, 1.0)  # through the corner only
    assert one([0.5, 0.5, 0.5], [0, 0, 1]) == (True, 0.0)  # starting inside
    assert one([0.5, 0.5, 0.5], [0, 0, 0]) == (True, 0.0)  # a point inside, d == 0
    assert one([0.5, 0.5, 2], [0, 0, 0])[0] is False  # a point outside
    assert one([0.5, 0.5, -1], [0, 0, 1], tmax=1.0)[0] is False  # open interval: t = 1 excluded
    assert one([0.5, 0.5, -1], [0, 0, 1], tmax=1.0001)[0] is True
    assert one([0.5, 0.5, 2], [0, 0, 1])[0] is False  # box behind the ray
    assert one([0.5, 0.5, 2], [0, 0, -1], tmin=3.0)[0] is False  # box exits at t = 2 < tmin
    assert one([0.5, 0.5, 2], [0, 0, -1], tmin=1.5) == (True, 1.5)
    assert one([0, 0, -1], [0, 0, 1], lo=np.float32([[0, 0, 0]]), hi=np.float32([[0, 0, 0]])) == (True, 1.0)
    empty_lo, empty_hi = np.full((1, 3), inf), np.full((1, 3), -inf)
    for o, d in (([0, 0, 0], [1, 0, 0]), ([0, 0, 0], [0, 0, 0]), ([5, -3, 2], [-1, 2, 0.5])):
        assert one(o, d, lo=empty_lo, hi=empty_hi)[0] is False
        assert one(o, d, lo=box_lo, hi=np.float32([[1, -1, 1]]))[0] is False


TOPOLOGY_SCRIPT = textwrap.dedent("""
    import numpy as np
    from indexzoo.native.rt import bvh as B

    rng = np.random.default_rng(12)
    for n, leaf_size in ((300, 1), (300, 4), (257, 7)):
        codes = np.sort(rng.integers(0, 2**20, n, dtype=np.uint64))
        codes[50:90] = codes[50]  # a run of equal codes
        outs = []
        for dev in ("cpu", "cuda"):
            m = n - 1
            first, last, split = (np.full(m, -9, np.int64) for _ in range(3))
            iparent = np.zeros(m, np.int64)
            pparent = np.full(n, -9, np.int64)
            B._RADIX(dev, m, codes, np.int64(n), first, last, split, iparent, pparent)
            start = np.zeros(n, np.int64)
            ls = np.int64(leaf_size)
            B._LEAF_START(dev, m + n, np.int64(n), ls, first, last, iparent, pparent, start)
            before = np.zeros(n + 1, np.int64)
            np.cumsum(start, out=before[1:])
            k = 2 * int(before[-1]) - 1
            words = np.full((k, 2), -99, np.int32)
            right = np.zeros(k, np.int64)
            level = np.full(k, -9, np.int64)
            B._RECORD(dev, m + n, np.int64(n), ls, first, last, split, iparent, pparent,
                      before, words, right, level)
            outs.append((first, last, split, iparent, pparent, words, right, level))
        for a, b in zip(*outs):
            assert np.array_equal(a, b), (n, leaf_size)
        assert (outs[0][5] != -99).all() and (outs[0][7] >= 0).all()  # every record written
        # the boxes, leaves then inner nodes level by level, on both devices
        words, levels, k = B._topology(np, codes, leaf_size)
        slo = rng.random((n, 3)).astype(np.float32)
        shi = slo + np.float32(0.5)
        boxes = []
        for dev in ("cpu", "cuda"):
            nodes = np.full((k, 8), np.nan, np.float32)
            leaves = np.concatenate(levels.leaf)
            B._LEAF_BOX(dev, leaves.shape[0], leaves, words, slo, shi, nodes)
            for pre in levels.pre[::-1]:
                B._INNER_BOX(dev, pre.shape[0], pre, levels.right, nodes)
            boxes.append(nodes[:, :6])
        assert np.array_equal(boxes[0], boxes[1]) and not np.isnan(boxes[0]).any()
    print("simulator agrees")
""")


def test_the_topology_kernels_agree_between_njit_and_the_cuda_simulator() -> None:
    """The radix tree, the leaf cut, the record placement and the box passes give the CPU's
    records through ``cuda.jit``."""
    agrees_in_the_simulator(TOPOLOGY_SCRIPT)
