"""``sorted-array`` and ``searchsorted``: differential tests against a brute-force reference,
and identical answers on the CPU and the GPU."""

from __future__ import annotations

import numpy as np
import pytest
from support.helpers import assert_identical, assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES

NAMES = ["sorted-array", "searchsorted"]


def _workload(dtype: type, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    distinct = rng.integers(0, top, max(n // 3, 1), dtype=dtype, endpoint=True)
    keys = rng.choice(distinct, n)  # duplicates
    keys[: min(n, 3)] = [0, top, top - 1][: min(n, 3)]
    q = np.concatenate([rng.choice(keys, 60), rng.integers(0, top, 40, dtype=dtype, endpoint=True),
                        np.array([0, 1, top, top - 1], dtype=dtype)])
    lo = np.concatenate([rng.choice(keys, 50), np.array([0, top, 5], dtype=dtype)])
    width = rng.integers(0, top // 4, lo.shape[0], dtype=dtype)
    hi = np.where(lo > top - width, top, lo + width).astype(dtype)
    hi[-1] = 4  # inverted range
    return keys, q, lo, hi


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("n", [1, 2, 3, 255, 256, 257, 4096])
def test_answers_match_the_reference(name: str, dtype: type, n: int, device: str) -> None:
    keys, q, lo, hi = _workload(dtype, n, seed=n)
    values = np.random.default_rng(1).integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    index = indexzoo.create(name, device=device).build(keys, values)
    miss = int(index.miss)
    assert_matches({m: index.point(q, out=m) for m in OUT_MODES},
                   reference(keys, q, q, values), miss)
    assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                   reference(keys, lo, hi, values), miss)


@pytest.mark.parametrize("name", NAMES)
def test_rowid_returns_the_smallest_matching_rowid(name: str, device: str) -> None:
    keys = np.array([4, 9, 4, 4, 1], dtype=np.uint64)
    index = indexzoo.create(name, device=device).build(keys)
    assert index.point([4, 9, 1], out="rowid").to_host().rowid.tolist() == [0, 1, 4]


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cpu_and_gpu_answer_identically_on_2_20_random_uint64_keys(name: str) -> None:
    rng = np.random.default_rng(2024)
    keys = rng.integers(0, 2**64 - 1, 1 << 20, dtype=np.uint64, endpoint=True)
    keys[::7] = rng.choice(keys, keys[::7].shape[0])  # some duplicates
    q = np.concatenate([rng.choice(keys, 1 << 19),
                        rng.integers(0, 2**64 - 1, 1 << 19, dtype=np.uint64, endpoint=True)])
    lo = rng.choice(keys, 1 << 14)
    hi = lo + rng.integers(0, 2**50, lo.shape[0], dtype=np.uint64)
    hi = np.maximum(hi, lo)  # saturate instead of wrapping
    cpu = indexzoo.create(name, device="cpu").build(keys)
    gpu = indexzoo.create(name, device="cuda").build(keys)
    for m in OUT_MODES:
        # a bitmap is one row of 2^15 words per lookup: 256 lookups, not 2^20 (137 GB)
        k = 256 if m == "bitmap" else None
        assert_identical(cpu.point(q[:k], out=m), gpu.point(q[:k], out=m), f"{name} point {m}")
        assert_identical(cpu.range(lo[:k], hi[:k], out=m), gpu.range(lo[:k], hi[:k], out=m),
                         f"{name} range {m}")
