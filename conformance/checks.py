"""The conformance checks: small functions, each named for the property of the contract it
guards, grouped, and selected by the index's capabilities.

Every check takes a :class:`Context` (how to make a fresh index of the plugin under test, on
which device, at which size) and raises ``AssertionError`` with a message that says what was
expected. Checks that need a capability (``range``, ``duplicates``, ``uint64``) are only run
for indexes that declare it; :func:`check_missing_capabilities_raise_unsupported` checks that
an index without it says so with ``Unsupported``.
"""

from __future__ import annotations

import copy
import pickle
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from indexzoo import (
    OUT_MODES,
    Capabilities,
    GpuIndex,
    IndexParams,
    InvalidInput,
    NotBuilt,
    Out,
    Unsupported,
    persist,
)
from indexzoo.contract import check_plugin_class
from indexzoo.devices import to_device, to_numpy
from indexzoo.errors import PluginError
from indexzoo.hooks import resolve
from indexzoo.native.targets import SERIAL_BELOW
from indexzoo.registry import available, load

from .context import Context, check, verify
from .data import EXTREME_KEYS_32, EXTREME_KEYS_64, FAMILIES, lookups, make_keys, ranges
from .oracle import Oracle, compare

#: A batch this large is always checked, whatever the kernels' thresholds.
LARGE_BATCH = 5000


def _snapshot(index: GpuIndex, points: np.ndarray, rng: tuple[np.ndarray, np.ndarray] | None,
              ) -> list[np.ndarray]:
    """Every result array of every mode, on the host, for bit-exact comparisons."""
    out = []
    for mode in index.capabilities.out_modes:
        results = [index.point(points, out=mode)] if index.capabilities.point else []
        if rng is not None and index.capabilities.range:
            results.append(index.range(rng[0], rng[1], out=mode))
        for r in results:
            out += _host_arrays(r)
    return out


def _host_arrays(result: Any) -> list[np.ndarray]:
    """The arrays of one lookup result, on the host."""
    h = result.to_host()
    return [a for a in (h.rowid, h.count, h.sum, h.offsets, h.rowids, h.bitmap) if a is not None]


# ====================================================================== contract
@check("contract")
def check_class_declares_the_contract(ctx: Context) -> None:
    """The class has a name, Params (an IndexParams with valid defaults), capabilities, a doc."""
    index = ctx.new()
    cls = type(index)
    assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
    assert issubclass(cls.Params, IndexParams), "Params must subclass indexzoo.IndexParams"
    cls.Params()  # defaults must validate
    assert isinstance(cls.capabilities, Capabilities)
    assert cls.__doc__ and cls.__doc__.strip(), "the class needs a docstring (indexzoo list shows it)"
    assert ctx.caps.point or ctx.caps.range, "an index must offer point or range lookups"
    assert set(ctx.caps.out_modes) <= set(OUT_MODES) and ctx.caps.out_modes
    assert index.device == ctx.device, f"index is on {index.device!r}, asked for {ctx.device!r}"
    assert not index.is_built


@check("contract")
def check_hooks_match_the_operation_table(ctx: Context) -> None:
    """Every hook is an operation of the table, with its signature, for an operation the
    capabilities declare; every declared operation is answered; the plugin API is one this
    indexzoo takes."""
    cls = ctx.cls if ctx.cls is not None else type(ctx.new())
    try:
        check_plugin_class(cls)
    except PluginError as exc:
        raise AssertionError(str(exc)) from None


@check("contract")
def check_a_subclass_hook_answers_on_every_path(ctx: Context) -> None:
    """A subclass that overrides the hook answering an operation is the one called, for a
    batch of the keys' own dtype (the prepared point path) and of another dtype (the general
    path), and answers as the class does."""
    plain = ctx.new()
    cls = type(plain)
    routes = resolve(cls, GpuIndex).routes
    hooks = sorted({r.source.hook for r in routes.values()})
    called: list[str] = []

    def spy(name: str) -> Callable[..., Any]:
        def hook(self: Any, st: Any, *args: Any) -> Any:
            called.append(name)
            return getattr(super(spied, self), name)(st, *args)
        hook.__name__ = name
        return hook

    spied = type(f"Spied{cls.__name__}", (cls,), {h: spy(h) for h in hooks})
    index = spied(plain.params, device=ctx.device)
    keys = make_keys("dense", 2000, 11, duplicates=ctx.caps.duplicates).keys
    keys = keys if ctx.wide else keys.astype(np.uint32)
    index.build(keys)
    plain.build(keys)
    native = lookups(keys, 300, 11)
    top = native.dtype.type(np.iinfo(native.dtype).max)
    wide = np.where(native > top - 2, top, native + native.dtype.type(2))
    for dtype in (native.dtype, np.dtype(np.int64)):
        q = to_device(native.astype(dtype), ctx.device)
        hi = to_device(wide.astype(dtype), ctx.device)
        for op, route in sorted(routes.items(), key=lambda kv: (kv[0].kind, kv[0].out)):
            called.clear()
            if op.kind == "point":
                got, want = index.point(q, out=op.out), plain.point(q, out=op.out)
            else:
                got, want = index.range(q, hi, out=op.out), plain.range(q, hi, out=op.out)
            where = f"{op.kind} {op.out} of {dtype} lookups"
            assert route.source.hook in called, (
                f"{where}: the subclass overrides {route.source.hook} (which answers it), yet "
                f"it was not called (called: {sorted(set(called)) or 'nothing'})")
            for a, b in zip(_host_arrays(got), _host_arrays(want), strict=True):
                assert np.array_equal(a, b), f"{where}: the subclass answers otherwise"


# ====================================================================== differential
def _family_check(family: str) -> Callable[[Context], None]:
    def run(ctx: Context) -> None:
        sizes = st.one_of(st.integers(0, ctx.n_max),
                          st.sampled_from([0, 1, 2, 3, 64, 1000, ctx.n_max]))

        @ctx.settings()
        @given(n=sizes, seed=st.integers(0, 2**32 - 1))
        def prop(n: int, seed: int) -> None:
            ks = make_keys(family, n, seed, duplicates=ctx.caps.duplicates)
            keys = ks.keys if ctx.wide else ks.keys.astype(np.uint32)
            index = ctx.new().build(keys)
            verify(ctx, index, keys, points=lookups(keys, ctx.n_lookups, seed),
                   rng=ranges(keys, ctx.n_ranges, seed),
                   label=f"{family} keys (n={keys.shape[0]}, seed={seed})")

        prop()

    run.__doc__ = f"Every out mode agrees with the oracle on {family} keys (hypothesis)."
    return run


for _family in FAMILIES:
    _needs = {"duplicates": ("duplicates",), "all_equal": ("duplicates",),
              "uniform64": ("uint64",)}.get(_family, ())
    _fn = _family_check(_family)
    _fn.__name__ = f"check_differential_{_family}"
    check("differential", needs=_needs)(_fn)


@check("differential")
def check_differential_small_sets_drawn_key_by_key(ctx: Context) -> None:
    """Small key sets and lookups drawn value by value, so hypothesis shrinks a failure to a
    minimal example (a few keys, one lookup)."""

    @ctx.settings()
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        bits = 64 if ctx.wide and data.draw(st.booleans(), label="64-bit") else 32
        top = (1 << bits) - 1
        specials = [v for v in (*EXTREME_KEYS_64, 2**32 - 2) if v <= top]
        value = st.one_of(st.integers(0, 40), st.sampled_from(specials), st.integers(0, top))
        keys = data.draw(st.lists(value, max_size=48, unique=not ctx.caps.duplicates),
                         label="keys")
        probe = st.one_of(st.sampled_from(keys), value) if keys else value
        q = data.draw(st.lists(probe, min_size=1, max_size=24), label="lookups")
        pairs = data.draw(st.lists(st.tuples(probe, probe), min_size=1, max_size=24),
                          label="ranges")
        dtype = np.uint64 if bits == 64 else np.uint32
        k = np.array(keys, dtype=dtype)
        index = ctx.new().build(k)
        verify(ctx, index, k, points=np.array(q, dtype=dtype),
               rng=(np.array([a for a, _ in pairs], dtype=dtype),
                    np.array([b for _, b in pairs], dtype=dtype)),
               label=f"keys {keys}")

    prop()


@check("differential")
def check_custom_values_are_summed(ctx: Context) -> None:
    """``sum`` adds the given values (not the rowIDs), wrapping modulo 2^64."""
    rng = np.random.default_rng(5)
    ks = make_keys("uniform32", 3000, 5, duplicates=ctx.caps.duplicates).keys
    values = rng.integers(2**62, 2**64 - 1, ks.shape[0], dtype=np.uint64, endpoint=True)
    index = ctx.new().build(ks, values)
    verify(ctx, index, ks, values=values, points=lookups(ks, ctx.n_lookups, 5),
           rng=ranges(ks, ctx.n_lookups, 5), label="custom values", modes=["sum"])


# ====================================================================== out modes
@check("out_modes")
def check_rowid_is_a_match_or_the_miss_value(ctx: Context) -> None:
    """out='rowid' returns a matching rowID, or index.miss for a lookup without a match."""
    keys = ctx.keys([5, 9, 9, 14, 2**31] if ctx.caps.duplicates else [5, 9, 14, 2**31], 32)
    index = ctx.new().build(keys)
    q = np.array([9, 4, 5, 2**31, 2**31 + 1, 0, 14, 15], dtype=keys.dtype)
    verify(ctx, index, keys, points=q, rng=(q, q + 2), modes=["rowid"], label="rowid")
    assert index.miss == np.iinfo(index.rowid_dtype).max


@check("out_modes", needs=("rowids",))
def check_rowids_lists_every_match_once(ctx: Context) -> None:
    """out='rowids' gives exactly the set of matching rowIDs per lookup, none twice."""
    keys = make_keys("clustered", 2000, 3, duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    verify(ctx, index, keys, points=lookups(keys, 500, 3), rng=ranges(keys, 300, 3),
           modes=["rowids"], label="rowids")


@check("out_modes", needs=("bitmap",))
def check_bitmaps_are_packed_lsb_first_with_zero_padding(ctx: Context) -> None:
    """out="bitmap": one row of ceil(n/32) uint32 words per lookup, rowID r at bit r % 32 of
    word r // 32, padding bits zero (n = 1, 31, 32, 33, 63, 64, 65, 100 and 1000)."""
    for n in (1, 31, 32, 33, 63, 64, 65, 100, 1000):
        keys = make_keys("duplicates" if ctx.caps.duplicates else "dense", n, n,
                         duplicates=ctx.caps.duplicates).keys.astype(np.uint32)
        index = ctx.new().build(keys)
        top = np.uint32(2**32 - 1)
        verify(ctx, index, keys, points=np.concatenate([keys[:40], [top]]).astype(np.uint32),
               rng=(np.array([0, 0, 5, top], np.uint32), np.array([top, 0, 3, top], np.uint32)),
               label=f"n={n}", modes=["bitmap"])


@check("out_modes")
def check_unknown_out_mode_is_invalid_input(ctx: Context) -> None:
    """An out value that is no out mode raises InvalidInput naming the allowed ones."""
    index = ctx.new().build(ctx.keys([1, 2, 3], 32))
    bad_outs: tuple[Any, ...] = ("rowidz", None, 3)
    for bad in bad_outs:
        try:
            (index.point if ctx.caps.point else lambda q, out: index.range(q, q, out=out))(
                np.array([1], np.uint32), out=bad)
        except InvalidInput as exc:
            assert "'rowid', 'count', 'sum', 'rowids'" in str(exc), str(exc)
        else:
            raise AssertionError(f"out={bad!r} was accepted")


@check("out_modes", needs=("duplicates",))
def check_point_lookups_see_every_duplicate(ctx: Context) -> None:
    """A point lookup counts, sums and lists every duplicate of its key (multiplicity 1..2^10)."""
    mults = [1, 2, 3, 31, 32, 33, 255, 256, 1024]
    keys = np.repeat(np.arange(len(mults), dtype=np.uint32) * 7 + 3, mults)
    keys = keys[np.random.default_rng(1).permutation(keys.shape[0])]
    index = ctx.new().build(keys)
    q = np.arange(0, 7 * len(mults) + 5, dtype=np.uint32)
    verify(ctx, index, keys, points=q, rng=(q, q + 7), label="duplicates")


# ====================================================================== ranges
def _range_case(ctx: Context, keys: np.ndarray, lo: list[int], hi: list[int], label: str) -> None:
    index = ctx.new().build(keys)
    verify(ctx, index, keys, rng=(np.array(lo, keys.dtype), np.array(hi, keys.dtype)), label=label)


@check("ranges", needs=("range",))
def check_range_bounds_are_inclusive(ctx: Context) -> None:
    """[lo, hi] includes keys equal to lo and hi and excludes the neighbours lo-1 and hi+1."""
    keys = np.arange(100, 200, dtype=np.uint32)
    _range_case(ctx, keys, [120, 100, 150, 99, 199, 130], [130, 100, 150, 99, 200, 129],
                "inclusive bounds")


@check("ranges", needs=("range",))
def check_single_key_ranges(ctx: Context) -> None:
    """lo == hi finds exactly the key (with all its duplicates), or nothing."""
    keys = ctx.keys([7, 7, 9, 2**32 - 1] if ctx.caps.duplicates else [7, 9, 2**32 - 1], 32)
    _range_case(ctx, keys, [7, 8, 9, 2**32 - 1, 0], [7, 8, 9, 2**32 - 1, 0], "lo == hi")


@check("ranges", needs=("range",))
def check_inverted_ranges_are_empty(ctx: Context) -> None:
    """lo > hi is an empty range, not an error."""
    keys = np.arange(0, 50, dtype=np.uint32)
    _range_case(ctx, keys, [10, 49, 2**32 - 1, 1], [9, 0, 0, 0], "lo > hi")


@check("ranges", needs=("range",))
def check_full_cover_and_ranges_outside_the_keys(ctx: Context) -> None:
    """A range over the whole domain finds every key; ranges below min or above max nothing."""
    keys = make_keys("uniform32", 2000, 9, duplicates=ctx.caps.duplicates).keys
    keys = keys[(keys > 100) & (keys < 2**32 - 100)]
    kmin, kmax = int(keys.min()), int(keys.max())
    _range_case(ctx, keys, [0, 0, kmax + 1, 0, kmin], [2**32 - 1, kmin - 1, 2**32 - 1, kmin, kmax],
                "full cover / outside")


@check("ranges", needs=("range", "uint64"))
def check_ranges_crossing_bit_split_boundaries(ctx: Context) -> None:
    """Ranges across 2^23, 2^32 and 2^46 (RX's 3D split points) find every key in between."""
    parts = []
    for b in (2**23, 2**32, 2**46):
        parts.append(np.arange(b - 40, b + 40, dtype=np.uint64))
    keys = np.concatenate(parts)
    lo = [b - 3 for b in (2**23, 2**32, 2**46)] + [2**23 - 40, 2**23, 0]
    hi = [b + 2 for b in (2**23, 2**32, 2**46)] + [2**46 + 39, 2**32 - 1, 2**64 - 1]
    _range_case(ctx, keys, lo, hi, "bit-split boundaries")


@check("ranges", needs=("range",))
def check_ranges_with_31_32_33_64_and_more_hits(ctx: Context) -> None:
    """Ranges with 31, 32, 33, 64, 65, 1000 hits (where scans switch to cooperative groups)."""
    keys = np.arange(1000, 4000, dtype=np.uint32) * 2
    lo = [2000] * 7
    hi = [2000 + 2 * (h - 1) for h in (31, 32, 33, 64, 65, 1000, 2999)]
    _range_case(ctx, keys, lo, hi, "hit counts around 32")


# ====================================================================== extremes
@check("extremes")
def check_extreme_keys_in_data_and_lookups(ctx: Context) -> None:
    """Keys and lookups at 0, 1, 2^23±1, 2^24+1, 2^32-1, 2^32, 2^64-2, 2^64-1."""
    for bits, extremes in ((32, EXTREME_KEYS_32), (64, EXTREME_KEYS_64)):
        if bits == 64 and not ctx.wide:
            continue
        top = (1 << bits) - 1
        around = sorted({min(max(v + d, 0), top) for v in extremes for d in (-1, 0, 1)})
        for keys in (ctx.keys(extremes, bits), ctx.keys(extremes[::2], bits)):
            index = ctx.new().build(keys)
            q = np.array(around, dtype=keys.dtype)
            lo = np.array(around * 3, dtype=keys.dtype)
            hi = np.array(around + [min(v + 1, top) for v in around] + [top] * len(around),
                          dtype=keys.dtype)
            verify(ctx, index, keys, points=q, rng=(lo, hi), label=f"extreme {bits}-bit keys")


# ====================================================================== sizes
@check("sizes")
def check_sizes_0_1_2_3_and_powers_of_two(ctx: Context) -> None:
    """Indexes of 0, 1, 2, 3, 2^k and 2^k±1 keys answer right."""
    ks = [4, 8, 12] if ctx.size == "small" else [4, 8, 12, 16, 20]
    sizes = [0, 1, 2, 3] + [s for k in ks for s in (2**k - 1, 2**k, 2**k + 1)]
    for n in sizes:
        keys = (np.arange(n, dtype=np.uint32) * 3 + 1)[np.random.default_rng(n).permutation(n)]
        index = ctx.new().build(keys)
        assert len(index) == n, f"len(index) = {len(index)}, built on {n} keys"
        q = np.arange(0, 3 * n + 3, max(1, n // 300), dtype=np.uint32)
        verify(ctx, index, keys, points=q, rng=(q, q + 4), label=f"n={n}")


@check("sizes")
def check_empty_index_misses_everything(ctx: Context) -> None:
    """An index built on no keys answers every lookup with a miss."""
    keys = np.zeros(0, dtype=np.uint64 if ctx.wide else np.uint32)
    index = ctx.new().build(keys)
    q = np.array([0, 1, 2**31, 2**32 - 1], dtype=keys.dtype)
    verify(ctx, index, keys, points=q, rng=(np.zeros_like(q), q), label="empty index")


@check("sizes")
def check_lookup_batches_of_awkward_sizes(ctx: Context) -> None:
    """Batches of 0, 1 and sizes that are no multiple of any block or group size."""
    keys = make_keys("dense", 3000, 4, duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    for q in (0, 1, 7, 31, 33, 255, 257, 1000, 4097):
        pts = lookups(keys, q, q)
        lo, hi = ranges(keys, q, q)
        verify(ctx, index, keys, points=pts, rng=(lo, hi), label=f"{q} lookups")


@check("sizes")
def check_batches_above_every_threshold_answer_right(ctx: Context) -> None:
    """One batch larger than every size at which a lookup changes path (the CPU kernels run
    their parallel loop from SERIAL_BELOW lookups on), at every suite size."""
    keys = make_keys("dense", 3000, 5, duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    q = max(SERIAL_BELOW, LARGE_BATCH) + 17
    pts = lookups(keys, q, 5)
    top = pts.dtype.type(np.iinfo(pts.dtype).max)
    hi = np.where(pts > top - 3, top, pts + pts.dtype.type(3))  # a few keys each
    verify(ctx, index, keys, points=pts, rng=(pts, hi), label=f"one batch of {q} lookups")


# ====================================================================== dtypes
@check("dtypes", needs=("uint64",))
def check_uint32_and_uint64_keys_agree(ctx: Context) -> None:
    """The same keys as uint32 and as uint64 give the same answers."""
    k32 = make_keys("uniform32", 3000, 8, duplicates=ctx.caps.duplicates).keys
    q32 = lookups(k32, ctx.n_lookups, 8)
    lo32, hi32 = ranges(k32, ctx.n_lookups, 8)
    a = _snapshot(ctx.new().build(k32), q32, (lo32, hi32))
    b = _snapshot(ctx.new().build(k32.astype(np.uint64)), q32.astype(np.uint64),
                  (lo32.astype(np.uint64), hi32.astype(np.uint64)))
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg="uint32 and uint64 keys disagree")


@check("dtypes")
def check_signed_and_float_keys_through_the_key_map(ctx: Context) -> None:
    """int8/int32/int64/float32/float64/bytes keys answer like the oracle on the raw values."""
    rng = np.random.default_rng(12)
    cases: list[np.ndarray] = [
        rng.integers(-128, 128, 500).astype(np.int8),
        rng.integers(-(2**31), 2**31, 800).astype(np.int32),
        np.round(rng.standard_normal(800) * 100, 1).astype(np.float32),
        np.array([b"apple", b"fig", b"kiwi", b"apple", b"a", b"b\x00c"], dtype="S5"),
    ]
    if ctx.wide:
        cases += [rng.integers(-(2**63), 2**63 - 1, 800, dtype=np.int64),
                  np.concatenate([rng.standard_normal(800) * 1e6, [np.inf, -np.inf, 0.0]])]
    for keys in cases:
        if not ctx.caps.duplicates:
            keys = np.unique(keys)
        keys = keys[rng.permutation(keys.shape[0])]
        if keys.dtype.kind == "f":
            keys[:1] = -0.0  # -0.0 and 0.0 are one key
        if keys.dtype.kind == "S":
            q = np.array([b"apple", b"ap", b"kiwi", b"zz", b"a", b"fig"], dtype="S5")
        else:  # hits, and neighbours that mostly miss
            q = np.concatenate([keys[:100], keys[:50] + keys.dtype.type(1)])
        half = q.shape[0] // 2
        a, b = q[:half], q[half:2 * half]
        lo, hi = np.where(a <= b, a, b), np.where(a <= b, b, a)
        index = ctx.new().build(keys)
        verify(ctx, index, keys, points=q, rng=(lo, hi), label=f"{keys.dtype} keys")


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
    keys = make_keys("duplicates" if ctx.caps.duplicates else "uniform32", 3000, 4,
                     duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    q = lookups(keys, ctx.n_lookups, 4)
    r = ranges(keys, ctx.n_lookups, 4)
    for x, y in zip(_snapshot(index, q, r), _snapshot(index, q, r), strict=True):
        np.testing.assert_array_equal(x, y, err_msg="two identical calls differ")


@check("order")
def check_chunked_batches_give_the_same_answers(ctx: Context) -> None:
    """A batch cut into chunks (max_batch) answers like one batch."""
    keys = make_keys("clustered", 2000, 7, duplicates=ctx.caps.duplicates).keys
    q = lookups(keys, 1001, 7)
    r = ranges(keys, 1001, 7)
    whole = _snapshot(ctx.new().build(keys), q, r)
    chunked = _snapshot(ctx.new(max_batch=64).build(keys), q, r)
    for x, y in zip(whole, chunked, strict=True):
        if x.shape == y.shape:
            np.testing.assert_array_equal(x, y, err_msg="chunked batch differs")
    verify(ctx, ctx.new(max_batch=64).build(keys), keys, points=q, rng=r, label="max_batch=64")


@check("order")
def check_sorted_probes_answer_in_the_callers_order(ctx: Context) -> None:
    """With sort_probes the index answers a sorted batch and puts every answer back in the
    caller's order (every out mode, duplicates, misses, a batch cut into chunks)."""
    keys = make_keys("duplicates" if ctx.caps.duplicates else "clustered", 2000, 9,
                     duplicates=ctx.caps.duplicates).keys
    q = lookups(keys, 700, 9)
    r = ranges(keys, 500, 9)
    for extra in ({}, {"max_batch": 97}):
        index = ctx.new(sort_probes=True, **extra).build(keys)
        verify(ctx, index, keys, points=q, rng=r, label=f"sort_probes {extra}")


# ====================================================================== bad input
def _bad_calls(ctx: Context, keys: np.ndarray
               ) -> list[tuple[str, Callable[[GpuIndex], Any], type[Exception]]]:
    q = np.array([1, 2], dtype=keys.dtype)
    d = ctx.caps.dims
    too_wide = ((f"keys of {d + 1} columns", lambda i: i.build(np.zeros((4, d + 1), keys.dtype)))
                if d > 1 else ("2-D keys", lambda i: i.build(np.zeros((4, 2), keys.dtype))))
    calls: list[tuple[str, Callable[[GpuIndex], Any], type[Exception]]] = [
        (*too_wide, InvalidInput),
        ("3-D keys", lambda i: i.build(np.zeros((4, 2, 2), keys.dtype)), InvalidInput),
        ("NaN keys", lambda i: i.build(np.array([1.0, np.nan])), InvalidInput),
        ("object keys", lambda i: i.build(np.array([1, "x"], dtype=object)), InvalidInput),
        ("values of another length", lambda i: i.build(keys, np.arange(3)), InvalidInput),
        ("float values", lambda i: i.build(keys, np.ones(keys.shape[0])), InvalidInput),
    ]
    if ctx.caps.point:
        calls += [
            ("2-D lookups", lambda i: i.point(np.zeros((2, 2), keys.dtype)), InvalidInput),
            ("scalar lookup", lambda i: i.point(np.uint32(3)), InvalidInput),
            ("float lookups", lambda i: i.point(np.array([1.5])), InvalidInput),
            ("unknown out", lambda i: i.point(q, out=cast(Any, "bogus")), InvalidInput),
        ]
    if ctx.caps.range:
        calls += [
            ("lo and hi of other lengths", lambda i: i.range(q, q[:1]), InvalidInput),
            ("NaN bounds", lambda i: i.range(np.array([np.nan]), np.array([1.0])), InvalidInput),
        ]
    return calls


@check("bad_input")
def check_bad_input_raises_and_leaves_the_index_correct(ctx: Context) -> None:
    """Each bad input raises its specific error, and the built index still answers right."""
    keys = make_keys("uniform32", 1500, 11, duplicates=ctx.caps.duplicates).keys
    q = lookups(keys, 300, 11)
    r = ranges(keys, 300, 11)
    index = ctx.new().build(keys)
    footprint = index.memory_footprint()
    for label, call, err in _bad_calls(ctx, keys):
        try:
            call(index)
        except err:
            pass
        except Exception as exc:
            raise AssertionError(f"{label}: raised {type(exc).__name__}: {exc}, "
                                 f"expected {err.__name__}") from exc
        else:
            raise AssertionError(f"{label}: no error, expected {err.__name__}")
        verify(ctx, index, keys, points=q, rng=r, label=f"after {label}")
        assert index.memory_footprint() == footprint, f"footprint changed after {label}"


@check("bad_input")
def check_lookups_before_build_raise_not_built(ctx: Context) -> None:
    """Lookups and footprints of an unbuilt index raise NotBuilt."""
    index = ctx.new()
    q = np.array([1], np.uint32)
    calls: list[Callable[[], Any]] = [index.memory_footprint]
    if ctx.caps.point:
        calls.append(lambda: index.point(q))
    if ctx.caps.range:
        calls.append(lambda: index.range(q, q))
    for call in calls:
        try:
            call()
        except NotBuilt:
            continue
        raise AssertionError("a call on an unbuilt index did not raise NotBuilt")


# ====================================================================== ownership
def _changed(before: Any, after: Any) -> str:
    now = to_numpy(after)
    bad = np.nonzero(now != before)[0]
    return f"{bad.size} of {before.size} entries changed, first at positions {bad[:5]}" \
        if bad.size else ""


@check("ownership")
def check_the_callers_arrays_are_left_untouched(ctx: Context) -> None:
    """build() and every lookup leave the arrays the caller passed exactly as they were."""
    rng = np.random.default_rng(21)
    host_keys = make_keys("duplicates" if ctx.caps.duplicates else "uniform32", 2000, 21,
                          duplicates=ctx.caps.duplicates).keys
    host_values = rng.integers(0, 2**64 - 1, host_keys.shape[0], dtype=np.uint64, endpoint=True)
    keys = to_device(host_keys.copy(), ctx.device)  # the caller's arrays; the host_ ones are
    values = to_device(host_values.copy(), ctx.device)  # the reference copies
    index = ctx.new().build(keys, values)
    for what, before, arr in (("keys", host_keys, keys), ("values", host_values, values)):
        diff = _changed(before, arr)
        assert not diff, f"build() changed the caller's {what} array: {diff}"
    host_q = lookups(host_keys, 300, 21)
    host_lo, host_hi = ranges(host_keys, 300, 21)
    q, lo, hi = (to_device(a.copy(), ctx.device) for a in (host_q, host_lo, host_hi))
    for mode in ctx.modes:
        calls: list[tuple[str, Callable[[], Any], tuple[tuple[str, Any, Any], ...]]] = []
        if ctx.caps.point:
            calls.append((f"point(out={mode!r})", partial(index.point, q, out=mode),
                          (("queries", host_q, q),)))
        if ctx.caps.range:
            calls.append((f"range(out={mode!r})", partial(index.range, lo, hi, out=mode),
                          (("lo", host_lo, lo), ("hi", host_hi, hi))))
        for label, call, args in calls:
            call()
            for what, before, arr in args:
                diff = _changed(before, arr)
                assert not diff, f"{label} changed the caller's {what} array: {diff}"


@check("ownership")
def check_changing_the_callers_arrays_after_build_changes_no_answer(ctx: Context) -> None:
    """The index keeps its own copies: overwriting the keys and values the caller passed to
    build() afterwards changes no answer."""
    rng = np.random.default_rng(22)
    host_keys = make_keys("uniform32", 2000, 22, duplicates=ctx.caps.duplicates).keys
    host_values = rng.integers(0, 2**64 - 1, host_keys.shape[0], dtype=np.uint64, endpoint=True)
    for dtype in (host_keys.dtype, np.dtype(np.uint64)) if ctx.wide else (host_keys.dtype,):
        keys = to_device(host_keys.astype(dtype), ctx.device)  # the caller's own arrays
        values = to_device(host_values.copy(), ctx.device)
        index = ctx.new().build(keys, values)
        keys[:] = keys[::-1].copy()  # a different key column (unique keys stay unique)
        values[:] = 7
        try:
            verify(ctx, index, host_keys.astype(dtype), values=host_values,
                   points=lookups(host_keys, 300, 22).astype(dtype),
                   rng=tuple(a.astype(dtype) for a in ranges(host_keys, 300, 22)),  # type: ignore[arg-type]
                   label=f"{dtype} keys overwritten after build")
        except AssertionError as exc:
            raise AssertionError(
                "answers changed after the caller overwrote the keys and values it had passed "
                "to build(): the index must keep its own copies\n" + str(exc)) from None


# ====================================================================== concurrency
#: How long the rebuild race may run at most (seconds), and how many rebuilds it wants.
RACE_SECONDS, RACE_REBUILDS, RACE_READERS = 20.0, 24, 3


@check("concurrency")
def check_lookups_racing_rebuilds_answer_from_one_build(ctx: Context) -> None:
    """Threads looking up while another thread rebuilds between two key sets: each answer is
    entirely right for one of the two builds (no crash, no mixture, no error)."""
    rng = np.random.default_rng(23)
    n = 6000 if ctx.size == "small" else 60000
    a_keys = make_keys("uniform32", n, 23, duplicates=ctx.caps.duplicates).keys
    b_keys = a_keys[-(n * 3 // 7):].copy()  # a suffix: the two builds differ in size
    a_vals = rng.integers(0, 2**64 - 1, a_keys.shape[0], dtype=np.uint64, endpoint=True)
    b_vals = rng.integers(0, 2**64 - 1, b_keys.shape[0], dtype=np.uint64, endpoint=True)
    builds = [(a_keys, a_vals), (b_keys, b_vals)]
    oracles = [Oracle(k, v) for k, v in builds]
    q = np.concatenate([b_keys[:200], a_keys[:200], lookups(a_keys, 200, 23)])
    lo, hi = ranges(a_keys, 300, 23)
    calls: list[tuple[str, str, Callable[[], Any]]] = []
    index = ctx.new().build(*builds[0])
    for mode in ctx.modes:
        if ctx.caps.point:
            calls.append(("point", mode, partial(index.point, q, out=mode)))
        if ctx.caps.range:
            calls.append(("range", mode, partial(index.range, lo, hi, out=mode)))
    for b in (1, 0):  # compile and warm up outside the race
        index.build(*builds[b])
        for _, _, call in calls:
            call()

    def right_for_one(kind: str, mode: str, res: Any) -> bool:
        for o in oracles:
            exp = o.point(q) if kind == "point" else o.range(lo, hi)
            if not compare(res, exp, o, mode, index, kind):
                return True
        return False

    stop = threading.Event()
    wrong: list[str] = []
    done = [0] * RACE_READERS

    def reader(r: int) -> None:
        i = r
        while not stop.is_set():
            kind, mode, call = calls[i % len(calls)]
            i += 1
            try:
                res = call()
            except Exception as exc:  # any error under a race is a failure of the plugin
                wrong.append(f"{kind} out={mode!r} raised {type(exc).__name__}: {exc}")
                return
            if not right_for_one(kind, mode, res):
                wrong.append(f"{kind} out={mode!r}: the answer matches neither build")
            done[r] += 1

    threads = [threading.Thread(target=reader, args=(r,), daemon=True)
               for r in range(RACE_READERS)]
    for t in threads:
        t.start()
    t0, rebuilds = time.perf_counter(), 0
    try:
        while time.perf_counter() - t0 < RACE_SECONDS and not wrong and (
                rebuilds < RACE_REBUILDS or sum(done) < RACE_REBUILDS):
            rebuilds += 1
            index.build(*builds[rebuilds % 2])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not wrong, (f"{len(wrong)} of {sum(done) + len(wrong)} lookups during {rebuilds} "
                       "rebuilds went wrong; first: " + "; ".join(wrong[:3]))
    assert sum(done) > 0, "no lookup finished while the index was rebuilt"
    last_keys, last_vals = builds[rebuilds % 2]
    verify(ctx, index, last_keys, values=last_vals, points=q, rng=(lo, hi),
           label="after the race")


@check("concurrency", needs=("updates",))
def check_updates_from_several_threads_are_never_lost(ctx: Context) -> None:
    """Threads updating disjoint positions of one index at once: afterwards every position has
    the key its thread set last (no update lost), and answers equal a fresh build's."""
    threads, rounds = 3, 12 if ctx.size == "small" else 40
    n = 900
    keys = np.arange(n, dtype=np.uint64) * np.uint64(7)
    index = ctx.new().build(keys)
    final = keys.copy()
    plans = []
    for t in range(threads):
        mine = np.arange(t, n, threads, dtype=np.int64)
        steps = []
        for r in range(rounds):
            pos = mine[r % 3::3][:20]
            new = (np.uint64(1_000_000) + np.uint64(10_000 * t + 100 * r)
                   + np.arange(pos.shape[0], dtype=np.uint64))
            steps.append((pos, new))
            final[pos] = new
        plans.append(steps)
    index.update(*plans[0][0])  # compile outside the race
    failures: list[str] = []

    def updater(steps: list[tuple[np.ndarray, np.ndarray]]) -> None:
        try:
            for pos, new in steps:
                index.update(pos, new)
        except Exception as exc:  # an error under concurrency is a failure of the plugin
            failures.append(f"{type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=updater, args=(plans[t],), daemon=True)
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert not failures, f"updates from {threads} threads raised: {failures[0]}"
    got = index.point(final, out="rowid").to_host().rowid
    lost = np.flatnonzero(got.astype(np.int64) != np.arange(n))
    assert lost.shape[0] == 0, (
        f"{lost.shape[0]} of {n} positions lost their last update (first at rowIDs "
        f"{lost[:5].tolist()})")
    verify(ctx, index, final, points=final, rng=(final[:50], final[:50] + np.uint64(9)),
           label="after concurrent updates")


# ====================================================================== footprint
@check("footprint")
def check_footprint_is_consistent(ctx: Context) -> None:
    """resident > 0 after a non-empty build, peak >= resident, breakdown adds up, all >= 0."""
    keys = make_keys("uniform32", 5000, 13, duplicates=ctx.caps.duplicates).keys
    fp = ctx.new().build(keys).memory_footprint()
    assert fp.resident_bytes > 0, "resident_bytes must be > 0 after a non-empty build"
    assert fp.peak_build_bytes >= fp.resident_bytes, (
        f"peak_build_bytes {fp.peak_build_bytes} < resident_bytes {fp.resident_bytes}")
    assert all(isinstance(v, int) and v >= 0 for v in fp.breakdown.values()), fp.breakdown
    assert sum(fp.breakdown.values()) == fp.resident_bytes


@check("footprint")
def check_footprint_grows_roughly_linearly(ctx: Context) -> None:
    """Resident bytes grow about linearly with the number of keys (x8 keys: x4 to x16 bytes)."""
    sizes = [1 << 12, 1 << 15]
    res = []
    for n in sizes:
        keys = np.arange(n, dtype=np.uint32)[np.random.default_rng(n).permutation(n)] * 5
        res.append(ctx.new().build(keys).memory_footprint().resident_bytes)
    ratio = res[1] / max(res[0], 1)
    assert 4 <= ratio <= 16, f"resident bytes {res} for {sizes} keys: ratio {ratio:.2f}"


# ====================================================================== persistence
def _persisted_keys(ctx: Context) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray],
                                           np.ndarray]:
    """Keys with duplicates (where allowed), lookups, ranges and custom values."""
    keys = make_keys("duplicates" if ctx.caps.duplicates else "clustered", 1500, 21,
                     duplicates=ctx.caps.duplicates).keys
    keys = keys if ctx.wide else keys.astype(np.uint32)
    values = np.asarray(np.random.default_rng(21).integers(0, 2**64 - 1, int(keys.shape[0]),
                                                          dtype=np.uint64))
    return keys, lookups(keys, 400, 21), ranges(keys, 200, 21), values


def _load(index: GpuIndex, path: str, device: str) -> GpuIndex:
    """``indexzoo.load`` where the registry names the index's class; the class's own
    ``from_saved`` for a class the registry does not hold (a test's subclass)."""
    if available().get(index.name) is type(index):
        return load(path, device=device)
    return type(index).from_saved(persist.read(path), device=device)


def _same_snapshots(a: list[np.ndarray], b: list[np.ndarray], what: str) -> None:
    assert len(a) == len(b), f"{what}: {len(b)} result arrays, expected {len(a)}"
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=f"{what} answers otherwise than the original")


@check("persistence")
def check_save_and_load_answer_identically(ctx: Context) -> None:
    """An index saved and loaded on its device answers bit for bit as before, in every out
    mode, with custom values and keys through a key map (int32); when the index runs on the CPU
    too, a GPU index loaded onto the CPU answers right, and saved from there and loaded back
    answers as before: bit for bit, or right where the load changed its params
    (``_params_for_load``, e.g. an engine that runs on the GPU only)."""
    keys, q, r, values = _persisted_keys(ctx)
    signed = (keys.astype(np.int64) - (1 << 20)).astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        for label, k, vals in (("uint keys", keys, None), ("int32 keys with values", signed,
                                                            values)):
            index = ctx.new().build(k, vals)
            qk, rk = q.astype(np.int64) - (1 << 20), (r[0].astype(np.int64) - (1 << 20),
                                                       r[1].astype(np.int64) - (1 << 20))
            qq, rr = (q, r) if k is keys else (qk.astype(np.int32),
                                               (rk[0].astype(np.int32), rk[1].astype(np.int32)))
            path = f"{tmp}/index.izo"
            index.save(path)
            loaded = _load(index, path, ctx.device)
            assert loaded.device == ctx.device and len(loaded) == len(index)
            assert loaded.key_dtype == index.key_dtype, (loaded.key_dtype, index.key_dtype)
            assert loaded.memory_footprint().breakdown == index.memory_footprint().breakdown, (
                "the loaded index holds other buffers: "
                f"{loaded.memory_footprint().breakdown} vs {index.memory_footprint().breakdown}")
            _same_snapshots(_snapshot(index, qq, rr), _snapshot(loaded, qq, rr),
                            f"{label}: the loaded index")
            if ctx.device != "cpu" and "cpu" in ctx.caps.devices:
                host = _load(index, path, "cpu")
                verify(ctx, host, k, values=vals, points=qq, rng=rr,
                       label=f"{label}: loaded from {ctx.device} onto the cpu")
                host.save(f"{tmp}/host.izo")
                back = _load(index, f"{tmp}/host.izo", ctx.device)
                what = f"{label}: saved from the cpu, loaded onto {ctx.device}"
                if back.params == index.params:
                    _same_snapshots(_snapshot(index, qq, rr), _snapshot(back, qq, rr), what)
                else:  # the load changed the configuration (_params_for_load: e.g. an
                    # engine that runs on the GPU only): right answers, not the same bits
                    verify(ctx, back, k, values=vals, points=qq, rng=rr,
                           label=f"{what} (params {back.params} after the load)")


@check("persistence", needs=("updates",))
def check_a_loaded_index_takes_updates(ctx: Context) -> None:
    """Updates of a loaded index answer like a fresh build over the updated keys."""
    keys, q, r, _ = _persisted_keys(ctx)
    index = ctx.new().build(keys)
    with tempfile.TemporaryDirectory() as tmp:
        index.save(f"{tmp}/index.izo")
        loaded = _load(index, f"{tmp}/index.izo", ctx.device)
    pos = np.arange(0, keys.shape[0], 7, dtype=np.int64)
    new = keys[pos][::-1].copy()
    loaded.update(pos, new)
    final = keys.copy()
    final[pos] = new
    verify(ctx, loaded, final, points=q, rng=r, label="updated after loading")


@check("persistence")
def check_pickle_round_trip_of_built_and_unbuilt_indexes(ctx: Context) -> None:
    """``pickle.loads(pickle.dumps(index))`` gives an index of the same class, params and
    device: unbuilt if it was, answering bit for bit as the original if built; an unpickled
    unbuilt index builds and answers right."""
    keys, q, r, values = _persisted_keys(ctx)
    fresh = ctx.new()
    empty = pickle.loads(pickle.dumps(fresh))
    assert type(empty) is type(fresh) and not empty.is_built, "an unbuilt index came back built"
    assert empty.params == fresh.params and empty.device == fresh.device
    index = ctx.new().build(keys, values)
    back = pickle.loads(pickle.dumps(index))
    assert type(back) is type(index) and back.device == index.device
    _same_snapshots(_snapshot(index, q, r), _snapshot(back, q, r), "the unpickled index")
    empty.build(keys, values)  # a build of its own: right answers (a GPU hash table's rowid
    # among duplicates may differ from another build's)
    verify(ctx, empty, keys, values=values, points=q, rng=r,
           label="an unpickled unbuilt index, built")


@check("persistence")
def check_a_deep_copy_is_independent(ctx: Context) -> None:
    """``copy.deepcopy(index)`` answers as the original; building the copy again changes no
    answer of the original (and the other way round)."""
    keys, q, r, _ = _persisted_keys(ctx)
    index = ctx.new().build(keys)
    before = _snapshot(index, q, r)
    dup = copy.deepcopy(index)
    _same_snapshots(before, _snapshot(dup, q, r), "the deep copy")
    other = make_keys("uniform32", 700, 22, duplicates=ctx.caps.duplicates).keys
    other = other if ctx.wide else other.astype(np.uint32)
    dup.build(other)
    _same_snapshots(before, _snapshot(index, q, r), "the original after its copy was rebuilt")
    verify(ctx, dup, other, points=q, rng=r, label="the rebuilt copy")


def _lookup(index: GpuIndex, caps: Capabilities, q: Any, out: Out) -> Any:
    """A point lookup, or the range [q, q] for an index without point lookups."""
    return index.point(q, out=out) if caps.point else index.range(q, q, out=out)


# ====================================================================== capabilities
@check("capabilities")
def check_missing_capabilities_raise_unsupported(ctx: Context) -> None:
    """What the capabilities leave out raises Unsupported: ranges, out modes, duplicates,
    uint64 keys."""
    keys = ctx.keys([1, 5, 9], 32)
    index = ctx.new().build(keys)
    q = np.array([5], dtype=keys.dtype)
    attempts: list[tuple[str, Callable[[], Any]]] = []
    if not ctx.caps.range:
        attempts.append(("range lookups", lambda: index.range(q, q)))
    if not ctx.caps.point:
        attempts.append(("point lookups", lambda: index.point(q)))
    for mode in set(OUT_MODES) - set(ctx.modes):
        attempts.append((f"out={mode!r}", partial(_lookup, index, ctx.caps, q, cast(Any, mode))))
    if not ctx.caps.duplicates:
        attempts.append(("duplicate keys", lambda: ctx.new().build(ctx.keys([3, 3], 32))))
    if not ctx.wide:
        attempts.append(("uint64 keys",
                         lambda: ctx.new().build(np.array([2**40], dtype=np.uint64))))
    for label, call in attempts:
        try:
            call()
        except Unsupported:
            continue
        except Exception as exc:
            raise AssertionError(f"{label}: raised {type(exc).__name__}, expected Unsupported"
                                 ) from exc
        raise AssertionError(f"{label}: not declared in capabilities, yet no Unsupported")
    verify(ctx, index, keys, points=q, rng=(q, q), label="after unsupported calls")

