"""The ``differential`` conformance checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ..context import Context, check, verify
from ..data import EXTREME_KEYS_64, FAMILIES, lookups, make_keys, ranges


def _family_check(family: str) -> Callable[[Context], None]:
    """The hypothesis differential check over keys of one family of :data:`FAMILIES`."""

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

        ctx.seeded(prop)()

    run.__doc__ = f"Every out mode agrees with the oracle on {family} keys (hypothesis)."
    return run


#: One check per key family, each a named attribute of this module (the catalog collects a
#: module's checks from its attributes): dense, uniform32, uniform64, clustered, duplicates,
#: all_equal.
_NEEDS = {"duplicates": ("duplicates",), "all_equal": ("duplicates",), "uniform64": ("uint64",)}
for _family in FAMILIES:
    _fn = _family_check(_family)
    _fn.__name__ = _fn.__qualname__ = f"check_differential_{_family}"
    globals()[_fn.__name__] = check("differential", needs=_NEEDS.get(_family, ()))(_fn)
del _family, _fn


@check("differential")
def check_differential_small_sets_drawn_key_by_key(ctx: Context) -> None:
    """Small key sets and lookups drawn value by value, so hypothesis shrinks a failure to a
    minimal example (a few keys, one lookup)."""

    @ctx.settings()
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        bits = 64 if ctx.wide and data.draw(st.booleans(), label="64-bit") else 32
        top = (1 << bits) - 1
        specials = [v for v in (*EXTREME_KEYS_64, 2**32 - 2) if v <= top]
        value = st.one_of(st.integers(0, 40), st.sampled_from(specials), st.integers(0, top))
        keys = data.draw(st.lists(value, max_size=48, unique=not ctx.caps.duplicates),
                         label="keys")
        probe = st.one_of(st.sampled_from(keys), value) if keys else value
        q = data.draw(st.lists(probe, min_size=1, max_size=24), label="lookups")
        pairs = data.draw(st.lists(st.tuples(probe, probe), min_size=1, max_size=24),
                          label="ranges")
        dtype = np.uint64 if bits == 64 else np.uint32
        k = np.array(keys, dtype=dtype)
        index = ctx.new().build(k)
        verify(ctx, index, k, points=np.array(q, dtype=dtype),
               rng=(np.array([a for a, _ in pairs], dtype=dtype),
                    np.array([b for _, b in pairs], dtype=dtype)),
               label=f"keys {keys}")

    ctx.seeded(prop)()


@check("differential", needs=("sum",))
def check_custom_values_are_summed(ctx: Context) -> None:
    """``sum`` adds the given values (not the rowIDs), wrapping modulo 2^64."""
    rng = np.random.default_rng(5)
    ks = make_keys("uniform32", 3000, 5, duplicates=ctx.caps.duplicates).keys
    values = rng.integers(2**62, 2**64 - 1, ks.shape[0], dtype=np.uint64, endpoint=True)
    index = ctx.new().build(ks, values)
    verify(ctx, index, ks, values=values, points=lookups(ks, ctx.n_lookups, 5),
           rng=ranges(ks, ctx.n_lookups, 5), label="custom values", modes=["sum"])
