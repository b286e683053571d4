"""The ``extremes`` conformance checks."""

from __future__ import annotations

import numpy as np

from ..context import Context, check, verify
from ..data import EXTREME_KEYS_32, EXTREME_KEYS_64


# ====================================================================== extremes
@check("extremes")
def check_extreme_keys_in_data_and_lookups(ctx: Context) -> None:
    """Keys and lookups at 0, 1, 2^23±1, 2^24+1, 2^32-1, 2^32, 2^64-2, 2^64-1."""
    for bits, extremes in ((32, EXTREME_KEYS_32), (64, EXTREME_KEYS_64)):
        if bits == 64 and not ctx.wide:
            continue
        top = (1 << bits) - 1
        around = sorted({min(max(v + d, 0), top) for v in extremes for d in (-1, 0, 1)})
        for keys in (ctx.keys(extremes, bits), ctx.keys(extremes[::2], bits)):
            index = ctx.new().build(keys)
            q = np.array(around, dtype=keys.dtype)
            lo = np.array(around * 3, dtype=keys.dtype)
            hi = np.array(around + [min(v + 1, top) for v in around] + [top] * len(around),
                          dtype=keys.dtype)
            verify(ctx, index, keys, points=q, rng=(lo, hi), label=f"extreme {bits}-bit keys")
