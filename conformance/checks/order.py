"""The ``order`` conformance checks."""

from __future__ import annotations

import numpy as np

from indexzoo.devices import to_numpy

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges
from .common import key_set, snapshot


# ====================================================================== order
@check("order")
def check_build_order_does_not_change_answers(ctx: Context) -> None:
    """Sorted, reversed and shuffled builds of the same keys give the same answers."""
    base = make_keys("clustered", 2500, 6, duplicates=ctx.caps.duplicates).keys
    q = lookups(base, ctx.n_lookups, 6)
    lo, hi = ranges(base, ctx.n_lookups, 6)
    counts = []
    for label, keys in (("sorted", np.sort(base)), ("reversed", np.sort(base)[::-1].copy()),
                        ("shuffled", base)):
        index = ctx.new().build(keys)
        verify(ctx, index, keys, points=q, rng=(lo, hi), label=f"{label} build")
        if "count" in ctx.modes:
            counts.append(to_numpy(index.point(q, out="count").count) if ctx.caps.point else
                          to_numpy(index.range(lo, hi, out="count").count))
    for c in counts[1:]:
        np.testing.assert_array_equal(c, counts[0], err_msg="counts depend on the build order")


@check("order")
def check_results_follow_the_lookup_order(ctx: Context) -> None:
    """Permuted lookups give the same answers, permuted the same way."""
    keys = make_keys("uniform32", 2000, 2, duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    q = lookups(keys, ctx.n_lookups, 2)
    lo, hi = ranges(keys, ctx.n_lookups, 2)
    perm = np.random.default_rng(2).permutation(q.shape[0])
    for mode in ctx.modes:
        if mode in ("rowid", "rowids"):
            continue  # any match may be reported: compared against the oracle instead
        if ctx.caps.point:
            a = to_numpy(getattr(index.point(q, out=mode), mode))
            b = to_numpy(getattr(index.point(q[perm], out=mode), mode))
            np.testing.assert_array_equal(a[perm], b, err_msg=f"point out={mode}")
        if ctx.caps.range:
            a = to_numpy(getattr(index.range(lo, hi, out=mode), mode))
            b = to_numpy(getattr(index.range(lo[perm], hi[perm], out=mode), mode))
            np.testing.assert_array_equal(a[perm], b, err_msg=f"range out={mode}")
    verify(ctx, index, keys, points=q[perm], rng=(lo[perm], hi[perm]), label="permuted lookups")


@check("order")
def check_repeated_calls_give_identical_results(ctx: Context) -> None:
    """The same lookups twice give bit-identical results in every mode."""
    keys = key_set(ctx, "duplicates", 3000, 4, unique="uniform32")
    index = ctx.new().build(keys)
    q = lookups(keys, ctx.n_lookups, 4)
    r = ranges(keys, ctx.n_lookups, 4)
    for x, y in zip(snapshot(index, q, r), snapshot(index, q, r), strict=True):
        np.testing.assert_array_equal(x, y, err_msg="two identical calls differ")


@check("order")
def check_chunked_batches_give_the_same_answers(ctx: Context) -> None:
    """A batch cut into chunks (max_batch) answers like one batch."""
    keys = make_keys("clustered", 2000, 7, duplicates=ctx.caps.duplicates).keys
    q = lookups(keys, 1001, 7)
    r = ranges(keys, 1001, 7)
    whole = snapshot(ctx.new().build(keys), q, r)
    chunked = snapshot(ctx.new(max_batch=64).build(keys), q, r)
    for x, y in zip(whole, chunked, strict=True):
        if x.shape == y.shape:
            np.testing.assert_array_equal(x, y, err_msg="chunked batch differs")
    verify(ctx, ctx.new(max_batch=64).build(keys), keys, points=q, rng=r, label="max_batch=64")


@check("order")
def check_sorted_probes_answer_in_the_callers_order(ctx: Context) -> None:
    """With sort_probes the index answers a sorted batch and puts every answer back in the
    caller's order (every out mode, duplicates, misses, a batch cut into chunks)."""
    keys = key_set(ctx, "duplicates", 2000, 9, unique="clustered")
    q = lookups(keys, 700, 9)
    r = ranges(keys, 500, 9)
    for extra in ({}, {"max_batch": 97}):
        index = ctx.new(sort_probes=True, **extra).build(keys)
        verify(ctx, index, keys, points=q, rng=r, label=f"sort_probes {extra}")
