"""The ``sizes`` conformance checks."""

from __future__ import annotations

import numpy as np

from indexzoo.native.targets import SERIAL_BELOW

from .. import scale
from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges

#: A batch this large is always checked, whatever the kernels' thresholds.
LARGE_BATCH = 5000
#: Thresholds above this many lookups are out of a check's reach (a setting that keeps every
#: kernel on its serial loop, as the project's own test runs do): LARGE_BATCH is checked.
MOST_BATCH = 1 << 22


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
    their parallel loop from SERIAL_BELOW lookups on; a threshold beyond MOST_BATCH keeps them
    serial), at every suite size."""
    keys = make_keys("dense", 3000, 5, duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    q = (SERIAL_BELOW if SERIAL_BELOW <= MOST_BATCH else 0)
    q = max(q, LARGE_BATCH) + 17
    pts = lookups(keys, q, 5)
    top = pts.dtype.type(np.iinfo(pts.dtype).max)
    hi = np.where(pts > top - 3, top, pts + pts.dtype.type(3))  # a few keys each
    verify(ctx, index, keys, points=pts, rng=(pts, hi), label=f"one batch of {q} lookups")


@check("sizes")
def check_large_batches_answer_every_lookup(ctx: Context) -> None:
    """Batches of sizes drawn from the run's seed, the largest above 2^19 lookups on the CPU
    (2^24 on a GPU) at --size large, answer every lookup right in every out mode but bitmap
    (a bug at a position of a large batch shows here)."""
    for case in scale.batch_cases(ctx):
        scale.run_case(ctx, case.keys, scale.batch_plan(ctx, case.batches),
                       what=f"batches of {', '.join(f'{q:,}' for q in case.batches)}; ")


@check("sizes")
def check_large_key_sets_answer_every_key(ctx: Context) -> None:
    """Key sets of sizes drawn from the run's seed, the largest above 2^21 distinct keys on
    the CPU (2^26 on a GPU) at --size large: every key is looked up as a point and as a
    range's lower bound, and every answer is right in every out mode but bitmap."""
    for case in scale.key_cases(ctx):
        scale.run_case(ctx, case, scale.sweep_plan(ctx, case.distinct, case.batch))
