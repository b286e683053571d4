"""``warpcore-hash`` beyond the conformance suite: every parameter combination, the whole key
domain (the empty sentinel is kept out of band), contention on equal keys, the load factor,
and identical answers from the CPU twin and the cooperative GPU kernels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES, Unsupported
from indexzoo.native.hashing import next_prime, probe_start
from indexzoo.plugins.warpcore_hash.index import next_prime_windows

GROUPS = [1, 2, 4, 8, 16, 32]


def _keys(n: int, dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    keys = rng.integers(0, top, n, dtype=dtype, endpoint=True)
    keys[::5] = keys[1::5][: keys[::5].shape[0]] if n > 5 else keys[::5]
    keys[: min(n, 3)] = np.array([top, top - 1, 0], dtype=dtype)[: min(n, 3)]
    return keys


@pytest.mark.parametrize("group_size, layout", list(itertools.product(GROUPS, ["soa", "aos"])))
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_every_combination_answers_like_the_reference(group_size: int, layout: str, dtype: type,
                                                      device: str) -> None:
    keys = _keys(700, dtype, seed=group_size)
    q = np.concatenate([keys[:300], np.arange(50, dtype=dtype),
                        np.array([np.iinfo(dtype).max], dtype=dtype)])
    values = np.random.default_rng(1).integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64,
                                               endpoint=True)
    index = indexzoo.create("warpcore-hash", device=device, group_size=group_size,
                            layout=layout, load_factor=0.9).build(keys, values)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES},
                   reference(keys, q, q, values), int(index.miss))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_the_empty_sentinel_is_an_ordinary_key(dtype: type, device: str) -> None:
    top = np.iinfo(dtype).max
    keys = np.array([top, 3, top, top - 1], dtype=dtype)
    index = indexzoo.create("warpcore-hash", device=device).build(keys)
    q = np.array([top, top - 1, 3, 4], dtype=dtype)
    assert index.point(q, out="count").to_host().count.tolist() == [2, 1, 1, 0]
    assert index.point(q, out="rowid").to_host().rowid.tolist()[:3] == [0, 3, 1]
    rows = index.point(q, out="rowids").to_host()
    assert sorted(rows.rowids[rows.offsets[0]:rows.offsets[1]].tolist()) == [0, 2]
    assert index.memory_footprint().breakdown["out_of_band"] == 2 * index.rowid_dtype.itemsize


@pytest.mark.parametrize("group_size", [1, 8, 32])
def test_many_equal_keys_are_neither_lost_nor_doubled(group_size: int, device: str) -> None:
    keys = np.concatenate([np.full(3000, 42, dtype=np.uint64),
                           np.arange(1000, dtype=np.uint64) + 100])
    index = indexzoo.create("warpcore-hash", device=device, group_size=group_size).build(keys)
    rows = index.point(np.array([42], dtype=np.uint64), out="rowids").to_host()
    np.testing.assert_array_equal(np.sort(rows.rowids), np.arange(3000))
    assert index.point([42], out="count").to_host().count.tolist() == [3000]


def test_range_lookups_are_unsupported_with_a_hint() -> None:
    index = indexzoo.create("warpcore-hash", device="cpu").build(np.arange(10))
    with pytest.raises(Unsupported, match="range lookups; an ordered index such as 'sorted-array'"):
        index.range([1], [3])


@pytest.mark.parametrize("lf", [0.5, 0.8, 0.95])
def test_realised_load_factor_is_just_under_the_target(lf: float) -> None:
    n = 100_000
    index = indexzoo.create("warpcore-hash", device="cpu", load_factor=lf).build(
        np.arange(n, dtype=np.uint64) * 7)
    assert lf * 0.99 <= index.load_factor <= lf
    fp = index.memory_footprint()
    assert fp.breakdown["table_keys"] == index.capacity * 8
    assert fp.breakdown["table_rowids"] == index.capacity * 4


def test_windows_are_prime_and_leave_an_empty_slot() -> None:
    for n, lf, g in [(0, 0.8, 8), (1, 0.95, 1), (10, 0.95, 32), (1000, 0.5, 4), (12345, 0.8, 8)]:
        w = next_prime_windows(n, lf, g)
        assert w == next_prime(w) and w * g > n
    assert [next_prime(x) for x in (0, 2, 14, 97, 2**31)] == [2, 2, 17, 97, 2147483659]


def test_probe_sequence_visits_every_window() -> None:
    from numba import njit

    @njit
    def visits(key, n_windows):  # type: ignore[no-untyped-def]
        w, s = probe_start(key, n_windows)
        seen = np.zeros(n_windows, np.bool_)
        for _ in range(n_windows):
            seen[w] = True
            w = (w + s) % n_windows
        return seen.all()

    for key in (np.uint64(0), np.uint64(12345), np.uint64(2**64 - 1)):
        assert visits(key, 101) and visits(key, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("group_size, layout", [(1, "soa"), (8, "soa"), (8, "aos"), (32, "aos")])
def test_cpu_twin_and_gpu_kernels_agree(group_size: int, layout: str) -> None:
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 2**64 - 1, 1 << 18, dtype=np.uint64, endpoint=True)
    keys[::3] = rng.choice(keys, keys[::3].shape[0])
    q = np.concatenate([rng.choice(keys, 1 << 16), rng.integers(0, 2**64 - 1, 1 << 14,
                                                                dtype=np.uint64)])
    params = {"group_size": group_size, "layout": layout}
    cpu = indexzoo.create("warpcore-hash", device="cpu", **params).build(keys)
    gpu = indexzoo.create("warpcore-hash", device="cuda", **params).build(keys)
    for mode in ("count", "sum"):
        np.testing.assert_array_equal(getattr(cpu.point(q, out=mode).to_host(), mode),
                                      getattr(gpu.point(q, out=mode).to_host(), mode))
    a, b = cpu.point(q, out="rowids").to_host(), gpu.point(q, out="rowids").to_host()
    np.testing.assert_array_equal(a.offsets, b.offsets)
    seg = np.repeat(np.arange(q.shape[0]), np.diff(a.offsets))
    np.testing.assert_array_equal(a.rowids[np.lexsort((a.rowids, seg))],
                                  b.rowids[np.lexsort((b.rowids, seg))])
    ra, rb = cpu.point(q).to_host().rowid, gpu.point(q).to_host().rowid
    np.testing.assert_array_equal(ra == cpu.miss, rb == gpu.miss)
    np.testing.assert_array_equal(keys[ra[ra != cpu.miss]], keys[rb[rb != gpu.miss]])


def test_more_windows_than_the_hash_can_address_is_invalid_input() -> None:
    with pytest.raises(indexzoo.InvalidInput, match="at most 2\\^32 windows"):
        next_prime_windows(1 << 33, 0.05, 1)
