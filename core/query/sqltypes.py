"""The SQL types of integer columns and expressions, and where their values overflow, as
DuckDB has them (the reference every engine is compared with).

A column's type follows its dtype (``int8`` -> TINYINT, ..., ``uint64`` -> UBIGINT, ``bool``
-> BOOLEAN). The result type of ``a + b``, ``a - b`` and ``a * b`` is :func:`arithmetic`'s
table, read off DuckDB 2.0 (``typeof()`` of every pair of integer types; the three operators
agree): the wider of two types of one signedness; BIGINT for a signed and an unsigned type
below UBIGINT, but for a few pairs whose smaller type fits the other (``SMALLINT +
UTINYINT`` is SMALLINT); HUGEINT with UBIGINT and any signed type. An integer literal takes
the other operand's type where its value fits that type, and otherwise combines as
INTEGER, BIGINT or HUGEINT by its value (:func:`with_literal`). ``-x`` keeps ``x``'s type.
DuckDB raises an out-of-range error where a value leaves its type; so do the engines
(:class:`~indexzoo.OutOfRange`).
"""

from __future__ import annotations

import numpy as np

from ..errors import Unsupported

__all__ = ["INT_TYPES", "RANGE", "SQL_NAME", "arithmetic", "dtype_of", "fits", "literal_type",
           "of_dtype", "with_literal"]

#: Inclusive value range of each integer type (HUGEINT is ``i128``).
RANGE: dict[str, tuple[int, int]] = {
    "i8": (-(1 << 7), (1 << 7) - 1), "i16": (-(1 << 15), (1 << 15) - 1),
    "i32": (-(1 << 31), (1 << 31) - 1), "i64": (-(1 << 63), (1 << 63) - 1),
    "u8": (0, (1 << 8) - 1), "u16": (0, (1 << 16) - 1), "u32": (0, (1 << 32) - 1),
    "u64": (0, (1 << 64) - 1), "i128": (-(1 << 127), (1 << 127) - 1), "bool": (0, 1)}

INT_TYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "i128")

SQL_NAME = {"i8": "TINYINT", "i16": "SMALLINT", "i32": "INTEGER", "i64": "BIGINT",
            "u8": "UTINYINT", "u16": "USMALLINT", "u32": "UINTEGER", "u64": "UBIGINT",
            "i128": "HUGEINT", "bool": "BOOLEAN"}

# Rows and columns in the order of INT_TYPES (DuckDB 2.0.1, typeof(1::A + 1::B)).
_TABLE = """
i8   i16  i32  i64  i64  i64  i64  i128 i128
i16  i16  i32  i64  i16  i64  i64  i128 i128
i32  i32  i32  i64  i32  i32  i64  i128 i128
i64  i64  i64  i64  i64  i64  i64  i128 i128
i64  i16  i32  i64  u8   u16  u32  u64  i128
i64  i64  i32  i64  u16  u16  u32  u64  i128
i64  i64  i64  i64  u32  u32  u32  u64  i128
i128 i128 i128 i128 u64  u64  u64  u64  i128
i128 i128 i128 i128 i128 i128 i128 i128 i128
"""
_RESULT = {(a, b): r for a, row in zip(INT_TYPES, _TABLE.split("\n")[1:-1], strict=True)
           for b, r in zip(INT_TYPES, row.split(), strict=True)}


def fits(value: int, sqltype: str) -> bool:
    lo, hi = RANGE[sqltype]
    return lo <= value <= hi


def arithmetic(a: str, b: str) -> str:
    """The type of ``a + b``, ``a - b`` and ``a * b`` for integer types ``a`` and ``b``."""
    for t in (a, b):
        if t not in INT_TYPES:
            raise Unsupported(f"arithmetic takes integer columns; {SQL_NAME.get(t, t)} has no "
                              f"+, - or *")
    return _RESULT[a, b]


def literal_type(value: int) -> str:
    """The type DuckDB gives an integer literal alone: INTEGER, BIGINT or HUGEINT."""
    for t in ("i32", "i64", "i128"):
        if fits(value, t):
            return t
    raise Unsupported(f"the literal {value} is beyond HUGEINT, the widest integer type")


def with_literal(sqltype: str, value: int) -> str:
    """The type of an expression of type ``sqltype`` combined with the literal ``value``."""
    if sqltype in INT_TYPES and fits(value, sqltype):
        return sqltype
    return arithmetic(sqltype, literal_type(value))


_DTYPES = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
           "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}


def of_dtype(dtype: np.dtype) -> str | None:
    """The SQL type of an integer or boolean NumPy dtype (None for any other)."""
    for name, t in _DTYPES.items():
        if np.dtype(dtype) == np.dtype(t):
            return name
    return None


def dtype_of(sqltype: str) -> np.dtype:
    """The NumPy dtype holding values of ``sqltype`` (object: Python integers, for HUGEINT)."""
    return np.dtype(_DTYPES.get(sqltype, object))
