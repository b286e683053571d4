"""Multi-column input: the keys of an index that declares ``capabilities.dims > 1``, and its
lookups, as lists of 1-D columns.

Accepted forms, for ``build`` keys, ``point`` queries and ``range`` bounds alike:

* a 2-D NumPy or CuPy array of shape (rows, d): column ``j`` is ``arr[:, j]``;
* a list or tuple of d 1-D arrays (or of lists of numbers), which may differ in dtype;
* a table, read column by column (never converted to one array, which would cast every column
  to a common dtype and change its values): a pandas, cuDF or Polars DataFrame, an Arrow
  table or record batch, or anything that exposes the Arrow C stream (``__arrow_c_stream__``,
  read with PyArrow);
* a 1-D array (or a flat list of numbers): one column.

* a dict of name -> column: named columns, in the dict's order.

A nested Python list is read as a list of columns, never as rows: ``[[1, 2], [3, 4]]`` is two
columns of two rows. For range bounds, ``None`` in place of a column leaves that side of the
column unconstrained (``lo[j] = None``: no lower bound; ``hi[j] = None``: no upper bound).

Tables and dicts keep their column names (:func:`read_columns`), and ``columns=[...]`` selects
columns by name (an index built so keeps the names, and reads lookup tables by them). Each
column is read by :func:`~indexzoo.reading.read_column`, with its nulls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .devices import coerce
from .display import shown
from .errors import IndexZooError, InvalidInput
from .reading import library_of
from .validation import as_1d, null_error, read_1d

__all__ = ["Columns", "as_columns", "column_count", "read_columns", "table_columns",
           "table_names"]

#: Libraries whose objects are columns or tables, never arrays (their array probes may
#: raise: a cuDF column with nulls has no ``__cuda_array_interface__``).
_TABLE_LIBRARIES = frozenset({"pandas", "polars", "pyarrow", "cudf"})


@dataclass(frozen=True)
class Columns:
    """Columns read by :func:`read_columns`: 1-D arrays (None where a bound leaves a column
    open), the null mask of each (None: no nulls) and the names, where the input had them."""

    arrays: list[Any]
    nulls: list[Any]
    names: tuple[str, ...] | None = None


def _is_column_list(obj: Any) -> bool:
    """A list/tuple whose items are all columns (array-likes with a length) or None."""
    if not isinstance(obj, (list, tuple)) or len(obj) == 0:
        return False
    return all(item is None or isinstance(item, (list, tuple))
               or getattr(item, "ndim", 0) >= 1 for item in obj)


def table_columns(obj: Any) -> list[Any] | None:
    """The columns of a table, in order (see the module docstring), or None when ``obj`` is
    not a table. Each column is returned as the table holds it (a pandas or Polars Series, an
    Arrow array), for :func:`~indexzoo.validation.as_1d` to read with its own dtype."""
    if isinstance(obj, Mapping):
        return list(obj.values())
    if library_of(obj) not in _TABLE_LIBRARIES and (
            hasattr(obj, "__array_interface__") or hasattr(obj, "__cuda_array_interface__")):
        return None  # an array, not a table
    if library_of(obj) in _TABLE_LIBRARIES and getattr(obj, "ndim", 2) == 1:
        return None  # a column (a pandas, Polars or cuDF Series), not a table
    names = getattr(obj, "column_names", None)
    if isinstance(names, list) and callable(getattr(obj, "column", None)):  # Arrow
        return [obj.column(j) for j in range(len(names))]
    columns = getattr(obj, "columns", None)
    if columns is not None and getattr(obj, "ndim", 2) == 2 and hasattr(obj, "shape"):
        iloc = getattr(obj, "iloc", None)
        if iloc is not None:  # pandas, cuDF: by position, so repeated names stay apart
            return [iloc[:, j] for j in range(int(obj.shape[1]))]
        to_series = getattr(obj, "to_series", None)
        if callable(to_series):  # Polars
            return [to_series(j) for j in range(int(obj.shape[1]))]
    if hasattr(obj, "__arrow_c_stream__") and library_of(obj) not in _TABLE_LIBRARIES:
        try:
            import pyarrow
        except ImportError:
            raise InvalidInput(
                f"a table of type {type(obj).__name__} is read through the Arrow C stream, "
                "which needs PyArrow (pip install pyarrow); or pass a list of columns"
            ) from None
        return table_columns(pyarrow.table(obj))
    return None


def table_names(obj: Any) -> list[str] | None:
    """The column names of a table or dict (as text), or None when ``obj`` has none."""
    if isinstance(obj, Mapping):
        return [str(k) for k in obj]
    names = getattr(obj, "column_names", None)  # Arrow
    if isinstance(names, list):
        return [str(n) for n in names]
    if library_of(obj) in _TABLE_LIBRARIES and getattr(obj, "ndim", 2) == 2:
        return [str(n) for n in obj.columns]
    if hasattr(obj, "__arrow_c_stream__") and library_of(obj) not in _TABLE_LIBRARIES:
        import pyarrow
        return [str(n) for n in pyarrow.table(obj).column_names]
    return None


def read_columns(obj: Any, name: str, *, allow_none: bool = False,
                 select: Sequence[str] | None = None) -> Columns:
    """``obj`` as :class:`Columns` of equal length, each on the device where it lives, with
    their nulls and names; ``select``: the names of the columns to take from a table or dict
    (InvalidInput naming those it lacks)."""
    if obj is None:
        raise InvalidInput(f"argument {name!r}: expected an array of shape (n, d) or a list "
                           "of d columns, got None")
    table = table_columns(obj)
    if table is not None:
        if not table:
            raise InvalidInput(f"argument {name!r}: the table has no columns")
        names = table_names(obj)
        if select is not None:
            table, names = _select(table, names, select, name)
        cols, nulls = _from_list(table, name, allow_none, names)
        return Columns(cols, nulls, None if names is None else tuple(names))
    if select is not None:
        raise InvalidInput(f"argument {name!r}: columns are selected by name from a table "
                           f"(a DataFrame, an Arrow table, a dict), not from {type(obj).__name__}")
    if _is_column_list(obj):
        cols, nulls = _from_list(obj, name, allow_none)
        return Columns(cols, nulls)
    if isinstance(obj, (list, tuple)):
        arr, null = read_1d(obj, name)  # a flat list of numbers: one column
        return Columns([arr], [null])
    if library_of(obj) in _TABLE_LIBRARIES or isinstance(obj, np.ma.MaskedArray):
        arr, null = read_1d(obj, name)  # one column (a Series, an Arrow array)
        return Columns([arr], [null])
    arrays = _array_columns(obj, name)
    return Columns(arrays, [None] * len(arrays))


def _select(table: list[Any], names: list[str] | None, select: Sequence[str],
            name: str) -> tuple[list[Any], list[str]]:
    if isinstance(select, str) or not all(isinstance(s, str) for s in select) or not select:
        raise InvalidInput(f"argument 'columns': expected a non-empty list of column names, "
                           f"got {shown(select)}")
    if names is None:
        raise InvalidInput(f"argument {name!r}: the table has no column names to select by")
    missing = [s for s in select if s not in names]
    if missing:
        raise InvalidInput(f"argument {name!r}: no column named {shown(missing[0])}; the "
                           f"table has {shown(names, 200)}")
    at = [names.index(s) for s in select]
    return [table[j] for j in at], list(select)


def as_columns(obj: Any, name: str, *, allow_none: bool = False) -> list[Any]:
    """``obj`` as a list of 1-D arrays of equal length (None entries kept when
    ``allow_none``), each on the device where it lives; a null is InvalidInput."""
    got = read_columns(obj, name, allow_none=allow_none)
    for j, null in enumerate(got.nulls):
        if null is not None:
            column = None if got.names is None else got.names[j]
            raise null_error(name if len(got.arrays) == 1 else f"{name}[{j}]", null, column)
    return got.arrays


def _array_columns(obj: Any, name: str) -> list[Any]:
    """The columns of a 2-D array, or the one column of a 1-D array."""
    try:
        arr = coerce(obj)
    except IndexZooError:
        raise
    except Exception:
        return [as_1d(obj, name)]  # as_1d says why it cannot be read
    if getattr(arr, "ndim", None) == 2:
        if arr.dtype == object:
            raise InvalidInput(f"argument {name!r}: got an array of Python objects "
                               "(dtype object); pass numbers")
        if arr.shape[1] == 0:
            raise InvalidInput(f"argument {name!r}: an array of shape {tuple(arr.shape)} "
                               "has no columns")
        return [arr[:, j] for j in range(arr.shape[1])]
    if getattr(arr, "ndim", None) not in (None, 1):
        raise InvalidInput(f"argument {name!r}: expected an array of shape (n, d) or a list "
                           f"of d columns, got {arr.ndim}-D with shape {tuple(arr.shape)}")
    return [as_1d(arr, name)]


def _from_list(items: Any, name: str, allow_none: bool, names: list[str] | None = None,
               ) -> tuple[list[Any], list[Any]]:
    """A list of columns (None entries kept when ``allow_none``), each read as a 1-D array,
    and their null masks."""
    cols: list[Any] = []
    nulls: list[Any] = []
    for j, item in enumerate(items):
        if item is None:
            if not allow_none:
                raise InvalidInput(
                    f"argument {name!r}: column {j} is None; only range bounds may leave "
                    "a column unconstrained")
            cols.append(None)
            nulls.append(None)
        else:
            label = f"{name}[{j}]" if names is None else f"{name}[{names[j]!r}]"
            arr, null = read_1d(item, label)
            cols.append(arr)
            nulls.append(null)
    given = [c for c in cols if c is not None]
    if not given:
        raise InvalidInput(f"argument {name!r}: every column is None; give at least one "
                           "column (the bounds' length is the number of lookups)")
    lengths = {int(c.shape[0]) for c in given}
    if len(lengths) > 1:
        raise InvalidInput(f"argument {name!r}: the columns differ in length "
                           f"({', '.join(str(int(c.shape[0])) for c in given)})")
    return cols, nulls


def column_count(cols: list[Any], name: str, expected: int, what: str) -> None:
    """InvalidInput unless ``cols`` has ``expected`` columns."""
    if len(cols) != expected:
        raise InvalidInput(f"argument {name!r}: {len(cols)} column(s), but {what} has "
                           f"{expected}")
