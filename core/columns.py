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

A nested Python list is read as a list of columns, never as rows: ``[[1, 2], [3, 4]]`` is two
columns of two rows. For range bounds, ``None`` in place of a column leaves that side of the
column unconstrained (``lo[j] = None``: no lower bound; ``hi[j] = None``: no upper bound).
"""

from __future__ import annotations

from typing import Any

from .devices import coerce
from .errors import IndexZooError, InvalidInput
from .validation import as_1d

__all__ = ["as_columns", "column_count", "table_columns"]


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
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__cuda_array_interface__"):
        return None  # an array, not a table
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
    if hasattr(obj, "__arrow_c_stream__"):
        try:
            import pyarrow
        except ImportError:
            raise InvalidInput(
                f"a table of type {type(obj).__name__} is read through the Arrow C stream, "
                "which needs PyArrow (pip install pyarrow); or pass a list of columns"
            ) from None
        return table_columns(pyarrow.table(obj))
    return None


def as_columns(obj: Any, name: str, *, allow_none: bool = False) -> list[Any]:
    """``obj`` as a list of 1-D arrays of equal length (None entries kept when
    ``allow_none``), each on the device where it lives."""
    if obj is None:
        raise InvalidInput(f"argument {name!r}: expected an array of shape (n, d) or a list "
                           "of d columns, got None")
    table = table_columns(obj)
    if table is not None:
        if not table:
            raise InvalidInput(f"argument {name!r}: the table has no columns")
        return _from_list(table, name, allow_none)
    if _is_column_list(obj):
        return _from_list(obj, name, allow_none)
    if isinstance(obj, (list, tuple)):
        return [as_1d(obj, name)]  # a flat list of numbers: one column
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


def _from_list(items: Any, name: str, allow_none: bool) -> list[Any]:
    """A list of columns (None entries kept when ``allow_none``), each read as a 1-D array."""
    cols: list[Any] = []
    for j, item in enumerate(items):
        if item is None:
            if not allow_none:
                raise InvalidInput(
                    f"argument {name!r}: column {j} is None; only range bounds may leave "
                    "a column unconstrained")
            cols.append(None)
        else:
            cols.append(as_1d(item, f"{name}[{j}]"))
    given = [c for c in cols if c is not None]
    if not given:
        raise InvalidInput(f"argument {name!r}: every column is None; give at least one "
                           "column (the bounds' length is the number of lookups)")
    lengths = {int(c.shape[0]) for c in given}
    if len(lengths) > 1:
        raise InvalidInput(f"argument {name!r}: the columns differ in length "
                           f"({', '.join(str(int(c.shape[0])) for c in given)})")
    return cols


def column_count(cols: list[Any], name: str, expected: int, what: str) -> None:
    """InvalidInput unless ``cols`` has ``expected`` columns."""
    if len(cols) != expected:
        raise InvalidInput(f"argument {name!r}: {len(cols)} column(s), but {what} has "
                           f"{expected}")
