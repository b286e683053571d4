"""``rx`` (RTIndeX) beyond the conformance suite: the suite itself for every configuration of
the paper, the paper's worked example (Fig. 4), keys at the bit-split boundaries, duplicates,
updates (refit equals rebuild equals a fresh build), key limits and bad configurations.

Naive and extended mode hold keys below 2^23 and 2^29 only, while the suite draws keys from the
whole uint32/uint64 domain and has no way to narrow it. Their suites therefore run through
:class:`InDomain`: key sets that fit the mode reach the index unchanged (lookups too, including
those beyond the mode's keys); a key set that does not fit is first mapped into the mode's range
by an order-preserving map built from the keys (differences of at most D kept, larger gaps
shrunk to D), and the lookups through the same map, so every answer is still the oracle's.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from support.helpers import assert_matches, reference
from support.rx_cases import LIMIT, SUITE_CONFIGS, VALID, InDomain, _label, _same, _workload

import indexzoo
from indexzoo import OUT_MODES, ConfigError, InvalidInput
from indexzoo.conformance import GROUPS, ConformanceSuite
from indexzoo.native.rt.keymap import KeyCoder
from indexzoo.plugins.rx import PRESETS
from indexzoo.plugins.rx.rays import range_plan

# ============================================================================ the suite
# Lookup answers depend on (key mode, primitive, point ray, range ray): the suite runs every
# valid combination (extended mode: rays from zero only, no spheres). compact and update only
# change the footprint accounting and update() (tested for every combination below), so they
# alternate. The default configuration's suite is tests/conformance/test_builtin_conformance.py's.
# The whole suite runs on one configuration of each key mode and geometry (FULL). In the
# default tier, the groups that check answers run on the configurations of PAIRWISE besides:
# with FULL and the default configuration, every pair of values of two of the four choices
# (key mode, primitive, point ray, range ray) meets in one of them, and compact and update
# take both values (test_the_default_tier_meets_every_pair_of_choices). Every configuration
# answers in the default tier before and after updates
# (test_every_configuration_answers_like_the_reference_before_and_after_updates). The groups
# that check answers on the other configurations, and the rest of the suite on every
# configuration but FULL, run in the exhaustive tier.
ANSWER_GROUPS = ("differential", "out_modes", "ranges", "extremes")
FULL = {"naive_aabb_parallel_zero_False_refit", "extended_triangle_perpendicular_zero_False_refit",
        "22_22_20", "generated_8"}
PAIRWISE = {"3d_sphere_parallel_zero_False_refit", "3d_aabb_perpendicular_offset_True_rebuild",
            "naive_triangle_parallel_offset_True_rebuild",
            "naive_sphere_perpendicular_offset_True_rebuild",
            "extended_aabb_parallel_zero_False_refit", "generated_24"}
assert {_label(c) for c in SUITE_CONFIGS} >= FULL | PAIRWISE
for _cfg in SUITE_CONFIGS:
    _base = {"index": InDomain if _cfg.get("key_mode") in LIMIT else "rx", "params": _cfg,
             "__module__": __name__}
    _name = f"TestConformance_rx_{_label(_cfg)}"
    if _label(_cfg) in FULL:
        globals()[_name] = type(_name, (ConformanceSuite,), _base)
        continue
    globals()[_name] = type(_name, (ConformanceSuite,), {
        **_base, "groups": ANSWER_GROUPS,
        "pytestmark": [] if _label(_cfg) in PAIRWISE else [pytest.mark.exhaustive]})
    _rest = tuple(g for g in GROUPS if g not in ANSWER_GROUPS)
    globals()[f"{_name}_rest"] = type(f"{_name}_rest", (ConformanceSuite,), {
        **_base, "groups": _rest, "pytestmark": [pytest.mark.exhaustive]})


def test_the_default_tier_meets_every_pair_of_choices() -> None:
    """The configurations whose answers the suite checks in the default tier (FULL, PAIRWISE
    and the default configuration, tests/conformance/test_builtin_conformance.py's) meet every
    valid pair of values of two choices, and compact and update take both values."""
    choices = ("key_mode", "primitive", "point_ray", "range_ray")
    default = indexzoo.create("rx", device="cpu").params.model_dump()
    quick = [{**default, **c} for c in SUITE_CONFIGS if _label(c) in FULL | PAIRWISE] + [default]
    for a, b in itertools.combinations(choices, 2):
        want = {(c[a], c[b]) for c in VALID}
        assert {(c[a], c[b]) for c in quick} >= want, (a, b)
    assert {(c["compact"], c["update"]) for c in quick} >= {(True, "rebuild"), (False, "refit")}


# ============================================================================ helpers
def _check(index: indexzoo.GpuIndex, keys: np.ndarray, q: np.ndarray, lo: np.ndarray,
           hi: np.ndarray, values: np.ndarray | None = None) -> None:
    miss = int(index.miss)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES}, reference(keys, q, q, values),
                   miss)
    assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                   reference(keys, lo, hi, values), miss)


def _u64(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


UPDATES = [dict(compact=True, update="rebuild"), dict(compact=False, update="rebuild"),
           dict(compact=False, update="refit")]


# ============================================================================ every configuration
@pytest.mark.parametrize("cfg", VALID, ids=lambda c: "-".join(c.values()))
def test_every_configuration_answers_like_the_reference_before_and_after_updates(
        cfg: dict[str, str], device: str) -> None:
    keys, q, lo, hi = _workload(cfg["key_mode"], 600, seed=len(str(cfg)))
    values = np.asarray(np.random.default_rng(3).integers(0, 2**64 - 1, keys.shape[0],
                                                          dtype=np.uint64, endpoint=True))
    rng = np.random.default_rng(9)
    for upd in UPDATES:
        index = indexzoo.create("rx", device=device, **cfg, **upd).build(keys, values)
        _check(index, keys, q, lo, hi, values)
        pos = rng.integers(0, keys.shape[0], 50)
        new = rng.choice(keys, 50)  # keys the mode holds, moved across the scene
        index.update(pos, new)
        moved = keys.copy()
        moved[pos] = new
        _check(index, moved, q, lo, hi, values)


@pytest.mark.parametrize("cfg", [
    dict(key_mode="3d", primitive="triangle"), dict(key_mode="3d", primitive="sphere"),
    dict(key_mode="3d", primitive="aabb"),
    dict(key_mode="extended", primitive="triangle", range_ray="zero", point_ray="parallel"),
], ids=lambda c: f"{c['key_mode']}-{c['primitive']}")
def test_generated_geometry_answers_like_stored_geometry(cfg: dict[str, str], device: str) -> None:
    """Each primitive made from its key during traversal (one function per mode, split and
    primitive; the linear x map and extended mode's bit cast)."""
    keys, q, lo, hi = _workload(cfg["key_mode"], 600, seed=11)
    rng = np.random.default_rng(4)
    pos, new = rng.integers(0, keys.shape[0], 40), rng.choice(keys, 40)
    moved = keys.copy()
    moved[pos] = new
    for upd in UPDATES[1:]:
        index = indexzoo.create("rx", device=device, geometry="generated", **cfg, **upd)
        index.build(keys)
        assert "records" in index.memory_footprint().breakdown
        _check(index, keys, q, lo, hi)
        index.update(pos, new)
        _check(index, moved, q, lo, hi)


# ============================================================================ the paper's example
@pytest.mark.parametrize("primitive", ["triangle", "sphere", "aabb"])
@pytest.mark.parametrize("range_ray", ["offset", "zero"])
def test_fig4_range_15_21_under_the_2_bit_split_returns_rowids_0_1_5_6(primitive: str,
                                                                       range_ray: str) -> None:
    """Fig. 4: x = k[1:0], y = k[63:2]; keys by rowID 19, 17, 23, 14, 12, 15, 20."""
    keys = np.array([19, 17, 23, 14, 12, 15, 20], dtype=np.uint64)
    index = indexzoo.create("rx", device="cpu", x_bits=2, y_bits=62, z_bits=0,
                            primitive=primitive, range_ray=range_ray).build(keys)
    res = index.range(np.array([15], np.uint64), np.array([21], np.uint64), out="rowids")
    assert sorted(res.to_host().matches(0).tolist()) == [0, 1, 5, 6]
    assert index.range([15], [21], out="sum").sum.tolist() == [0 + 1 + 5 + 6]


def test_fig4_casts_three_rays_from_2_5_and_to_1_5() -> None:
    """The three rays of Fig. 4: y = 3 from x = 2.5, y = 4 over the whole line, y = 5 up to
    x = 1.5 (offset origins; from-zero rays start at x = 0 with tmin at the same gaps)."""
    coder = KeyCoder.for_params("3d", 2, 62, 0)
    highs = np.array([3, 4, 5], np.uint64)
    lo, hi = np.array([15], np.uint64), np.array([21], np.uint64)
    offset = range_plan(coder, lo, hi, highs, zero=False).rays(0, 3)
    np.testing.assert_array_equal(offset.origins, [[2.5, 3, 0], [-0.5, 4, 0], [-0.5, 5, 0]])
    np.testing.assert_array_equal(offset.origins[:, 0] + offset.tmax, [3.5, 3.5, 1.5])
    zero = range_plan(coder, lo, hi, highs, zero=True).rays(0, 3)
    np.testing.assert_array_equal(zero.origins[:, 0], [0, 0, 0])
    np.testing.assert_array_equal(zero.tmin, [2.5, -0.5, -0.5])
    np.testing.assert_array_equal(zero.tmax, [3.5, 3.5, 1.5])


# ============================================================================ 3D mode
BOUNDARIES = [2**23 - 1, 2**23, 2**46 - 1, 2**46, 2**64 - 1]
RAY_KINDS = [dict(point_ray="perpendicular", range_ray="offset"),
             dict(point_ray="parallel", range_ray="zero")]


@pytest.mark.parametrize("primitive", ["triangle", "sphere", "aabb"])
@pytest.mark.parametrize("rays", RAY_KINDS, ids=lambda r: r["range_ray"])
def test_keys_and_ranges_at_the_bit_split_boundaries(primitive: str, rays: dict[str, str],
                                                     device: str) -> None:
    keys = np.array(sorted({min(max(b + d, 0), 2**64 - 1) for b in BOUNDARIES
                            for d in (-2, -1, 0, 1, 2)} | {0, 1}), dtype=np.uint64)
    keys = np.concatenate([keys, keys[::3]])  # a few duplicates
    index = indexzoo.create("rx", device=device, primitive=primitive, **rays).build(keys)
    q = np.array(sorted({min(max(b + d, 0), 2**64 - 1) for b in BOUNDARIES
                         for d in (-3, -1, 0, 1, 3)}), dtype=np.uint64)
    lo = np.array([2**23 - 3, 2**46 - 2, 2**23 - 1, 2**64 - 3, 0, 2**23, 2**46 + 1, 5],
                  dtype=np.uint64)
    hi = np.array([2**23 + 2, 2**46 + 1, 2**46, 2**64 - 1, 2**64 - 1, 2**23, 2**64 - 2, 4],
                  dtype=np.uint64)
    _check(index, keys, q, lo, hi)


def test_a_range_across_one_high_part_boundary_casts_two_rays() -> None:
    index = indexzoo.create("rx", device="cpu").build(
        np.arange(2**23 - 40, 2**23 + 40, dtype=np.uint64))
    plan = index._plan_ranges(index.state, np.array([2**23 - 3], np.uint64), np.array([2**23 + 2], np.uint64))
    assert plan.n_rays == 2


def test_sparse_64_bit_ranges_cast_one_ray_per_distinct_high_part_at_most() -> None:
    keys = np.random.default_rng(4).integers(0, 2**64 - 1, 1000, dtype=np.uint64)
    index = indexzoo.create("rx", device="cpu").build(keys)
    everything = (np.array([0], np.uint64), np.array([2**64 - 1], np.uint64))
    plan = index._plan_ranges(index.state, *everything)
    assert plan.n_rays == np.unique(keys >> np.uint64(23)).shape[0] <= 1000  # not 2^41
    assert index.range(*everything, out="count").count.tolist() == [1000]


def test_launches_of_at_most_max_rays_give_the_same_answers() -> None:
    keys, q, lo, hi = _workload("3d", 800, seed=5)
    whole = indexzoo.create("rx", device="cpu").build(keys)
    for params in ({"max_rays": 7}, {"max_rays": 1}, {"max_rays": 7, "primitive": "aabb",
                                                      "point_ray": "parallel"}):
        small = indexzoo.create("rx", device="cpu", **params).build(keys)
        for m in OUT_MODES:
            _same(whole.point(q, out=m), small.point(q, out=m), f"{params} point {m}")
            _same(whole.range(lo, hi, out=m), small.range(lo, hi, out=m), f"{params} range {m}")
        _check(small, keys, q, lo, hi)


def test_a_custom_split_holds_keys_whose_parts_fit_23_bits() -> None:
    index = indexzoo.create("rx", device="cpu", x_bits=20, y_bits=30, z_bits=14)
    top = (2**64 - 2**50) | ((2**23 - 1) << 20) | (2**20 - 1)  # the largest key it holds
    keys = np.array([0, 2**20 - 1, 2**20, (2**23 - 1) << 20, 2**50, top], np.uint64)
    index.build(keys)
    _check(index, keys, keys, keys[:-1], keys[1:])
    with pytest.raises(InvalidInput, match="y part"):
        index.build(np.array([2**43], np.uint64))  # y part 2^23


# ============================================================================ duplicates
@pytest.mark.parametrize("primitive", ["triangle", "sphere", "aabb"])
@pytest.mark.parametrize("rays", RAY_KINDS, ids=lambda r: r["point_ray"])
def test_point_lookups_return_every_duplicate_up_to_256_per_key(primitive: str,
                                                                rays: dict[str, str],
                                                                device: str) -> None:
    mults = [1, 2, 3, 7, 64, 255, 256]
    base = np.array([0, 2**23 - 1, 2**23, 12345678901, 2**46, 2**63 + 5, 2**64 - 1], np.uint64)
    keys = np.repeat(base, mults)
    keys = keys[np.random.default_rng(1).permutation(keys.shape[0])]
    index = indexzoo.create("rx", device=device, primitive=primitive, **rays).build(keys)
    q = np.concatenate([base, base + np.uint64(1)])
    _check(index, keys, q, base, base)
    counts = index.point(base, out="count").to_host().count
    assert counts.tolist() == mults


# ============================================================================ key modes
def test_naive_and_extended_mode_hold_keys_up_to_their_limits(device: str) -> None:
    for mode, top, extra in (("naive", 2**23 - 1, {}), ("extended", 2**29 - 1, {"range_ray": "zero"})):
        # extended: keys at multiples of 2^22 map to powers of two (the gaps either side differ)
        keys = np.array([0, 1, 2, 2**22 - 1, 2**22, 2**22 + 1, 2**23 - 2, 2**23 - 1,
                         2**24, 2**28, top - 1, top], dtype=np.uint64)
        keys = np.unique(np.minimum(keys, top))
        for primitive in (["triangle", "aabb"] if mode == "extended" else ["triangle", "sphere",
                                                                           "aabb"]):
            for point_ray in ("perpendicular", "parallel"):
                index = indexzoo.create("rx", device=device, key_mode=mode, primitive=primitive,
                                        point_ray=point_ray, **extra).build(keys)
                q = np.concatenate([keys, keys + np.uint64(1), _u64([top + 1, 2**40])])
                lo = np.concatenate([keys, keys[:-1] + np.uint64(1), _u64([0, top, top + 1])])
                hi = np.concatenate([keys, keys[1:] - np.uint64(1), _u64([2**64 - 1, 2**40, 2**41])])
                _check(index, keys, q, lo, hi)


@pytest.mark.parametrize("mode, key, fragment", [
    ("naive", 2**23, "2\\^23 = 8388608.*key_mode='extended'"),
    ("naive", 2**29, "2\\^23.*key_mode='3d'"),
    ("extended", 2**29, "2\\^29 = 536870912.*key_mode='3d'"),
])
def test_keys_beyond_a_mode_raise_invalid_input_naming_the_limit_and_the_mode_that_holds_them(
        mode: str, key: int, fragment: str) -> None:
    extra = {"range_ray": "zero"} if mode == "extended" else {}
    index = indexzoo.create("rx", device="cpu", key_mode=mode, **extra)
    keys = np.array([3, 5, 7], np.uint64)
    index.build(keys)
    with pytest.raises(InvalidInput, match=fragment) as err:
        index.build(np.array([1, key, 2], np.uint64))
    assert f"key {key} at rowID 1" in str(err.value)
    if mode == "naive" and key >= 2**29:
        assert "extended" not in str(err.value)
    _check(index, keys, keys, keys, keys)  # the previous build still answers


def test_signed_keys_beyond_naive_mode_are_shown_as_given() -> None:
    with pytest.raises(InvalidInput, match="key -1 at rowID 0"):
        indexzoo.create("rx", device="cpu", key_mode="naive").build(np.array([-1, 2], np.int32))


def test_lookups_beyond_a_mode_miss_and_ranges_are_clipped() -> None:
    keys = np.array([0, 5, 2**23 - 1], np.uint64)
    index = indexzoo.create("rx", device="cpu", key_mode="naive").build(keys)
    q = np.array([2**23 - 1, 2**23, 2**32 - 1, 2**64 - 1], np.uint64)
    assert index.point(q).rowid.tolist() == [2, *[int(index.miss)] * 3]
    got = index.range(_u64([2**23 - 1, 2**23, 1]), _u64([2**40, 2**64 - 1, 2**23]),
                      out="count").count
    assert got.tolist() == [1, 0, 2]


# ============================================================================ configuration
@pytest.mark.parametrize("params, fragment", [
    ({"key_mode": "extended", "primitive": "sphere", "range_ray": "zero"}, "spheres"),
    ({"key_mode": "extended"}, "range_ray='zero'"),
    ({"update": "refit"}, "compact=False"),
    ({"x_bits": 23, "y_bits": 23, "z_bits": 17}, "must be 64"),
    ({"key_mode": "naive", "x_bits": 20, "y_bits": 26}, "key_mode='3d' only"),
    ({"x_bits": 24, "y_bits": 22}, "x_bits"),
    ({"primitive": "cone"}, "primitive"),
])
def test_inconsistent_configurations_are_config_errors(params: dict[str, Any],
                                                       fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        indexzoo.create("rx", device="cpu", **params)


def test_the_default_is_the_papers_selected_configuration() -> None:
    p = indexzoo.create("rx", device="cpu").params
    assert p.model_dump(include=set(PRESETS["paper"])) == PRESETS["paper"]
    for preset in PRESETS.values():
        indexzoo.create("rx", device="cpu", **preset)  # every preset is a valid configuration


# ============================================================================ updates
def _paper_updates(n: int, kind: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """§3.6's workloads on dense shuffled keys: (a) swap adjacent positions (large key changes),
    (b) swap rank-adjacent keys (+-1), and (c) keys moved far across the scene."""
    keys = rng.permutation(n).astype(np.uint64)
    if kind == "positions":
        i = rng.choice(n // 2, 64, replace=False) * 2
        pos = np.concatenate([i, i + 1])
        new = np.concatenate([keys[i + 1], keys[i]])
    elif kind == "keys":
        k = rng.choice(n // 2, 64, replace=False) * 2
        where = np.argsort(keys)
        pos = np.concatenate([where[k], where[k + 1]])
        new = np.concatenate([keys[where[k + 1]], keys[where[k]]])
    else:
        pos = rng.choice(n, 64, replace=False)
        new = rng.integers(0, 2**64 - 1, 64, dtype=np.uint64)
    return keys, pos, new


@pytest.mark.parametrize("kind", ["positions", "keys", "far"])
@pytest.mark.parametrize("primitive", ["triangle", "sphere", "aabb"])
def test_refit_equals_rebuild_equals_a_fresh_build(kind: str, primitive: str,
                                                   device: str) -> None:
    rng = np.random.default_rng(len(kind))
    keys, pos, new = _paper_updates(4096, kind, rng)
    moved = keys.copy()
    moved[pos] = new
    q = np.concatenate([keys[:300], new, new + np.uint64(1)])
    lo = np.sort(rng.choice(moved, 100))
    hi = np.concatenate([lo[1:], [2**64 - 1]]).astype(np.uint64)
    fresh = indexzoo.create("rx", device=device, primitive=primitive, compact=False).build(moved)
    for update in ("refit", "rebuild"):
        index = indexzoo.create("rx", device=device, primitive=primitive, compact=False,
                                update=update).build(keys)
        bvh = index.memory_footprint().breakdown["bvh_nodes"]
        assert index.update(pos, new) is index
        assert index.memory_footprint().breakdown["bvh_nodes"] == bvh  # same count, same buffer
        for m in OUT_MODES:
            _same(index.point(q, out=m), fresh.point(q, out=m), f"{update} point {m}")
            _same(index.range(lo, hi, out=m), fresh.range(lo, hi, out=m), f"{update} range {m}")
        _check(index, moved, q, lo, hi)


def test_update_takes_the_last_key_of_a_repeated_position_and_keeps_values() -> None:
    keys = np.arange(10, dtype=np.uint64) * 10
    values = np.arange(10, dtype=np.uint64) + 100
    index = indexzoo.create("rx", device="cpu").build(keys, values)
    index.update(np.array([3, 3, 4]), np.array([1000, 2000, 3000], np.uint64))
    assert index.point([30, 1000, 2000, 3000], out="rowid").rowid.tolist() == \
        [int(index.miss), int(index.miss), 3, 4]
    assert index.point([2000], out="sum").sum.tolist() == [103]


@pytest.mark.parametrize("positions, new_keys, fragment", [
    ([0, 10], [1, 2], "rowIDs must lie in"),
    ([-1], [1], "rowIDs must lie in"),
    ([0.5], [1], "integer dtype"),
    ([0, 1], [1], "same length"),
    ([1], [2**23], "new key 8388608 for rowID 1"),
])
def test_bad_updates_raise_invalid_input_and_change_nothing(positions: list[Any],
                                                            new_keys: list[int],
                                                            fragment: str) -> None:
    keys = np.arange(10, dtype=np.uint64)
    index = indexzoo.create("rx", device="cpu", key_mode="naive").build(keys)
    with pytest.raises(InvalidInput, match=fragment):
        index.update(np.array(positions), np.array(new_keys, np.uint64))
    _check(index, keys, keys, keys[:5], keys[5:])


@pytest.mark.parametrize(("masked", "what"), [("positions", "an update's rowID"),
                                              ("new_keys", "an update's new key")])
@pytest.mark.parametrize("nulls", ["refuse", "skip"])
def test_masked_update_inputs_raise_invalid_input_and_change_nothing(masked: str, what: str,
                                                                     nulls: str) -> None:
    keys = np.arange(10, dtype=np.uint64)
    index = indexzoo.create("rx", device="cpu", key_mode="naive").build(keys, nulls=nulls)
    args = {"positions": np.array([1, 2]), "new_keys": np.array([7, 8], np.uint64)}
    args[masked] = np.ma.masked_array(args[masked], mask=[False, True])
    with pytest.raises(InvalidInput, match=f"^argument '{masked}': null at position 1; {what} "
                                           "cannot be null under either null policy"):
        index.update(**args)
    _check(index, keys, keys, keys[:5], keys[5:])


# ============================================================================ footprint
@pytest.mark.parametrize("primitive, per_key", [("triangle", 36), ("sphere", 12), ("aabb", 24)])
def test_footprint_is_keys_primitives_bvh_and_high_parts(primitive: str, per_key: int) -> None:
    keys = np.random.default_rng(2).integers(0, 2**64 - 1, 5000, dtype=np.uint64)
    nodes = {}
    for compact in (True, False):
        index = indexzoo.create("rx", device="cpu", primitive=primitive,
                                compact=compact).build(keys)
        fp = index.memory_footprint()
        parts = fp.breakdown
        assert parts["keys"] == 8 * 5000 and parts["primitives"] == per_key * 5000
        assert parts["high_parts"] == 8 * np.unique(keys >> np.uint64(23)).shape[0]
        assert parts["bvh_order"] > 0 and fp.peak_build_bytes >= fp.resident_bytes
        nodes[compact] = parts["bvh_nodes"]
    # uncompacted: the worst-case buffer of 2N - 1 node records; compaction keeps the used ones
    assert nodes[False] == 32 * (2 * 5000 - 1) > nodes[True]


# ============================================================================ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [{}, {"primitive": "sphere"}, {"primitive": "aabb"},
                                 {"point_ray": "parallel", "range_ray": "zero"},
                                 {"key_mode": "naive"}, {"key_mode": "extended", "range_ray": "zero"},
                                 {"compact": False, "update": "refit"},
                                 {"geometry": "generated", "leaf_size": 8},
                                 {"geometry": "generated", "primitive": "aabb",
                                  "key_mode": "extended", "range_ray": "zero"}])
def test_cpu_and_gpu_answer_alike(cfg: dict[str, Any]) -> None:
    keys, q, lo, hi = _workload(cfg.get("key_mode", "3d"), 1 << 14, seed=21)
    cpu = indexzoo.create("rx", device="cpu", **cfg).build(keys)
    gpu = indexzoo.create("rx", device="cuda", **cfg).build(keys)
    for m in OUT_MODES:
        _same(cpu.point(q, out=m), gpu.point(q, out=m), f"{cfg} point {m}")
        _same(cpu.range(lo, hi, out=m), gpu.range(lo, hi, out=m), f"{cfg} range {m}")
    _check(gpu, keys, q, lo, hi)
    pos = np.arange(0, 1 << 14, 97)
    gpu.update(pos, keys[pos][::-1].copy())


def test_generated_triangles_keep_one_copy_of_the_keys() -> None:
    """The lean configuration: the engine's records are the keys, the index holds no second
    copy, and updates and ranges rebuild what they need from the records."""
    keys = np.random.default_rng(3).integers(0, 2**64 - 1, 4000, dtype=np.uint64)
    index = indexzoo.create("rx", device="cpu", geometry="generated", leaf_size=16).build(keys)
    parts = index.memory_footprint().breakdown
    assert parts["keys"] == 0 and parts["records"] == keys.nbytes and "high_parts" not in parts
    stored = indexzoo.create("rx", device="cpu").build(keys)
    assert index.memory_footprint().resident_bytes < stored.memory_footprint().resident_bytes / 2
    moved = keys.copy()
    moved[:100] = keys[:100] ^ np.uint64(0xFFFF)
    index.update(np.arange(100), moved[:100])
    lo, hi = np.minimum(moved[:50], moved[50:100]), np.maximum(moved[:50], moved[50:100])
    _check(index, moved, moved, lo, hi)
