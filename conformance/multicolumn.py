"""The ``columns`` checks: multi-column indexes (``capabilities.dims > 1``) against a NumPy
brute force, the AND of per-column predicates on the columns as the user gave them.

A multi-column index also takes one column, so every one-column check runs on it as well;
these checks add conjunctions of 2 to 5 columns, columns left unconstrained, columns of
different dtypes, correlated, skewed and small-domain columns, rows equal on some columns but
not all, bitmaps at row counts around multiples of 32, and bad multi-column input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from indexzoo import GpuIndex, InvalidInput, Out, Unsupported
from indexzoo.devices import to_device

from .context import Context, check
from .data import lookups, make_keys, ranges
from .oracle import ColumnsOracle, compare_mask

__all__ = ["distinct_rows", "table", "verify_columns"]

#: Most (lookups x rows) entries of one brute-force match mask.
MASK_BUDGET = 1 << 24

Cols = list[Any]


def _widths(ctx: Context) -> list[int]:
    """Column counts to try: 2, 3 and, where the index takes them, 4 and 5."""
    return [d for d in (2, 3, 4, 5) if d <= ctx.caps.dims]


def verify_columns(ctx: Context, index: GpuIndex, cols: Cols, *, values: Any = None,
                   points: Cols | None = None, bounds: tuple[Cols, Cols] | None = None,
                   label: str = "", modes: Iterable[Out] | None = None) -> None:
    """Every offered ``out`` mode agrees with the brute force on these lookups (batches cut
    to what a (lookups x rows) mask affords)."""
    oracle = ColumnsOracle(cols, values)
    keep = max(1, MASK_BUDGET // max(oracle.n, 1))

    def cut(c: Cols) -> Cols:
        return [None if x is None else x[:keep] for x in c]

    pts = None if points is None else cut(points)
    bnd = None if bounds is None else (cut(bounds[0]), cut(bounds[1]))
    problems: list[str] = []
    for mode in modes or ctx.modes:
        if pts is not None and ctx.caps.point:
            res = index.point(pts, out=mode)
            problems += compare_mask(res, oracle.point(pts), oracle, mode, index,
                                     f"{label} point")
        if bnd is not None and ctx.caps.range:
            res = index.range(bnd[0], bnd[1], out=mode)
            problems += compare_mask(res, oracle.range(*bnd), oracle, mode, index,
                                     f"{label} range")
    if problems:
        raise AssertionError(f"{ctx.name}: " + "\n".join(problems))


def distinct_rows(ctx: Context, cols: Cols) -> Cols:
    """``cols`` as they are for an index that takes duplicate rows; for one that does not,
    without the rows that repeat an earlier one on every column (-0.0 equals 0.0)."""
    n = cols[0].shape[0] if cols else 0
    if ctx.caps.duplicates or n < 2:
        return cols
    order = np.lexsort(cols[::-1])
    same = np.ones(n - 1, dtype=bool)
    for c in cols:
        s = c[order]
        same &= s[1:] == s[:-1]
    keep = np.ones(n, dtype=bool)
    keep[order[1:][same]] = False
    return [c[keep] for c in cols]


def _table(ctx: Context, kind: str, n: int, d: int, seed: int, *, wide: bool = True) -> Cols:
    """:func:`table` without repeated rows where the index takes no duplicate rows."""
    return distinct_rows(ctx, table(kind, n, d, seed, wide=wide))


def table(kind: str, n: int, d: int, seed: int, *, wide: bool = True) -> Cols:
    """``d`` columns of ``n`` rows of one kind (uint32 or uint64 columns)."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return [make_keys("uniform64" if wide and j % 2 else "uniform32", n, seed + j).keys
                for j in range(d)]
    if kind == "small_domain":
        return [rng.integers(0, 64, n).astype(np.uint32) for _ in range(d)]
    if kind == "zipf":
        return [(rng.zipf(a, n) % (2**32 - 1)).astype(np.uint32)
                for a in [1.1, 1.3, 1.5, 1.3, 1.1][:d]]
    if kind == "normal":
        return [np.clip(rng.normal(2**31, 1, n), 0, 2**32 - 1).astype(np.uint32)
                for _ in range(d)]
    if kind == "correlated":  # x = y = z
        x = make_keys("duplicates", n, seed).keys.astype(np.uint64)
        x = x if wide else (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return [x.copy() for _ in range(d)]
    if kind == "anticorrelated":  # y = max - x
        x = rng.integers(0, 2**32 - 1, n, dtype=np.uint64, endpoint=True).astype(np.uint32)
        return [x if j % 2 == 0 else np.uint32(2**32 - 1) - x for j in range(d)]
    if kind == "all_equal":
        return [np.full(n, 2**31 + j, dtype=np.uint32) for j in range(d)]
    if kind == "duplicate_rows":  # few distinct rows, and rows sharing some columns
        base = rng.integers(0, 5, (max(n, 1), d)).astype(np.uint32)[:n]
        return [base[:, j].copy() for j in range(d)]
    raise ValueError(f"unknown table kind {kind!r}")


KINDS = ("uniform", "small_domain", "zipf", "normal", "correlated", "anticorrelated",
         "all_equal", "duplicate_rows")


def point_rows(cols: Cols, q: int, seed: int) -> Cols:
    """Point lookups: whole rows of the table (hits), rows mixing columns of different rows
    (hits on some columns only) and per-column values of every kind (mostly misses)."""
    rng = np.random.default_rng(seed)
    n = cols[0].shape[0]
    out = [lookups(c, q, seed + j) for j, c in enumerate(cols)]
    if n:
        whole, mixed = rng.random(q) < 0.4, rng.random(q) < 0.2
        row = rng.integers(0, n, q)
        for j, c in enumerate(cols):
            other = rng.integers(0, n, q)
            out[j][whole] = c[row[whole]]
            out[j][mixed] = c[np.where(rng.random(int(mixed.sum())) < 0.5, row[mixed],
                                       other[mixed])]
    return out


def range_bounds(cols: Cols, q: int, seed: int) -> tuple[Cols, Cols]:
    """Per-column bounds of every width (empty, single keys, around keys, whole domain)."""
    pairs = [ranges(c, q, seed + 7 * j) for j, c in enumerate(cols)]
    rng = np.random.default_rng(seed)
    lo, hi = [p[0] for p in pairs], [p[1] for p in pairs]
    for j, c in enumerate(cols):  # some lookups leave a column open (its whole domain)
        full = rng.random(q) < 0.3
        lo[j][full], hi[j][full] = 0, np.iinfo(c.dtype).max
    return lo, hi


# ====================================================================== the checks
@check("columns", needs=("multi",))
def check_conjunctions_match_the_and_of_column_predicates(ctx: Context) -> None:
    """2 to 5 columns of every kind (uniform, small domain, Zipf, normal, correlated,
    anti-correlated, all equal, duplicate rows): every out mode is the AND of the per-column
    predicates (hypothesis)."""

    @ctx.settings()
    @given(kind=st.sampled_from(KINDS), d=st.sampled_from(_widths(ctx)),
           n=st.one_of(st.integers(0, ctx.n_max), st.sampled_from([0, 1, 2, 33, ctx.n_max])),
           seed=st.integers(0, 2**32 - 1))
    def prop(kind: str, d: int, n: int, seed: int) -> None:
        cols = _table(ctx, kind, n, d, seed, wide=ctx.wide)
        index = ctx.new().build(cols)
        verify_columns(ctx, index, cols, points=point_rows(cols, ctx.n_lookups // 4, seed),
                       bounds=range_bounds(cols, ctx.n_ranges, seed),
                       label=f"{kind} table (n={n}, d={d}, seed={seed})")

    ctx.seeded(prop)()


@check("columns", needs=("multi",))
def check_a_2d_array_and_a_list_of_columns_build_the_same_index(ctx: Context) -> None:
    """build((N, d) array) and build([col0, col1, ...]) answer alike, and lookups given as
    (Q, d) arrays or lists of columns too; custom values are summed."""
    d = _widths(ctx)[-1] if ctx.caps.dims < 4 else 3
    cols = _table(ctx, "small_domain", 1500, d, 31)
    values = np.random.default_rng(31).integers(0, 2**64 - 1, cols[0].shape[0],
                                                dtype=np.uint64, endpoint=True)
    pts = point_rows(cols, 200, 31)
    lo, hi = range_bounds(cols, 200, 31)
    for label, keys in (("2-D array", np.column_stack(cols)), ("list of columns", cols),
                        ("tuple of columns", tuple(cols))):
        index = ctx.new().build(keys, values)
        verify_columns(ctx, index, cols, values=values, points=pts, bounds=(lo, hi),
                       label=f"keys as {label}")
        if ctx.caps.point:
            verify_columns(ctx, index, cols, values=values, label=f"keys as {label}",
                           points=list(np.column_stack(pts).T))
        if ctx.caps.range:  # (Q, d) arrays of bounds
            for mode in ctx.modes:
                a = index.range(np.column_stack(lo), np.column_stack(hi), out=mode).to_host()
                b = index.range(lo, hi, out=mode).to_host()
                for x, y in zip(_arrays(a), _arrays(b), strict=True):
                    np.testing.assert_array_equal(x, y, err_msg=f"(Q, d) bounds, {mode}")


def _arrays(res: Any) -> list[np.ndarray]:
    return [a for a in (res.rowid, res.count, res.sum, res.offsets, res.rowids, res.bitmap)
            if a is not None]


@check("columns", needs=("multi", "range"))
def check_none_leaves_a_column_unconstrained(ctx: Context) -> None:
    """``lo[j] = None`` drops column j's lower bound, ``hi[j] = None`` its upper bound, both
    drop the column: the same answers as the oracle with that side open."""
    d = min(3, ctx.caps.dims)
    cols = _table(ctx, "uniform", 2000, d, 41, wide=ctx.wide)
    lo, hi = range_bounds(cols, 250, 41)
    cases = [([None, *lo[1:]], hi), (lo, [None, *hi[1:]]), ([None, *lo[1:]], [None, *hi[1:]]),
             ([*lo[:-1], None], [*hi[:-1], None])]
    index = ctx.new().build(cols)
    for j, (a, b) in enumerate(cases):
        verify_columns(ctx, index, cols, bounds=(a, b), label=f"None case {j}")


@check("columns", needs=("multi",))
def check_columns_of_different_dtypes_each_use_their_own_key_map(ctx: Context) -> None:
    """Signed, float (with -0.0 and negatives), 8-bit and datetime columns in one index
    (int32 for the 64-bit ones where the index takes 32-bit keys only): each column compares
    in its own dtype."""
    rng = np.random.default_rng(51)
    n = 1200
    cols_all: Cols = [
        rng.integers(-1000, 1000, n).astype(np.int64),
        np.concatenate([rng.normal(0, 10, n - 4), [-0.0, 0.0, -np.inf, np.inf]]
                       ).astype(np.float32)[rng.permutation(n)],
        rng.integers(0, 256, n).astype(np.uint8),
        (np.datetime64("2024-01-01") + rng.integers(0, 400, n)).astype("datetime64[D]"),
        rng.integers(-(2**62), 2**62, n).astype(np.int64),
    ]
    if not ctx.wide:  # 32-bit keys only: int32 columns in place of the 64-bit ones
        cols_all[0] = cols_all[0].astype(np.int32)
        cols_all[3] = (cols_all[3] - np.datetime64("2024-01-01")).astype(np.int32)
        cols_all[4] = (cols_all[4] >> 32).astype(np.int32)
    d = min(ctx.caps.dims, 5)
    cols = distinct_rows(ctx, cols_all[:d])
    n = cols[0].shape[0]
    index = ctx.new().build(cols)
    q = 150
    pts: Cols = [c[rng.integers(0, n, q)] for c in cols]
    lo: Cols = [np.minimum(c[rng.integers(0, n, q)], c[rng.integers(0, n, q)]) for c in cols]
    hi: Cols = [np.maximum(c[rng.integers(0, n, q)], lo[j]) for j, c in enumerate(cols)]
    verify_columns(ctx, index, cols, points=pts, bounds=(lo, hi), label="mixed dtypes")
    assert tuple(index.key_dtypes) == tuple(c.dtype for c in cols), index.key_dtypes


@check("columns", needs=("multi",))
def check_points_need_every_column_equal(ctx: Context) -> None:
    """A point lookup matches the rows equal to it on every column: duplicate rows all, rows
    equal on some columns only none."""
    d = min(3, ctx.caps.dims)
    cols = distinct_rows(ctx, [np.array([1, 1, 1, 2, 1, 1], dtype=np.uint32),
                               np.array([5, 5, 6, 5, 5, 7], dtype=np.uint32),
                               np.array([9, 9, 9, 9, 8, 9], dtype=np.uint32)][:d])
    index = ctx.new().build(cols)
    pts = [np.array([1, 1, 2, 3, 1], dtype=np.uint32), np.array([5, 6, 5, 5, 7], np.uint32),
           np.array([9, 9, 9, 9, 9], dtype=np.uint32)][:d]
    verify_columns(ctx, index, cols, points=pts,
                   bounds=(pts, pts) if ctx.caps.range else None, label="equal on some")


@check("columns", needs=("multi",))
def check_bitmaps_at_row_counts_around_multiples_of_32(ctx: Context) -> None:
    """n = 1, 31, 32, 33, 63, 64, 65, 100: one row of ceil(n/32) words per lookup, the bits
    past row n-1 zero."""
    for n in (1, 31, 32, 33, 63, 64, 65, 100):
        cols = table("small_domain", n, 2, n)
        if not ctx.caps.duplicates:  # n distinct rows
            cols[0] = np.random.default_rng(n).permutation(n).astype(np.uint32)
        index = ctx.new().build(cols)
        lo = [np.zeros(4, np.uint32), np.array([0, 0, 10, 70], np.uint32)]
        hi = [np.full(4, 63, np.uint32), np.array([63, 5, 30, 80], np.uint32)]
        verify_columns(ctx, index, cols, points=point_rows(cols, 20, n),
                       bounds=(lo, hi) if ctx.caps.range else None, label=f"n={n}")


def _bad_column_calls(ctx: Context, d: int) -> list[tuple[str, Callable[[GpuIndex], Any]]]:
    q = [np.array([1, 2], np.uint32)] * d
    floats = np.float64 if ctx.wide else np.float32  # float64 keys need uint64 keys
    calls: list[tuple[str, Callable[[GpuIndex], Any]]] = [
        ("columns of different lengths",
         lambda i: i.build([np.arange(5, dtype=np.uint32), np.arange(4, dtype=np.uint32)])),
        (f"{ctx.caps.dims + 1} columns", lambda i: i.build([np.arange(3)] * (ctx.caps.dims + 1))),
        ("a NaN in a float column",
         lambda i: i.build([np.arange(3, dtype=np.uint32),
                            np.array([1.0, np.nan, 2.0], dtype=floats)])),
        ("a None key column", lambda i: i.build([np.arange(3), None])),
    ]
    if ctx.caps.point:
        calls += [
            ("point lookups with one column too few", lambda i: i.point(q[:-1])),
            ("point lookups with one column too many", lambda i: i.point(q + q[:1])),
            ("(Q, d+1) point lookups", lambda i: i.point(np.zeros((2, d + 1), np.uint32))),
            ("point lookups of 3-D shape", lambda i: i.point(np.zeros((2, d, 1), np.uint32))),
            ("point lookup columns of different lengths",
             lambda i: i.point([np.arange(3, dtype=np.uint32), *q[1:]])),
            ("a None point column", lambda i: i.point([None, *q[1:]])),
        ]
    if ctx.caps.range:
        calls += [
            ("lo with d columns, hi with d-1", lambda i: i.range(q, q[:-1])),
            ("lo and hi of other lengths", lambda i: i.range(q, [c[:1] for c in q])),
            ("bounds all None", lambda i: i.range([None] * d, [None] * d)),
            ("NaN bounds on an integer column",
             lambda i: i.range([np.array([np.nan])] + [c[:1] for c in q[1:]],
                               [c[:1] for c in q])),
            ("float bounds on an integer column",
             lambda i: i.range([np.array([1.5, 2.0]), *q[1:]], q)),
        ]
    return calls


@check("columns", needs=("multi",))
def check_bad_multi_column_input_raises_and_leaves_the_index_correct(ctx: Context) -> None:
    """Bad shapes, mismatched column counts and lengths, NaN: InvalidInput, and the index
    still answers right afterwards (nothing built half-way)."""
    d = min(3, ctx.caps.dims)
    cols = _table(ctx, "small_domain", 800, d, 61)
    pts = point_rows(cols, 100, 61)
    bounds = range_bounds(cols, 100, 61)
    index = ctx.new().build(cols)
    footprint = index.memory_footprint()
    for label, call in _bad_column_calls(ctx, d):
        try:
            call(index)
        except InvalidInput:
            pass
        except Exception as exc:
            raise AssertionError(f"{label}: raised {type(exc).__name__}: {exc}, "
                                 "expected InvalidInput") from exc
        else:
            raise AssertionError(f"{label}: no error, expected InvalidInput")
        verify_columns(ctx, index, cols, points=pts, bounds=bounds, label=f"after {label}")
        assert index.memory_footprint() == footprint, f"footprint changed after {label}"
    floats = np.float64 if ctx.wide else np.float32
    float_cols = [np.array([1.0, 2.0, 3.0], floats), np.array([4.0, 5.0, 6.0], floats)]
    if ctx.caps.range and ctx.caps.dims >= 2:
        fidx = ctx.new().build(float_cols)
        try:
            fidx.range([np.array([np.nan], floats), None], [np.array([2.0], floats), None])
        except InvalidInput:
            pass
        else:
            raise AssertionError("a NaN bound on a float column: no InvalidInput")


@check("columns", needs=("multi",))
def check_the_callers_columns_are_copied(ctx: Context) -> None:
    """Overwriting the columns passed to build() afterwards changes no answer; lookups leave
    the caller's arrays as they were (lists of columns and (Q, d) arrays alike)."""
    d = min(3, ctx.caps.dims)
    host = _table(ctx, "uniform", 1500, d, 71, wide=ctx.wide)
    cols = [to_device(c.copy(), ctx.device) for c in host]
    index = ctx.new().build(cols)
    pts = point_rows(host, 150, 71)
    lo, hi = range_bounds(host, 150, 71)
    dev_pts = [to_device(c.copy(), ctx.device) for c in pts]
    for c in cols:
        c[:] = c[::-1].copy()
    if ctx.caps.point:
        index.point(dev_pts, out="rowids" if "rowids" in ctx.modes else ctx.modes[0])
        for a, b in zip(dev_pts, pts, strict=True):
            np.testing.assert_array_equal(np.asarray(a if isinstance(a, np.ndarray) else a.get()),
                                          b, err_msg="point() changed the caller's lookups")
    if ctx.caps.range:
        # (Q, d) C-contiguous bounds of the columns' one dtype: the contract hands the caller's
        # own arrays to the hooks (no key map to apply), which must only read them
        same = _table(ctx, "uniform", 1500, d, 72, wide=False)
        one = ctx.new().build([to_device(c, ctx.device) for c in same])
        lo2, hi2 = (np.ascontiguousarray(np.column_stack(b)) for b in range_bounds(same, 150, 72))
        dev2 = [to_device(a.copy(), ctx.device) for a in (lo2, hi2)]
        for mode in ctx.modes:
            one.range(dev2[0], dev2[1], out=mode)
            for a, b, side in zip(dev2, (lo2, hi2), ("lo", "hi"), strict=True):
                np.testing.assert_array_equal(
                    np.asarray(a if isinstance(a, np.ndarray) else a.get()), b,
                    err_msg=f"range(out={mode!r}) changed the caller's (Q, d) {side} bounds")
    verify_columns(ctx, index, host, points=pts, bounds=(lo, hi),
                   label="columns overwritten after build")


@check("columns", needs=("multi",))
def check_updates_of_a_multi_column_build_raise_unsupported(ctx: Context) -> None:
    """update() of a multi-column build raises Unsupported (updates are one-column only)."""
    index = ctx.new().build(_table(ctx, "small_domain", 10, 2, 1))
    try:
        index.update([0], [1])
    except Unsupported:
        return
    raise AssertionError("update() of a multi-column build must raise Unsupported")
