"""``rx-opt`` (optimized RX) beyond the defaults' conformance suite: the suite's groups that
check answers for a sample of option combinations (the rest of their suite, and every
combination, in the exhaustive tier), the invariants the thesis's
optimizations must keep (option invariance, closest hit = first key >= lo, duplicate runs across
partition boundaries, boundary keys, more partitions than keys), the ray budget of a range, and
the footprint of partitions."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from support.helpers import agrees_in_the_simulator, assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES, ConfigError
from indexzoo.conformance import GROUPS, ConformanceSuite

# ============================================================================ the suite
# The defaults' whole suite is tests/conformance/test_builtin_conformance.py's. Each sampled
# combination runs the groups that check answers in the default tier and the rest of the suite
# in the exhaustive tier (as the presets and variants there do); every combination runs the
# whole suite in the exhaustive tier.
ANSWER_GROUPS = ("differential", "out_modes", "ranges", "extremes")
SAMPLE = [
    dict(compress_duplicates=False, partitions=7),
    dict(range_method="anyhit", partitions=1, sort_probes=False),
    dict(primitive="aabb", inverse_mapping="on"),
]
EVERY = [dict(zip(("compress_duplicates", "partitions", "range_method", "sort_probes",
                   "primitive"), combo, strict=True))
         for combo in itertools.product([True, False], [1, 5], ["closest_scan", "anyhit"],
                                        [True, False], ["triangle", "sphere", "aabb"])]


def _suite(name: str, params: dict[str, Any], marks: list[Any],
           groups: tuple[str, ...] | None = None) -> None:
    cls = type(name, (ConformanceSuite,), {"index": "rx-opt", "params": params,
                                           "groups": groups, "__module__": __name__})
    for m in marks:
        cls = m(cls)
    globals()[name] = cls


for _k, _p in enumerate(SAMPLE):
    _suite(f"TestConformance_rx_opt_sample_{_k}", _p, [], ANSWER_GROUPS)
    _suite(f"TestConformance_rx_opt_sample_{_k}_rest", _p, [pytest.mark.exhaustive],
           tuple(g for g in GROUPS if g not in ANSWER_GROUPS))
for _k, _p in enumerate(EVERY):
    _suite(f"TestConformance_rx_opt_every_{_k}", _p, [pytest.mark.exhaustive])


# ============================================================================ invariants
def _workload(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = np.concatenate([
        rng.integers(0, 2**64 - 1, 300, dtype=np.uint64, endpoint=True),
        np.arange(2**23 - 20, 2**23 + 20, dtype=np.uint64),           # across a row boundary
        np.arange(2**46 - 10, 2**46 + 10, dtype=np.uint64),           # across a plane boundary
        np.array([0, 1, 2**32 - 1, 2**32, 2**64 - 2, 2**64 - 1], dtype=np.uint64),
    ])
    mult = rng.choice([1, 1, 1, 2, 3, 17], base.shape[0])
    keys = np.repeat(base, mult)[rng.permutation(int(mult.sum()))]
    q = np.concatenate([keys[:200], keys[:50] + np.uint64(1), np.array([5, 2**63], np.uint64)])
    lo = np.concatenate([keys[:150], np.array([0, 2**23 - 3, 2**46 - 2, 7, 2**64 - 1],
                                               np.uint64)])
    width = rng.integers(0, 2**40, lo.shape[0], dtype=np.uint64)
    hi = np.minimum(lo + width, np.uint64(2**64 - 1))
    hi[lo.shape[0] - 2] = 3  # lo > hi: empty
    return keys, q, lo, hi


def _answers(index: Any, q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[Any]:
    out = []
    for mode in OUT_MODES:
        for res in (index.point(q, out=mode), index.range(lo, hi, out=mode)):
            h = res.to_host()
            if mode == "rowids":  # any order within a lookup: compare sorted segments
                out.append([sorted(h.rowids[a:b].tolist())
                            for a, b in zip(h.offsets[:-1], h.offsets[1:], strict=True)])
            elif mode != "rowid":  # rowid: any match (checked against the reference below)
                out.append(getattr(h, mode).tolist())
    return out


OPTIONS = [
    {}, dict(compress_duplicates=False), dict(partitions=1), dict(partitions=4),
    dict(partitions=256), dict(compress_duplicates=False, partitions=256),
    dict(range_method="anyhit"), dict(sort_probes=False), dict(inverse_mapping="on"),
    dict(inverse_mapping="auto"), dict(primitive="sphere"), dict(primitive="aabb"),
    dict(geometry="generated", leaf_size=24), dict(range_ray="zero"),
    dict(x_bits=22, y_bits=22, z_bits=20),
]


def test_every_option_gives_identical_answers(device: str) -> None:
    """Results are bit-identical across probe order, compression, partitions,
    range method, inverse mapping, primitive, geometry and ray origin (and match the reference,
    rowid included)."""
    keys, q, lo, hi = _workload()
    values = np.random.default_rng(1).integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64)
    first = None
    for opts in OPTIONS:
        index = indexzoo.create("rx-opt", device=device, **opts).build(keys, values)
        got = _answers(index, q, lo, hi)
        if first is None:
            first = got
        assert got == first, opts
        assert_matches({m: index.point(q, out=m) for m in OUT_MODES},
                       reference(keys, q, q, values), int(index.miss))
        assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                       reference(keys, lo, hi, values), int(index.miss))


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("partitions", [1, 3, 64])
def test_the_closest_hit_is_the_first_key_at_or_above_lo(compress: bool, partitions: int) -> None:
    """The traced position is the first sorted position with key >= lo (when that
    key is <= hi); with duplicates, its first occurrence."""
    keys, _, lo, hi = _workload(seed=5)
    index = indexzoo.create("rx-opt", device="cpu", compress_duplicates=compress,
                            partitions=partitions).build(keys)
    st = index.state
    first, count = index._runs_of_ranges(st, lo, hi)
    sk = np.sort(keys)
    want = np.searchsorted(sk, lo, side="left")
    has = (want < sk.shape[0]) & (sk[np.minimum(want, sk.shape[0] - 1)] <= hi) & (lo <= hi)
    np.testing.assert_array_equal(count > 0, has)
    np.testing.assert_array_equal(first[has], want[has])


def test_a_duplicate_run_across_partition_cuts_is_found_whole() -> None:
    """Runs of equal keys crossing where partitions would cut (without compression
    the cuts move to run starts)."""
    keys = np.repeat(np.arange(10, dtype=np.uint64) * 1000, [1, 50, 1, 1, 200, 1, 1, 1, 80, 1])
    q = np.arange(10, dtype=np.uint64) * 1000
    for compress in (True, False):
        for parts in (2, 3, 7, 64):
            index = indexzoo.create("rx-opt", device="cpu", compress_duplicates=compress,
                                    partitions=parts).build(keys)
            counts = index.point(q, out="count").count
            assert counts.tolist() == [1, 50, 1, 1, 200, 1, 1, 1, 80, 1], (compress, parts)
            if not compress:
                cuts = index._cuts(index.state.pkeys)
                sk = index.state.keys
                assert all(c == 0 or sk[c] != sk[c - 1] for c in cuts[:-1]), cuts


def test_more_partitions_than_keys_and_empty_builds() -> None:
    for keys in (np.array([7], np.uint64), np.array([3, 3, 3], np.uint64),
                 np.zeros(0, np.uint64)):
        index = indexzoo.create("rx-opt", device="cpu", partitions=256).build(keys)
        q = np.array([3, 7, 8], np.uint64)
        assert index.point(q, out="count").count.tolist() == [
            int((keys == x).sum()) for x in q]


def _expected_rays(keys: np.ndarray, lo: int, hi: int, x_bits: int = 23) -> int:
    """[AMBIG] multi-row ranges, as the module docstring states: a ray on the first occupied row
    at or after lo's, and a second on the next row only when the first ran on lo's own row
    and met no key in range."""
    highs = np.unique(keys >> np.uint64(x_bits)).tolist()
    hlo, hhi = lo >> x_bits, hi >> x_bits
    j = int(np.searchsorted(highs, hlo))
    if lo > hi or j == len(highs) or highs[j] > hhi:
        return 0
    row = highs[j]
    met = any(lo <= int(k) <= hi for k in keys.tolist() if int(k) >> x_bits == row)
    if met or row != hlo or j + 1 == len(highs) or highs[j + 1] > hhi:
        return 1
    return 2


def test_a_range_casts_at_most_two_closest_hit_rays() -> None:
    """[AMBIG] multi-row ranges: however many rows a range spans, it casts one ray, a second only
    when lo's own row holds no key from lo on."""
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 2**64 - 1, 2000, dtype=np.uint64)
    row0 = int(np.sort(keys)[0]) >> 23  # the first occupied row
    below = int(np.sort(keys)[0]) - 1
    lo = np.array([0, 2**40, 2**63, row0 << 23, (row0 << 23) | (2**23 - 1), below,
                   int(keys.max()) + 1, 5], np.uint64)
    hi = np.array([2**64 - 1, 2**62, 2**64 - 1, 2**64 - 1, 2**64 - 1, below, 2**64 - 1, 4],
                  np.uint64)
    for partitions in (1, 16):
        index = indexzoo.create("rx-opt", device="cpu", partitions=partitions).build(keys)
        rays = index.rays_cast(lo, hi)
        assert rays == [_expected_rays(keys, int(a), int(b)) for a, b in zip(lo, hi, strict=True)]
        assert max(rays) == 2 and min(rays) == 0
        assert index.rays_cast(keys[:5]) == [1] * 5  # a point lookup: one perpendicular ray
        got = index.range(lo, hi, out="count").count.tolist()
        assert got == [int(((keys >= a) & (keys <= b)).sum()) for a, b in zip(lo, hi, strict=True)]


def test_partitions_lower_the_build_peak() -> None:
    """Alg. 5: sub-BVHs built one after another hold one slice's build at a time (thesis: a
    third of the peak at 256)."""
    keys = np.random.default_rng(2).integers(0, 2**64 - 1, 1 << 15, dtype=np.uint64)
    peaks = {p: indexzoo.create("rx-opt", device="cpu", partitions=p, compact=True)
             .build(keys).memory_footprint() for p in (1, 16, 256)}
    assert peaks[256].peak_build_bytes < peaks[16].peak_build_bytes <= \
        peaks[1].peak_build_bytes
    for fp in peaks.values():
        assert fp.peak_build_bytes >= fp.resident_bytes


def test_compression_keeps_one_primitive_per_distinct_key() -> None:
    keys = np.repeat(np.arange(100, dtype=np.uint64), 9)
    on = indexzoo.create("rx-opt", device="cpu", partitions=1).build(keys).memory_footprint()
    off = indexzoo.create("rx-opt", device="cpu", partitions=1,
                          compress_duplicates=False).build(keys).memory_footprint()
    assert on.breakdown["primitives"] * 9 == off.breakdown["primitives"]


def test_bad_configurations_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="partitions"):
        indexzoo.create("rx-opt", partitions=0)
    with pytest.raises(ConfigError, match="inverse_mapping='on'"):
        indexzoo.create("rx-opt", inverse_mapping="on", range_method="anyhit")
    with pytest.raises(ConfigError, match="range_ray='zero'"):
        indexzoo.create("rx-opt", key_mode="extended")


RXOPT_SIM_SCRIPT = """
import numpy as np
import indexzoo

rng = np.random.default_rng(4)
keys = rng.integers(0, 2**40, 400, dtype=np.uint64)
keys = np.concatenate([keys, keys[:50]])  # duplicates
for params in CASES:
    # (extended mode is left out: the simulator runs math.ldexp as Python, which refuses the
    # NumPy integer that the compiled kernels pass)
    k = keys
    index = indexzoo.create("rx-opt", device="cpu", **params).build(k)
    st = index.state
    lo = np.concatenate([k[:60], k[:30] + np.uint64(1), rng.integers(0, 2**40, 30,
                                                                     dtype=np.uint64)])
    hi = lo + rng.integers(0, 2**33, lo.shape[0], dtype=np.uint64)
    for point in (True, False):
        outs = []
        for device in ("cpu", "cuda"):
            rays = np.zeros(lo.shape[0], np.int8)
            first, count = index._launch_lookup(st, point, lo, hi, rays, device=device)
            outs.append((first, count, rays))
        for a, b in zip(*outs):
            assert np.array_equal(a, b), (params, point)
        assert (outs[0][1] > 0).any() and (outs[0][2] > 0).any(), params
print("simulator agrees")
"""


SIM_CASES = [dict(partitions=1), dict(partitions=4, compress_duplicates=False),
             dict(partitions=3, primitive="sphere")]
SIM_CASES_MORE = [dict(primitive="aabb", geometry="stored"), dict(range_ray="zero", partitions=2)]


@pytest.mark.exhaustive
def test_more_lookup_kernels_agree_between_njit_and_the_cuda_simulator() -> None:
    """The same for AABBs (the intersection program) and the zero range ray."""
    agrees_in_the_simulator(RXOPT_SIM_SCRIPT.replace("CASES", repr(SIM_CASES_MORE)))


def test_the_lookup_kernel_agrees_between_njit_and_the_cuda_simulator() -> None:
    """The rays and the scan of every lookup through ``cuda.jit`` give the CPU's runs and ray
    counts: GAS and IAS, compressed or not, triangles, spheres (any-hit confirmation) and
    AABBs (intersection program), both range rays (the last two in the exhaustive tier)."""
    agrees_in_the_simulator(RXOPT_SIM_SCRIPT.replace("CASES", repr(SIM_CASES)))
