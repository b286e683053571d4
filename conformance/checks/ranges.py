"""The ``ranges`` conformance checks."""

from __future__ import annotations

import numpy as np

from ..context import Context, check, verify
from ..data import make_keys


# ====================================================================== ranges
def _range_case(ctx: Context, keys: np.ndarray, lo: list[int], hi: list[int], label: str) -> None:
    index = ctx.new().build(keys)
    verify(ctx, index, keys, rng=(np.array(lo, keys.dtype), np.array(hi, keys.dtype)), label=label)


@check("ranges", needs=("range",))
def check_range_bounds_are_inclusive(ctx: Context) -> None:
    """[lo, hi] includes keys equal to lo and hi and excludes the neighbours lo-1 and hi+1."""
    keys = np.arange(100, 200, dtype=np.uint32)
    _range_case(ctx, keys, [120, 100, 150, 99, 199, 130], [130, 100, 150, 99, 200, 129],
                "inclusive bounds")


@check("ranges", needs=("range",))
def check_single_key_ranges(ctx: Context) -> None:
    """lo == hi finds exactly the key (with all its duplicates), or nothing."""
    keys = ctx.keys([7, 7, 9, 2**32 - 1] if ctx.caps.duplicates else [7, 9, 2**32 - 1], 32)
    _range_case(ctx, keys, [7, 8, 9, 2**32 - 1, 0], [7, 8, 9, 2**32 - 1, 0], "lo == hi")


@check("ranges", needs=("range",))
def check_inverted_ranges_are_empty(ctx: Context) -> None:
    """lo > hi is an empty range, not an error."""
    keys = np.arange(0, 50, dtype=np.uint32)
    _range_case(ctx, keys, [10, 49, 2**32 - 1, 1], [9, 0, 0, 0], "lo > hi")


@check("ranges", needs=("range",))
def check_full_cover_and_ranges_outside_the_keys(ctx: Context) -> None:
    """A range over the whole domain finds every key; ranges below min or above max nothing."""
    keys = make_keys("uniform32", 2000, 9, duplicates=ctx.caps.duplicates).keys
    keys = keys[(keys > 100) & (keys < 2**32 - 100)]
    kmin, kmax = int(keys.min()), int(keys.max())
    _range_case(ctx, keys, [0, 0, kmax + 1, 0, kmin], [2**32 - 1, kmin - 1, 2**32 - 1, kmin, kmax],
                "full cover / outside")


@check("ranges", needs=("range", "uint64"))
def check_ranges_crossing_bit_split_boundaries(ctx: Context) -> None:
    """Ranges across 2^23, 2^32 and 2^46 (RX's 3D split points) find every key in between."""
    parts = []
    for b in (2**23, 2**32, 2**46):
        parts.append(np.arange(b - 40, b + 40, dtype=np.uint64))
    keys = np.concatenate(parts)
    lo = [b - 3 for b in (2**23, 2**32, 2**46)] + [2**23 - 40, 2**23, 0]
    hi = [b + 2 for b in (2**23, 2**32, 2**46)] + [2**46 + 39, 2**32 - 1, 2**64 - 1]
    _range_case(ctx, keys, lo, hi, "bit-split boundaries")


@check("ranges", needs=("range",))
def check_ranges_with_31_32_33_64_and_more_hits(ctx: Context) -> None:
    """Ranges with 31, 32, 33, 64, 65, 1000 hits (where scans switch to cooperative groups)."""
    keys = np.arange(1000, 4000, dtype=np.uint32) * 2
    lo = [2000] * 7
    hi = [2000 + 2 * (h - 1) for h in (31, 32, 33, 64, 65, 1000, 2999)]
    _range_case(ctx, keys, lo, hi, "hit counts around 32")
