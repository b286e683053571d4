"""One column of any kind a user may hold, read as an array and a null mask.

:func:`read_column` is the one place that knows the column types of other libraries:

* NumPy and CuPy arrays, ``__cuda_array_interface__`` and DLPack producers (as they are);
  a NumPy masked array's mask is its nulls;
* pandas Series and Index, including nullable (``Int64``, ``boolean``, ``string``),
  Arrow-backed, categorical and time-zone-aware datetime columns;
* Polars Series and Arrow arrays (chunked or not, dictionary-encoded too), read through
  Arrow;
* cuDF Series (values stay on the GPU where they are numbers without nulls);
* Python lists and tuples, where ``None`` is a null;
* NumPy arrays of Python objects holding text, bytes or time-zone-aware timestamps (and
  ``None``, NaN, ``pd.NA`` or ``NaT`` as nulls).

What comes out is a :class:`Column`: ``values`` (1-D, any key dtype; timestamps as
``datetime64`` in UTC), ``nulls`` (a boolean mask, or None when there are none: a null
position holds an arbitrary value of the dtype) and ``tz`` (the time zone of
time-zone-aware timestamps, whose values are UTC).

**Text** comes out exact, NULs included (:mod:`indexzoo.text`): a NumPy array of dtype
``object`` holding Python ``str``, and byte strings one holding Python ``bytes``, whatever
held them (a list, an object array, pandas ``object``/``string``/``str``, Arrow
``string``/``large_string``/``binary``/dictionary arrays, Polars); a null holds ``""`` (or
``b""``). An empty text column comes out as an empty ``U1`` (``S1``) array, which says its
kind. NumPy ``U`` and ``S`` arrays come out as they are (NumPy has already dropped their
values' trailing NULs); NumPy's variable-width ``StringDType`` arrays, which keep them, come
out as Python ``str`` too.

**Categoricals** (pandas ``category``, Polars ``Categorical``/``Enum``, Arrow dictionary
arrays) are read as their values, never as their codes, whether ordered or not: keys compare
as the values do (text by code point). [decision, documented in docs/keys.md]
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import text
from .devices import coerce
from .display import one_line
from .errors import IndexZooError, InvalidInput

__all__ = ["Column", "ZonedArray", "describe", "library_of", "read_column"]


class ZonedArray(np.ndarray):
    """``datetime64`` values in UTC that carry the time zone they were given in (``tz``), so
    that lookups can be checked against the time zone of the index's keys."""

    tz: str | None

    def __array_finalize__(self, obj: Any) -> None:
        self.tz = getattr(obj, "tz", None)


def zoned(values: np.ndarray, tz: str) -> ZonedArray:
    """``values`` (UTC ``datetime64``) marked with time zone ``tz``."""
    out = values.view(ZonedArray)
    out.tz = tz
    return out


@dataclass(frozen=True)
class Column:
    """One column read by :func:`read_column`."""

    values: Any
    nulls: Any = None
    tz: str | None = None


def library_of(obj: Any) -> str:
    """The top-level module of ``obj``'s type (``pandas``, ``polars``, ``pyarrow``, ...)."""
    return type(obj).__module__.split(".")[0]


def describe(obj: Any) -> str:
    """The type of ``obj`` in full: module, class and, where it has them, dtype and
    ``requires_grad`` (a torch tensor)."""
    text = f"{type(obj).__module__}.{type(obj).__qualname__}".replace("builtins.", "")
    try:
        dtype = getattr(obj, "dtype", None)
        if dtype is not None:
            text += f" of dtype {dtype}"
        if getattr(obj, "requires_grad", False) is True:
            text += " with requires_grad=True"
    except Exception:  # a property that raises (a column with nulls, say) adds nothing
        pass
    return text


def _hint(obj: Any) -> str:
    """What to do about an object NumPy cannot read, where we know."""
    if library_of(obj) != "torch":
        return ""
    hints = []
    if getattr(obj, "requires_grad", False) is True:
        hints.append("pass tensor.detach()")
    if "bfloat16" in str(getattr(obj, "dtype", "")):
        hints.append("convert bfloat16 to float32 first (tensor.float())")
    return "; " + ", ".join(hints) if hints else ""


def read_column(obj: Any, name: str) -> Column:
    """``obj`` as a :class:`Column` (see the module docstring); InvalidInput, naming
    ``name`` and the type in full, for what cannot be read."""
    if type(obj) is np.ndarray and obj.dtype.kind not in "OT":  # the common case, first
        return Column(obj)
    if type(obj) is np.ndarray and obj.dtype.kind == "T":  # NumPy's StringDType: keeps NULs
        return Column(obj.astype(object))
    lib = library_of(obj)
    if lib == "cupy" and type(obj).__name__ == "ndarray":  # CuPy arrays hold no nulls
        return Column(obj)
    try:
        if isinstance(obj, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(obj)
            return _checked(np.ma.getdata(obj), mask if mask.any() else None, None, name)
        if lib == "pandas":
            return _pandas(obj, name)
        if lib in ("pyarrow", "polars"):
            return _arrow(obj.to_arrow() if lib == "polars" else obj, name)
        if lib == "cudf":
            return _cudf(obj, name)
        if isinstance(obj, (list, tuple)):
            return _sequence(obj, name)
        arr = coerce(obj)
    except IndexZooError:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        raise InvalidInput(
            f"argument {name!r}: cannot read {describe(obj)} as an array "
            f"({type(exc).__name__}: {one_line(str(exc))}){_hint(obj)}"
        ) from None
    if isinstance(arr, np.ndarray) and arr.dtype == np.dtype(object) and arr.ndim == 1:
        return _objects(arr, name)
    return Column(arr)


def _checked(values: Any, nulls: Any, tz: str | None, name: str,
             kind: text.Kind | None = None) -> Column:
    """``values`` with their nulls and time zone; an object array is read as
    :func:`_objects` reads it (``kind``: the text kind the column's type declares)."""
    if tz is not None:
        values = zoned(values, tz)
    if values.dtype == object and values.ndim == 1:
        inner = _objects(values, name, nulls, kind)
        return Column(inner.values, inner.nulls, inner.tz or tz)
    return Column(values, nulls, tz)


# ---------------------------------------------------------------------- Python objects
def _is_null(x: Any) -> bool:
    if x is None:
        return True
    if isinstance(x, float) and x != x:
        return True
    kind = type(x).__name__
    return kind in ("NAType", "NaTType")


def _sequence(seq: Any, name: str) -> Column:
    """A list or tuple: ``None`` (and NaN among text) marks nulls; the rest is read as
    :func:`~indexzoo.validation.as_1d` reads sequences (by the caller)."""
    nulls = [x is None for x in seq]
    if any(isinstance(x, (str, bytes, datetime.datetime)) for x in seq):
        return _objects(np.array(list(seq), dtype=object), name)
    if not any(nulls):
        return Column(seq)
    fill = next((x for x in seq if x is not None), 0)
    return Column([fill if n else x for x, n in zip(seq, nulls, strict=True)],
                  np.array(nulls, dtype=bool))


def _objects(arr: np.ndarray, name: str, nulls: Any = None,
             kind: text.Kind | None = None) -> Column:
    """An array of Python objects: text or bytes (kept as Python objects, exactly), or
    timestamps, with None/NaN/NA/NaT as nulls; anything else is returned as it is (and
    refused by the caller). ``kind``: the text kind the column's type declares, for a column
    without a present value."""
    mask = np.fromiter((_is_null(x) for x in arr), dtype=bool, count=arr.shape[0])
    if nulls is not None:
        mask |= np.asarray(nulls, dtype=bool)
    present = arr[~mask]
    values: Any = arr
    tz = None
    found = text.kind_of(present) if present.shape[0] else kind
    if found is not None:
        if arr.shape[0] == 0:
            return Column(text.empty(found))
        values = _filled(arr, mask, "" if found == "U" else b"")
    elif present.shape[0] and all(isinstance(x, datetime.datetime) for x in present):
        import pandas  # timestamps with a time zone come from pandas or datetime

        col = _pandas(pandas.Series(list(_filled(arr, mask, None))), name)
        values, tz = col.values, col.tz
    return Column(values, mask if mask.any() else None, tz)


def _filled(arr: np.ndarray, mask: np.ndarray, fill: Any) -> np.ndarray:
    """``arr`` with ``fill`` at the nulls (the first present value where ``fill`` is None);
    a copy where there are nulls."""
    if not mask.any():
        return arr
    out = arr.copy()
    out[mask] = fill if fill is not None else arr[~mask][0] if (~mask).any() else None
    return out


# ---------------------------------------------------------------------- pandas
def _pandas(s: Any, name: str) -> Column:
    import pandas

    if isinstance(s, pandas.DataFrame):
        raise InvalidInput(f"argument {name!r}: a DataFrame is a table; pass one column")
    dtype = s.dtype
    nulls = np.asarray(s.isna(), dtype=bool)
    mask = nulls if nulls.any() else None
    if isinstance(dtype, pandas.CategoricalDtype):
        cats = read_column(dtype.categories, name)
        codes = np.asarray(s.cat.codes if isinstance(s, pandas.Series) else s.codes,
                           dtype=np.int64)
        if cats.values.shape[0] == 0:  # no categories: every row is null
            return Column(np.zeros(codes.shape[0], dtype=np.uint8), mask)
        values = cats.values[np.where(codes < 0, 0, codes)]
        return _checked(values, mask, cats.tz, name)
    if isinstance(dtype, pandas.DatetimeTZDtype):
        utc = s.dt.tz_convert("UTC").dt.tz_localize(None) if isinstance(s, pandas.Series) \
            else s.tz_convert("UTC").tz_localize(None)
        return _checked(utc.to_numpy(), mask, str(dtype.tz), name)
    kind: text.Kind | None = "U" if isinstance(dtype, pandas.StringDtype) else None
    if mask is not None:
        return _pandas_nullable(s, dtype, mask, name, kind)
    return _checked(s.to_numpy(), None, None, name, kind)


def _pandas_nullable(s: Any, dtype: Any, mask: np.ndarray, name: str,
                     kind: text.Kind | None) -> Column:
    """A pandas column with nulls: its values with the nulls filled by a present value."""
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    fill = None if mask.all() else s.array[int(np.argmin(mask))]
    if isinstance(numpy_dtype, np.dtype) and numpy_dtype.kind in "biufmM":
        if fill is None:
            fill = numpy_dtype.type(0)
        return _checked(s.to_numpy(dtype=numpy_dtype, na_value=fill), mask, None, name)
    if isinstance(dtype, np.dtype) and dtype.kind in "fmM":
        values = s.to_numpy().copy()
        if fill is not None:
            values[mask] = fill
        return _checked(values, mask, None, name)
    return _checked(s.to_numpy(dtype=object, na_value=None), mask, None, name, kind)


# ---------------------------------------------------------------------- Arrow (and Polars)
def _arrow(arr: Any, name: str) -> Column:
    import pyarrow

    if isinstance(arr, pyarrow.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pyarrow.array([], arr.type)
    if isinstance(arr, pyarrow.Scalar) or not isinstance(arr, pyarrow.Array):
        raise InvalidInput(f"argument {name!r}: expected a column, got {describe(arr)}")
    t = arr.type
    if pyarrow.types.is_dictionary(t):
        return _arrow(arr.dictionary_decode(), name)
    if pyarrow.types.is_string_view(t):
        arr, t = arr.cast(pyarrow.large_string()), pyarrow.large_string()
    if pyarrow.types.is_binary_view(t):
        arr, t = arr.cast(pyarrow.large_binary()), pyarrow.large_binary()
    nulls = None
    if arr.null_count:
        nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        arr = arr.fill_null(_arrow_fill(arr, nulls))
    tz = None
    if pyarrow.types.is_timestamp(t):
        tz = t.tz  # Arrow holds UTC instants; the zone is how they are shown
        unit = t.unit
        values = arr.cast(pyarrow.int64()).to_numpy(zero_copy_only=False).view(
            f"datetime64[{unit}]")
        return _checked(values, nulls, tz, name)
    kind: text.Kind | None = None
    if pyarrow.types.is_string(t) or pyarrow.types.is_large_string(t):
        kind = "U"
    elif (pyarrow.types.is_binary(t) or pyarrow.types.is_large_binary(t)
          or pyarrow.types.is_fixed_size_binary(t)):
        kind = "S"
    if kind is not None:  # Python str or bytes, exactly (NULs included)
        values = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
        return _checked(values, nulls, None, name, kind)
    return _checked(arr.to_numpy(zero_copy_only=False), nulls, None, name)


def _arrow_fill(arr: Any, nulls: np.ndarray) -> Any:
    """A value to put where ``arr`` has nulls: its first present value, or a zero of its type."""
    import pyarrow

    if not nulls.all():
        return arr[int(np.argmin(nulls))]
    for zero in (0, "", b"", False):
        try:
            return pyarrow.scalar(zero, arr.type)
        except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError, TypeError, ValueError):
            continue
    raise InvalidInput(f"a column of Arrow type {arr.type} holds only nulls")


# ---------------------------------------------------------------------- cuDF
def _cudf(s: Any, name: str) -> Column:
    """A cuDF Series: numbers without nulls stay on the GPU (CuPy); otherwise the column is
    read through Arrow (a cuDF column with nulls has no ``__cuda_array_interface__``)."""
    has_nulls = bool(s.isna().any())
    numeric = getattr(getattr(s, "dtype", None), "kind", "O") in "biufmM"
    if numeric and not has_nulls:
        return Column(coerce(s.values))
    return _arrow(s.to_arrow(), name)
