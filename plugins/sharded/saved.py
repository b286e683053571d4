"""The saved form of a ``sharded`` index, as its ``state_schema`` declares it.

Each shard is another index's saved form (its metadata as JSON text, its arrays) with the
global rowID of each of its rows. Before any shard goes to a worker, the client checks every
one as a file of its inner index would be checked (:func:`indexzoo.restore.check_saved`: the
metadata within its bounds, the params, the base's fields, the inner plugin's schema), that
there is one per configured shard, that each holds the sharded index's native keys, and that
the shards' global rowIDs together are each of ``0 .. n - 1`` once (lookups answer with them).
The routing keys are checked for their dtype and order, each shard's key bounds for their
form (none, or two native keys, the smaller first, for a non-empty one-column shard).
Bounds narrower than the shard's keys make lookups miss those keys, as an index that holds
fewer keys would: a value a load cannot know (docs/persistence.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import to_numpy
from indexzoo.errors import ConfigError
from indexzoo.metadata import parse_metadata
from indexzoo.persist import Array, Check, Nested, SavedIndex, Scope, StateSchema, Value
from indexzoo.registry import lookup
from indexzoo.restore import check_saved

__all__ = ["SHARDED_SCHEMA"]


def _check_shards(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    p = ctx.params
    shards = root["shards"]
    if len(shards) != p.shards:
        raise scope.problem("shards", f"holds {len(shards)} shards; the params say {p.shards}")
    try:
        inner = lookup(p.inner.index)
    except ConfigError as exc:
        raise scope.problem("shards", f"are of index {p.inner.index!r}, which cannot be used "
                                      f"here: {exc}") from None
    rows = []
    for s, shard in enumerate(shards):
        where = f"{ctx.source} (shard {s})"
        meta = parse_metadata(shard["meta"].encode("utf-8", "replace"), where)
        arrays = {k: to_numpy(a) for k, a in shard["arrays"].items()}
        st = check_saved(inner, SavedIndex(meta, arrays, source=where))
        got = to_numpy(shard["rows"])  # host arrays: the client checks on the host
        held = 0 if st is None else st.n
        if got.shape != (held,):
            raise scope.problem(f"shards[{s}].rows", f"holds {got.shape[0]} rowIDs for the "
                                                     f"shard's {held} rows")
        if st is not None and (st.dims != ctx.dims or any(
                km.source != ctx.native for km in st.keymaps)):
            raise scope.problem(f"shards[{s}]", f"holds keys other than {ctx.dims} columns of "
                                                f"the index's native {ctx.native}")
        wrong = _bounds_problem(shard["bounds"], held, ctx.dims, ctx.native)
        if wrong:
            raise scope.problem(f"shards[{s}].bounds", wrong)
        rows.append(got)
    every = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    n = ctx.n
    if every.shape[0] != n:
        return f"shards: hold {every.shape[0]} rows, not n = {n}"
    if n and (int(every.min()) < 0 or int(every.max()) >= n):
        return f"shards: hold a global rowID outside 0 .. {n - 1}"
    seen = np.zeros(n, dtype=bool)
    seen[every] = True
    return None if bool(seen.all()) else "shards: hold a global rowID twice"


def _bounds_problem(bounds: Any, held: int, dims: int, native: np.dtype) -> str | None:
    """What is wrong with a shard's saved key bounds (the smallest and largest native key of
    a non-empty shard of one-column keys; None where the inner index keeps none), or None."""
    if bounds is None:  # an inner index of column tables keeps none (nor does an empty shard)
        return None
    if dims > 1 or held == 0:
        return "holds key bounds for a shard that has none"
    top = int(np.iinfo(native).max)
    if len(bounds) != 2 or not 0 <= bounds[0] <= bounds[1] <= top:
        return f"is {str(bounds)[:60]}, not two native keys lo <= hi for {held} rows"
    return None


#: The state of ``sharded`` (see the module docstring).
SHARDED_SCHEMA = StateSchema(
    Value("scheme", str, choices=("range", "hash", "rows")),
    Array("lo", dtype="native", shape=("params.shards",)),
    Array("hi", dtype="native", shape=("params.shards",)),
    Array("split", dtype="native", shape=(None,), order="nondecreasing"),
    Array("heavy", dtype="native", shape=(None,), order="increasing"),
    Value("shards", list[Any]),
    Nested("shards[*]",
           Value("meta", str),
           Value("arrays", dict[str, Any]),
           Array("arrays[*]"),
           Array("rows", dtype="int64", shape=(None,)),
           Value("bounds", list[int] | None)),
    Check(_check_shards),
)
