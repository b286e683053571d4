"""The launch-parameter struct of an OptiX launch, written from a launch record.

The software engine hands its programs one flat ``NamedTuple`` of arrays and scalars
(:func:`indexzoo.native.rt.query.launch_record`); OptiX hands its programs one C struct in
constant memory (``params``). :func:`layout` turns the fields of such a record into that
struct: a device array becomes a pointer to its element type, a scalar its C type, in the
record's order, with C's natural alignment (NumPy's aligned structured dtype gives the same
offsets). The programs then read the same names on both engines (``params.keys[prim]``).
:func:`pack` writes one record's values into the struct's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Layout", "layout", "pack"]

# element type -> (C type, NumPy format of a scalar of it)
_C = {
    np.dtype(np.uint64): "unsigned long long", np.dtype(np.int64): "long long",
    np.dtype(np.uint32): "unsigned int", np.dtype(np.int32): "int",
    np.dtype(np.uint16): "unsigned short", np.dtype(np.int16): "short",
    np.dtype(np.uint8): "unsigned char", np.dtype(np.int8): "signed char",
    np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.bool_): "bool",
}


def _is_array(v: Any) -> bool:
    return hasattr(v, "data") and hasattr(v, "dtype") and getattr(v, "ndim", 0) >= 1


def _kind(v: Any) -> tuple[str, np.dtype]:
    """(C declaration type, NumPy field dtype) of one field value."""
    if _is_array(v):
        dt = np.dtype(v.dtype)
        if dt not in _C:
            raise TypeError(f"no C type for arrays of {dt}")
        return f"{_C[dt]}*", np.dtype(np.uint64)
    if isinstance(v, (bool, np.bool_)):
        return "bool", np.dtype(np.bool_)
    if isinstance(v, (int, np.integer)) and not isinstance(v, np.generic):
        return "long long", np.dtype(np.int64)  # a Python int
    dt = np.asarray(v).dtype
    if dt not in _C:
        raise TypeError(f"no C type for a scalar of {dt}")
    return _C[dt], dt


@dataclass(frozen=True)
class Layout:
    """The struct of one set of field names and types: its C declaration and its dtype."""

    names: tuple[str, ...]
    declaration: str
    dtype: np.dtype


def layout(names: tuple[str, ...], values: tuple[Any, ...], struct: str = "Params") -> Layout:
    """The C struct ``struct`` with one member per field (``names``, ``values``)."""
    if len(names) != len(values):
        raise ValueError("one value per field name")
    lines, fields = [], []
    for n, v in zip(names, values, strict=True):
        ctype, dt = _kind(v)
        lines.append(f"  {ctype} {n};")
        fields.append((n, dt))
    decl = f"struct {struct} {{\n" + "\n".join(lines) + "\n};\n"
    return Layout(tuple(names), decl, np.dtype(fields, align=True))


def _address(v: Any) -> int:
    if hasattr(v, "data") and hasattr(v.data, "ptr"):  # CuPy
        return int(v.data.ptr)
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    raise TypeError(f"an OptiX launch needs device arrays, got {type(v).__name__}")


def pack(lay: Layout, values: tuple[Any, ...]) -> np.ndarray:
    """The struct's bytes (uint8) for ``values`` (device arrays become their addresses)."""
    rec = np.zeros(1, dtype=lay.dtype)
    for n, v in zip(lay.names, values, strict=True):
        rec[n] = _address(v) if _is_array(v) else v
    return rec.view(np.uint8)
