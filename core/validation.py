"""Input validation shared by every index: one place that turns user input into clean arrays
or raises the specific error with a message naming the argument, what was received and what
is allowed."""

from __future__ import annotations

from typing import Any

import numpy as np

from .devices import coerce, device_of, to_device
from .errors import IndexZooError, InvalidInput, Unsupported
from .results import OUT_MODES, Out

__all__ = ["as_1d", "check_out", "prepare_values"]


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}".replace("builtins.", "")


def as_1d(obj: Any, name: str) -> Any:
    """``obj`` as a 1-D NumPy or CuPy array on the device where it lives."""
    if obj is None:
        raise InvalidInput(f"argument {name!r}: expected a 1-D array, got None")
    try:
        arr = coerce(obj)
    except IndexZooError:  # e.g. DeviceUnavailable for GPU input without CuPy
        raise
    except Exception as exc:
        raise InvalidInput(
            f"argument {name!r}: cannot read {_describe(obj)} as an array ({exc})"
        ) from None
    if arr.ndim != 1:
        hint = "; wrap a single value in a list" if arr.ndim == 0 else ""
        raise InvalidInput(
            f"argument {name!r}: expected a 1-D array, got {arr.ndim}-D with shape "
            f"{tuple(arr.shape)}{hint}"
        )
    if arr.dtype == object:
        raise InvalidInput(
            f"argument {name!r}: got an array of Python objects (dtype object); "
            "pass numbers or fixed-width bytes of one type"
        )
    return arr


def check_out(out: Any, offered: tuple[str, ...], index_name: str) -> Out:
    """Validate an ``out`` argument against the modes an index offers."""
    if not isinstance(out, str) or out not in OUT_MODES:
        raise InvalidInput(
            f"argument 'out': {out!r} is not an out mode; allowed: "
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
