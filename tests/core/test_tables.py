"""Tables as keys and lookups of a multi-column index: read column by column, each column with
its own dtype, never converted to one array (which casts every column to a common dtype: an
int64 column of 2^60 and 2^60 + 1 became two equal float64 values)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import indexzoo

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

A = np.array([2**60, 2**60 + 1, 7, 2**60], dtype=np.int64)
B = np.array([0.5, 0.5, -1.25, 0.75])
C = np.array([3, 1, 2, 3], dtype=np.uint8)

TABLES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "pandas": pd.DataFrame,
    "polars": pl.DataFrame,
    "arrow table": pa.table,
    "arrow record batch": pa.record_batch,
    "arrow C stream": lambda cols: _Stream(pa.table(cols)),
}


class _Stream:
    """A table known only by the Arrow PyCapsule stream protocol."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._table.__arrow_c_stream__(requested_schema)


def _counts(index: Any, points: Any) -> list[int]:
    return index.point(points, out="count").to_host().count.tolist()


@pytest.mark.parametrize("kind", list(TABLES))
@pytest.mark.parametrize("name", ["rtscan", "fused-scan"])
def test_a_table_of_mixed_dtypes_answers_like_its_list_of_columns(kind: str, name: str) -> None:
    table = TABLES[kind]({"a": A, "b": B, "c": C})
    index = indexzoo.create(name, device="cpu").build(table)
    reference = indexzoo.create(name, device="cpu").build([A, B, C])
    assert index.key_dtypes == (np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.uint8))
    points = [A, B, C]
    assert _counts(index, points) == _counts(reference, points) == [1, 1, 1, 1]
    assert _counts(index, [[2**60 + 1], [0.5], [1]]) == [1]  # not the float64 twin of 2^60
    assert _counts(index, [[2**60], [0.5], [3]]) == [1]
    lo = [np.array([2**60]), None, np.array([1])]
    hi = [np.array([2**60 + 1]), np.array([0.6]), None]
    want = reference.range(lo, hi, out="bitmap").to_host().bitmap
    np.testing.assert_array_equal(index.range(lo, hi, out="bitmap").to_host().bitmap, want)


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow table"])
def test_lookups_may_be_tables_too(kind: str) -> None:
    index = indexzoo.create("fused-scan", device="cpu").build([A, B, C])
    queries = TABLES[kind]({"a": A[:2], "b": B[:2], "c": C[:2]})
    assert _counts(index, queries) == [1, 1]


def test_changing_the_callers_table_after_build_changes_no_answer() -> None:
    table = pd.DataFrame({"a": A.copy(), "b": B.copy()})
    index = indexzoo.create("fused-scan", device="cpu").build(table)
    table.iloc[:, 0] = 0
    table.iloc[:, 1] = 0.0
    assert _counts(index, [A, B]) == [1, 1, 1, 1]


def test_repeated_column_names_are_read_by_position() -> None:
    a = A[:3]  # distinct keys
    table = pd.DataFrame(np.column_stack([a, a + 1]), columns=["x", "x"])
    index = indexzoo.create("fused-scan", device="cpu").build(table)
    assert _counts(index, [a, a + 1]) == [1, 1, 1]
    assert _counts(index, [a, a]) == [0, 0, 0]


def test_a_table_without_columns_is_invalid_input() -> None:
    with pytest.raises(indexzoo.InvalidInput, match="the table has no columns"):
        indexzoo.create("fused-scan", device="cpu").build(pd.DataFrame())
