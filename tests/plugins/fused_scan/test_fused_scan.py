"""``fused-scan``: the base class derives rowIDs and counts from its bitmaps in chunks of
lookups (bounded bitmap memory) with the answers of one chunk; the conformance suite certifies
the rest."""

from __future__ import annotations

import numpy as np
import pytest

import indexzoo
from indexzoo import pipeline


def test_chunked_lookups_answer_like_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    cols = [rng.integers(0, 50, 1000).astype(np.uint32) for _ in range(3)]
    lo = [rng.integers(0, 30, 77).astype(np.uint32) for _ in range(3)]
    hi = [a + rng.integers(0, 30, 77).astype(np.uint32) for a in lo]
    index = indexzoo.create("fused-scan", device="cpu").build(cols)
    whole = [index.range(lo, hi, out=m).to_host() for m in ("rowids", "count")]
    points = index.point([c[:50] for c in cols], out="rowids").to_host()
    monkeypatch.setattr(pipeline, "BITMAP_CHUNK_BYTES", 4 * 32 * 3)  # three lookups a chunk
    parts = [index.range(lo, hi, out=m).to_host() for m in ("rowids", "count")]
    np.testing.assert_array_equal(whole[0].offsets, parts[0].offsets)
    np.testing.assert_array_equal(whole[0].rowids, parts[0].rowids)
    np.testing.assert_array_equal(whole[1].count, parts[1].count)
    chunked_points = index.point([c[:50] for c in cols], out="rowids").to_host()
    np.testing.assert_array_equal(points.offsets, chunked_points.offsets)
    np.testing.assert_array_equal(points.rowids, chunked_points.rowids)
    mask = np.ones((77, 1000), bool)
    for c, a, b in zip(cols, lo, hi, strict=True):
        mask &= (c[None, :] >= a[:, None]) & (c[None, :] <= b[:, None])
    np.testing.assert_array_equal(parts[1].count, mask.sum(axis=1))
