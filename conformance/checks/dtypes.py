"""The ``dtypes`` conformance checks."""

from __future__ import annotations

import numpy as np

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges
from .common import snapshot


# ====================================================================== dtypes
@check("dtypes", needs=("uint64",))
def check_uint32_and_uint64_keys_agree(ctx: Context) -> None:
    """The same keys as uint32 and as uint64 give the same answers."""
    k32 = make_keys("uniform32", 3000, 8, duplicates=ctx.caps.duplicates).keys
    q32 = lookups(k32, ctx.n_lookups, 8)
    lo32, hi32 = ranges(k32, ctx.n_lookups, 8)
    a = snapshot(ctx.new().build(k32), q32, (lo32, hi32))
    b = snapshot(ctx.new().build(k32.astype(np.uint64)), q32.astype(np.uint64),
                  (lo32.astype(np.uint64), hi32.astype(np.uint64)))
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg="uint32 and uint64 keys disagree")


@check("dtypes")
def check_signed_and_float_keys_through_the_key_map(ctx: Context) -> None:
    """int8/int32/int64/float32/float64/bytes keys answer like the oracle on the raw values."""
    rng = np.random.default_rng(12)
    cases: list[np.ndarray] = [
        rng.integers(-128, 128, 500).astype(np.int8),
        rng.integers(-(2**31), 2**31, 800).astype(np.int32),
        np.round(rng.standard_normal(800) * 100, 1).astype(np.float32),
    ]
    if ctx.wide:  # these key maps need uint64 keys
        cases += [rng.integers(-(2**63), 2**63 - 1, 800, dtype=np.int64),
                  np.concatenate([rng.standard_normal(800) * 1e6, [np.inf, -np.inf, 0.0]]),
                  np.array([b"apple", b"fig", b"kiwi", b"apple", b"a", b"b\x00c"], dtype="S5")]
    for keys in cases:
        if not ctx.caps.duplicates:
            keys = np.unique(keys)
        keys = keys[rng.permutation(keys.shape[0])]
        if keys.dtype.kind == "f":  # -0.0 and 0.0 are one key
            zero = np.flatnonzero(keys == 0)
            keys[zero if zero.shape[0] and not ctx.caps.duplicates else slice(0, 1)] = -0.0
        if keys.dtype.kind == "S":
            q = np.array([b"apple", b"ap", b"kiwi", b"zz", b"a", b"fig"], dtype="S5")
        else:  # hits, and neighbours that mostly miss
            q = np.concatenate([keys[:100], keys[:50] + keys.dtype.type(1)])
        half = q.shape[0] // 2
        a, b = q[:half], q[half:2 * half]
        lo, hi = np.where(a <= b, a, b), np.where(a <= b, b, a)
        index = ctx.new().build(keys)
        verify(ctx, index, keys, points=q, rng=(lo, hi), label=f"{keys.dtype} keys")
