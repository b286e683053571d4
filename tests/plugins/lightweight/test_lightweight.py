"""The lightweight family (``ao-bs``, ``eo-bs``, ``ao-pb-bs``, ``eo-ks``, ``ao-pb-ks`` and
``lightweight``): answers against a brute-force reference, identical answers for every
combination of options, the paper's edge cases, parameters, footprints and the decision tree.
The layouts themselves are specified in ``tests/native/test_layouts.py``."""

from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest
from support.helpers import (
    agrees_in_the_simulator,
    assert_identical,
    assert_matches,
    reference,
    rowid_sets,
)

import indexzoo
from indexzoo import OUT_MODES, ConfigError
from indexzoo.plugins.lightweight import PRESETS, recommend

SCHEMES = list(PRESETS)


def _data(dtype: type, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    keys = rng.integers(0, max(n // 2, 1) * 3, n).astype(dtype)  # duplicates and gaps
    keys[: min(n, 2)] = [top, 0][: min(n, 2)]
    q = np.concatenate([rng.choice(keys, 40), rng.integers(0, n * 3 + 2, 30).astype(dtype),
                        np.array([0, 1, top, top - 1], dtype=dtype)])
    lo = np.concatenate([rng.choice(keys, 30), np.array([0, top, 7, top - 3], dtype=dtype)])
    width = rng.integers(0, 40, lo.shape[0]).astype(dtype)
    hi = np.where(lo > top - width, top, lo + width).astype(dtype)
    hi[-2] = 3  # inverted range
    return keys, q, lo, hi


def _same(a: indexzoo.LookupResult, b: indexzoo.LookupResult, label: str) -> None:
    """Identical answers; ``rowids`` per query as sets (EO lists them level by level, and the
    levels depend on K)."""
    if a.out == "rowids":
        for i, (x, y) in enumerate(zip(rowid_sets(a), rowid_sets(b), strict=True)):
            np.testing.assert_array_equal(x, y, err_msg=f"{label} query {i}")
    else:
        assert_identical(a, b, label)


def _check(index: indexzoo.GpuIndex, keys: np.ndarray, q: np.ndarray, lo: np.ndarray,
           hi: np.ndarray, values: np.ndarray | None = None) -> None:
    miss = int(index.miss)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES}, reference(keys, q, q, values), miss)
    assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                   reference(keys, lo, hi, values), miss)


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 9, 16, 80, 81, 127, 128, 129, 1000, 4096])
def test_every_scheme_answers_like_the_reference(name: str, dtype: type, n: int,
                                                 device: str) -> None:
    """Sizes include K-1, K, K^H - 1 (complete EO) and K^H for K = 3, 9, and 2^k, where the
    paper's Listing 1 as printed never terminates."""
    keys, q, lo, hi = _data(dtype, n, seed=n)
    values = np.random.default_rng(n).integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    _check(indexzoo.create(name, device=device).build(keys, values), keys, q, lo, hi, values)


def test_listing_1_terminates_for_every_power_of_two(device: str) -> None:
    for e in range(0, 13):
        keys = np.arange(1 << e, dtype=np.uint32) * 2
        index = indexzoo.create("ao-bs", device=device).build(keys)
        got = index.point(np.array([0, keys[-1], 1], dtype=np.uint32)).to_host().rowid
        assert got.tolist() == [0, (1 << e) - 1, int(index.miss)]


# Options that change how the GPU works but never what it answers.
OPTIONS = {
    "schedule": ["dynamic", "static"],
    "blocks_per_sm": [1, 4],
    "lookups_per_thread": [1, 4],
    "reorder": ["none", "single", "double"],
    "pinning": ["none", "steps", "full"],
    "memory_layout": ["soa", "aos"],
    "multi_thread_scan": [True, False],
}


def _combinations(name: str, limit: int) -> list[dict[str, object]]:
    combos = [dict(zip(OPTIONS, v, strict=True)) for v in itertools.product(*OPTIONS.values())]
    rng = np.random.default_rng(sum(map(ord, name)))
    picked = [combos[i] for i in rng.choice(len(combos), limit, replace=False)]
    extra: list[dict[str, object]] = []
    if "ks" in name:
        extra = [{"k": k} for k in (3, 5, 9, 17, 33)]
    if "pb" in name:
        extra += [{"pivot_buffer": "full"}, {"pivot_buffer": "coarse", "pb_levels": 2},
                  {"pivot_buffer": "coarse", "pb_levels": -1}]
    return picked + extra


@pytest.mark.parametrize("name", SCHEMES)
def test_every_option_gives_the_same_answers(name: str, device: str) -> None:
    keys, q, lo, hi = _data(np.uint64, 3000, seed=7)
    base = indexzoo.create(name, device=device).build(keys)
    expected = {m: base.point(q, out=m) for m in OUT_MODES}
    expected_r = {m: base.range(lo, hi, out=m) for m in OUT_MODES}
    for opts in _combinations(name, 6):
        params = {**opts, "threads_per_block": 64, "pinning_bytes": 512}
        index = indexzoo.create(name, device=device, **params).build(keys)
        for m in OUT_MODES:
            if m == "rowid" and name.startswith("eo"):
                continue  # EO's early exit may find another copy of a duplicate key
            _same(index.point(q, out=m), expected[m], f"{name} {opts} point {m}")
            _same(index.range(lo, hi, out=m), expected_r[m], f"{name} {opts} range {m}")
        _check(index, keys, q, lo, hi)


def test_presets_fix_their_scheme_and_take_every_other_option() -> None:
    with pytest.raises(ConfigError, match="layout"):
        indexzoo.create("eo-ks", device="cpu", layout="ao")
    index = indexzoo.create("eo-ks", device="cpu", k=17, memory_layout="aos")
    assert (index.params.scheme, index.params.k) == ("eo-ks", 17)
    assert indexzoo.create("lightweight", device="cpu", layout="eo").params.scheme == "eo-bs"


@pytest.mark.parametrize("params, fragment", [
    ({"layout": "eo", "pivot_buffer": "full"}, "pivot buffer sits on the ascending array"),
    ({"search": "kary"}, "AO\\+KS is not a scheme"),
    ({"reorder": "double", "threads_per_block": 96}, "power of two"),
    ({"k": 4}, "k"),
])
def test_inconsistent_options_are_config_errors(params: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        indexzoo.create("lightweight", device="cpu", **params)


@pytest.mark.parametrize("name, key_bytes, rowid_bytes", [
    ("ao-bs", 4, 4), ("eo-bs", 4, 4), ("eo-ks", 8, 4), ("ao-pb-bs", 4, 4), ("ao-pb-ks", 8, 8)])
def test_footprint_is_keys_and_rowids_plus_pivots(name: str, key_bytes: int, rowid_bytes: int) -> None:
    n = 10_000
    keys = np.arange(n, dtype=np.uint32 if key_bytes == 4 else np.uint64)
    index = indexzoo.create(name, device="cpu").build(keys)
    fp = index.memory_footprint()
    slots = n + (1 if name == "eo-bs" else 0)
    if index.params.memory_layout == "soa":
        assert fp.breakdown["keys"] == slots * key_bytes
        assert fp.breakdown["rowids"] == slots * 4
    else:  # AoS: one word of the key's width per rowID, as a C struct pads
        assert fp.breakdown["pairs"] == slots * 2 * max(key_bytes, 4)
    if "pb" in name:
        assert fp.breakdown["pivots"] == index.pivot_plan.slots * key_bytes
        assert index.pivot_plan.chunk * (index.params.k if "ks" in name else 2) ** \
            index.pivot_plan.levels >= n
    assert fp.peak_build_bytes >= fp.resident_bytes


def test_coarse_pivot_buffer_levels_follow_pb_levels() -> None:
    keys = np.arange(1 << 16, dtype=np.uint32)
    full = indexzoo.create("lightweight", device="cpu", pivot_buffer="full").build(keys)
    assert (full.pivot_plan.chunk, full.pivot_plan.levels) == (2, 15)
    coarse = indexzoo.create("ao-pb-bs", device="cpu").build(keys)  # all but 3 levels
    assert (coarse.pivot_plan.chunk, coarse.pivot_plan.levels) == (16, 12)
    five = indexzoo.create("ao-pb-bs", device="cpu", pb_levels=5).build(keys)
    assert five.pivot_plan.levels == 5


def test_build_again_equals_a_fresh_build(device: str) -> None:
    keys, _q, lo, hi = _data(np.uint32, 500, seed=3)
    other = keys[::-1].copy()
    for name in SCHEMES:
        index = indexzoo.create(name, device=device).build(other).build(keys)
        fresh = indexzoo.create(name, device=device).build(keys)
        for m in ("count", "rowids"):
            assert_identical(index.range(lo, hi, out=m), fresh.range(lo, hi, out=m), name)


class TestRecommend:
    """The paper's decision tree (§6.1), with the L2 size given."""

    L2 = 50 << 20

    def test_small_unordered_point_workloads_get_eytzinger_binary_search(self) -> None:
        assert recommend(1 << 20, 4, "point", "cpu", l2_bytes=self.L2).index == "eo-bs"

    def test_beyond_l2_eytzinger_goes_k_ary_with_k_9(self) -> None:
        spec = recommend(1 << 26, 4, "point", "cpu", l2_bytes=self.L2)
        assert (spec.index, spec.params["k"]) == ("eo-ks", 9)

    def test_ordered_or_small_ranges_get_optimised_binary_search_then_a_pivot_buffer(self) -> None:
        assert recommend(1 << 20, 4, "range", "cpu", l2_bytes=self.L2).index == "ao-bs"
        assert recommend(1 << 20, 8, "point", "cpu", ordered=True, l2_bytes=self.L2).index == "ao-bs"
        assert recommend(1 << 26, 4, "point", "cpu", fast_rebuild=True,
                         l2_bytes=self.L2).index == "ao-pb-ks"

    def test_range_workloads_always_use_aos(self) -> None:
        for workload in ("range", "mixed"):
            spec = recommend(1 << 26, 8, workload, "cpu", l2_bytes=self.L2)
            assert spec.params["memory_layout"] == "aos"
            indexzoo.create(spec)  # a spec that builds

    def test_bad_arguments_are_config_errors(self) -> None:
        with pytest.raises(ConfigError):
            recommend(10, 3)
        with pytest.raises(ConfigError):
            recommend(10, 4, "scan")  # type: ignore[arg-type]


SIMULATOR = textwrap.dedent("""
    import numpy as np, indexzoo
    from indexzoo.plugins.lightweight import kernels as lw
    rng = np.random.default_rng(3)
    configs = [("dynamic", 1, "none", "none", "soa"), ("static", 2, "double", "steps", "aos"),
               ("dynamic", 4, "none", "none", "aos"), ("dynamic", 2, "single", "full", "soa"),
               ("static", 1, "double", "full", "aos")]
    for dtype in (np.uint32, np.uint64):
        keys = rng.integers(0, 300, 100).astype(dtype)
        q = np.concatenate([keys[:40], rng.integers(0, 320, 30).astype(dtype)])
        for name in ("ao-bs", "eo-bs", "ao-pb-bs"):
            for sched, r, reorder, pin, ml in configs:
                index = indexzoo.create(name, device="cpu", threads_per_block=32,
                                        lookups_per_thread=r, schedule=sched, reorder=reorder,
                                        pinning=pin, pinning_bytes=24 * np.dtype(dtype).itemsize,
                                        memory_layout=ml).build(keys)
                st = index.state
                assert st.pins.pa > 0 or pin == "none"
                modes = [(lw.RANK, np.int64), (lw.FIRST, index.rowid_dtype)]
                if name != "eo-bs":  # interleaved EO searches skip the early exit: another copy
                    modes.append((lw.POINT, index.rowid_dtype))
                for mode, dt in modes:
                    got, want = np.empty(q.shape[0], dt), np.empty(q.shape[0], dt)
                    # the GPU driver under the simulator, and the CPU twin
                    lw.locate("cuda", st.plan, st.layout, st.pins, q, got, st.miss, mode)
                    lw.locate("cpu", st.plan, st.layout, st.pins, q, want, st.miss, mode)
                    assert np.array_equal(got, want), (name, sched, r, reorder, pin, ml, mode)
    print("driver agrees")
""")


@pytest.mark.slow
@pytest.mark.exhaustive  # about 40 s of simulated threads: CI runs it in the exhaustive tier
def test_every_driver_configuration_agrees_with_the_cpu_under_the_cuda_simulator() -> None:
    """Scheduling, lookups per thread, reordering (the shared-memory bitonic sort), pinning
    and AoS/SoA of the GPU driver, each configuration on every binary-search scheme and both
    key widths (the K-ary groups and the multi-threaded scans need warp votes:
    ``tests/native/test_lightweight_coop.py`` runs them with the simulator's intrinsics from
    ``tests/support/cudasim_warp.py``)."""
    agrees_in_the_simulator(SIMULATOR, "driver agrees")


@pytest.mark.gpu
@pytest.mark.parametrize("name", SCHEMES)
def test_cpu_and_gpu_answer_identically(name: str) -> None:
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 2**40, 1 << 18, dtype=np.uint64)
    keys[::5] = rng.choice(keys, keys[::5].shape[0])  # duplicates
    q = np.concatenate([rng.choice(keys, 1 << 16), rng.integers(0, 2**40, 1 << 16, dtype=np.uint64)])
    lo = rng.choice(keys, 1 << 12)
    hi = lo + rng.integers(0, 2**30, lo.shape[0], dtype=np.uint64)
    cpu = indexzoo.create(name, device="cpu").build(keys)
    for opts in [{}, *_combinations(name, 5)]:
        params = {**PRESETS[name].Params().model_dump(), **opts}
        gpu = indexzoo.create("lightweight", device="cuda", **params).build(keys)
        for m in OUT_MODES:
            if not (m == "rowid" and name.startswith("eo")):
                _same(cpu.point(q, out=m), gpu.point(q, out=m), f"{name} {opts} {m}")
            _same(cpu.range(lo, hi, out=m), gpu.range(lo, hi, out=m), f"{name} {opts} {m}")
        _check(gpu, keys, q[:300], lo[:100], hi[:100])


# ------------------------------------------------------------ the decision at build
def _cache(monkeypatch: pytest.MonkeyPatch, l2_bytes: int) -> None:
    """The decision tree sees a CPU whose largest cache holds ``l2_bytes``."""
    import dataclasses
    import importlib

    hw = importlib.import_module("indexzoo.plugins.lightweight.hardware")
    rec = importlib.import_module("indexzoo.plugins.lightweight.recommend")
    real = hw.hardware("cpu")
    monkeypatch.setattr(rec, "hardware",
                        lambda device: dataclasses.replace(real, l2_bytes=l2_bytes))


def _counts(keys: np.ndarray, q: np.ndarray) -> np.ndarray:
    s = np.sort(keys)
    return np.searchsorted(s, q, side="right") - np.searchsorted(s, q, side="left")


@pytest.mark.parametrize("l2_bytes, picked", [(64 << 20, "eo-bs"), (1 << 10, "eo-ks")])
def test_lightweight_without_options_builds_the_decision_tree_s_pick(
        l2_bytes: int, picked: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``configuration="auto"`` (the default): the scheme recommend() names for the keys'
    count, width and device, with its preset's configuration (here the CPU's paper tree:
    EO+BS within the cache, EO+KS with K=9 beyond it)."""
    _cache(monkeypatch, l2_bytes)
    keys = np.random.default_rng(5).integers(0, 1 << 40, 4000, dtype=np.uint64)
    index = indexzoo.create("lightweight", device="cpu")
    assert index.params.configuration == "auto"
    index.build(keys)
    spec = recommend(4000, 8, "point", "cpu")
    got = index.built_options
    assert spec.index == got.scheme == picked
    want = PRESETS[picked].Params(**spec.params).model_dump()
    assert got.model_dump() == want
    q = np.concatenate([keys[:300], keys[:300] + np.uint64(1)])
    np.testing.assert_array_equal(index.point(q, out="count").to_host().count, _counts(keys, q))


def test_lightweight_with_options_builds_them_as_given() -> None:
    index = indexzoo.create("lightweight", device="cpu", layout="eo", search="kary", k=5)
    assert index.params.configuration == "given"
    index.build(np.arange(1000, dtype=np.uint64))
    assert index.built_options == index.params and index.built_options.scheme == "eo-ks"
    assert all(cls().params.configuration == "given" for cls in PRESETS.values())


def test_a_loaded_lightweight_keeps_the_scheme_it_was_built_with(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pick is saved: loaded where the tree would pick otherwise, the index keeps it."""
    keys = np.random.default_rng(6).integers(0, 1 << 40, 3000, dtype=np.uint64)
    _cache(monkeypatch, 64 << 20)
    index = indexzoo.create("lightweight", device="cpu").build(keys)
    index.save(f"{tmp_path}/l.izo")
    _cache(monkeypatch, 1 << 10)
    assert indexzoo.create("lightweight", device="cpu").build(keys).built_options.scheme \
        == "eo-ks"
    loaded = indexzoo.load(f"{tmp_path}/l.izo")
    assert loaded.built_options.scheme == index.built_options.scheme == "eo-bs"
    assert loaded.memory_footprint().breakdown == index.memory_footprint().breakdown
    q = keys[:500]
    np.testing.assert_array_equal(loaded.point(q).to_host().rowid, index.point(q).to_host().rowid)
