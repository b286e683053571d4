"""What a lookup result becomes when it leaves indexzoo: the miss policy, pandas and Arrow.

:class:`~indexzoo.results.LookupResult`'s methods ``to_host``, ``to_pandas`` and ``to_arrow``
copy the result to the host and call the functions here on its NumPy arrays; its DLPack
methods hand over the device array itself. See ``docs/results.md``.

* **The miss policy** (``miss=``) says how a lookup without a match reads in ``out="rowid"``:
  ``"sentinel"`` (the default) keeps the rowID dtype and its maximum (``index.miss``);
  ``-1`` gives int64 with -1 for a miss; ``"mask"`` gives a masked result (a NumPy masked
  array, a pandas nullable ``UInt32``/``UInt64`` Series, Arrow nulls). The other modes have
  no miss value (no match is a count or sum of 0, an empty list), so there the policy is
  checked and changes nothing.
* **pandas** (``LookupResult.to_pandas``): a one-array mode is a Series named after the mode,
  indexed by the lookup's position in the batch (a RangeIndex named ``query``); a mode that
  lists every match (``rowids``, ``bitmap``) is a DataFrame of one row per match, columns
  ``query`` (int64) and ``rowid``.
* **Arrow** (``LookupResult.to_arrow``): a one-array mode is a ``pyarrow.Array``; a listing
  mode a ``pyarrow.ListArray`` (one list of rowIDs per lookup; a ``LargeListArray`` past
  2^31 - 1 matches, which 32-bit list offsets cannot address).

pandas and pyarrow are optional: a conversion that needs a missing one raises
:class:`~indexzoo.errors.MissingDependency` (an ImportError) naming the extra and the pip line
that installs it. Nothing here imports either until a conversion asks for it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Literal

import numpy as np

from .display import shown
from .errors import InvalidInput, MissingDependency

__all__ = ["LARGE_LIST_FROM", "MISS_POLICIES", "Miss", "arrow_array", "arrow_lists",
           "check_miss", "import_pandas", "import_pyarrow", "pandas_pairs", "pandas_series",
           "with_misses"]

#: How a lookup without a match reads in ``out="rowid"`` (see the module docstring).
Miss = Literal["sentinel", -1, "mask"]
#: The values ``miss=`` takes, the default first.
MISS_POLICIES: tuple[Miss, ...] = ("sentinel", -1, "mask")

#: Matches from which a listing mode's Arrow form is a LargeListArray (64-bit offsets).
LARGE_LIST_FROM = 1 << 31


def check_miss(miss: Any) -> Miss:
    """``miss`` as one of :data:`MISS_POLICIES` (``np.int64(-1)`` reads as ``-1``), else
    InvalidInput (a ValueError) naming the allowed values."""
    if isinstance(miss, str) and miss in ("sentinel", "mask"):
        return "sentinel" if miss == "sentinel" else "mask"
    if (isinstance(miss, (int, np.integer)) and not isinstance(miss, (bool, np.bool_))
            and int(miss) == -1):
        return -1
    raise InvalidInput(
        f"argument 'miss': expected 'sentinel' (a miss is the rowID dtype's maximum, "
        f"index.miss; the default), -1 (int64 rowIDs, -1 for a miss) or 'mask' (misses "
        f"masked: a NumPy masked array, pandas <NA>, Arrow nulls), got {shown(miss)}")


def import_pandas(purpose: str) -> ModuleType:
    """pandas, or MissingDependency naming the ``pandas`` extra."""
    try:
        import pandas
    except ImportError:
        raise MissingDependency("pandas", "pandas", purpose) from None
    return pandas


def import_pyarrow(purpose: str) -> ModuleType:
    """pyarrow, or MissingDependency naming the ``arrow`` extra."""
    try:
        import pyarrow
    except ImportError:
        raise MissingDependency("pyarrow", "arrow", purpose) from None
    return pyarrow


def _hits(rowid: np.ndarray) -> np.ndarray:
    """Where a rowID array holds a match (not its dtype's maximum, the miss value)."""
    return rowid != rowid.dtype.type(np.iinfo(rowid.dtype).max)


def with_misses(rowid: np.ndarray, miss: Miss) -> np.ndarray:
    """A host rowID array (misses: its dtype's maximum) under the miss policy: itself
    (``"sentinel"``), int64 with -1 for a miss (``-1``), or a ``numpy.ma.MaskedArray`` of its
    dtype whose mask is True at the misses (``"mask"``; the data under the mask stays the
    sentinel)."""
    if miss == "sentinel":
        return rowid
    hit = _hits(rowid)
    if miss == -1:
        return np.where(hit, rowid.astype(np.int64), np.int64(-1))
    return np.ma.MaskedArray(rowid, mask=~hit)


def pandas_series(values: np.ndarray, mode: str, miss: Miss, purpose: str) -> Any:
    """The pandas Series of a one-array mode's host array (see the module docstring)."""
    pd = import_pandas(purpose)
    index = pd.RangeIndex(int(values.shape[0]), name="query")
    if mode == "rowid" and miss == "mask":
        data: Any = pd.arrays.IntegerArray(values, ~_hits(values))
    elif mode == "rowid":
        data = with_misses(values, miss)
    else:
        data = values
    return pd.Series(data, index=index, name=mode, copy=False)


def _query_of_match(offsets: np.ndarray) -> np.ndarray:
    q = int(offsets.shape[0]) - 1
    return np.repeat(np.arange(q, dtype=np.int64), np.diff(offsets))


def pandas_pairs(offsets: np.ndarray, rowids: np.ndarray, purpose: str) -> Any:
    """The pandas DataFrame of CSR matches: one row per match, columns ``query`` (int64, the
    lookup's position in the batch) and ``rowid``, in the CSR's order."""
    pd = import_pandas(purpose)
    return pd.DataFrame({"query": _query_of_match(offsets), "rowid": rowids}, copy=False)


def arrow_array(values: np.ndarray, mode: str, miss: Miss, purpose: str) -> Any:
    """The ``pyarrow.Array`` of a one-array mode's host array (misses as nulls under
    ``"mask"``)."""
    pa = import_pyarrow(purpose)
    if mode == "rowid" and miss == "mask":
        return pa.array(values, mask=~_hits(values))
    if mode == "rowid":
        return pa.array(with_misses(values, miss))
    return pa.array(values)


def arrow_lists(offsets: np.ndarray, rowids: np.ndarray, purpose: str) -> Any:
    """The Arrow list array of CSR matches: list ``i`` holds the rowIDs of lookup ``i``
    (a ``ListArray``, or a ``LargeListArray`` from :data:`LARGE_LIST_FROM` matches on)."""
    pa = import_pyarrow(purpose)
    items = pa.array(rowids)
    if int(offsets[-1]) >= LARGE_LIST_FROM:
        return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), items)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items)
