"""The RT query layer: lookups as batches of rays in CSR form, the hit operations reduced per
lookup, launches cut at ``max_rays``, answered like a brute-force oracle.

The scene: unit boxes centred on the integers ``keys`` along the x axis (several may coincide:
duplicates). A lookup ``[lo, hi]`` is cast as one to three rays along x that together cover
exactly ``[lo, hi]`` (the split is random), or as no ray at all when ``lo > hi``; its matches are
the boxes of the keys in ``[lo, hi]``, whose rowID is the box's position.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from numba.extending import register_jitable

from indexzoo.native.rt import query
from indexzoo.native.rt.geometry import AABBS
from indexzoo.native.rt.trace import build_gas


class Parity(NamedTuple):
    odd_only: Any  # bool: only boxes at odd positions match


@register_jitable
def match(ray, inst, prim, t, front, params):
    if params.odd_only and prim % 2 == 0:
        return query.NO_MATCH
    return np.int64(prim)


PROGRAMS = query.QueryPrograms(match=match)


class Segments(query.RayBatch):
    """Lookup q casts rays over the x intervals ``[a, b]`` of its pieces."""

    def __init__(self, pieces: list[list[tuple[int, int]]], odd_only: bool) -> None:
        self.n_queries = len(pieces)
        counts = np.array([len(p) for p in pieces], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.one_each = bool((counts == 1).all())
        flat = [iv for p in pieces for iv in p]
        self.a = np.array([iv[0] for iv in flat], dtype=np.float32).reshape(-1)
        self.b = np.array([iv[1] for iv in flat], dtype=np.float32).reshape(-1)
        self.odd_only = odd_only

    def rays(self, s: int, e: int) -> query.Rays:
        r = e - s
        origins = np.zeros((r, 3), np.float32)
        origins[:, 0] = self.a[s:e] - np.float32(0.5)
        directions = np.zeros((r, 3), np.float32)
        directions[:, 0] = 1
        return query.Rays(origins, directions, np.float32(0),
                          self.b[s:e] - self.a[s:e] + np.float32(1))

    def record(self, s: int, e: int) -> Parity:
        return Parity(np.bool_(self.odd_only))


def _case(seed: int, n_keys: int = 60, n_lookups: int = 40) -> tuple[Any, ...]:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 30, n_keys)
    boxes = np.zeros((n_keys, 6), np.float32)
    boxes[:, 0], boxes[:, 3] = keys - 0.25, keys + 0.25
    boxes[:, 1:3], boxes[:, 4:6] = -0.25, 0.25
    pieces, bounds = [], []
    for _ in range(n_lookups):
        lo, hi = sorted(rng.integers(-2, 33, 2).tolist())
        if rng.random() < 0.15:
            lo, hi = hi + 1, lo  # empty: no rays
        bounds.append((lo, hi))
        if lo > hi:
            pieces.append([])
            continue
        cuts = sorted(set(rng.integers(lo, hi + 1, rng.integers(0, 3)).tolist()) - {lo})
        edges = [lo, *cuts, hi + 1]
        pieces.append([(edges[j], edges[j + 1] - 1) for j in range(len(edges) - 1)])
    return keys, build_gas(AABBS, boxes), pieces, bounds


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("max_rays", [1, 3, 1000])
@pytest.mark.parametrize("odd_only", [False, True])
def test_every_operation_answers_like_brute_force(seed: int, max_rays: int,
                                                  odd_only: bool) -> None:
    keys, gas, pieces, bounds = _case(seed)
    batch = Segments(pieces, odd_only)
    values = np.random.default_rng(seed).integers(0, 2**64 - 1, keys.shape[0], dtype=np.uint64,
                                                   endpoint=True)
    rows = np.arange(keys.shape[0])
    ok = (rows % 2 == 1) if odd_only else np.ones(keys.shape[0], bool)
    want = [rows[ok & (keys >= lo) & (keys <= hi)] for lo, hi in bounds]
    args = {"max_rays": max_rays}
    counts = query.count(gas, batch, PROGRAMS, **args)
    assert counts.tolist() == [len(w) for w in want]
    sums = query.sum_values(gas, batch, PROGRAMS, values, **args)
    assert sums.tolist() == [int(values[w].sum(dtype=np.uint64)) for w in want]
    plain = query.sum_values(gas, batch, PROGRAMS, None, **args)
    assert plain.tolist() == [int(w.sum()) for w in want]
    offsets, rowids = query.collect(gas, batch, PROGRAMS, rowid_dtype=np.uint32, **args)
    assert rowids.dtype == np.uint32
    for i, w in enumerate(want):
        assert sorted(rowids[offsets[i]:offsets[i + 1]].tolist()) == w.tolist()
    first = query.first(gas, batch, PROGRAMS, **args)
    for i, w in enumerate(want):
        assert (first[i] == query.MISS) if not len(w) else int(first[i]) in w
    closest = query.closest(gas, batch, PROGRAMS, **args)
    for i, w in enumerate(want):
        # the closest match of the first ray that has one: the smallest key, then the
        # smallest primitive index among its coincident boxes
        expected = query.MISS if not len(w) else min(w, key=lambda r: (keys[r], r))
        assert int(closest[i]) == int(expected), (i, bounds[i], pieces[i])


def test_a_record_that_reuses_a_layer_field_is_refused() -> None:
    class Clash(NamedTuple):
        op: Any

    with pytest.raises(TypeError, match="reuses the query layer's fields"):
        query.launch_record(Clash)
