"""Distributed key columns a sharded index builds from without gathering them: a Dask array,
a Dask DataFrame column, or Parquet files read by Dask. Each becomes a list of partitions
(Dask futures or delayed objects) and the key map of its dtype; nothing is computed here."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.errors import InvalidInput
from indexzoo.keys import KeyMap

__all__ = ["Source", "distributed_source", "is_dask"]


@dataclass(frozen=True)
class Source:
    key_parts: list[Any]  # delayed objects, one per partition, each a 1-D column
    value_parts: list[Any] | None
    keymap: KeyMap


def is_dask(obj: Any) -> bool:
    """Whether ``obj`` is a Dask collection, whichever library made it (Dask's own arrays and
    frames, dask-cudf, an xarray object backed by Dask)."""
    import dask

    return bool(dask.is_dask_collection(obj))


def _dask_column(obj: Any) -> Any:
    """A Dask collection with partitions to build from: itself, or the Dask array an xarray
    object wraps."""
    if not hasattr(obj, "to_delayed") and is_dask(getattr(obj, "data", None)):
        return obj.data
    return obj


def _is_parquet_list(obj: Any) -> bool:
    if isinstance(obj, (str, os.PathLike)):
        return str(obj).endswith(".parquet")
    return (isinstance(obj, (list, tuple)) and len(obj) > 0
            and all(isinstance(p, (str, os.PathLike)) and str(p).endswith(".parquet")
                    for p in obj))


def distributed_source(keys: Any, values: Any, columns: Sequence[str] | None) -> Source | None:
    """The partitions of ``keys`` (and ``values``) when they are distributed, else None."""
    if _is_parquet_list(keys):
        import dask.dataframe as dd

        paths = [os.fspath(keys)] if isinstance(keys, (str, os.PathLike)) else \
            [os.fspath(p) for p in keys]
        if columns is None or len(columns) != 1:
            raise InvalidInput("argument 'columns': a build from Parquet files names the key "
                               "column, e.g. columns=['key']")
        keys = dd.read_parquet(paths, columns=list(columns))
    if not is_dask(keys):
        if values is not None and is_dask(values):
            raise InvalidInput("argument 'values': a Dask collection, but the keys are not; "
                               "give both distributed or both in memory")
        return None
    keys = _dask_column(keys)
    if not hasattr(keys, "to_delayed"):
        raise InvalidInput(f"argument 'keys': a Dask collection ({type(keys).__name__}) "
                           "without partitions to build from; give a Dask array, Series "
                           "or DataFrame")
    if hasattr(keys, "columns"):  # a DataFrame: take the named column
        if columns is None or len(columns) != 1:
            raise InvalidInput("argument 'columns': a build from a Dask DataFrame names the "
                               "key column, e.g. columns=['key']")
        keys = keys[columns[0]]
    elif columns is not None:
        raise InvalidInput("argument 'columns': a Dask array or Series is one column already")
    dtype = np.dtype(keys.dtype)
    if dtype.kind not in "iuf" or (hasattr(keys, "ndim") and keys.ndim != 1):
        raise InvalidInput(f"argument 'keys': a distributed key column of dtype {dtype} "
                           "(ndim 1, integer or float keys); build others from memory")
    value_parts = None
    if values is not None:
        if not is_dask(values):
            raise InvalidInput("argument 'values': the keys are a Dask collection; give the "
                               "values as one too, partitioned alike")
        values = _dask_column(values)
        if hasattr(keys, "chunks") and hasattr(values, "chunks"):
            values = values.rechunk(keys.chunks)
        value_parts = list(np.ravel(values.to_delayed()))
    key_parts = list(np.ravel(keys.to_delayed()))
    if value_parts is not None and len(value_parts) != len(key_parts):
        raise InvalidInput(f"argument 'values': {len(value_parts)} partitions, the keys have "
                           f"{len(key_parts)}; partition them alike")
    return Source(key_parts, value_parts, KeyMap.for_dtype(dtype))
