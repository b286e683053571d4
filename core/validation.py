"""Input validation shared by every index: one place that turns user input into clean arrays
or raises the specific error with a message naming the argument, what was received and what
is allowed."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import text
from .devices import device_of, to_device
from .display import int_text, shown
from .errors import InvalidInput, Unsupported
from .keys import UntypedEmpty
from .reading import read_column
from .results import OUT_MODES, Out

__all__ = ["as_1d", "check_out", "null_error", "prepare_values", "read_1d"]


#: Lookup arguments: an empty Python sequence given for them takes the index's key dtype.
LOOKUP_ARGS = frozenset({"queries", "lo", "hi", "new_keys"})

_I64_MIN, _U64_END = -(1 << 63), 1 << 64


def _from_sequence(seq: list[Any] | tuple[Any, ...], name: str) -> np.ndarray:
    """A Python list or tuple as a NumPy array, keeping integer semantics.

    NumPy turns ``[3, 2**63 + 1]`` into float64 (losing the value) and integers beyond 2^64
    into dtype object; here Python integers stay integers: uint64 when all lie in [0, 2^64),
    int64 when all lie in [-2^63, 2^63), else InvalidInput stating the range. An empty
    sequence has no dtype: keys and values become uint64, lookups take the index's key dtype
    (:class:`~indexzoo.keys.UntypedEmpty`). Anything else is read as NumPy reads it.
    """
    if len(seq) == 0:
        return np.empty(0, np.uint64).view(UntypedEmpty) if name in LOOKUP_ARGS else \
            np.empty(0, np.uint64)
    try:
        arr = np.asarray(seq)
    except (OverflowError, ValueError, TypeError):
        arr = None  # e.g. a NumPy version that refuses integers beyond int64
    if arr is not None and arr.ndim == 1 and arr.dtype == np.int64:
        # NumPy's default for Python ints; no value negative: uint64, as for larger integers
        if all(type(x) is int for x in seq) and int(arr.min()) >= 0:
            return arr.astype(np.uint64)
        return arr
    if arr is not None and (arr.dtype.kind not in "fO" or arr.ndim != 1):
        return arr
    if not all(isinstance(x, (int, np.integer)) for x in seq):
        if arr is None:
            return np.asarray(seq)  # raises the error as_1d reports
        return arr  # floats stay floats; objects are refused by as_1d
    ints = [int(x) for x in seq]
    lo, hi = min(ints), max(ints)
    if lo >= 0 and hi < _U64_END:
        return np.array(ints, dtype=np.uint64)
    if lo >= _I64_MIN and hi < -_I64_MIN:
        return np.array(ints, dtype=np.int64)
    raise InvalidInput(
        f"argument {name!r}: the sequence holds integers from {int_text(lo)} to {int_text(hi)}; "
        "the largest key type covers [-2^63, 2^63) (int64) or [0, 2^64) (uint64)"
    )


def read_1d(obj: Any, name: str) -> tuple[Any, Any]:
    """``obj`` as a 1-D NumPy or CuPy array on the device where it lives, and its nulls (a
    boolean NumPy mask, or None when it has none): see :func:`~indexzoo.reading.read_column`
    for the kinds of columns read (text and byte strings are object arrays of ``str`` or
    ``bytes``, exactly; see :mod:`indexzoo.text`). Python lists and tuples of integers keep integer
    semantics (see :func:`_from_sequence`)."""
    if obj is None:
        raise InvalidInput(f"argument {name!r}: expected a 1-D array, got None")
    col = read_column(obj, name)
    values = col.values
    arr = _from_sequence(values, name) if isinstance(values, (list, tuple)) else values
    if arr.ndim != 1:
        hint = "; wrap a single value in a list" if arr.ndim == 0 else ""
        raise InvalidInput(
            f"argument {name!r}: expected a 1-D array, got {arr.ndim}-D with shape "
            f"{tuple(arr.shape)}{hint}"
        )
    if arr.dtype == object and text.kind_of(arr) is None:  # text and bytes stay objects
        raise InvalidInput(
            f"argument {name!r}: got an array of Python objects (dtype object); "
            "pass numbers, text, bytes or timestamps of one type"
        )
    return arr, col.nulls


#: Arguments that hold no nulls under either null policy (``nulls="skip"`` covers keys and
#: lookups), and what a null there would be.
NEVER_NULL = {"values": "a row's value", "positions": "an update's rowID",
              "new_keys": "an update's new key"}


def null_error(name: str, nulls: Any, column: str | None = None) -> InvalidInput:
    """The error for nulls under ``nulls="refuse"`` (or, for :data:`NEVER_NULL`, under any
    policy): it says "null", names the argument (and the column) and the first null's
    position."""
    pos = int(np.argmax(np.asarray(nulls)))
    where = f"argument {name!r}" + (f" (column {column!r})" if column is not None else "")
    if name in NEVER_NULL:  # a masked update or values array: nulls='skip' does not apply
        return InvalidInput(f"{where}: null at position {pos}; {NEVER_NULL[name]} cannot be "
                            "null under either null policy: drop or fill the nulls")
    what = ("a null key has no place in an order" if name.startswith("keys")
            else "a null lookup has no key to match")
    return InvalidInput(
        f"{where}: null at position {pos}; {what}: drop or fill the nulls, or build with "
        "nulls='skip' (rows with a null are never matched, null lookups miss)"
    )


def as_1d(obj: Any, name: str) -> Any:
    """``obj`` as a 1-D NumPy or CuPy array on the device where it lives (see
    :func:`read_1d`); a null is InvalidInput (see :func:`null_error`)."""
    arr, nulls = read_1d(obj, name)
    if nulls is not None:
        raise null_error(name, nulls)
    return arr


def check_out(out: Any, offered: tuple[str, ...], index_name: str) -> Out:
    """Validate an ``out`` argument against the modes an index offers."""
    if not isinstance(out, str) or out not in OUT_MODES:
        raise InvalidInput(
            f"argument 'out': {shown(out)} is not an out mode; allowed: "
            + ", ".join(repr(m) for m in OUT_MODES)
        )
    if out not in offered:
        raise Unsupported(
            f"index {index_name!r} does not offer out={out!r}; it offers "
            + ", ".join(repr(m) for m in offered)
        )
    return out


def same_length(a: Any, b: Any, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise InvalidInput(
            f"arguments {name_a!r} and {name_b!r} must have the same length, "
            f"got {a.shape[0]} and {b.shape[0]}"
        )


def prepare_values(values: Any, keys: Any, device: str) -> Any:
    """The index's own copy of ``values`` on ``device``, as uint64 (signed values wrap as two's
    complement); same length as the keys. Never the caller's array itself: changing that
    afterwards must not change any answer."""
    arr = as_1d(values, "values")
    same_length(keys, arr, "keys", "values")
    if arr.dtype.kind not in "biu":
        raise InvalidInput(
            f"argument 'values': dtype {arr.dtype} is not supported; 'sum' adds values as "
            "unsigned 64-bit integers modulo 2^64, so pass bool or an integer dtype"
        )
    if device_of(arr) != device:  # moving to the other device makes the copy
        return to_device(arr.astype(np.uint64, copy=False), device)
    return arr.copy() if arr.dtype == np.uint64 else arr.astype(np.uint64)
