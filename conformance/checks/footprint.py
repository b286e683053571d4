"""The ``footprint`` conformance checks."""

from __future__ import annotations

import numpy as np

from ..context import Context, check
from ..data import make_keys


# ====================================================================== footprint
@check("footprint")
def check_footprint_is_consistent(ctx: Context) -> None:
    """resident > 0 after a non-empty build, peak >= resident, breakdown adds up, all >= 0."""
    keys = make_keys("uniform32", 5000, 13, duplicates=ctx.caps.duplicates).keys
    fp = ctx.new().build(keys).memory_footprint()
    assert fp.resident_bytes > 0, "resident_bytes must be > 0 after a non-empty build"
    assert fp.peak_build_bytes >= fp.resident_bytes, (
        f"peak_build_bytes {fp.peak_build_bytes} < resident_bytes {fp.resident_bytes}")
    assert all(isinstance(v, int) and v >= 0 for v in fp.breakdown.values()), fp.breakdown
    assert sum(fp.breakdown.values()) == fp.resident_bytes


@check("footprint")
def check_footprint_grows_roughly_linearly(ctx: Context) -> None:
    """Resident bytes grow about linearly with the number of keys (x8 keys: x4 to x16 bytes)."""
    sizes = [1 << 12, 1 << 15]
    res = []
    for n in sizes:
        keys = np.arange(n, dtype=np.uint32)[np.random.default_rng(n).permutation(n)] * 5
        res.append(ctx.new().build(keys).memory_footprint().resident_bytes)
    ratio = res[1] / max(res[0], 1)
    assert 4 <= ratio <= 16, f"resident bytes {res} for {sizes} keys: ratio {ratio:.2f}"
