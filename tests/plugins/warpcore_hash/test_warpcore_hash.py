"""``warpcore-hash`` beyond the conformance suite: every parameter combination, the whole key
domain (the empty sentinel is kept out of band), heavy duplicates (one slot per distinct key,
rows in overflow runs), builds linear in the rows, the load factor and footprint, and
identical answers from the CPU twin and the cooperative GPU kernels."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
from support.helpers import assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES, Unsupported
from indexzoo.plugins.warpcore_hash.index import (
    REHASH_MIN_MULTIPLICITY,
    next_prime_windows,
    value_word_dtype,
)
from indexzoo.plugins.warpcore_hash.kernels import next_prime, probe_start

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


#: Multiplicities around the group sizes and beyond (runs shorter and longer than a group).
MULTIPLICITIES = [1, 2, 31, 32, 33, 255, 256, 1024]


def _duplicate_heavy(kind: str, dtype: type, seed: int) -> np.ndarray:
    """Key columns with few distinct keys; ``top`` (the empty sentinel) goes out of band."""
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    if kind == "bool":
        return rng.integers(0, 2, 3000).astype(dtype)
    if kind == "bool-with-top":
        return rng.choice(np.array([7, top], dtype=dtype), 3000)
    if kind == "all-equal":
        return np.full(2000, 42, dtype=dtype)
    # "mixed": mean multiplicity 6 (the keys move to a table sized for them); "mixed-stays":
    # 1.8 (the pass-1 table stays)
    singles = 300 if kind == "mixed" else 2000
    distinct = np.unique(rng.integers(0, top - 1, 2500, dtype=dtype))[:8 + singles]
    keys = np.concatenate([np.repeat(distinct[:8], MULTIPLICITIES), distinct[8:],
                           [top] * 3]).astype(dtype)
    return rng.permutation(keys)


@pytest.mark.parametrize("group_size, layout", list(itertools.product(GROUPS, ["soa", "aos"])))
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("kind", ["bool", "bool-with-top", "all-equal", "mixed", "mixed-stays"])
def test_heavy_duplicates_answer_like_the_reference(kind: str, group_size: int, layout: str,
                                                    dtype: type, device: str) -> None:
    keys = _duplicate_heavy(kind, dtype, seed=group_size)
    top = np.iinfo(dtype).max
    q = np.concatenate([np.unique(keys), np.array([3, 1 << 20, top - 1, top], dtype=dtype)])
    values = np.random.default_rng(2).integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64,
                                               endpoint=True)
    for vals in (values, None):
        index = indexzoo.create("warpcore-hash", device=device, group_size=group_size,
                                layout=layout).build(keys, vals)
        assert_matches({m: index.point(q, out=m) for m in OUT_MODES},
                       reference(keys, q, q, vals), int(index.miss))
    pass_one = next_prime_windows(int(np.sum(keys != top)), 0.8, group_size) * group_size
    assert (index.capacity == pass_one) == (kind == "mixed-stays")


@pytest.mark.parametrize("group_size", [1, 8, 32])
def test_the_build_probes_linearly_many_windows(group_size: int) -> None:
    """Each pair costs a few windows whatever the multiplicities. The previous layout (one slot
    per pair, all copies of a key on one probe sequence) probed ~n^2 / (2G) windows for these:
    2.5e9 for the bool column at G = 8."""
    rng = np.random.default_rng(3)
    columns = {
        "bool": rng.integers(0, 2, 200_000).astype(np.uint8),
        "equal": np.full(100_000, 9, dtype=np.uint64),
        "pairs and singles": rng.permutation(np.concatenate(  # mean multiplicity 1.25: no move
            [np.arange(60_000), np.repeat(np.arange(20_000) + 10**6, 2)]).astype(np.uint64)),
        "multiplicity 256": rng.permutation(np.repeat(np.arange(400, dtype=np.uint64), 256)),
    }
    for name, keys in columns.items():
        index = indexzoo.create("warpcore-hash", device="cpu", group_size=group_size).build(keys)
        n = keys.shape[0]
        assert index.state.build_probes <= 4 * n, (name, index.state.build_probes)
        assert index.point(keys[:1], out="count").to_host().count[0] == np.sum(keys == keys[0])


def test_each_distinct_key_takes_one_slot_and_heavy_duplicates_a_small_table() -> None:
    n = 1_000_000
    keys = np.random.default_rng(4).integers(0, 2, n).astype(np.bool_)
    index = indexzoo.create("warpcore-hash", device="cpu", group_size=8).build(keys)
    fp = index.memory_footprint()
    assert index.capacity == 2 * 8 and index.load_factor == 2 / 16  # 2 windows, the minimum
    assert fp.breakdown["overflow"] == (n + 2) * 4  # a count and the rowIDs per key
    assert fp.resident_bytes < n * 4 + 1000
    assert fp.peak_build_bytes >= next_prime_windows(n, 0.8, 8) * 8 * 4  # pass 1: counts
    # below the mean multiplicity that moves the keys, the pass-1 table stays
    some = np.concatenate([np.arange(900), np.full(10, 5000)]).astype(np.uint64)
    assert some.shape[0] < REHASH_MIN_MULTIPLICITY * 901
    index = indexzoo.create("warpcore-hash", device="cpu", load_factor=0.5,
                               group_size=8).build(some)
    assert index.capacity == next_prime_windows(some.shape[0], 0.5, 8) * 8
    assert index.load_factor == 901 / index.capacity
    assert index.memory_footprint().breakdown["overflow"] == 11 * 4


def test_the_cpu_lists_a_keys_rows_in_rowid_order() -> None:
    keys = np.array([5, 3, 5, 5, 4, 3, 5], dtype=np.uint32)
    index = indexzoo.create("warpcore-hash", device="cpu", group_size=4).build(keys)
    q = np.array([5, 3, 4, 6], dtype=np.uint32)
    rows = index.point(q, out="rowids").to_host()
    assert rows.offsets.tolist() == [0, 4, 6, 7, 7]
    assert rows.rowids.tolist() == [0, 2, 3, 6, 1, 5, 4]
    assert index.point(q).to_host().rowid.tolist() == [0, 1, 4, int(index.miss)]


def test_value_words_are_one_size_up_where_the_flag_bit_is_not_free() -> None:
    u32, u64 = np.dtype(np.uint32), np.dtype(np.uint64)
    most = (1 << 32) // 3  # n + n // 2 <= 2^31: every rowID and run offset lies below 2^31
    assert value_word_dtype(0, u32) == value_word_dtype(most, u32) == u32
    assert value_word_dtype(most + 1, u32) == u64
    assert value_word_dtype((1 << 32) - 2, u32) == u64
    assert value_word_dtype(1 << 33, u64) == u64


def test_range_lookups_are_unsupported_with_a_hint() -> None:
    index = indexzoo.create("warpcore-hash", device="cpu").build(np.arange(10))
    with pytest.raises(Unsupported, match="range lookups; an ordered index such as 'sorted-array'"):
        index.range([1], [3])


@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("lf", [0.5, 0.8, 0.95])
def test_realised_load_factor_is_just_under_the_target(lf: float, layout: str) -> None:
    n = 100_000
    index = indexzoo.create("warpcore-hash", device="cpu", load_factor=lf,
                            layout=layout).build(np.arange(n, dtype=np.uint64) * 7)
    assert lf * 0.99 <= index.load_factor <= lf
    fp = index.memory_footprint()
    # uint64 keys, uint32 value words: aos pads each slot's word to the key's width
    table = ({"table": index.capacity * 16} if layout == "aos" else
             {"table_keys": index.capacity * 8, "table_values": index.capacity * 4})
    assert fp.breakdown == {**table, "overflow": 0, "out_of_band": 0}
    assert fp.peak_build_bytes >= fp.resident_bytes + index.capacity * 4  # the pass-1 counts
    assert index.state.build_probes <= 3 * n  # one pass, a few windows per key at lf <= 0.95


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
@pytest.mark.parametrize("kind", ["some duplicates", "multiplicity 256", "bool"])
def test_cpu_twin_and_gpu_kernels_agree(group_size: int, layout: str, kind: str) -> None:
    rng = np.random.default_rng(7)
    if kind == "some duplicates":  # mean multiplicity < 2: the pass-1 table stays
        keys = rng.integers(0, 2**64 - 1, 1 << 18, dtype=np.uint64, endpoint=True)
        keys[::3] = rng.choice(keys, keys[::3].shape[0])
    elif kind == "multiplicity 256":  # the distinct keys move to a table sized for them
        keys = rng.permutation(np.repeat(rng.integers(0, 2**64 - 1, 1 << 10, dtype=np.uint64),
                                         256))
    else:
        keys = rng.integers(0, 2, 1 << 18).astype(np.uint64)
    # every hit of the two-key case lists half the rows: few lookups keep its CSR answer small
    hits = 1 << 6 if kind == "bool" else 1 << 16
    q = np.concatenate([rng.choice(keys, hits), rng.integers(0, 2**64 - 1, 1 << 14,
                                                             dtype=np.uint64)])
    values = rng.integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64, endpoint=True)
    params = {"group_size": group_size, "layout": layout}
    cpu = indexzoo.create("warpcore-hash", device="cpu", **params).build(keys, values)
    gpu = indexzoo.create("warpcore-hash", device="cuda", **params).build(keys, values)
    assert cpu.capacity == gpu.capacity and cpu.load_factor == gpu.load_factor
    assert cpu.memory_footprint() == gpu.memory_footprint()
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


READ_ONLY_INSTALL = """
import numba.core.caching as caching

# a read-only install: the package folder, NUMBA_CACHE_DIR and the home cache all unwritable,
# so no cache locator of numba's applies (as root, chmod cannot make a folder unwritable)
impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.62
impl._locator_classes = []

import numpy as np
import indexzoo

assert "warpcore-hash" in indexzoo.available(), indexzoo.load_errors()
keys = np.array([5, 3, 5, 9], dtype=np.uint64)
idx = indexzoo.create("warpcore-hash", device="cpu").build(keys)
print(idx.point(np.array([5, 4, 9], dtype=np.uint64), out="count").count.tolist())
"""


def test_a_read_only_install_builds_without_the_kernel_cache() -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "NUMBA_CACHE_LOCATOR_CLASSES")}
    res = subprocess.run([sys.executable, "-c", READ_ONLY_INSTALL], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == "[2, 0, 1]"
