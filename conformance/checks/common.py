"""What several groups of conformance checks share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from indexzoo import (
    GpuIndex,
)

from ..context import Context, check, verify
from ..data import FAMILIES, lookups, make_keys, ranges


def snapshot(index: GpuIndex, points: np.ndarray, rng: tuple[np.ndarray, np.ndarray] | None,
              ) -> list[np.ndarray]:
    """Every result array of every mode, on the host, for bit-exact comparisons."""
    out = []
    for mode in index.capabilities.out_modes:
        results = [index.point(points, out=mode)] if index.capabilities.point else []
        if rng is not None and index.capabilities.range:
            results.append(index.range(rng[0], rng[1], out=mode))
        for r in results:
            out += host_arrays(r)
    return out


def host_arrays(result: Any) -> list[np.ndarray]:
    """The arrays of one lookup result, on the host."""
    h = result.to_host()
    return [a for a in (h.rowid, h.count, h.sum, h.offsets, h.rowids, h.bitmap) if a is not None]


# ====================================================================== differential
def family_check(family: str) -> Callable[[Context], None]:
    def run(ctx: Context) -> None:
        sizes = st.one_of(st.integers(0, ctx.n_max),
                          st.sampled_from([0, 1, 2, 3, 64, 1000, ctx.n_max]))

        @ctx.settings()
        @given(n=sizes, seed=st.integers(0, 2**32 - 1))
        def prop(n: int, seed: int) -> None:
            ks = make_keys(family, n, seed, duplicates=ctx.caps.duplicates)
            keys = ks.keys if ctx.wide else ks.keys.astype(np.uint32)
            index = ctx.new().build(keys)
            verify(ctx, index, keys, points=lookups(keys, ctx.n_lookups, seed),
                   rng=ranges(keys, ctx.n_ranges, seed),
                   label=f"{family} keys (n={keys.shape[0]}, seed={seed})")

        prop()

    run.__doc__ = f"Every out mode agrees with the oracle on {family} keys (hypothesis)."
    return run


for family in FAMILIES:
    _needs = {"duplicates": ("duplicates",), "all_equal": ("duplicates",),
              "uniform64": ("uint64",)}.get(family, ())
    _fn = family_check(family)
    _fn.__name__ = f"check_differential_{family}"
    check("differential", needs=_needs)(_fn)
