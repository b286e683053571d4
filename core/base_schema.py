"""The schema of the base's part of every saved state (``meta["base"]``): the key maps, the
values, the rows kept under ``nulls="skip"``, the build's row count, the null policy and the
column names. Every load checks it (:mod:`indexzoo.restore`) before the plugin's own schema,
whose expressions then rely on ``n``, ``n_rows``, ``dims`` and the native and rowID dtypes it
vouches for.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .errors import InvalidInput
from .keys import KeyMap
from .schema import Array, Check, Scope, StateSchema, Value
from .schema_types import mismatch

__all__ = ["BASE_HINTS", "BASE_SCHEMA", "keymaps_problem"]

#: The annotations of the base's fields of a state, as saved (the key maps' class among them).
BASE_HINTS: dict[str, Any] = {"keymaps": tuple[KeyMap, ...], "values": Any, "rows": Any,
                              "n_rows": int, "nulls": str, "names": tuple[str, ...] | None}

_NATIVE = (np.dtype(np.uint32), np.dtype(np.uint64))
_MAX_ROWS = (1 << 63) - 1


def _keymap_problem(km: KeyMap) -> str | None:
    """What is wrong with one key map read from a file, or None."""
    if km.target not in _NATIVE:
        return f"maps onto {km.target}, not onto uint32 or uint64"
    if km.tz is not None and (km.kind != "datetime" or len(km.tz) > 64):
        return f"has the time zone {km.tz[:64]!r}, which only timestamps have"
    if km.kind == "strings":
        d = km.dictionary  # unpacked: an object array of str (source U) or bytes (source S)
        kind = {"U": str, "S": bytes}.get(getattr(km.source, "kind", ""))
        if not isinstance(d, np.ndarray) or d.ndim != 1 or d.dtype.kind != "O" or kind is None \
                or not all(type(v) is kind for v in d.tolist()):
            return "maps strings without a dictionary of strings of its source dtype"
        values = d.tolist()
        if any(b <= a for a, b in itertools.pairwise(values)):
            return "has a dictionary that is not sorted and distinct"
        if d.shape[0] > (1 << 32) and km.target != np.uint64:
            return f"maps {d.shape[0]} strings onto {km.target}"
        return None
    if km.dictionary is not None:
        return f"holds a dictionary, which keys of kind {km.kind!r} do not have"
    try:
        natural = KeyMap.for_dtype(km.source)
    except (InvalidInput, TypeError, ValueError):
        return f"maps keys of dtype {km.source}, which cannot be keys"
    if natural.kind != km.kind or natural.target.itemsize > km.target.itemsize:
        return (f"says keys of dtype {km.source} are of kind {km.kind!r} onto {km.target}; they "
                f"are of kind {natural.kind!r} onto {natural.target} or wider")
    return None


def keymaps_problem(maps: Any, max_dims: int, key_dtypes: tuple[np.dtype, ...]) -> str | None:
    """What is wrong with the key maps of a file for an index of at most ``max_dims`` columns
    and native dtypes ``key_dtypes``, or None (they then say ``dims`` and the native dtype)."""
    if not isinstance(maps, tuple) or not maps:
        return "is not a tuple of key maps"
    typed = mismatch(maps, tuple[KeyMap, ...], "keymaps")
    if typed:
        return f"{typed[0][len('keymaps'):]} is {typed[1]}"
    if len(maps) > max_dims:
        return f"holds {len(maps)} key maps; the index takes at most {max_dims} columns"
    for j, km in enumerate(maps):
        wrong = _keymap_problem(km)
        if wrong:
            return f"[{j}] {wrong}"
        if km.target != maps[0].target:
            return f"[{j}] maps onto {km.target}, column 0 onto {maps[0].target}"
    if maps[0].target not in key_dtypes:
        return f"maps onto {maps[0].target}, which the index does not take"
    return None


def _names(scope: Scope) -> str | None:
    names = scope.get("names")
    if names is not None and len(names) != scope.ctx.dims:
        return f"names {len(names)} columns of {scope.ctx.dims}"
    return None


def _row_count(scope: Scope) -> str | None:
    if scope.get("rows") is None and scope.ctx.n_rows != scope.ctx.n:
        return f"is {scope.ctx.n_rows} for {scope.ctx.n} rows held, and no rows were skipped"
    return None


#: The base's fields as every load checks them. The key maps are checked before this schema
#: runs (:func:`keymaps_problem`: the native dtype and ``dims`` come from them).
BASE_SCHEMA = StateSchema(
    Value("keymaps", tuple),
    Array("keymaps[*].dictionary", optional=True),
    Value("n_rows", int, at_least="n", below=_MAX_ROWS),
    Check(_row_count, "n_rows"),
    Value("nulls", str, choices=("refuse", "skip")),
    Value("names", tuple, optional=True),
    Check(_names, "names"),
    Array("values", dtype="uint64", shape=("n",), optional=True),
    Array("rows", dtype="int64", shape=("n",), order="increasing", at_least=0,
          below="n_rows", optional=True),
)
