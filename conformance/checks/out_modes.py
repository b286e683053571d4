"""The ``out_modes`` conformance checks."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo import (
    InvalidInput,
)

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges


# ====================================================================== out modes
@check("out_modes", needs=("rowid",))
def check_rowid_is_a_match_or_the_miss_value(ctx: Context) -> None:
    """out='rowid' returns a matching rowID, or index.miss for a lookup without a match."""
    keys = ctx.keys([5, 9, 9, 14, 2**31] if ctx.caps.duplicates else [5, 9, 14, 2**31], 32)
    index = ctx.new().build(keys)
    q = np.array([9, 4, 5, 2**31, 2**31 + 1, 0, 14, 15], dtype=keys.dtype)
    verify(ctx, index, keys, points=q, rng=(q, q + 2), modes=["rowid"], label="rowid")
    assert index.miss == np.iinfo(index.rowid_dtype).max


@check("out_modes", needs=("rowids",))
def check_rowids_lists_every_match_once(ctx: Context) -> None:
    """out='rowids' gives exactly the set of matching rowIDs per lookup, none twice."""
    keys = make_keys("clustered", 2000, 3, duplicates=ctx.caps.duplicates).keys
    index = ctx.new().build(keys)
    verify(ctx, index, keys, points=lookups(keys, 500, 3), rng=ranges(keys, 300, 3),
           modes=["rowids"], label="rowids")


@check("out_modes", needs=("bitmap",))
def check_bitmaps_are_packed_lsb_first_with_zero_padding(ctx: Context) -> None:
    """out="bitmap": one row of ceil(n/32) uint32 words per lookup, rowID r at bit r % 32 of
    word r // 32, padding bits zero (n = 1, 31, 32, 33, 63, 64, 65, 100 and 1000)."""
    for n in (1, 31, 32, 33, 63, 64, 65, 100, 1000):
        keys = make_keys("duplicates" if ctx.caps.duplicates else "dense", n, n,
                         duplicates=ctx.caps.duplicates).keys.astype(np.uint32)
        index = ctx.new().build(keys)
        top = np.uint32(2**32 - 1)
        verify(ctx, index, keys, points=np.concatenate([keys[:40], [top]]).astype(np.uint32),
               rng=(np.array([0, 0, 5, top], np.uint32), np.array([top, 0, 3, top], np.uint32)),
               label=f"n={n}", modes=["bitmap"])


@check("out_modes")
def check_unknown_out_mode_is_invalid_input(ctx: Context) -> None:
    """An out value that is no out mode raises InvalidInput naming the allowed ones."""
    index = ctx.new().build(ctx.keys([1, 2, 3], 32))
    bad_outs: tuple[Any, ...] = ("rowidz", None, 3)
    for bad in bad_outs:
        try:
            (index.point if ctx.caps.point else lambda q, out: index.range(q, q, out=out))(
                np.array([1], np.uint32), out=bad)
        except InvalidInput as exc:
            assert "'rowid', 'count', 'sum', 'rowids'" in str(exc), str(exc)
        else:
            raise AssertionError(f"out={bad!r} was accepted")


@check("out_modes", needs=("duplicates",))
def check_point_lookups_see_every_duplicate(ctx: Context) -> None:
    """A point lookup counts, sums and lists every duplicate of its key (multiplicity 1..2^10)."""
    mults = [1, 2, 3, 31, 32, 33, 255, 256, 1024]
    keys = np.repeat(np.arange(len(mults), dtype=np.uint32) * 7 + 3, mults)
    keys = keys[np.random.default_rng(1).permutation(keys.shape[0])]
    index = ctx.new().build(keys)
    q = np.arange(0, 7 * len(mults) + 5, dtype=np.uint32)
    verify(ctx, index, keys, points=q, rng=(q, q + 7), label="duplicates")
