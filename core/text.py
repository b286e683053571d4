"""Text and byte strings held exactly: trailing and embedded NULs are part of the value.

NumPy's fixed-width dtypes drop trailing NULs: ``np.array(["a", "a\\x00"])`` holds ``"a"``
twice, and ``np.array([b"a", b"a\\x00"])`` holds ``b"a"`` twice. So every text column
:func:`~indexzoo.reading.read_column` reads from a container of its own (a list, an object
array, pandas, Arrow, Polars, cuDF) comes out as a NumPy array of dtype ``object`` holding
Python ``str``, and every byte-string column as one holding Python ``bytes``. A NumPy ``U``
or ``S`` array is taken as it is: its values are what NumPy holds.

Python compares ``str`` by code point and ``bytes`` byte by byte, the order docs/keys.md
promises, and ``np.unique`` and ``np.searchsorted`` on object arrays use Python's
comparisons: ``"a" < "a\\x00" < "a\\x00\\x00" < "a\\x00b" < "b"``. A ``U`` or ``S`` array
compares the same way (its values have no trailing NUL, and the padding NULs sort first), so
both kinds of array can be searched against one dictionary. The dictionary of a build is made
and searched with Python's own set, dict, ``sorted`` and ``bisect`` (:class:`Ranks`), several
times faster on Python objects than NumPy's object sort and search.

A key map saves its dictionary through :func:`pack` and :func:`unpack`: plain ``uint8``, since
a saved index holds no Python objects.
"""

from __future__ import annotations

import bisect
from typing import Any, Literal

import numpy as np

__all__ = ["Kind", "Ranks", "as_objects", "distinct", "empty", "fixed_width", "kind_of",
           "objects", "pack", "source_dtype", "unpack", "what"]

#: ``"U"``: text; ``"S"``: byte strings (NumPy's dtype kinds).
Kind = Literal["U", "S"]

_TYPES: dict[Kind, type] = {"U": str, "S": bytes}


def kind_of(arr: Any) -> Kind | None:
    """``"U"`` for text (a ``U`` array, or an object array holding only ``str``), ``"S"`` for
    byte strings (an ``S`` array, or an object array holding only ``bytes``), else None
    (numbers, a mixture, an empty object array)."""
    dtype = getattr(arr, "dtype", None)
    if not isinstance(dtype, np.dtype) or not isinstance(arr, np.ndarray):
        return None
    if dtype.kind in "US":
        return "U" if dtype.kind == "U" else "S"
    if dtype.kind != "O" or arr.ndim != 1 or arr.shape[0] == 0:
        return None
    types = set(map(type, arr.tolist()))
    for kind, cls in _TYPES.items():
        if all(issubclass(t, cls) for t in types):
            return kind
    return None


def what(kind: Kind) -> str:
    """``"text"`` or ``"byte strings"``."""
    return "text" if kind == "U" else "byte strings"


def empty(kind: Kind) -> np.ndarray:
    """An empty column of ``kind`` (an empty object array would not say which kind it is)."""
    return np.empty(0, dtype=f"{kind}1")


def as_objects(arr: np.ndarray) -> np.ndarray:
    """``arr`` (``U``, ``S`` or object) as an object array of Python ``str`` or ``bytes``."""
    return arr if arr.dtype.kind == "O" else arr.astype(object)


def objects(values: list[Any]) -> np.ndarray:
    """A list of ``str`` or ``bytes`` as a 1-D object array."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def distinct(arr: np.ndarray) -> np.ndarray:
    """The distinct values of ``arr``, sorted (by code point, or byte by byte), as an object
    array. A ``U``/``S`` array is sorted in its own dtype (exact, and fastest)."""
    if arr.dtype.kind in "US":
        return as_objects(np.unique(arr))
    return objects(sorted(set(arr.tolist())))


class Ranks:
    """Ranks of Python ``str`` or ``bytes`` values in a sorted dictionary of them (an object
    array of distinct values), exactly: a dict for equality, ``bisect`` for order."""

    def __init__(self, dictionary: np.ndarray) -> None:
        self._sorted = dictionary.tolist()
        self._rank = {v: i for i, v in enumerate(self._sorted)}

    def points(self, values: np.ndarray) -> np.ndarray:
        """The rank of each value, -1 where it is not in the dictionary."""
        get = self._rank.get
        return np.fromiter((get(v, -1) for v in values.tolist()), dtype=np.int64,
                           count=values.shape[0])

    def at_or_above(self, values: np.ndarray) -> np.ndarray:
        """The rank of the first value at or above each (the dictionary's size: none)."""
        d = self._sorted
        return np.fromiter((bisect.bisect_left(d, v) for v in values.tolist()),
                           dtype=np.int64, count=values.shape[0])

    def at_or_below(self, values: np.ndarray) -> np.ndarray:
        """The rank of the last value at or below each (-1: none)."""
        d = self._sorted
        return np.fromiter((bisect.bisect_right(d, v) - 1 for v in values.tolist()),
                           dtype=np.int64, count=values.shape[0])


def source_dtype(kind: Kind, values: np.ndarray) -> np.dtype:
    """The fixed-width dtype that names a column of ``values`` (``<U5``, ``|S12``): the width
    of its longest value, at least 1. It names the column; the values stay exact."""
    widest = max((len(v) for v in values), default=1)
    return np.dtype(f"{kind}{max(widest, 1)}")


def fixed_width(values: np.ndarray, dtype: np.dtype) -> np.ndarray | None:
    """``values`` (an object array) as an array of ``dtype``, where that is exact: None when a
    value ends in NUL (the fixed-width dtype would drop it)."""
    nul = "\x00" if dtype.kind == "U" else b"\x00"
    if any(v.endswith(nul) for v in values):
        return None
    return values.astype(dtype)


def pack(values: np.ndarray, kind: Kind) -> np.ndarray:
    """An object array of ``str`` (UTF-8, lone surrogates kept) or ``bytes`` as one ``uint8``
    array: the count, each value's end (little-endian int64) and the values' bytes."""
    raw = [v.encode("utf-8", "surrogatepass") if kind == "U" else bytes(v) for v in values]
    ends = np.cumsum([len(r) for r in raw], dtype=np.int64) if raw else np.zeros(0, np.int64)
    head = np.concatenate([[len(raw)], ends]).astype("<i8")
    return np.concatenate([head.view(np.uint8), np.frombuffer(b"".join(raw), np.uint8)])


def unpack(packed: np.ndarray, kind: Kind) -> np.ndarray:
    """The object array :func:`pack` packed; ValueError for bytes that are not a packing."""
    raw = np.ascontiguousarray(packed, dtype=np.uint8).tobytes()
    if len(raw) < 8:
        raise ValueError("a packed dictionary holds at least its count")
    count = int(np.frombuffer(raw[:8], "<i8")[0])
    if not 0 <= count <= (len(raw) - 8) // 8:
        raise ValueError(f"a packed dictionary of {len(raw)} bytes cannot hold {count} values")
    ends = np.frombuffer(raw[8:8 * (count + 1)], "<i8")
    data = raw[8 * (count + 1):]
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    if count and (ends[-1] != len(data) or bool((ends < starts).any())):
        raise ValueError("the ends of a packed dictionary do not fit its bytes")
    pieces = [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    if kind == "U":
        return objects([p.decode("utf-8", "surrogatepass") for p in pieces])
    return objects(pieces)
