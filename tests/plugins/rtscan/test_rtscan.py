"""``rtscan`` beyond the conformance suite (the paper's §4): every bitmap compared bit for bit
with a NumPy brute force on the original values, for the operators and the sieve's borders,
positive/negative selection, skew and duplicates, small domains, float32 precision (epsilon,
codes past 2^24, keys near 2^32), parameter invariance, conjunctions of 1 to 5 columns and
their groupings, point lookups, the footprint, the presets, the query layer's ``BITMAP``
operation, the GPU paths under numba's simulator, stage timing and the benchmark script."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.helpers import agrees_in_the_simulator

import indexzoo
from indexzoo import ConfigError, ResourceError
from indexzoo.devices import to_numpy
from indexzoo.native.rt import query
from indexzoo.native.rt.bvh import slab_box
from indexzoo.native.rt.geometry import AABBS
from indexzoo.native.rt.trace import build_gas
from indexzoo.plugins.rtscan import PRESET_CLASSES, RtscanIndex, StageTimes
from indexzoo.plugins.rtscan.encoding import ColumnTables, rank_bounds, sorted_bounds
from indexzoo.plugins.rtscan.layout import (
    AXIS,
    NA,
    NB,
    NZ,
    box_ray,
    cube_boxes,
    geometry,
    paper_eps,
    plan_rays,
)
from indexzoo.plugins.rtscan.params import MAX_CUBE_WIDTH, MAX_RAY_LENGTH
from indexzoo.plugins.rtscan.plan import CLEAR, NO_UNSET, SKIP_COL
from indexzoo.plugins.rtscan.refine import direct_plan, direct_strided, refine_rt
from indexzoo.plugins.rtscan.regions import refine_boxes
from indexzoo.plugins.rtscan.sieve import SEL_COLUMNS, approximate_sel, choose

U32 = np.uint32
TOP32 = 2**32 - 1
REPO = Path(__file__).parents[3]


# ============================================================================ helpers
def oracle(cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The packed bitmaps (Q, ceil(N/32)) of ``lo[:, j] <= cols[j] <= hi[:, j]`` for all j."""
    n = cols[0].shape[0]
    mask = np.ones((lo.shape[0], n), dtype=bool)
    for j, c in enumerate(cols):
        mask &= (c[None, :] >= lo[:, j:j + 1]) & (c[None, :] <= hi[:, j:j + 1])
    words = (n + 31) // 32
    padded = np.zeros((lo.shape[0], words * 32), dtype=bool)
    padded[:, :n] = mask
    return np.packbits(padded, axis=1, bitorder="little").view("<u4").astype(np.uint32)


def make(cols: list[np.ndarray], name: str = "rtscan", device: str = "cpu",
         **params: Any) -> RtscanIndex:
    """An index over ``cols``. ``rtscan`` here is the paper's RTScan (the RT refine) unless the
    test names a refine: its default picks the direct refine on the software engine."""
    if name == "rtscan":
        params.setdefault("refine", "rt")
    index = indexzoo.create(name, device=device, **params).build(np.column_stack(cols))
    assert isinstance(index, RtscanIndex)
    return index


def bitmap(index: RtscanIndex, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return to_numpy(index.range(lo, hi, out="bitmap").bitmap)


def check(index: RtscanIndex, cols: list[np.ndarray], lo: Any, hi: Any,
          label: str = "") -> np.ndarray:
    """The index's bitmaps equal the brute force's; returns them."""
    lo, hi = np.asarray(lo), np.asarray(hi)
    got, want = bitmap(index, lo, hi), oracle(cols, lo, hi)
    if not np.array_equal(got, want):
        bad = np.nonzero((got != want).any(axis=1))[0]
        diff = np.unpackbits(got[bad[0]].view(np.uint8), bitorder="little") ^ \
            np.unpackbits(want[bad[0]].view(np.uint8), bitorder="little")
        raise AssertionError(f"{label}: {bad.size} of {lo.shape[0]} bitmaps differ; query "
                             f"{bad[0]} ({lo[bad[0]]}..{hi[bad[0]]}) on rows "
                             f"{np.flatnonzero(diff)[:10]}")
    return got


def table(kind: str, n: int, d: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return [rng.integers(0, TOP32, n, dtype=np.uint64, endpoint=True).astype(U32)
                for _ in range(d)]
    if kind == "small":
        return [rng.integers(0, 64, n).astype(U32) for _ in range(d)]
    raise ValueError(kind)


def lt_bounds(cols: list[np.ndarray], sel: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """The artifact's workload: ``x_j < c`` with ``c`` at each selectivity (per column)."""
    srt = [np.sort(c) for c in cols]
    n = cols[0].shape[0]
    hi = np.array([[int(s[min(int(f * n), n - 1)]) - 1 if f < 1 else TOP32 for s in srt]
                   for f in sel], dtype=np.int64)
    lo = np.zeros_like(hi)
    empty = hi < 0
    lo[empty], hi[empty] = 1, 0
    return lo.astype(U32), hi.astype(U32)


def random_bounds(cols: list[np.ndarray], q: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds between two values of each column (sometimes open, sometimes inverted)."""
    rng = np.random.default_rng(seed)
    n = cols[0].shape[0]
    lo = np.stack([c[rng.integers(0, n, q)] for c in cols], axis=1).astype(np.int64)
    hi = np.stack([c[rng.integers(0, n, q)] for c in cols], axis=1).astype(np.int64)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    lo[rng.random(lo.shape) < 0.15] = 0
    hi[rng.random(hi.shape) < 0.15] = TOP32
    return lo.astype(U32), hi.astype(U32)


@pytest.fixture(scope="module")
def uniform3() -> list[np.ndarray]:
    return table("uniform", 3000, 3, 11)


@pytest.fixture(scope="module")
def built(uniform3: list[np.ndarray]) -> RtscanIndex:
    """``rtscan`` over three uniform columns, K = 32 bins of 4 fine bins each (so the 128 fine
    bins hold ~23 rows; the default 32 x 32 would leave ~3)."""
    return make(uniform3, sieve_vectors=32, sieve_fine=4)


def reference_ranks(index: RtscanIndex, lo: np.ndarray, hi: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The rank intervals (Q, d) of the bounds by the host references: the mapping tables
    (paper layout), or a binary search in the whole sorted column (compact layout)."""
    st = index.state
    t = st.tables
    q, d = lo.shape
    x0, x1 = np.empty((q, d), np.int64), np.empty((q, d), np.int64)
    for j in range(d):
        if isinstance(t, ColumnTables):
            x0[:, j], x1[:, j] = (to_numpy(a) for a in rank_bounds(t.uniq[j], t.starts[j],
                                                                  lo[:, j], hi[:, j]))
        else:
            srt = np.sort(to_numpy(st.lc[:, j]))
            x0[:, j], x1[:, j] = sorted_bounds(srt, lo[:, j], hi[:, j])
    return x0, x1


# ============================================================================ operators, borders
def test_constants_below_the_minimum_at_it_at_the_maximum_and_above(
        uniform3: list[np.ndarray], built: RtscanIndex) -> None:
    c = uniform3[0]
    mn, mx = int(c.min()), int(c.max())
    rest_lo, rest_hi = [0, 0], [TOP32, TOP32]
    cases = []
    for v in (0, mn - 1, mn, mn + 1, mx - 1, mx, mx + 1, TOP32):
        v = min(max(v, 0), TOP32)
        cases += [([0, *rest_lo], [v, *rest_hi]),       # x <= v
                  ([v, *rest_lo], [TOP32, *rest_hi]),   # x >= v
                  ([v, *rest_lo], [v, *rest_hi])]       # x = v
    lo = np.array([a for a, _ in cases], dtype=U32)
    hi = np.array([b for _, b in cases], dtype=U32)
    check(built, uniform3, lo, hi, "extremes")


def test_every_operator_is_a_pair_of_inclusive_bounds(uniform3: list[np.ndarray],
                                                      built: RtscanIndex) -> None:
    """<, <=, >, >=, = and BETWEEN on a value that is in the column, mixed over columns."""
    v = [int(np.sort(c)[1000]) for c in uniform3]
    ops = {"<": (0, lambda x: x - 1), "<=": (0, lambda x: x), ">": (1, lambda x: x + 1),
           ">=": (1, lambda x: x), "=": (2, lambda x: x)}
    lo_rows, hi_rows = [], []
    for op_x in ops.values():
        for op_y in ops.values():
            lo, hi = [], []
            for (kind, f), x in zip((op_x, op_y, ops["<="]), v, strict=True):
                if kind == 0:
                    lo.append(0)
                    hi.append(f(x))
                elif kind == 1:
                    lo.append(f(x))
                    hi.append(TOP32)
                else:
                    lo.append(x)
                    hi.append(x)
            lo_rows.append(lo)
            hi_rows.append(hi)
    lo_rows.append([v[0] - 5000, v[1], 0])  # BETWEEN
    hi_rows.append([v[0] + 5000, v[1] + 10**8, v[2]])
    check(built, uniform3, np.array(lo_rows, U32), np.array(hi_rows, U32), "operators")


def test_constants_on_a_sieve_border_one_below_and_one_above(uniform3: list[np.ndarray],
                                                             built: RtscanIndex) -> None:
    """Borders are ranks; their values (and +-1) as upper and lower bounds, in the first and
    last bin too."""
    srt = np.sort(uniform3[0])
    bounds = to_numpy(built.state.sieve.bounds[0])
    values = [int(srt[r]) for r in bounds[1:-1]]
    assert len(values) == 32 * 4 - 1  # both levels' borders
    consts = sorted({min(max(v + dv, 0), TOP32) for v in [*values, int(srt[0]), int(srt[-1])]
                     for dv in (-1, 0, 1)})
    lo = np.array([[0, 0, 0]] * len(consts) + [[c, 0, 0] for c in consts], dtype=U32)
    hi = np.array([[c, TOP32, TOP32] for c in consts] + [[TOP32] * 3] * len(consts), dtype=U32)
    check(built, uniform3, lo, hi, "borders")


def test_empty_and_full_ranges(uniform3: list[np.ndarray], built: RtscanIndex) -> None:
    lo = np.array([[0, 0, 0], [5, 0, 0], [0, 0, 9], [TOP32, TOP32, TOP32], [0, 1, 0]], U32)
    hi = np.array([[TOP32] * 3, [4, TOP32, TOP32], [TOP32, TOP32, 8], [TOP32] * 3,
                   [TOP32, 0, TOP32]], U32)
    got = check(built, uniform3, lo, hi, "empty/full")
    assert np.unpackbits(got[0].view(np.uint8)).sum() == 3000
    assert not got[1:3].any() and not got[4].any()


# ============================================================================ selection
@pytest.mark.parametrize("encoding", [True, False])
def test_positive_negative_and_auto_selection_give_identical_bitmaps(
        uniform3: list[np.ndarray], encoding: bool, device: str) -> None:
    lo, hi = random_bounds(uniform3, 60, 3)
    lt_lo, lt_hi = lt_bounds(uniform3, [i / 10 for i in range(11)])
    lo, hi = np.concatenate([lo, lt_lo]), np.concatenate([hi, lt_hi])
    results = [check(make(uniform3, device=device, sieve_vectors=16, selection=s,
                          encoding=encoding), uniform3, lo, hi, s)
               for s in ("auto", "positive", "negative")]
    assert all(np.array_equal(r, results[0]) for r in results)


def test_selection_takes_the_nearer_border_and_a_tie_goes_negative() -> None:
    """Unique values 0..1023 (rank = value), K = 16 and one level: borders every 64 ranks."""
    col = np.random.default_rng(1).permutation(1024).astype(U32)
    index = make([col], sieve_vectors=16, sieve_fine=0)
    sieve = index.state.sieve
    x = np.array
    # upper side, x < x1: 64 < x1 < 128; nearer 64 positive, nearer 128 or the middle negative
    up = choose(sieve, 0, x([0, 0, 0]), x([70, 96, 120]), "auto")
    assert up.a1.tolist() == [64, 128, 128]
    # lower side, x >= x0: positive = the subset [128, ...), negative = the superset [64, ...)
    low = choose(sieve, 0, x([70, 96, 120]), x([1024] * 3), "auto")
    assert low.a0.tolist() == [64, 64, 128]
    assert choose(sieve, 0, x([70]), x([100]), "positive").a0.tolist() == [128]
    assert choose(sieve, 0, x([70]), x([100]), "negative").a1.tolist() == [128]
    # exactly on a border: exact on that side, no vector beyond it
    on = choose(sieve, 0, x([128]), x([192]), "negative")
    assert (on.a0.tolist(), on.a1.tolist()) == ([128], [192])
    lo = x([[0], [0], [0], [70], [96], [120], [64], [63], [65]], dtype=U32)
    hi = x([[69], [95], [119], [1023], [1023], [1023], [200], [127], [129]], dtype=U32)
    check(index, [col], lo, hi, "tie")


def test_the_second_level_splits_every_bin_and_its_borders_read_three_vectors() -> None:
    """Unique values 0..1023, K = 16 bins of F = 4 fine bins: borders every 16 ranks. A
    first-level border is one vector F_c; a fine border (c, t) is F_c | (F_{c+1} & G_t), one
    vector G_t per t shared by every bin; the nearer border wins, a tie goes negative."""
    col = np.random.default_rng(1).permutation(1024).astype(U32)
    index = make([col], "rtscan-direct", sieve_vectors=16, sieve_fine=4)
    sieve = index.state.sieve
    assert sieve.bounds[0].tolist() == list(range(0, 1025, 16))
    assert sieve.n_vectors == (15 + 3,)
    x = np.array
    up = choose(sieve, 0, x([0, 0, 0, 0]), x([70, 76, 72, 1000]), "auto")
    assert up.a1.tolist() == [64, 80, 80, 1008]
    f1, f2, g1 = 0, 1, 15  # F_1, F_2, G_1 of the column
    assert up.hi_code.tolist()[:3] == [[f1, -1, -1], [f1, f2, g1], [f1, f2, g1]]
    assert up.hi_code.tolist()[3] == [14, -1, 15 + 2]  # 1000: a tie, 1008 = F_15 | G_3
    low = choose(sieve, 0, x([10, 200]), x([1024, 1024]), "auto")
    assert low.a0.tolist() == [16, 192]  # 10: nearer 16 (positive); 200: nearer 192
    assert low.lo_code.tolist() == [[-1, 0, 15], [2, -1, -1]]  # (0 | (F_1 & G_1)), F_3
    lo = x([[0], [0], [0], [10], [200], [16], [15], [17], [1000]], dtype=U32)
    hi = x([[69], [75], [71], [1023], [1023], [31], [32], [1023], [1023]], dtype=U32)
    check(index, [col], lo, hi, "two levels")


def test_refine_boxes_are_the_papers_regions() -> None:
    """x < 80, y < 90, z < 80 sieved as x < 70, y < 60, z < 65 (Fig. 10)."""
    b = refine_boxes(np.array([[0, 0, 0]]), np.array([[80, 90, 80]]),
                     np.array([[0, 0, 0]]), np.array([[70, 60, 65]]))
    boxes = sorted(zip(map(tuple, b.lo.tolist()), map(tuple, b.hi.tolist()), strict=True))
    assert boxes == [((0, 0, 65), (70, 60, 80)), ((0, 60, 0), (70, 90, 80)),
                     ((70, 0, 0), (80, 90, 80))]


# ============================================================================ the device plan
def host_plan(index: RtscanIndex, lo: np.ndarray, hi: np.ndarray) -> dict[str, Any]:
    """The plan of a batch made on the host by the reference functions (``_predicates``,
    ``choose``, ``refine_boxes``, ``_box_coords``, ``plan_rays``; the direct refine's
    narrowest slab), with the plan kernel's two per-query rules: a dead query (an empty
    predicate) has no boxes and a zero approximation, a group without a predicate for the query
    passes every row and has no boxes."""
    st, p = index.state, index.params
    n = st.n
    x0, x1 = reference_ranks(index, lo, hi)
    if st.tables.ranks is None:  # the exact bounds are the values
        plo, phi = lo, hi
    else:
        empty = x0 >= x1
        plo = np.where(empty, 1, x0)
        phi = np.where(empty, 0, np.minimum(x1 - 1, max(n - 1, 0)))
    q = int(lo.shape[0])
    alive = np.all(x0 < x1, axis=1)
    groups = []
    for grp in st.groups:
        cols = list(grp.cols)
        g = len(cols)
        sel = np.full((q, SEL_COLUMNS), -1, dtype=np.int64)
        a = np.zeros((q, g, 2), dtype=np.int64)
        rows: list[tuple[int, ...]] = []
        for i in range(q):
            gx0, gx1 = x0[i:i + 1, cols], x1[i:i + 1, cols]
            free = bool(np.all((gx0 == 0) & (gx1 == n)))
            if free:
                a0, a1 = gx0, gx1
            elif st.sieve is None:
                a0 = a1 = np.zeros((1, g), dtype=np.int64)
            else:
                picks = [choose(st.sieve, j, gx0[:, k], gx1[:, k], p.selection)
                         for k, j in enumerate(cols)]
                a0 = np.stack([c.a0 for c in picks], axis=1)
                a1 = np.stack([c.a1 for c in picks], axis=1)
                for k, c in enumerate(picks):
                    sel[i, 6 * k:6 * k + 3] = c.lo_code[0]
                    sel[i, 6 * k + 3:6 * k + 6] = c.hi_code[0]
            a[i, :, 0], a[i, :, 1] = a0[0], a1[0]
            sel[i, -1] = int(not alive[i] or bool(np.any(a0 >= a1)))
            if not alive[i] or free:
                continue
            boxes = refine_boxes(gx0, gx1, a0, a1)
            if boxes.n == 0:
                continue
            query_of = np.full(boxes.n, i, dtype=np.int64)
            if p.refine == "rt":
                lo3, hi3 = index._box_coords(st, grp, boxes.lo, boxes.hi)
                rows += [tuple(r) for r in plan_rays(query_of, lo3, hi3, grp.geom,
                                                     p.ray_axis).tolist()]
            else:
                width = boxes.hi - boxes.lo
                for b in range(boxes.n):
                    k = int(np.argmin(width[b]))
                    r0, r1 = int(boxes.lo[b, k]), int(boxes.hi[b, k])
                    p0, p1 = int(gx0[0, k]), int(gx1[0, k])
                    s0, s1 = int(a0[0, k]), int(a1[0, k])
                    if r1 <= p0 or r0 >= p1:
                        mode = CLEAR
                    else:
                        mode = (SKIP_COL if p0 <= r0 and r1 <= p1 else 0) | (
                            NO_UNSET if s0 >= s1 or r1 <= s0 or r0 >= s1 else 0)
                    rows.append((i, cols[k], r0, r1 - r0, mode))
        groups.append({"sel": sel, "a": a, "rows": sorted(rows)})
    return {"x0": x0, "x1": x1, "plo": plo, "phi": phi, "alive": alive, "groups": groups}


def check_plan(index: RtscanIndex, lo: np.ndarray, hi: np.ndarray, label: str,
               device: str | None = None) -> None:
    """The plan kernel's outputs equal the host plan's, field by field."""
    st = index.state
    want = host_plan(index, lo, hi)
    plan = index._plan(st, index.state.xp.asarray(lo), index.state.xp.asarray(hi), device)
    rk = to_numpy(plan.rk)
    np.testing.assert_array_equal(rk[:, :, 0], want["x0"], err_msg=label)
    np.testing.assert_array_equal(rk[:, :, 1], want["x1"], err_msg=label)
    alive = want["alive"]
    np.testing.assert_array_equal(to_numpy(plan.plo)[alive], want["plo"][alive], err_msg=label)
    np.testing.assert_array_equal(to_numpy(plan.phi)[alive], want["phi"][alive], err_msg=label)
    x0, x1, _, _ = (to_numpy(a) for a in index._predicates(st, lo, hi))  # the point path's
    np.testing.assert_array_equal(x0, want["x0"], err_msg=label)
    np.testing.assert_array_equal(x1, want["x1"], err_msg=label)
    boxes, ends = to_numpy(plan.boxes), to_numpy(plan.ends)
    cnt = plan.count_column
    for gi, (grp, g) in enumerate(zip(st.groups, want["groups"], strict=True)):
        sel = to_numpy(plan.sel)[gi]
        np.testing.assert_array_equal(sel[:, -1], g["sel"][:, -1], err_msg=f"{label} zero")
        live = alive & (sel[:, -1] == 0)
        np.testing.assert_array_equal(sel[live, :-1], g["sel"][live, :-1], err_msg=label)
        for k, j in enumerate(grp.cols):
            np.testing.assert_array_equal(rk[alive, j, 2], g["a"][alive, k, 0], err_msg=label)
            np.testing.assert_array_equal(rk[alive, j, 3], g["a"][alive, k, 1], err_msg=label)
        counts = boxes[gi, :, cnt]
        assert (counts >= 0).all()
        np.testing.assert_array_equal(ends[gi], np.cumsum(counts), err_msg=label)
        got = sorted(tuple(r) for r in boxes[gi][counts > 0].tolist())
        assert got == g["rows"], (label, gi, got[:4], g["rows"][:4])


def plan_bounds(cols: list[np.ndarray], index: RtscanIndex, seed: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Bounds for the plan tests: random ranges, empty predicates (lo > hi, and a range between
    two neighbouring values), full-domain and one-sided predicates, equalities of present and
    absent values, and constants on the sieve's borders."""
    rng = np.random.default_rng(seed)
    n, d = cols[0].shape[0], len(cols)
    top = np.iinfo(cols[0].dtype).max
    if top == TOP32:
        lo, hi = random_bounds(cols, 40, seed)
    else:
        a, b = (np.stack([c[rng.integers(0, n, 40)] for c in cols], axis=1) for _ in range(2))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
    extra_lo, extra_hi = [], []
    srt = [np.sort(c) for c in cols]
    for i in range(24):
        a = np.zeros(d, dtype=np.uint64)
        b = np.full(d, top, dtype=np.uint64)
        for j in range(d):
            kind = (i + j) % 8
            v = int(srt[j][rng.integers(0, n)])
            if kind == 0:
                a[j], b[j] = v, v                      # equality, present
            elif kind == 1:
                a[j], b[j] = (v + 1, v) if v < top else (v, v - 1)  # empty (lo > hi)
            elif kind == 2:
                b[j] = v                               # x <= v
            elif kind == 3:
                a[j] = v                               # x >= v
            elif kind == 4 and index.state.sieve is not None:
                bd = index.state.sieve.bounds[j]      # on a border (its first value)
                r = int(bd[rng.integers(0, bd.shape[0] - 1)])
                a[j] = int(srt[j][r])
                b[j] = int(srt[j][min(n - 1, r + rng.integers(0, n))])
            elif kind == 5:
                a[j] = b[j] = min(v + 1, top)          # equality, maybe absent
            # kind 6, 7 (and 4 without a sieve): the full domain
        extra_lo.append(a)
        extra_hi.append(b)
    for last in (False, True):  # no predicate at all; one on the last column only
        a = np.zeros(d, dtype=np.uint64)
        b = np.full(d, top, dtype=np.uint64)
        if last:
            b[-1] = int(srt[-1][n // 2])
        extra_lo.append(a)
        extra_hi.append(b)
    dt = cols[0].dtype
    return (np.concatenate([lo, np.array(extra_lo).astype(dt)]),
            np.concatenate([hi, np.array(extra_hi).astype(dt)]))


PLAN_CASES = [
    {}, {"encoding": False}, {"refine": "direct"}, {"refine": "direct", "encoding": False},
    {"sieve_vectors": 0}, {"selection": "positive"}, {"selection": "negative"},
    {"group_size": 2}, {"group_size": 1, "encoding": False, "sieve_vectors": 0},
    {"sieve_vectors": 0, "encoding": False, "ray_length": 0.0, "ray_axis": "z"},
    {"ray_axis": "y", "sieve_vectors": 16}, {"ray_interval": 0.5, "ray_spacing": 0.25},
    {"layout": "paper", "sieve_fine": 0}, {"layout": "paper", "encoding": False},
    {"layout": "paper", "refine": "direct", "sieve_fine": 4}, {"sieve_fine": 0},
    {"sieve_fine": 3, "selection": "negative"},
]
#: The cases the README's test command runs; every case runs in the exhaustive tier.
PLAN_CASES_QUICK = [0, 1, 3, 8, 12, 15]


@pytest.mark.parametrize("params", [
    p if k in PLAN_CASES_QUICK else pytest.param(p, marks=pytest.mark.exhaustive)
    for k, p in enumerate(PLAN_CASES)], ids=lambda p: ",".join(
    f"{k}={v}" for k, v in p.items()) or "default")
@pytest.mark.parametrize("kind", ["uniform", "duplicates"])
def test_the_plan_kernel_is_the_host_plan(params: dict[str, Any], kind: str) -> None:
    """The device plan (one launch per batch) against the host reference functions, on
    N = 1007 rows (not a multiple of 32), 3 and 5 columns."""
    rng = np.random.default_rng(90)
    n = 1007
    for d in (3, 5):
        if kind == "uniform":
            cols = table("uniform", n, d, 91 + d)
        else:  # few distinct values, a heavy hitter, an all-equal column
            cols = [rng.integers(0, 20, n).astype(U32) for _ in range(d)]
            cols[0] = np.where(rng.random(n) < 0.5, 7, cols[0]).astype(U32)
            cols[-1] = np.full(n, 2**31, U32)
        index = make(cols, **{"sieve_vectors": 32, "sieve_fine": 4, **params})
        lo, hi = plan_bounds(cols, index, 92 + d)
        check_plan(index, lo, hi, f"{kind} d={d} {params}")
        check(index, cols, lo, hi, f"{kind} d={d} {params}")


def _sieve_reference(vectors: np.ndarray, sel: np.ndarray, n: int) -> np.ndarray:
    """The sieve's approximation from its codes, on unpacked bits (the module's definition):
    per column the set below the upper border AND NOT the set below the lower border."""
    bits = np.unpackbits(vectors.view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)

    def below(p: int, h: int, g: int) -> np.ndarray:
        if g < 0:
            return bits[p]
        fine = bits[g] & (bits[h] if h >= 0 else True)
        return fine | bits[p] if p >= 0 else fine

    out = np.zeros((sel.shape[0], 32 * ((n + 31) // 32)), dtype=bool)  # padding bits 0
    for q, row in enumerate(sel.tolist()):
        if row[18]:
            continue
        acc = np.ones(n, dtype=bool)
        for k in range(3):
            lo_code, hi_code = row[6 * k:6 * k + 3], row[6 * k + 3:6 * k + 6]
            if hi_code[0] >= 0 or hi_code[2] >= 0:
                acc &= below(*hi_code)
            if lo_code[0] >= 0 or lo_code[2] >= 0:
                acc &= ~below(*lo_code)
        out[q, :n] = acc
    return np.packbits(out, axis=1, bitorder="little").view(np.uint32)


def test_the_sieve_pass_equals_its_definition_over_several_tiles() -> None:
    """The sieve kernel writes each item's words a block width apart: over a bitmap of several
    tiles and a partial one (20,011 rows, 626 words, tiles of 4 x 32 words), for many queries
    of both sieve levels, every word equals the AND of the chosen sets, padding bits clear.
    (The GPU kernel runs the same body: the simulator test below checks it too.)"""
    n = 20_011
    cols = table("uniform", n, 3, 91)
    index = make(cols, "rtscan-direct")
    st = index.state
    lo, hi = plan_bounds(cols, index, 92)
    lo, hi = lo[:12], hi[:12]
    sel = np.ascontiguousarray(index._plan(st, lo, hi).sel[0])
    assert (sel[:, 2::3][:, :6] >= 0).any()  # fine borders (three vectors) among the codes
    got = np.empty((sel.shape[0], (n + 31) // 32), U32)
    approximate_sel("cpu", st.sieve.vectors, sel, n, got, 32)
    np.testing.assert_array_equal(got, _sieve_reference(st.sieve.vectors, sel, n))


@pytest.mark.parametrize("params", [{}, {"encoding": False}, {"selection": "positive"},
                                    {"selection": "negative"}])
def test_the_direct_slots_modes_hold_on_the_rows(params: dict[str, Any]) -> None:
    """What a direct slot's mode promises holds for every row of its slab: ``CLEAR``, no row
    passes the slab's column; ``SKIP_COL``, every row passes it; ``NO_UNSET``, the sieve left
    every row's bit 0. Each selection makes the modes it should (windows and one-sided
    ranges)."""
    n = 3000
    cols = table("uniform", n, 3, 71)
    index = make(cols, "rtscan-direct", sieve_vectors=16, **params)
    st = index.state
    lo, hi = plan_bounds(cols, index, 72)
    plan = index._plan(st, lo, hi)
    approx = np.empty((lo.shape[0], (n + 31) // 32), U32)
    approximate_sel("cpu", st.sieve.vectors, plan.sel[0], n, approx, 32)
    bits = np.unpackbits(approx.view(np.uint8), axis=1, bitorder="little")[:, :n]
    seen: set[int] = set()
    for q, col, start, count, mode in plan.boxes[0].tolist():
        if count == 0:
            continue
        rows = st.tables.order[start:start + count, col]
        v = st.lc[rows, col]
        passes = (v >= plan.plo[q, col]) & (v <= plan.phi[q, col])
        if mode & CLEAR:
            assert mode == CLEAR and not passes.any()
        if mode & SKIP_COL:
            assert passes.all()
        if mode & NO_UNSET:
            assert not bits[q, rows].any()
        seen.add(mode)
    # positive selection (approximation inside the predicate) leaves only rows to set,
    # negative selection only rows to clear
    selection = params.get("selection", "auto")
    assert (CLEAR in seen) == (selection != "positive"), seen
    assert any(m & SKIP_COL and m & NO_UNSET for m in seen) == (selection != "negative"), seen


def test_the_plan_kernel_with_64_bit_columns() -> None:
    """Wide values without encoding: the scene coordinates are shifted in the kernel."""
    rng = np.random.default_rng(93)
    n = 777
    cols = [rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True),
            rng.integers(0, 2**40, n, dtype=np.uint64) << np.uint64(20),
            rng.integers(0, 50, n).astype(np.uint64)]
    for params in ({}, {"encoding": False}, {"encoding": False, "refine": "direct"},
                   {"layout": "paper"}, {"layout": "paper", "encoding": False}):
        index = make(cols, **params)
        lo, hi = plan_bounds(cols, index, 94)
        check_plan(index, lo, hi, str(params))
        check(index, cols, lo, hi, str(params))


@pytest.mark.parametrize("per_slot", [1, 3, 64])
def test_the_strided_direct_refine_is_the_summed_one(per_slot: int) -> None:
    """The GPU's strided direct refine (``per_slot`` threads a slot, no running sum) sets and
    clears exactly the bits of the refine balanced by the running sums, over any starting
    bitmap, for every group of a plan with dead, open and one-sided queries."""
    rng = np.random.default_rng(96)
    n = 1007
    cols = table("uniform", n, 4, 97)
    index = make(cols, "rtscan-direct", sieve_vectors=16)
    lo, hi = plan_bounds(cols, index, 98)
    st = index.state
    plan = index._plan(st, lo, hi)
    words = rng.integers(0, 2**32, (lo.shape[0], (n + 31) // 32), dtype=np.uint64).astype(U32)
    for gi in range(len(st.groups)):
        want, got = words.copy(), words.copy()
        total = int(plan.ends[gi, -1])
        assert total > 0
        direct_plan(st.tables.order, st.lc, plan.plo, plan.phi, plan.boxes[gi],
                    plan.ends[gi], total, want, 32, "cpu")
        direct_strided(st.tables.order, st.lc, plan.plo, plan.phi, plan.boxes[gi], got,
                       per_slot, 32, "cpu")
        np.testing.assert_array_equal(got, want, err_msg=f"group {gi}")
        assert not np.array_equal(got, words)  # the refine changed bits


def test_a_one_query_call_copies_to_the_host_once(uniform3: list[np.ndarray],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """One device-to-host copy per batch (the refine sizes), whatever the groups, and the plan
    in two launches (the bounds' ranks, then the rest): ``to_numpy`` is called once by the
    range path, kernels as counted."""
    from indexzoo.native import targets
    from indexzoo.plugins.rtscan import index as module

    calls: list[str] = []
    real = module.to_numpy
    monkeypatch.setattr(module, "to_numpy", lambda a: calls.append("d2h") or real(a))
    launched: list[str] = []
    real_call = targets.Kernel.__call__

    def counted(self: Any, *a: Any, **kw: Any) -> Any:
        launched.append(self.name)
        return real_call(self, *a, **kw)

    monkeypatch.setattr(targets.Kernel, "__call__", counted)
    cols = uniform3 + uniform3[:2]  # two groups
    for name in ("rtscan", "rtscan-direct"):
        index = make(cols, name, sieve_vectors=16)
        lo, hi = random_bounds(cols, 3, 95)
        calls.clear()
        launched.clear()
        check(index, cols, lo, hi, name)
        assert calls == ["d2h"], (name, calls)
        assert launched.count("rtscan_plan") == 1 and launched.count("rtscan_sieve") == 2
        assert launched.count("rtscan_sorted_ranks") == 1  # the compact layout's encoding
        assert len(launched) <= 6, launched


# ============================================================================ skew, duplicates
@pytest.mark.parametrize("kind", ["zipf1.1", "zipf1.3", "zipf1.5", "normal"])
@pytest.mark.parametrize("encoding", [True, False])
def test_skewed_columns(kind: str, encoding: bool) -> None:
    rng = np.random.default_rng(7)
    n = 3000
    if kind == "normal":
        cols = [np.random.default_rng(j).normal(2**31, 1, n).astype(U32) for j in range(3)]
    else:
        a = float(kind[4:])
        cols = [(rng.zipf(a, n) % TOP32).astype(U32) for _ in range(3)]
    index = make(cols, sieve_vectors=32, encoding=encoding)
    lo, hi = lt_bounds(cols, [0.1, 0.5, 0.9, 0.95, 1.0])
    rlo, rhi = random_bounds(cols, 40, 5)
    check(index, cols, np.concatenate([lo, rlo]), np.concatenate([hi, rhi]), kind)


def test_heavy_hitters_all_copies_on_equal_none_on_either_side() -> None:
    rng = np.random.default_rng(8)
    n = 4000
    heavy = np.where(rng.random(n) < 0.3, rng.integers(0, 1000, n), 500).astype(U32)
    cols = [heavy, rng.integers(0, 50, n).astype(U32)]
    index = make(cols, sieve_vectors=64, sieve_fine=0)
    # the value 500 spans most of the 64 bins: its run keeps all its codes on one side
    assert index.state.sieve.n_vectors[0] < 20
    run = np.flatnonzero(np.sort(heavy) == 500)
    for fine in (0, 8):  # no border of either level inside the run
        b = make(cols, sieve_vectors=64, sieve_fine=fine).state.sieve.bounds[0]
        assert not ((b > run[0]) & (b <= run[-1])).any()
    lo = np.array([[500, 0], [0, 0], [501, 0], [499, 0], [500, 10]], U32)
    hi = np.array([[500, TOP32], [499, TOP32], [TOP32, TOP32], [501, TOP32], [500, 20]], U32)
    got = check(index, cols, lo, hi, "heavy")
    rows = np.flatnonzero(np.unpackbits(got[0].view(np.uint8), bitorder="little"))
    np.testing.assert_array_equal(rows, np.flatnonzero(heavy == 500))
    for r in (1, 2):
        assert not (np.unpackbits(got[r].view(np.uint8), bitorder="little")[:n][heavy == 500]).any()


def test_an_all_equal_column() -> None:
    n = 1000
    cols = [np.full(n, 2**31, U32), np.arange(n, dtype=U32)]
    for encoding in (True, False):
        index = make(cols, sieve_vectors=16, encoding=encoding)
        assert index.state.sieve.n_vectors[0] == 0
        lo = np.array([[2**31, 10], [0, 0], [2**31 + 1, 0], [0, 500]], U32)
        hi = np.array([[2**31, 900], [2**31 - 1, TOP32], [TOP32, TOP32], [2**31, 499]], U32)
        check(index, cols, lo, hi, f"all equal, encoding={encoding}")


# ============================================================================ small domains
@pytest.mark.parametrize("k", [16, 128])
def test_small_domain_of_64_values(k: int) -> None:
    """[0, 2^6) with K = 16 (the paper's Fig. 26) and K = 128 > 64 distinct values."""
    cols = table("small", 2500, 3, 13)
    lo, hi = random_bounds(cols, 50, 2)
    llo, lhi = lt_bounds(cols, [i / 10 for i in range(11)])
    for encoding in (True, False):
        index = make(cols, sieve_vectors=k, encoding=encoding)
        # borders only between values: at most 63 of both levels
        assert max(b.shape[0] - 2 for b in index.state.sieve.bounds) <= min(k * 32 - 1, 63)
        check(index, cols, np.concatenate([lo, llo]), np.concatenate([hi, lhi]),
              f"K={k} encoding={encoding}")


# ============================================================================ float precision
def test_the_epsilon_rule_is_the_papers() -> None:
    """2^(K-23) for floats below 2^K: 16 for ranks at N = 1e8 (K = 27), 0 below 2^23."""
    assert paper_eps(27) == 16 and paper_eps(23) == 0 and paper_eps(32) == 512
    n = 10**8
    g = geometry(n - 1, n, n, 3)
    assert (g.bits, g.eps) == (27, 16.0)
    assert 8.0e4 < g.width < 9.5e4  # the paper's tuned 8.3e4
    assert geometry(1000, 1000, 1000, 3).eps == 0
    assert geometry(2**32 - 1, 2**32, 1000, 1).bits >= 32


def _cover_check(n: int, axis_mode: str, seed: int) -> None:
    """For ranks up to ``n``: cubes at the corners of ray cells, in segment gaps and on box
    faces are met by the ray responsible for them (float32 exactly as the engine does)."""
    geom = geometry(n - 1, n, n, 3)
    rng = np.random.default_rng(seed)
    lo = np.sort(rng.integers(0, n // 2, 3))
    hi = lo + rng.integers(geom.width * 3, n // 2, 3)
    plan = plan_rays(np.zeros(1, np.int64), lo[None], hi[None], geom, axis_mode)
    d = int(plan[0, AXIS])
    a, c = (d + 1) % 3, (d + 2) % 3
    step, per = geom.interval, geom.period

    def picks(k: int, cell: int, count: int) -> list[int]:
        """Centres at the start, middle and end of the first cells and the last one."""
        out = []
        for i in [*range(min(count, 3)), count - 1]:
            base = int(lo[k]) + i * cell
            out += [base, base + cell // 2, base + cell - 1]
        return [v for v in out if lo[k] <= v <= hi[k]]

    ca = picks(a, step, int(plan[0, NA]))
    cc = picks(c, step, int(plan[0, NB]))
    cd = picks(d, per or int(hi[d] - lo[d] + 1), int(plan[0, NZ]))
    centres = np.array([(x, y, z) for x in ca for y in cc for z in cd], dtype=np.int64)
    pts = np.zeros_like(centres)
    pts[:, a], pts[:, c], pts[:, d] = centres[:, 0], centres[:, 1], centres[:, 2]
    boxes = cube_boxes([pts[:, 0], pts[:, 1], pts[:, 2]], geom, pts.shape[0])
    inf = np.float32(np.inf)
    for p, box in zip(pts, boxes, strict=True):
        ia, ib = (p[a] - lo[a]) // step, (p[c] - lo[c]) // step
        iz = (p[d] - lo[d]) // per if per else 0
        k = (ia * plan[0, NB] + ib) * plan[0, NZ] + iz
        ox, oy, oz, dx, dy, dz, t0, t1 = box_ray(plan, 0, k, np.int64(step), np.int64(per),
                                                 np.int64(geom.spacing), np.float64(geom.pad))
        inv = [np.float32(1) / v if v != 0 else inf for v in (dx, dy, dz)]
        hit, _ = slab_box(*box, ox, oy, oz, *inv, t0, t1)
        assert hit, (n, p.tolist(), box.tolist(), (ox, oy, oz, t0, t1))


@pytest.mark.parametrize("axis_mode", ["longest", "x", "z"])
def test_rays_meet_every_cube_at_codes_past_2_24(axis_mode: str) -> None:
    """N = 2^25 and 1e8 ranks (epsilon 8 and 16) without building: the geometry functions and
    the ray-generation program, run in Python with float32 arithmetic."""
    _cover_check(2**25 + 3, axis_mode, 1)
    _cover_check(10**8, axis_mode, 2)


def test_no_encoding_with_keys_near_2_32_and_neighbours_near_2_31() -> None:
    rng = np.random.default_rng(21)
    n = 3000
    top = (TOP32 - rng.integers(0, 5000, n)).astype(U32)
    mid = (2**31 + rng.integers(-1000, 1000, n)).astype(U32)
    pairs = (2**31 + 2 * rng.integers(0, 200, n) + rng.integers(0, 2, n)).astype(U32)
    cols = [top, mid, pairs]
    for params in ({"encoding": False}, {"encoding": False, "sieve_vectors": 0},
                   {"encoding": False, "ray_interval": 0.25, "ray_spacing": 0.0}, {}):
        index = make(cols, **params)
        geom = index.state.groups[0].geom
        assert geom.eps == paper_eps(geom.bits) and geom.eps >= (512 if "encoding" in params
                                                                 else 0)
        lo, hi = random_bounds(cols, 40, 3)
        v = int(np.sort(pairs)[1500])
        lo = np.concatenate([lo, [[0, 0, v], [0, 0, v + 1], [TOP32 - 100, 0, v]]]).astype(U32)
        hi = np.concatenate([hi, [[TOP32, TOP32, v], [TOP32, TOP32, v + 1],
                                  [TOP32, TOP32, v + 1]]]).astype(U32)
        check(index, cols, lo, hi, str(params))


@pytest.mark.parametrize("eps", [0.0, 16.0, 1e9, float("inf"), float("nan")])
def test_epsilon_is_not_a_parameter(eps: float) -> None:
    """Epsilon is always the paper's rule: an epsilon below it misses rows past 2^24, so no
    value can be set."""
    with pytest.raises(ConfigError, match="eps"):
        indexzoo.create("rtscan", eps=eps)


def test_the_widest_cube_builds_and_answers_and_a_wider_one_is_refused() -> None:
    """The largest ``cube_width`` with the longest segments and widest spacing plans its rays
    in int64 and answers exactly; one more is a ConfigError naming the field and its range."""
    cols = [c.astype(U32) for c in table("uniform", 300, 3, 1)]
    lo, hi = random_bounds(cols, 20, 2)
    for params in ({}, {"encoding": False, "ray_length": MAX_RAY_LENGTH, "ray_spacing": 1.0}):
        index = make(cols, cube_width=MAX_CUBE_WIDTH, **params)
        check(index, cols, lo, hi, f"cube_width 2^43 {params}")
    with pytest.raises(ConfigError, match=r"cube_width.*8796093022208"):
        indexzoo.create("rtscan", cube_width=MAX_CUBE_WIDTH + 1)


@pytest.mark.exhaustive
def test_codes_past_2_24_in_an_actual_build() -> None:
    """2^24 + 5000 rows of one column: ranks past 2^24 in a real scene (epsilon 4)."""
    n = (1 << 24) + 5000
    col = np.random.default_rng(3).permutation(n).astype(U32)
    index = make([col], sieve_vectors=16)
    assert index.state.groups[0].geom.eps >= 4
    lo = np.array([[n - 7000], [1 << 24], [(1 << 24) - 3], [5]], U32)
    hi = np.array([[n - 1], [(1 << 24) + 2], [(1 << 24) + 3000], [n - 100]], U32)
    check(index, [col], lo, hi, "past 2^24")


# ============================================================================ invariance
INVARIANT = [
    {"ray_interval": 0.25}, {"ray_interval": 0.5}, {"ray_spacing": 0.0},
    {"ray_spacing": 0.5}, {"ray_length": 1.0}, {"ray_length": 0.0}, {"ray_axis": "x"},
    {"ray_axis": "z"}, {"sieve_vectors": 16}, {"sieve_vectors": 64},
    {"sieve_vectors": 128, "sieve_fine": 0}, {"sieve_vectors": 0}, {"sieve_fine": 0},
    {"sieve_fine": 16}, {"layout": "paper"}, {"layout": "paper", "sieve_fine": 0},
    {"encoding": False}, {"refine": "direct"}, {"cube_width": 7},
    {"group_size": 2}, {"group_size": 1}, {"leaf_size": 1}, {"max_rays": 7},
]


def test_every_parameter_gives_identical_bitmaps(uniform3: list[np.ndarray],
                                                 device: str) -> None:
    lo, hi = random_bounds(uniform3, 40, 9)
    llo, lhi = lt_bounds(uniform3, [0.0, 0.2, 0.5, 0.8, 1.0])
    lo, hi = np.concatenate([lo, llo]), np.concatenate([hi, lhi])
    want = oracle(uniform3, lo, hi)
    for params in INVARIANT:
        index = make(uniform3, device=device, **{"sieve_vectors": 32, "sieve_fine": 4,
                                                 **params})
        index.stage_timer = timer = StageTimes(device)
        np.testing.assert_array_equal(bitmap(index, lo, hi), want, err_msg=str(params))
        work = "candidates" if params.get("refine") == "direct" else "rays"
        assert timer.counts[work] > 0, params  # the refine ran


# ============================================================================ conjunctions
@pytest.mark.parametrize("d", [1, 2, 4, 5])
def test_conjunctions_of_1_2_4_and_5_columns(d: int, device: str) -> None:
    cols = table("uniform", 2000, d, 30 + d)
    lo, hi = random_bounds(cols, 40, d)
    for name in ("rtscan", "rtscan-direct"):
        check(make(cols, name, device=device, sieve_vectors=32), cols, lo, hi, f"{name} d={d}")


def test_groupings_3_plus_1_and_2_plus_2_agree() -> None:
    cols = table("uniform", 2500, 4, 40)
    lo, hi = random_bounds(cols, 50, 4)
    a = check(make(cols, group_size=3), cols, lo, hi, "3+1")
    b = check(make(cols, group_size=2), cols, lo, hi, "2+2")
    assert [g.cols for g in make(cols, group_size=2).state.groups] == [(0, 1), (2, 3)]
    np.testing.assert_array_equal(a, b)


def test_correlated_and_anticorrelated_columns() -> None:
    rng = np.random.default_rng(50)
    x = rng.integers(0, TOP32, 3000, dtype=np.uint64, endpoint=True).astype(U32)
    for cols in ([x, x.copy(), x.copy()], [x, U32(TOP32) - x, x]):
        lo, hi = random_bounds(cols, 40, 1)
        same = np.sort(rng.integers(0, TOP32, (20, 2), dtype=np.uint64), axis=1).astype(U32)
        lo = np.concatenate([lo, np.repeat(same[:, :1], 3, axis=1)])
        hi = np.concatenate([hi, np.repeat(same[:, 1:], 3, axis=1)])
        for params in ({}, {"encoding": False}, {"refine": "direct"}):
            check(make(cols, **params), cols, lo, hi, str(params))


# ============================================================================ output
def test_bitmaps_counts_and_rowids_agree(uniform3: list[np.ndarray],
                                         built: RtscanIndex) -> None:
    n = 3000
    lo, hi = random_bounds(uniform3, 30, 12)
    bm = bitmap(built, lo, hi)
    assert bm.shape == (30, (n + 31) // 32) and bm.dtype == np.uint32
    assert not (bm[:, -1] >> U32(n % 32)).any()  # the padding bits past row n-1
    count = to_numpy(built.range(lo, hi, out="count").count)
    rows = built.range(lo, hi, out="rowids").to_host()
    for i in range(30):
        got = rows.rowids[rows.offsets[i]:rows.offsets[i + 1]].astype(np.int64)
        assert np.all(np.diff(got) > 0)  # ascending, unique
        np.testing.assert_array_equal(got, np.flatnonzero(
            np.unpackbits(bm[i].view(np.uint8), bitorder="little")))
        assert count[i] == got.shape[0]


def test_batches_cut_into_chunks_answer_the_same(uniform3: list[np.ndarray],
                                                 built: RtscanIndex,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo.plugins.rtscan import index as module

    lo, hi = random_bounds(uniform3, 25, 15)
    whole = bitmap(built, lo, hi)
    monkeypatch.setattr(module, "_CHUNK_BYTES", 3 * 4 * 94)  # three queries per chunk
    np.testing.assert_array_equal(bitmap(built, lo, hi), whole)
    np.testing.assert_array_equal(whole, oracle(uniform3, lo, hi))


def test_refining_twice_changes_nothing(uniform3: list[np.ndarray],
                                        built: RtscanIndex) -> None:
    """The refine writes bit := exact predicate: a second pass over the same boxes, starting
    from its own result, leaves every bit as it was."""
    st = built.state
    lo, hi = random_bounds(uniform3, 10, 14)
    x0, x1, plo, phi = (to_numpy(a) for a in built._predicates(st, lo, hi))
    keep = np.all(x0 < x1, axis=1)
    x0, x1, plo, phi = x0[keep], x1[keep], np.ascontiguousarray(plo[keep]), \
        np.ascontiguousarray(phi[keep])
    grp = st.groups[0]
    picks = [choose(st.sieve, j, x0[:, j], x1[:, j], "auto") for j in range(3)]
    a0 = np.stack([c.a0 for c in picks], 1)
    a1 = np.stack([c.a1 for c in picks], 1)
    boxes = refine_boxes(x0, x1, a0, a1)
    lo3, hi3 = built._box_coords(st, grp, boxes.lo, boxes.hi)
    words = oracle(uniform3, lo[keep], hi[keep])
    before = words.copy()
    refine_rt(grp, boxes.query, lo3, hi3, st.lc, plo, phi, words, built.params)
    np.testing.assert_array_equal(words, before)


# ============================================================================ point lookups
def test_point_lookups_absent_extreme_and_duplicate_keys(device: str) -> None:
    rng = np.random.default_rng(60)
    n = 3000
    a = rng.integers(0, 40, n).astype(U32)
    b = rng.integers(0, 5, n).astype(U32)
    c = np.where(rng.random(n) < 0.5, 7, rng.integers(0, TOP32, n)).astype(U32)
    c[:3] = [0, TOP32, TOP32]
    cols = [a, b, c]
    rows = rng.integers(0, n, 50)
    q = np.stack([a[rows], b[rows], c[rows]], axis=1)
    extra = np.array([[a[0], b[0], 0], [a[1], b[1], TOP32], [41, 0, 7], [a[5], 9, 7],
                      [a[5], b[5], 8], [0, 0, 0]], U32)
    q = np.concatenate([q, extra]).astype(U32)
    for name in ("rtscan", "rtscan-noenc", "rtc1"):
        index = make(cols, name, device=device)
        res = index.point(q, out="rowids").to_host()
        want = oracle(cols, q, q)
        for i in range(q.shape[0]):
            got = np.sort(res.rowids[res.offsets[i]:res.offsets[i + 1]].astype(np.int64))
            np.testing.assert_array_equal(
                got, np.flatnonzero(np.unpackbits(want[i].view(np.uint8),
                                                  bitorder="little")[:n]), err_msg=name)
        np.testing.assert_array_equal(to_numpy(index.point(q, out="bitmap").bitmap), want)


# ============================================================================ footprint
def _held_arrays(obj: Any, seen: set[int]) -> int:
    """Bytes of every distinct array reachable from ``obj`` (dataclasses, tuples, lists)."""
    import dataclasses

    if obj is None or id(obj) in seen:
        return 0
    if hasattr(obj, "nbytes") and hasattr(obj, "dtype"):
        base = obj
        while getattr(base, "base", None) is not None:
            base = base.base
        if id(base) in seen:
            return 0
        seen.add(id(base))
        return int(base.nbytes)
    seen.add(id(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(_held_arrays(getattr(obj, f.name), seen) for f in dataclasses.fields(obj))
    if isinstance(obj, (tuple, list)):
        return sum(_held_arrays(x, seen) for x in obj)
    return 0


@pytest.mark.parametrize("params", [{}, {"encoding": False}, {"refine": "direct"},
                                    {"sieve_vectors": 0, "group_size": 1},
                                    {"layout": "paper"}, {"sieve_fine": 0}])
def test_footprint_is_every_array_the_index_holds(uniform3: list[np.ndarray],
                                                  params: dict[str, Any]) -> None:
    index = make(uniform3, **params)
    st = index.state
    seen: set[int] = set()
    held = sum(_held_arrays(getattr(st, f), seen)
               for f in ("lc", "tables", "sieve", "groups", "plan_args"))
    fp = index.memory_footprint()
    assert fp.resident_bytes == held, (fp.breakdown, held)
    assert fp.peak_build_bytes >= fp.resident_bytes
    if index.params.sieve_vectors:
        k, f = index.params.sieve_vectors, index.params.sieve_fine
        vectors = k - 1 + (f - 1 if f else 0)  # the fine ones: every G_t moves a border
        assert fp.breakdown["sieve_vectors"] == 3 * vectors * ((3000 + 31) // 32) * 4


def test_vectors_grow_with_k(uniform3: list[np.ndarray]) -> None:
    sizes = [make(uniform3, sieve_vectors=k, sieve_fine=0, refine="direct").memory_footprint()
             .breakdown["sieve_vectors"] for k in (16, 32, 64, 128)]
    assert sizes == sorted(sizes) and sizes[-1] == 127 * 3 * 94 * 4


@pytest.mark.parametrize("d", [1, 3, 4])
@pytest.mark.parametrize("name", ["rtscan", "rtscan-direct"])
def test_the_default_layout_holds_at_most_4x_the_table(name: str, d: int) -> None:
    """Issue 57: ``rtscan`` and ``rtscan-direct`` (the direct refine: ``rtscan``'s on this
    engine) hold at most four times the bytes of their uint32 columns, 2^16 rows of 1, 3 and 4
    columns: the keys, the orders, the sorted samples, 62 sieve vectors per column and their
    borders; no codes, no mapping tables. The paper's layout holds twice that."""
    n = 1 << 16
    cols = table("uniform", n, d, 100 + d)
    index = make(cols, name, refine="direct")
    fp = index.memory_footprint()
    table_bytes = 4 * n * d
    assert fp.resident_bytes <= 4 * table_bytes, (fp.resident_bytes / table_bytes, fp.breakdown)
    assert set(fp.breakdown) == {"keys", "order", "sorted_sample", "sieve_vectors",
                                 "sieve_borders", "plan_args"}
    assert fp.breakdown["sieve_vectors"] == d * 62 * (n // 32) * 4
    paper = make(cols, "rtscan-paper", refine="direct").memory_footprint()
    assert paper.resident_bytes > 7.9 * table_bytes  # codes, mapping tables, 127 vectors


def test_the_compact_layout_finds_the_rank_intervals_of_the_mapping_tables() -> None:
    """The sample's binary search and the few steps through the order and the keys give the
    mapping tables' rank intervals, for every value of the sample and its neighbours, runs
    that span several samples, and bounds outside the values, at N = 5 * 64 + 7."""
    rng = np.random.default_rng(120)
    n = 5 * 64 + 7
    cols = [np.sort(rng.integers(0, 40, n)).astype(U32)[rng.permutation(n)],  # long runs
            rng.integers(1, TOP32 - 1, n, dtype=np.uint64).astype(U32),
            np.full(n, 7, U32)]
    compact = make(cols, "rtscan-direct")
    paper = make(cols, "rtscan-direct", layout="paper")
    assert compact.state.tables.ranks is None and compact.state.lc.dtype == np.uint32
    srt = [np.sort(c).astype(np.int64) for c in cols]
    picks = np.unique(np.concatenate([np.arange(0, n, 64), np.arange(63, n, 64), [n - 1]]))
    vals = [np.unique(np.clip(np.concatenate([s[picks] + dv for dv in (-1, 0, 1)]
                                             + [[0, TOP32]]), 0, TOP32)) for s in srt]
    m = max(v.shape[0] for v in vals)
    pick = np.stack([np.resize(v, m) for v in vals], axis=1).astype(U32)
    for lo, hi in ((pick, pick), (pick, np.full_like(pick, TOP32)), (np.zeros_like(pick), pick),
                   (pick, pick[::-1].copy())):
        got = [to_numpy(a) for a in compact._predicates(compact.state, lo, hi)[:2]]
        want = [to_numpy(a) for a in paper._predicates(paper.state, lo, hi)[:2]]
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        check(compact, cols, lo, hi, "compact")


def test_files_of_the_paper_layout_saved_before_the_compact_one_load_and_answer() -> None:
    """``data/v1_*.izx`` were saved by rtscan at ebfee87 (state version 1, the paper's
    layout, before the ``layout`` and ``sieve_fine`` parameters; made by
    ``data/make_v1_files.py``). They load as ``layout="paper"`` with one sieve level, answer
    as the brute force, and save and load again; the default layout saves and loads too."""
    data = Path(__file__).parent / "data"
    keys = np.load(data / "v1_keys.npy")
    cols = [keys[:, j] for j in range(3)]
    lo, hi = random_bounds(cols, 40, 121)
    names = sorted(p.stem[3:] for p in data.glob("v1_*.izx"))
    assert names == ["rtscan", "rtscan-direct", "rtscan-noenc", "rtscan-nosieve", "rtscan-rt"]
    for name in names:
        index = indexzoo.load(data / f"v1_{name}.izx", device="cpu")
        assert index.name == name and isinstance(index, RtscanIndex)
        assert (index.params.layout, index.params.sieve_fine) == ("paper", 0)
        assert isinstance(index.state.tables, ColumnTables)
        check(index, cols, lo, hi, f"v1 {name}")
        again = indexzoo.from_bytes(index.to_bytes(), device="cpu")
        check(again, cols, lo, hi, f"v1 {name} saved again")
    compact = indexzoo.from_bytes(make(cols, "rtscan-direct").to_bytes(), device="cpu")
    assert compact.params.layout == "compact"
    check(compact, cols, lo, hi, "compact saved")


# ============================================================================ presets, params
def test_presets_are_indexes_of_their_own() -> None:
    expect = {"rtc1": {"group_size": 1, "encoding": False, "sieve_vectors": 0},
              "rtc3": {"group_size": 3, "encoding": False, "sieve_vectors": 0,
                       "ray_length": 0.0, "ray_axis": "z"},
              "rtscan-noenc": {"encoding": False}, "rtscan-nosieve": {"sieve_vectors": 0},
              "rtscan-direct": {"refine": "direct"}, "rtscan-rt": {"refine": "rt"},
              "rtscan-paper": {"layout": "paper", "sieve_vectors": 128, "sieve_fine": 0,
                               "refine": "auto"}}
    for name in ("rtc1", "rtc3", "rtscan-noenc", "rtscan-nosieve"):  # the paper's: RT refine
        expect[name]["refine"] = "rt"
    assert set(PRESET_CLASSES) == set(expect)
    for name, values in expect.items():
        assert name in indexzoo.available()
        p = indexzoo.create(name).params
        for k, v in values.items():
            assert getattr(p, k) == v, (name, k)
    default = indexzoo.create("rtscan").params
    assert (default.layout, default.encoding, default.sieve_vectors, default.sieve_fine,
            default.refine) == ("compact", True, 32, 32, "auto")
    assert indexzoo.create("rtc1").capabilities.dims == 64


@pytest.mark.parametrize("bad", [{"sieve_vectors": 8}, {"sieve_vectors": 129},
                                 {"group_size": 4}, {"ray_interval": 0.0},
                                 {"ray_interval": 1.5}, {"ray_spacing": 1.1},
                                 {"cube_width": 0}, {"cube_width": MAX_CUBE_WIDTH + 1},
                                 {"ray_length": 2e6}, {"selection": "best"},
                                 {"sieve_vectors": 0, "selection": "positive"},
                                 {"refine": "bvh"}, {"encoding": 1}, {"sieve_fine": 1},
                                 {"sieve_fine": 65}, {"layout": "sorted"}])
def test_bad_parameters_are_config_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        indexzoo.create("rtscan", **bad)
    with pytest.raises(ConfigError):
        indexzoo.create("rtc3", **bad)


def test_a_cube_width_far_too_small_is_refused_before_tracing() -> None:
    cols = table("uniform", 500, 3, 70)
    index = make(cols, encoding=False, sieve_vectors=0, cube_width=1)
    with pytest.raises(ResourceError, match="rays"):
        index.range(np.zeros((1, 3), U32), np.array([[np.sort(c)[-2] for c in cols]], U32),
                    out="bitmap")


# ============================================================================ 64-bit columns
def test_64_bit_columns_with_and_without_encoding() -> None:
    rng = np.random.default_rng(80)
    n = 2500
    cols = [rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True),
            (rng.integers(0, 2**40, n, dtype=np.uint64)) << np.uint64(20),
            rng.integers(0, 1000, n).astype(np.uint64)]
    lo = np.stack([c[rng.integers(0, n, 40)] for c in cols], axis=1)
    hi = np.stack([c[rng.integers(0, n, 40)] for c in cols], axis=1)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    hi[:5, 0] = 2**64 - 1
    for params in ({}, {"encoding": False}, {"encoding": False, "refine": "direct"}):
        index = make(cols, **params)
        if params:
            assert index.state.shifts[0] == 32 and index.state.shifts[2] == 0
        check(index, cols, lo, hi, str(params))


# ============================================================================ the BITMAP op
def test_bitmap_hits_set_and_clear_bits_atomically_on_the_cpu() -> None:
    """2^16 rays (a parallel CPU launch) each meet all 64 cubes: even rows are set, odd rows
    cleared, whatever the words held; a race between threads would lose bits."""
    from numba.extending import register_jitable

    @register_jitable
    def parity(ray, inst, prim, t, front, params):
        return np.int64(prim) if prim % 2 == 0 else query.clear_bit(prim)

    from typing import NamedTuple

    class Empty(NamedTuple):
        pass

    xs = np.arange(64, dtype=np.float32)
    boxes = np.stack([xs - 0.4, np.full(64, -1, np.float32), np.full(64, -1, np.float32),
                      xs + 0.4, np.ones(64, np.float32), np.ones(64, np.float32)], axis=1)
    gas = build_gas(AABBS, boxes)
    r = 1 << 16
    origins = np.zeros((r, 3), np.float32)
    origins[:, 0] = -1
    dirs = np.zeros((r, 3), np.float32)
    dirs[:, 0] = 1
    batch = query.FunctionBatch.of(
        np.ones(4, np.int64) * (r // 4),
        lambda s, e, o: query.Rays(origins[s:e], dirs[s:e], np.float32(0), np.float32(100)),
        lambda s, e, o: Empty())
    words = np.tile(np.array([[0x55555555, 0xAAAAAAAA]], np.uint32), (2, 1))
    query.mark_bits(gas, batch, query.QueryPrograms(match=parity), words,
                    targets=np.array([0, 1, 0, 1]), max_rays=r)
    np.testing.assert_array_equal(words, np.full((2, 2), 0x55555555, np.uint32))


SIM_SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()  # the warp intrinsics of the compact layout's rank search
    import numpy as np
    from numba import cuda
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic
    cuda.atomic = FakeCUDAAtomic()  # the simulator's atomics, for helpers outside kernels
    import indexzoo
    from indexzoo.plugins.rtscan import index as M, launches as L, refine as R, sieve as S
    # the compact layout's rank search a thread a side, as on the CPU: the simulator runs a
    # warp's votes slowly, and the warp's search (alone and in the small call's one launch of
    # ranks and plan) is checked on its own (the tests before this)
    # (L's attribute read first: plugin modules run on first use, which would reset it)
    assert L.RANK_GROUP == 32
    L.RANK_GROUP = 1
    from indexzoo.plugins.rtscan.regions import refine_boxes

    rng = np.random.default_rng(3)
    n = 300
    cols = np.column_stack([rng.integers(0, 40, n).astype(np.uint32) for _ in range(3)])
    lo = np.array([[3, 5, 0], [10, 0, 7], [0, 0, 0]], np.uint32)
    hi = np.array([[30, 20, 33], [39, 25, 9], [5, 39, 39]], np.uint32)
    for enc, layout in ((True, "compact"), (False, "compact"), (True, "paper")):
        idx = indexzoo.create("rtscan", device="cpu", sieve_vectors=16, encoding=enc,
                              layout=layout, refine="rt", threads_per_block=32).build(cols)
        st = idx.state
        x0, x1, plo, phi = idx._predicates(st, lo, hi)
        plo, phi = np.ascontiguousarray(plo), np.ascontiguousarray(phi)
        grp = st.groups[0]
        picks = [S.choose(st.sieve, j, x0[:, j], x1[:, j], "auto") for j in range(3)]
        a0 = np.stack([c.a0 for c in picks], 1)
        a1 = np.stack([c.a1 for c in picks], 1)
        sel = np.full((3, S.SEL_COLUMNS), -1, np.int64)
        for k, c in enumerate(picks):
            sel[:, 6 * k:6 * k + 3], sel[:, 6 * k + 3:6 * k + 6] = c.lo_code, c.hi_code
        sel[:, -1] = np.any(a0 >= a1, axis=1)
        boxes = refine_boxes(x0, x1, a0, a1)
        lo3, hi3 = idx._box_coords(st, grp, boxes.lo, boxes.hi)
        want = idx.range(lo, hi, out="bitmap").bitmap
        for dev in ("cpu", "cuda"):
            w = np.empty((3, (n + 31) // 32), np.uint32)
            S.approximate_sel(dev, st.sieve.vectors, sel, n, w, 32)
            w2 = w.copy()
            R.refine_rt(grp, boxes.query, lo3, hi3, st.lc, plo, phi, w, idx.params,
                        device=dev)
            R.refine_direct(grp.cols, boxes.query, boxes.lo, boxes.hi, st.tables.order,
                            st.lc, plo, phi, w2, 32, device=dev)
            assert np.array_equal(w, want), (enc, dev, "rt")
            assert np.array_equal(w2, want), (enc, dev, "direct")
    # the range path itself (plan kernel, sieve, refine of the device plan) on the simulated
    # GPU: every plan array and every bitmap as on the CPU; 4 columns (two groups), a dead
    # query, a query without predicates, one on the second group only
    cols4 = np.column_stack([cols, rng.integers(0, 9, n).astype(np.uint32)])
    lo4 = np.array([[3, 5, 0, 2], [10, 0, 7, 0], [0, 0, 0, 0], [5, 0, 0, 0], [0, 0, 0, 3]],
                   np.uint32)
    hi4 = np.array([[30, 20, 33, 6], [39, 25, 9, 8], [5, 39, 39, 99], [4, 39, 39, 99],
                    [99, 99, 99, 3]], np.uint32)
    for params in ({}, {"encoding": False}, {"refine": "direct"}, {"sieve_vectors": 0},
                   {"group_size": 2, "selection": "positive"}, {"layout": "paper"},
                   {"sieve_fine": 0}):
        idx = indexzoo.create("rtscan", device="cpu", threads_per_block=32,
                              **{"sieve_vectors": 16, "refine": "rt", **params}).build(cols4)
        st = idx.state
        cpu = idx._plan(st, lo4, hi4)
        gpu = idx._plan(st, lo4, hi4, "cuda")
        for f in ("plo", "phi", "rk", "sel", "ends"):
            assert np.array_equal(getattr(cpu, f), getattr(gpu, f)), (params, f)
        cnt = cpu.count_column
        kept = cpu.boxes[:, :, cnt] > 0
        assert np.array_equal(cpu.boxes[:, :, cnt], gpu.boxes[:, :, cnt]), params
        assert np.array_equal(cpu.boxes[kept], gpu.boxes[kept]), params
        want = idx.range(lo4, hi4, out="bitmap").bitmap
        got = np.empty_like(want)
        idx._answer(st, lo4, hi4, got, device="cuda")
        assert np.array_equal(got, want), (params, "range path")
        if params.get("refine") == "direct":  # past STRIDED_QUERIES: the summed refine
            copies = []
            real = M.to_numpy
            M.to_numpy = lambda a: copies.append(1) or real(a)
            many = np.empty((10, want.shape[1]), np.uint32)
            idx._answer(st, np.tile(lo4, (2, 1)), np.tile(hi4, (2, 1)), many, device="cuda")
            assert np.array_equal(many, np.tile(want, (2, 1))), (params, "summed direct")
            assert len(copies) == 1, copies  # the summed refine's sizes
            idx._answer(st, lo4, hi4, got, device="cuda")
            assert len(copies) == 1, copies  # a strided batch waits for nothing
            M.to_numpy = real
    # the GPU's small calls with the launches bound (one group: three columns), against the
    # CPU: every direct-refine configuration, batches of one to three queries, a dead query
    from indexzoo.plugins.rtscan.prepared import prepared_direct
    for params in ({}, {"encoding": False}, {"sieve_vectors": 0}, {"selection": "positive"},
                   {"selection": "negative"}, {"layout": "paper"}, {"sieve_fine": 0}):
        idx = indexzoo.create("rtscan", device="cpu", threads_per_block=32,
                              **{"sieve_vectors": 16, "refine": "direct", **params}).build(cols)
        bound = prepared_direct(idx, idx.state, "cuda", 2, 16, -1)
        lo5 = np.vstack([lo, [[5, 0, 0]]]).astype(np.uint32)  # query 3 is dead
        hi5 = np.vstack([hi, [[4, 39, 39]]]).astype(np.uint32)
        for rows in (slice(0, 1), slice(1, 3), slice(3, 4), slice(0, 4)):  # the last: past 2
            want = idx.range(lo5[rows], hi5[rows], out="bitmap").bitmap
            got = bound(np.ascontiguousarray(lo5[rows]), np.ascontiguousarray(hi5[rows]))
            assert np.array_equal(got, want), (params, rows, "bound launches")
    # the sieve pass over several tiles and a partial one (626 words, tiles of 4 x 32)
    n2 = 20_011
    cols2 = np.column_stack([rng.integers(0, 5000, n2).astype(np.uint32) for _ in range(3)])
    idx = indexzoo.create("rtscan-direct", device="cpu", threads_per_block=32).build(cols2)
    a, b = (rng.integers(0, 5000, (6, 3)).astype(np.uint32) for _ in range(2))
    sel2 = np.ascontiguousarray(idx._plan(idx.state, np.minimum(a, b), np.maximum(a, b)).sel[0])
    words = [np.empty((6, (n2 + 31) // 32), np.uint32) for _ in range(2)]
    for dev, w in zip(("cpu", "cuda"), words):
        S.approximate_sel(dev, idx.state.sieve.vectors, sel2, n2, w, 32)
    assert np.array_equal(words[0], words[1]), "sieve over several tiles"
    print("simulator agrees")
""")


WARP_RANKS_SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    import indexzoo
    from indexzoo.plugins.rtscan.launches import rank_launch
    from indexzoo.plugins.rtscan.plan import RK_COLUMNS

    dt, n, params = np.dtype("{dtype}").type, {n}, {params}
    rng = np.random.default_rng(n)
    top = np.iinfo(dt).max
    runs = np.sort(rng.integers(0, 40, n)).astype(dt)[rng.permutation(n)]
    ends = np.where(rng.random(n) < 0.5, dt(0), dt(top)).astype(dt)
    wide = rng.integers(1, 2**32 - 1, n).astype(dt) * dt(3)
    cols = np.column_stack([runs, ends, wide])
    idx = indexzoo.create("rtscan-direct", device="cpu", **params).build(cols)
    st = idx.state
    srt = np.sort(cols, axis=0)
    picks = rng.choice(n, 3, replace=False)
    vals = np.concatenate([srt[picks], srt[picks] - dt(1), srt[picks] + dt(1),
                           np.array([[0, 0, 0], [top, top, top]], dt)])
    lo = np.ascontiguousarray(vals[:4])
    hi = np.ascontiguousarray(np.maximum(vals[4:8], lo))
    lo[1], hi[2] = 0, top
    q = lo.shape[0]
    want, got = (np.zeros((q, 3, RK_COLUMNS), np.int64) for _ in range(2))
    kernel, args, group = rank_launch(st.tables, st.lc, idx._sieve_args(st))
    assert group == 32
    kernel("cpu", 6 * q, lo, hi, *args, want)
    kernel("cuda", 6 * q, lo, hi, *args, got, group=group, threads_per_block=64)
    assert np.array_equal(got, want), (got, want)
    for k in range(3):
        assert np.array_equal(want[:, k, 0], np.searchsorted(srt[:, k], lo[:, k], "left"))
        assert np.array_equal(want[:, k, 1], np.searchsorted(srt[:, k], hi[:, k], "right"))
    print("simulator agrees")
""")


@pytest.mark.parametrize("dtype,n,params", [
    ("uint64", 70_001, {}),
    pytest.param("uint32", 70_001, {"sieve_fine": 0}, marks=pytest.mark.exhaustive),
    pytest.param("uint32", 5 * 64 + 7, {"sieve_vectors": 0}, marks=pytest.mark.exhaustive),
    pytest.param("uint64", 5 * 64 + 7, {}, marks=pytest.mark.exhaustive),
])
def test_the_warp_rank_search_is_the_threads_in_the_simulator(dtype: str, n: int,
                                                              params: dict[str, Any]) -> None:
    """The compact layout's rank search on the GPU (a warp a predicate side, votes over 32
    probes; :mod:`.plan_cuda`) and its sieve choice give what a thread a side gives on the CPU
    and NumPy's ``searchsorted``: long runs, values at both ends of the key range, bounds one
    below and above sampled values; 70,001 rows take several rounds of votes through the
    sample (1,094 entries), 327 rows one."""
    agrees_in_the_simulator(WARP_RANKS_SCRIPT.format(dtype=dtype, n=n, params=params))


QUERY_PLAN_SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from numba import cuda
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic
    cuda.atomic = FakeCUDAAtomic()  # the simulator's atomics, for helpers outside kernels
    import indexzoo
    from indexzoo.plugins.rtscan import launches as L
    from indexzoo.plugins.rtscan.prepared import prepared_direct

    rng = np.random.default_rng(8)
    n = 5_003
    cols = np.column_stack([rng.integers(0, 40, n), rng.integers(0, 3000, n),
                            np.where(rng.random(n) < 0.5, 0, 2**32 - 1)]).astype(np.uint32)
    idx = indexzoo.create("rtscan-direct", device="cpu", threads_per_block=32).build(cols)
    assert L.query_plan_group_size(3) == 192
    bound = prepared_direct(idx, idx.state, "cuda", 2, 16, -1)
    lo = np.array([[3, 100, 0], [0, 0, 1], [39, 2999, 2**32 - 1]], np.uint32)
    hi = np.array([[30, 2000, 2**32 - 1], [5, 5, 2**32 - 2], [39, 2999, 2**32 - 1]], np.uint32)
    for rows in (slice(0, 1), slice(1, 3)):  # one query; two (the second is dead)
        want = idx.range(lo[rows], hi[rows], out="bitmap").bitmap
        got = bound(np.ascontiguousarray(lo[rows]), np.ascontiguousarray(hi[rows]))
        assert np.array_equal(got, want), rows
    print("simulator agrees")
""")


def test_a_small_calls_ranks_and_plan_in_one_launch_in_the_simulator() -> None:
    """The compact layout's small GPU call makes its ranks and plan in one launch, a block a
    query (a warp a predicate side, a barrier, then one thread's plan;
    :data:`~indexzoo.plugins.rtscan.launches.QUERY_PLAN`): its bitmaps are the CPU's, for one
    query and for two in one call, one of them dead."""
    agrees_in_the_simulator(QUERY_PLAN_SCRIPT)


def test_the_gpu_kernels_agree_with_the_cpu_in_the_simulator() -> None:
    """The sieve kernel, the RT refine (any-hit with numba-cuda's atomics), the direct refine
    and the plan kernel through ``cuda.jit`` under numba's CUDA simulator, on host plans and on
    the range path's device plan."""
    agrees_in_the_simulator(SIM_SCRIPT)


# ============================================================================ profiling
def test_stage_times_cover_build_and_lookup_stages(uniform3: list[np.ndarray]) -> None:
    index = indexzoo.create("rtscan", device="cpu", sieve_vectors=16, refine="rt")
    assert isinstance(index, RtscanIndex)
    timer = StageTimes("cpu")
    index.stage_timer = timer
    index.build(np.column_stack(uniform3))
    lo, hi = lt_bounds(uniform3, [0.3, 0.9])
    check(index, uniform3, lo, hi, "profiled")
    sec = timer.seconds()
    assert {"build_tables", "build_sieve", "build_bvh", "encode", "sieve", "refine",
            "merge"} <= set(sec)
    assert timer.counts["queries"] == 2 and timer.counts["rays"] > 0
    assert abs(sum(timer.shares().values()) - 1) < 1e-9
    index.stage_timer = None


# ============================================================================ benchmarks
@pytest.mark.slow
def test_the_benchmark_script_runs_small_on_the_cpu(tmp_path: Path) -> None:
    out = tmp_path / "rtscan.json"
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "studies" / "rtscan_targets.py"),
                          "--small", "--device", "cpu", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    import json

    report = json.loads(out.read_text())
    assert report["checks_failed"] == 0
    assert {r["workload"] for r in report["results"]} >= {"uniform", "zipf1.3", "small_domain"}


def test_the_footprint_benchmark_runs_small_on_the_cpu(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/studies/rtscan_footprint.py`` (its GPU run) on 3000 rows: every
    variant built, every answer checked, the footprints and the targets' line printed."""
    sys.path.insert(0, str(REPO / "benchmarks" / "studies"))
    try:
        import rtscan_footprint
    finally:
        sys.path.pop(0)
    out = tmp_path / "fp.json"
    assert rtscan_footprint.main(["--device", "cpu", "--rows", "3000", "--repeats", "1",
                                  "--warmup", "0", "--kinds", "lt,window",
                                  "--selectivities", "0.1,0.9", "--json", str(out)]) == 0
    import json

    report = json.loads(out.read_text())
    queries = [r for r in report["rows_measured"] if r["what"] == "query"]
    assert {r["variant"] for r in queries} == set(rtscan_footprint.VARIANTS)
    assert len(queries) == 4 * len(rtscan_footprint.VARIANTS)
    assert all(r["check"] == "ok" for r in queries)
    assert "summary" in capsys.readouterr().out


def test_the_tpch_reader_parses_tbl_files_like_the_csv_module(tmp_path: Path) -> None:
    # the vectorized reader (used without pyarrow) against the csv module line by line, on
    # chunks that cut lines in two, and on a last line without its newline
    sys.path.insert(0, str(REPO / "benchmarks" / "studies"))
    try:
        import rtscan_workloads as wl
    finally:
        sys.path.pop(0)
    path = wl.write_lineitem_sample(tmp_path / "lineitem.tbl", 500, seed=3)
    text = path.read_text()
    path.write_text(text.rstrip("\n"))
    values: dict[str, list[str]] = {k: [] for k in wl._TBL_FIELDS}
    for row in wl._rows(path, True):
        for k, i in wl._TBL_FIELDS.items():
            values[k].append(row[i])
    want = wl._from_text(values)
    for chunk in (97, 4096, 1 << 20):
        got = wl._read_tbl_numpy(path, chunk=chunk)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), chunk


def test_the_default_refines_directly_on_the_software_engine_and_with_rays_on_optix(
        uniform3: list[np.ndarray]) -> None:
    """``refine="auto"``: without RT cores the direct refine was measured faster and holds
    less (no BVH), so ``rtscan`` builds no scene there; on OptiX it is the paper's RT refine.
    Either way the answers are the same."""
    from types import SimpleNamespace

    auto = make(uniform3, refine="auto")
    assert auto.state.refine == "direct"
    assert all(g.gas is None for g in auto.state.groups)
    paper = make(uniform3)  # refine="rt"
    assert paper.state.refine == "rt" and all(g.gas is not None for g in paper.state.groups)
    assert auto.memory_footprint().resident_bytes < paper.memory_footprint().resident_bytes
    lo, hi = lt_bounds(uniform3, [0.3, 0.6])
    assert np.array_equal(check(auto, uniform3, lo, hi), check(paper, uniform3, lo, hi))
    optix = SimpleNamespace(hardware_traversal=True)
    assert auto._resolved_refine(optix) == "rt"  # type: ignore[arg-type]
    assert make(uniform3, "rtscan-direct")._resolved_refine(optix) == "direct"  # type: ignore[arg-type]
