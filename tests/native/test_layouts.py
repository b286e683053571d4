"""The layout math of the lightweight sorted-array indexes (Henneberg & Schuhknecht, "Is
Binary Search Really All You Need?", §3.2-3.5): the closed-form K-ary Eytzinger order and the
pivot buffer, against independent references and the paper's figures. CPU only.
"""

from __future__ import annotations

from collections.abc import Iterator

import numba
import numpy as np
import pytest
from numba import njit

from indexzoo.plugins.lightweight.eytzinger import (
    EO_GATHER,
    eo_layout,
    eo_reference,
    eo_shape,
    eo_source,
    eo_sources,
)
from indexzoo.plugins.lightweight.pivots import (
    PB_GATHER,
    chunk_for_levels,
    full_chunk,
    levels_for_chunk,
    pb_chunk_of,
    pb_lower_bound,
    pb_plan,
    pb_reference,
    pb_sentinel,
    pb_source,
)

KS = (2, 3, 4, 5, 9, 17, 33)
PRIMES = (211, 1021, 4099)
#: The sorted keys of the paper's running example (Figs. 4-6, 8, 10).
PAPER_KEYS = np.array([2, 3, 6, 6, 7, 7, 9, 10, 12, 12, 13, 14, 17, 17], dtype=np.uint32)


@pytest.fixture(autouse=True, scope="module")
def _one_numba_thread() -> Iterator[None]:
    """The kernels run hundreds of tiny launches here; a parallel launch costs milliseconds of
    thread wake-up on a busy machine and tests nothing about the layouts, so use one thread."""
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(before)


def _powers_of_two_and_neighbours(exponents: range) -> list[int]:
    return sorted({m for e in exponents for m in (2**e - 1, 2**e, 2**e + 1)})


def _eo_sizes(k: int) -> list[int]:
    """0..200, 2^j and neighbours, K^H - 1 (complete trees), K^H and K^H + 1, primes."""
    sizes = set(range(201)) | set(_powers_of_two_and_neighbours(range(8, 13))) | set(PRIMES)
    full = k
    while full <= 5000:
        sizes |= {full - 1, full, full + 1}
        full *= k
    return sorted(sizes)


def _sorted_with_duplicates(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    return np.sort(rng.integers(0, max(1, n // 2), n).astype(dtype))


# ---------------------------------------------------------------------------------------------
# Eytzinger order


def test_eo_shape_counts_the_complete_levels_and_the_partial_leaf_level() -> None:
    assert eo_shape(0, 2) == (0, 0)
    assert eo_shape(1, 2) == (1, 0)
    assert eo_shape(14, 3) == (2, 6)  # Fig. 10: two complete levels (8 keys), 6 leaves
    assert eo_shape(14, 2) == (3, 7)
    assert eo_shape(15, 2) == (4, 0)
    assert eo_shape(2**20 - 1, 2) == (20, 0)
    assert eo_shape(80, 3) == (4, 0)
    assert eo_shape(81, 3) == (4, 1)


def test_fig10_golden_k3_and_binary() -> None:
    assert eo_layout(PAPER_KEYS, 3).tolist() == [12, 14, 6, 7, 12, 13, 17, 17, 2, 3, 6, 7, 9, 10]
    assert eo_layout(PAPER_KEYS, 2).tolist() == [10, 6, 14, 3, 7, 12, 17, 2, 6, 7, 9, 12, 13, 17]


def _eo_levels(n: int, k: int) -> list[slice]:
    """The slots of each EO level, top first (the last one possibly partial)."""
    levels, start, width = [], 0, k - 1
    while start < n:
        levels.append(slice(start, min(start + width, n)))
        start, width = start + width, width * k
    return levels


def _assert_search_tree(eo: list[int], k: int) -> None:
    """Every key of child subtree c of a node lies between the node's keys c-1 and c."""
    n = len(eo)
    nodes = -(-n // (k - 1))
    sub_min, sub_max = [0] * nodes, [0] * nodes
    for j in reversed(range(nodes)):
        keys = eo[j * (k - 1): min(j * (k - 1) + k - 1, n)]
        lo, hi = min(keys), max(keys)
        for c in range(k):
            child = j * k + 1 + c
            if child >= nodes:
                break
            assert len(keys) == k - 1, "only full nodes have children"
            if c > 0:
                assert keys[c - 1] <= sub_min[child], (j, c)
            if c < k - 1:
                assert sub_max[child] <= keys[c], (j, c)
            lo, hi = min(lo, sub_min[child]), max(hi, sub_max[child])
        sub_min[j], sub_max[j] = lo, hi


@pytest.mark.parametrize("k", KS)
def test_closed_form_eo_is_the_recursive_in_order_tree(k: int) -> None:
    rng = np.random.default_rng(k)
    for n in _eo_sizes(k):
        h, b = eo_shape(n, k)
        assert k**h - 1 <= n < k ** (h + 1) - 1 and b == n - (k**h - 1)
        src = eo_sources(n, k)  # eo_source as Python
        np.testing.assert_array_equal(src, eo_reference(np.zeros(n), k), err_msg=f"n={n}")
        compiled = np.empty(n, np.uint32)  # eo_source compiled, through the gather kernel
        positions = np.arange(n, dtype=np.uint32)
        EO_GATHER("cpu", n, positions, positions, compiled, compiled, 1, 0, n, k, h, b)
        np.testing.assert_array_equal(compiled, src)
        np.testing.assert_array_equal(np.sort(src), np.arange(n))  # a bijection onto [0, n)

        keys = _sorted_with_duplicates(rng, n, np.uint32)
        eo = keys[src]
        for level in _eo_levels(n, k):
            assert np.all(np.diff(src[level]) > 0), (n, level)
            assert np.all(np.diff(eo[level].astype(np.int64)) >= 0), (n, level)
        _assert_search_tree(eo.tolist(), k)


def test_eo_source_is_the_rank_of_the_slot() -> None:
    """On unique keys the sorted position is the number of smaller keys in the whole layout."""
    for k in (2, 3, 9):
        n = 300
        h, b = eo_shape(n, k)
        eo = eo_layout(np.arange(10, 10 + n), k)
        for t in range(n):
            assert eo_source(t, n, k, h, b) == int(np.sum(eo < eo[t]))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pad", [0, 1])
def test_eo_gather_moves_rowids_with_their_keys(dtype: type, stride: int, pad: int) -> None:
    """The build: sort (key, rowID) pairs, then one gather into EO, SoA or AoS, with or without
    the leading empty slot; the rowID of every slot still points to a row holding that key."""
    rng = np.random.default_rng(stride * 2 + pad)
    top = np.iinfo(dtype).max
    for k in (2, 3, 9, 33):
        for n in (1, 2, 14, 100, 1000, 4097):
            column: np.ndarray = rng.integers(0, max(2, n // 3), n).astype(dtype)
            column[:2] = [0, top][: min(n, 2)]
            order = np.argsort(column, kind="stable")
            src_keys, src_rowids = column[order], order.astype(np.uint32)
            h, b = eo_shape(n, k)
            marker = dtype(12345)
            if stride == 1:
                keys: np.ndarray = np.full(n + pad, marker, dtype)
                rowids = np.full(n + pad, 54321, np.uint32)
                EO_GATHER("cpu", n, src_keys, src_rowids, keys, rowids, 1, pad, n, k, h, b)
                assert pad == 0 or (keys[0], rowids[0]) == (marker, 54321)
                keys, rowids = keys[pad:], rowids[pad:]
            else:
                table: np.ndarray = np.full(2 * (n + pad), marker, dtype)
                EO_GATHER("cpu", n, src_keys, src_rowids, table, table[1:], 2, pad, n, k, h, b)
                assert pad == 0 or (table[0], table[1]) == (marker, marker)
                keys, rowids = table[2 * pad::2], table[2 * pad + 1::2]
            np.testing.assert_array_equal(keys, eo_layout(src_keys, k))
            np.testing.assert_array_equal(rowids, src_rowids[eo_sources(n, k)])
            np.testing.assert_array_equal(column[rowids.astype(np.int64)], keys)


# ---------------------------------------------------------------------------------------------
# Pivot buffer


def test_fig8_ternary_pivot_buffer() -> None:
    """K = 3 over chunks of 2: top pivots 7 and 14, then 3 6 | 10 12 | 17 -> sentinel."""
    plan = pb_plan(14, 3, 2)
    assert plan.level_nodes == (1, 3) and plan.offsets().tolist() == [0, 2, 8]
    s = int(pb_sentinel(np.uint32))
    assert pb_reference(PAPER_KEYS, 3, 2).tolist() == [7, 14, 3, 6, 10, 12, s, s]
    pb = np.empty(plan.slots, np.uint32)
    PB_GATHER("cpu", plan.slots, PAPER_KEYS, pb, plan.offsets(), plan.levels, 14, 3, 2,
              pb_sentinel(np.uint32))
    assert pb.tolist() == [7, 14, 3, 6, 10, 12, s, s]
    chunk = pb_chunk_of(pb, plan.offsets(), plan.levels, 3, np.uint32(13))
    assert chunk == 5 and PAPER_KEYS[chunk * 2: chunk * 2 + 2].tolist() == [13, 14]


def test_fig6_full_binary_pivot_buffer_has_three_levels_over_chunks_of_two() -> None:
    assert full_chunk(2) == 2 and full_chunk(3) == 2 and full_chunk(9) == 8
    plan = pb_plan(14, 2, full_chunk(2))
    assert plan.levels == 3 and plan.level_nodes == (1, 2, 4) and plan.slots == 7


def test_no_levels_when_one_chunk_covers_everything() -> None:
    for n in (0, 1, 7, 8):
        plan = pb_plan(n, 9, 8)
        assert plan.levels == 0 and plan.slots == 0 and plan.offsets().tolist() == [0]
        assert pb_reference(np.arange(n, dtype=np.uint32), 9, 8).size == 0
    assert pb_plan(9, 9, 8).level_nodes == (1,)


def test_paper_size_check_24_binary_levels_over_2_28_keys() -> None:
    n = 2**28
    assert levels_for_chunk(n, 2, full_chunk(2)) == 27  # "the full search tree of 27 levels"
    chunk = chunk_for_levels(n, 2, 24)
    assert chunk == 16 and chunk_for_levels(n, 2, -3) == 16
    plan = pb_plan(n, 2, chunk)
    assert plan.levels == 24 and plan.slots == 2**24 - 1
    assert plan.nbytes(4) == 64 * 2**20 - 4


@njit
def _pb_lookups(keys, pb, offsets, levels, k, chunk, probes):  # type: ignore[no-untyped-def]
    bounds = np.empty(probes.shape[0], np.int64)
    chunks = np.empty(probes.shape[0], np.int64)
    for i in range(probes.shape[0]):
        chunks[i] = pb_chunk_of(pb, offsets, levels, k, probes[i])
        bounds[i] = pb_lower_bound(keys, pb, offsets, levels, k, chunk, probes[i])
    return bounds, chunks


def _probes(keys: np.ndarray) -> np.ndarray:
    """Every key, its neighbours (between keys, below the minimum, above the maximum), 0 and
    the dtype maximum."""
    top = int(np.iinfo(keys.dtype).max)
    near = np.concatenate([keys.astype(object) + d for d in (-1, 0, 1)]).tolist()
    values = {v for v in near if 0 <= v <= top} | {0, 1, top - 1, top}
    return np.array(sorted(values), dtype=keys.dtype)


def _check_pb(keys: np.ndarray, k: int, chunk: int) -> None:
    n = len(keys)
    plan = pb_plan(n, k, chunk)
    offsets = plan.offsets()
    assert offsets[0] == 0 and offsets[-1] == plan.slots and len(offsets) == plan.levels + 1
    assert -(-n // chunk) <= k**plan.levels  # the chunks fit under the tree
    sentinel = pb_sentinel(keys.dtype)
    pb = np.empty(plan.slots, keys.dtype)
    PB_GATHER("cpu", plan.slots, keys, pb, offsets, plan.levels, n, k, chunk, sentinel)
    np.testing.assert_array_equal(pb, pb_reference(keys, k, chunk))
    for level, start in enumerate(offsets[:-1]):  # the paper's formula, per intra-level index i
        block = chunk * k ** (plan.levels - 1 - level)
        for i in range(plan.level_nodes[level] * (k - 1)):
            p = block * (1 + i + i // (k - 1)) - 1
            t = int(start) + i
            assert pb_source(t, offsets, plan.levels, n, k, chunk) == (p if p < n - 1 else -1)
            assert pb[t] == (keys[p] if p < n - 1 else sentinel)
    probes = _probes(keys)
    bounds, chunks = _pb_lookups(keys, pb, offsets, plan.levels, k, chunk, probes)
    np.testing.assert_array_equal(bounds, np.searchsorted(keys, probes, "left"))
    assert np.all((chunks >= 0) & (chunks < max(1, plan.chunks)))


def _pb_sizes() -> list[int]:
    return sorted(set(range(60)) | set(_powers_of_two_and_neighbours(range(6, 12))) | {97, 1021})


def _chunks(k: int) -> list[int]:
    return sorted({k - 1, (k - 1) * k, (k - 1) * k * k, full_chunk(k)})


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("k", KS)
def test_pivot_buffer_gather_slots_and_lower_bounds(k: int, dtype: type) -> None:
    """PB_GATHER equals the reference and the paper's formula; traversing the PB and searching
    the chunk gives searchsorted's lower bound, for keys with 0, the maximum and duplicates and
    for keys strictly inside the dtype's range."""
    rng = np.random.default_rng(k)
    top = np.iinfo(dtype).max
    for n in _pb_sizes():
        extremes = _sorted_with_duplicates(rng, n, dtype)
        if n:
            extremes[0], extremes[-1] = 0, top
            extremes[-min(n, 3):] = top  # a run of maximum keys, equal to the sentinel
        interior: np.ndarray = np.sort(rng.integers(1000, 1000 + 3 * n + 1, n).astype(dtype))
        for chunk in _chunks(k):
            _check_pb(extremes, k, chunk)
            _check_pb(interior, k, chunk)


@pytest.mark.parametrize("k", KS)
def test_chunk_for_levels_keeps_the_top_levels_of_the_full_buffer(k: int) -> None:
    """Every level count from 1 to the full PB's is reachable; the coarse PB is the full PB
    without its bottom levels, and still finds every lower bound."""
    rng = np.random.default_rng(100 + k)
    for n in (2, 14, 100, 1000, 4096, 4097, 10**5):
        full = pb_plan(n, k, full_chunk(k))
        keys = np.sort(rng.integers(0, 2 * n, n).astype(np.uint32))
        full_pb = pb_reference(keys, k, full.chunk) if n <= 4097 else None
        for levels in range(1, full.levels + 1):
            chunk = chunk_for_levels(n, k, levels)
            plan = pb_plan(n, k, chunk)
            assert plan.levels == levels
            assert chunk == full.chunk * k ** (full.levels - levels)
            assert plan.level_nodes == full.level_nodes[:levels]
            assert chunk_for_levels(n, k, levels - full.levels) == chunk  # "drop the bottom ones"
            if full_pb is not None:
                np.testing.assert_array_equal(pb_reference(keys, k, chunk), full_pb[: plan.slots])
                _check_pb(keys, k, chunk)
        assert chunk_for_levels(n, k, full.levels + 5) == full.chunk
        assert chunk_for_levels(n, k, 0) == full.chunk
        if full.levels:
            assert pb_plan(n, k, chunk_for_levels(n, k, -1000)).levels == 1  # clamped
