"""A table as the query engines read it: every column as order-preserving integer codes.

* Integer and boolean columns are held as their values (``code = value - base``; ``base`` is
  0, or 2^63 for a UBIGINT column holding values past int64, whose codes are then the values
  less 2^63), int32 where every code fits, else int64.
* Every other column (text, bytes, floats, dates, timestamps), and an integer column whose
  NULL code would not fit beside its values, is held as codes into its sorted distinct
  values (``info.dictionary``).
* A NULL is one code beside the values: one more than the largest (or one less than the
  smallest where the largest is int64's). A filter's intervals never include it (they are
  clipped to :meth:`Table.value_domain`), and a GROUP BY puts the NULLs of a column in one
  group, as SQL does.

So comparisons, ranges and ORDER BY on codes are those on values. Aggregates need values:
:meth:`Table.exact` gives an integer column's exact values, and the plan (:mod:`.plan`)
derives the int64 columns the engines aggregate (:meth:`Table.derive`).
"""

from __future__ import annotations

import datetime
import difflib
import fractions
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import text
from ..columns import table_columns, table_names
from ..errors import InvalidInput
from ..reading import read_column
from . import sqltypes

__all__ = ["ColumnInfo", "Table", "unknown_columns"]

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1

#: Names of derived columns start with this (no user column does).
DERIVED = "\x00"


def unknown_columns(names: Any, known: Any) -> InvalidInput:
    """The error for columns ``names`` that a table lacks: each with the closest of the
    table's ``known`` columns where one is close (``unknown column 'c_regin' (did you mean
    'c_region'?); the table has ...``)."""
    names = list(dict.fromkeys(names))
    known = list(known)
    listed = []
    for n in names:
        close = difflib.get_close_matches(n, known, n=1) if isinstance(n, str) and len(n) <= 100 \
            else []
        listed.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return InvalidInput(f"unknown column{'s' if len(names) > 1 else ''} {', '.join(listed)}; "
                        f"the table has {', '.join(known)}")


@dataclass(frozen=True)
class ColumnInfo:
    """How a column's codes relate to its values: ``sqltype`` (``i8`` .. ``u64``, ``bool``,
    or ``text``, ``blob``, ``float``, ``date``, ``timestamp``, ``interval``, and ``unknown``
    for an object column without a value), ``base`` (value
    = code + base where ``dictionary`` is None), ``dictionary`` (the sorted distinct non-NULL
    values the codes index), ``null_code`` (the code of NULL rows, None: no NULL) and
    ``dtype`` (of the decoded values)."""

    sqltype: str
    base: int = 0
    dictionary: np.ndarray | None = None
    null_code: int | None = None
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.int64))

    @property
    def integer(self) -> bool:
        """Integer or boolean values (the columns aggregates and arithmetic take)."""
        return self.sqltype in sqltypes.RANGE


def _writable(a: np.ndarray, dtype: Any) -> np.ndarray:
    return np.require(a, dtype=dtype, requirements=("C", "W"))


def _narrow(codes: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """int32 codes where ``[lo, hi]`` fits, else int64 (always a writable array)."""
    dtype = np.int32 if lo >= I32_MIN and hi <= I32_MAX else np.int64
    return _writable(codes, dtype)


def _kind(v: np.ndarray) -> str:
    k = v.dtype.kind
    if k == "M":
        return "date" if np.datetime_data(v.dtype)[0] in ("D", "W", "M", "Y") else "timestamp"
    if k == "O":
        first = next((x for x in v if x is not None), None)
        if first is None:  # no value tells the type
            return "unknown"
        return "blob" if isinstance(first, bytes) else "text"
    return {"U": "text", "S": "blob", "f": "float", "m": "interval"}.get(k, "other")


def code_column(name: str, raw: Any) -> tuple[np.ndarray, ColumnInfo, tuple[int, int]]:
    """``raw`` (any column :func:`~indexzoo.reading.read_column` reads) as codes, its info and
    the range of its non-NULL codes ((0, -1) where every row is NULL)."""
    c = read_column(raw, name)
    v = np.asarray(c.values)
    if v.ndim != 1:
        raise InvalidInput(f"column {name!r} is not one-dimensional (shape {v.shape})")
    nulls = None if c.nulls is None else np.asarray(c.nulls, dtype=bool)
    if nulls is not None and not nulls.any():
        nulls = None
    if v.dtype == object:
        v = _dates(v, nulls)
    valid = v if nulls is None else v[~nulls]
    t = sqltypes.of_dtype(v.dtype)
    if t is not None:
        ints = v.astype(np.int8) if t == "bool" else v
        lo, hi = (int(valid.min()), int(valid.max())) if valid.size else (0, -1)
        base = 1 << 63 if hi > I64_MAX else 0
        clo, chi = lo - base, hi - base
        null_code = None
        if nulls is not None:
            null_code = chi + 1 if chi < I64_MAX else clo - 1 if clo > I64_MIN else None
        if nulls is None or null_code is not None:
            if base:
                codes = (ints.astype(np.uint64) ^ np.uint64(1 << 63)).view(np.int64)
            elif null_code is not None:
                codes = ints.astype(np.int64)  # a copy: the NULL rows are written
            else:
                codes = ints
            if null_code is not None:
                codes[nulls] = null_code
            span = [clo, chi] + ([null_code] if null_code is not None else [])
            info = ColumnInfo(t, base, None, null_code, v.dtype)
            return _narrow(codes, builtins_min(span), builtins_max(span)), info, (clo, chi)
        kind = t  # a column that spans int64 and holds NULLs: codes into its values
    else:
        kind = _kind(v)
    try:
        if v.dtype == object and valid.size and text.kind_of(valid) is not None:
            uniq = text.distinct(valid)  # Python's sort and a dict: faster on str objects
            inverse = text.Ranks(uniq).points(valid)
        else:
            uniq, inverse = np.unique(valid, return_inverse=True)
    except TypeError as exc:
        raise InvalidInput(f"column {name!r} holds values that do not compare with each "
                           f"other ({exc})") from None
    k = len(uniq)
    codes = np.full(len(v), k, dtype=np.int64)
    if nulls is None:
        codes[:] = inverse.reshape(-1)
    else:
        codes[~nulls] = inverse.reshape(-1)
    info = ColumnInfo(kind, 0, uniq, k if nulls is not None else None, v.dtype)
    return _narrow(codes, 0, k), info, (0, k - 1)


builtins_min, builtins_max = min, max


def _dates(v: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
    """An object column of ``datetime.date`` (or naive ``datetime``) values as datetime64
    (days, or microseconds); any other object column as it is."""
    kept = v if nulls is None else v[~nulls]
    if not kept.size or not isinstance(kept[0], datetime.date) \
            or not all(isinstance(x, datetime.date) for x in kept):
        return v
    unit = "us" if any(isinstance(x, datetime.datetime) for x in kept) else "D"
    if unit == "us" and any(getattr(x, "tzinfo", None) is not None for x in kept):
        return v
    out = np.zeros(len(v), dtype=f"datetime64[{unit}]")
    idx = np.arange(len(v)) if nulls is None else np.flatnonzero(~nulls)
    out[idx] = np.array([np.datetime64(x, unit) for x in kept])  # type: ignore[call-overload]
    return out


class Table:
    """Columns by name as codes (see the module docstring): ``columns`` (name -> int32/int64
    codes), ``info`` (name -> :class:`ColumnInfo`), ``dictionaries`` (name -> sorted values,
    for the columns held as codes into them)."""

    def __init__(self, columns: Mapping[str, np.ndarray],
                 dictionaries: Mapping[str, np.ndarray] | None = None,
                 info: Mapping[str, ColumnInfo] | None = None,
                 value_domains: Mapping[str, tuple[int, int]] | None = None):
        self.columns: dict[str, np.ndarray] = dict(columns)
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise InvalidInput(f"columns differ in length: {sorted(lengths)}")
        self.n_rows = lengths.pop() if lengths else 0
        self.info: dict[str, ColumnInfo] = dict(info or {})
        for name, codes in self.columns.items():
            if name in self.info:
                continue
            d = (dictionaries or {}).get(name)
            if d is not None:
                self.info[name] = ColumnInfo(_kind(np.asarray(d)), 0, np.asarray(d), None,
                                             np.asarray(d).dtype)
            else:
                t = sqltypes.of_dtype(codes.dtype)
                if t is None or t in ("u64", "bool"):
                    raise InvalidInput(f"column {name!r}: a Table is built from int8..int64 "
                                       f"codes or values (use Table.of for other columns), "
                                       f"got {codes.dtype}")
                self.info[name] = ColumnInfo(t, 0, None, None, codes.dtype)
        self.dictionaries: dict[str, np.ndarray] = {
            n: i.dictionary for n, i in self.info.items() if i.dictionary is not None}
        self._value_domains: dict[str, tuple[int, int]] = dict(value_domains or {})
        self._domains: dict[str, tuple[int, int]] = {}
        self._derived: dict[str, np.ndarray] = {}
        self._cache: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, obj: Any) -> Table:
        """``obj`` as a Table: a Table, a dict of columns, or any table the zoo reads (pandas,
        Polars, Arrow, anything with the Arrow C stream)."""
        if isinstance(obj, Table):
            return obj
        if isinstance(obj, Mapping):
            items = list(obj.items())
        else:
            cols, names = table_columns(obj), table_names(obj)
            if cols is None or names is None:
                raise InvalidInput(f"a query reads a table with named columns (a dict, pandas, "
                                   f"Polars or Arrow), got {type(obj).__name__}")
            items = list(zip(names, cols, strict=True))
        columns, info, domains = {}, {}, {}
        for name, raw in items:
            if not isinstance(name, str) or not name or name.startswith(DERIVED):
                raise InvalidInput(f"column names are non-empty text not starting with NUL, "
                                   f"got {name!r}")
            columns[name], info[name], domains[name] = code_column(name, raw)
        return cls(columns, None, info, domains)

    # -- codes
    def column(self, name: str) -> np.ndarray:
        """The codes of column ``name`` (or a derived column's int64 values)."""
        got = self.columns.get(name)
        if got is None:
            got = self._derived.get(name)
        if got is None:
            raise unknown_columns([name], self.columns)
        return got

    def __contains__(self, name: str) -> bool:
        return name in self.columns or name in self._derived

    def domain(self, name: str) -> tuple[int, int]:
        """(smallest, largest) code of the column, its NULL code included ((0, -1) when the
        table is empty)."""
        if name not in self._domains:
            v = self.column(name)
            self._domains[name] = (int(v.min()), int(v.max())) if v.size else (0, -1)
        return self._domains[name]

    def value_domain(self, name: str) -> tuple[int, int]:
        """(smallest, largest) code of the column's non-NULL values ((0, -1): none)."""
        if name not in self._value_domains:
            i = self.info.get(name)
            if i is None or i.null_code is None:
                self._value_domains[name] = self.domain(name)
            else:
                v = self.column(name)
                rest = v[v != i.null_code]
                self._value_domains[name] = (int(rest.min()), int(rest.max())) if rest.size \
                    else (0, -1)
        return self._value_domains[name]

    def nulls(self, name: str) -> np.ndarray | None:
        """The rows where column ``name`` is NULL (None: no row)."""
        i = self.info[name]
        if i.null_code is None:
            return None
        return self.cached(("nulls", name), lambda: self.column(name) == i.null_code)

    def value_range(self, name: str) -> tuple[int, int]:
        """(smallest, largest) exact value of an integer column's non-NULL rows."""
        i = self.info[name]
        lo, hi = self.value_domain(name)
        if i.dictionary is None:
            return lo + i.base, hi + i.base
        if hi < lo:
            return 0, -1
        return int(i.dictionary[lo]), int(i.dictionary[hi])

    def exact(self, name: str) -> np.ndarray:
        """An integer column's exact values (int64, or Python integers in an object array
        where they pass int64); a NULL row holds 0."""
        i = self.info[name]

        def make() -> np.ndarray:
            codes = self.column(name)
            nulls = self.nulls(name)
            if i.dictionary is not None:
                d = i.dictionary.astype(np.int64) if i.dictionary.size and \
                    int(i.dictionary[-1]) <= I64_MAX else i.dictionary.astype(object)
                vals = d[np.minimum(codes, max(len(d) - 1, 0))] if len(d) else \
                    np.zeros(len(codes), dtype=np.int64)
            elif i.base:
                vals = (codes.astype(np.int64).view(np.uint64)
                        ^ np.uint64(1 << 63)).astype(object)
            else:
                vals = codes.astype(np.int64)
            if nulls is not None:
                vals = vals.copy()
                vals[nulls] = 0
            return vals

        return self.cached(("exact", name), make)

    # -- derived columns and other caches
    def derive(self, name: str, make: Callable[[], np.ndarray]) -> str:
        """A derived int64 column named ``DERIVED + name``, made once; returns its name."""
        full = DERIVED + name
        with self._lock:
            if full not in self._derived:
                arr = np.ascontiguousarray(make())
                if len(arr) != self.n_rows:
                    raise AssertionError(f"derived column {name} has {len(arr)} rows")
                self._derived[full] = arr
        return full

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, once per ``key`` for this table."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        got = make()
        with self._lock:
            return self._cache.setdefault(key, got)

    def dense(self, name: str) -> tuple[str, np.ndarray]:
        """Column ``name``'s codes renumbered 0..k-1 in order (a derived column) and the code
        of each new number."""
        def make() -> tuple[np.ndarray, np.ndarray]:
            uniq, inv = np.unique(self.column(name), return_inverse=True)
            return _narrow(inv.reshape(-1), 0, len(uniq)), uniq

        codes, uniq = self.cached(("dense", name), make)
        return self.derive(f"dense:{name}", lambda: codes), uniq

    # -- literals and decoding
    def bounds(self, name: str, value: Any) -> tuple[int, int]:
        """``(below, at_most)``: the largest code whose value is < ``value`` and the largest
        whose value is <= it (codes of values; one below the smallest where none is)."""
        i = self.info.get(name)
        if i is None:
            raise unknown_columns([name], self.columns)
        if i.integer:
            x = _number(name, i, value)
            if isinstance(x, float):  # +-inf
                return (I64_MAX, I64_MAX) if x > 0 else (I64_MIN, I64_MIN)
            if i.dictionary is None:
                return math.ceil(x) - 1 - i.base, math.floor(x) - i.base
            ints = i.dictionary
            return (_count_below(ints, math.ceil(x)) - 1,
                    _count_below(ints, math.floor(x) + 1) - 1)
        d = i.dictionary
        assert d is not None
        x = _comparable(name, i, value)
        try:
            left = int(np.searchsorted(d, x, side="left"))
            right = int(np.searchsorted(d, x, side="right"))
        except (TypeError, ValueError):
            raise InvalidInput(f"column {name!r} holds {i.sqltype} values; {value!r} does not "
                               f"compare with them") from None
        return left - 1, right - 1

    def decode(self, name: str, codes: np.ndarray) -> np.ndarray:
        """The values of ``codes`` of column ``name``, in the column's dtype; a masked array
        where a code is the NULL code."""
        i = self.info[name]
        if i.null_code is None and i.dictionary is not None and len(i.dictionary):  # (common)
            return i.dictionary[codes]
        codes = np.asarray(codes).astype(np.int64, copy=False)
        null = (codes == i.null_code) if i.null_code is not None else None
        if null is not None and not null.any():
            null = None
        safe = codes if null is None else np.where(null, 0, codes)
        if i.dictionary is not None:
            vals = i.dictionary[safe] if len(i.dictionary) else \
                np.zeros(len(safe), dtype=i.dtype)
        elif i.base:
            vals = safe.view(np.uint64) ^ np.uint64(1 << 63)
        elif i.sqltype == "bool":
            vals = safe.astype(bool)
        else:
            vals = safe.astype(i.dtype)
        return vals if null is None else np.ma.MaskedArray(vals, mask=null)


def _number(name: str, info: ColumnInfo, value: Any) -> fractions.Fraction | int | float:
    """A literal compared with an integer column, exactly."""
    if isinstance(value, (bool, np.bool_, int, np.integer)):  # TRUE is 1, as in DuckDB
        return int(value)
    if isinstance(value, str):  # DuckDB casts text to the column's type
        text = value.strip().lower()
        if info.sqltype == "bool" and text in ("true", "false"):
            return int(text == "true")
        try:
            return int(text)
        except ValueError:
            raise InvalidInput(f"column {name!r} holds {info.sqltype} values; {value!r} is "
                               f"not one") from None
    if info.sqltype == "bool":
        raise InvalidInput(f"column {name!r} holds booleans; {value!r} does not compare with "
                           f"them")
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if math.isnan(f):
            raise InvalidInput(f"column {name!r} holds integers; NaN does not compare with them")
        return f if math.isinf(f) else fractions.Fraction(f)
    if isinstance(value, fractions.Fraction):
        return value
    try:  # decimal.Decimal and other exact numbers
        return fractions.Fraction(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"column {name!r} holds integers; {value!r} is not a number") \
            from None


def _comparable(name: str, info: ColumnInfo, value: Any) -> Any:
    """A literal in the terms of a dictionary column's values."""
    kind = info.sqltype
    if kind == "unknown":  # a column of no value: any literal, nothing matches it
        return value
    if kind in ("date", "timestamp"):
        if isinstance(value, str):
            try:
                return np.datetime64(value)
            except ValueError:
                raise InvalidInput(f"column {name!r} holds {kind}s; {value!r} is not one") \
                    from None
        if isinstance(value, (datetime.date, np.datetime64)):
            return np.datetime64(value)
        raise InvalidInput(f"column {name!r} holds {kind}s; {value!r} is not one")
    if kind == "text" and not isinstance(value, str):
        raise InvalidInput(f"column {name!r} holds text; {value!r} is not text")
    if kind == "blob" and not isinstance(value, (bytes, np.bytes_)):
        raise InvalidInput(f"column {name!r} holds bytes; {value!r} is not bytes")
    if kind == "float":  # DuckDB casts a numeric literal to DOUBLE
        if isinstance(value, (bool, np.bool_, str)):
            raise InvalidInput(f"column {name!r} holds floats; {value!r} is not a number")
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput(f"column {name!r} holds floats; {value!r} is not a number") \
                from None
    return value


def _count_below(d: np.ndarray, v: int) -> int:
    """How many of the sorted integers ``d`` are below the integer ``v``."""
    if not len(d) or v <= int(d[0]):
        return 0
    if v > int(d[-1]):
        return len(d)
    return int(np.searchsorted(d, v, side="left"))
