"""Tables as keys: a pandas DataFrame of mixed column dtypes builds the same multi-column index
as its list of columns, a pandas Series, Arrow array or Polars Series the same one-column index
as its NumPy array, and changing the caller's table after build changes no answer.

Each check needs the library it feeds the index (pandas, PyArrow, Polars) and is skipped with
the reason where it is not installed."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo import GpuIndex

from .context import Context, check, verify
from .multicolumn import distinct_rows, verify_columns

__all__: list[str] = []

N = 700


def _mixed_columns(ctx: Context, seed: int) -> dict[str, np.ndarray]:
    """int64 (around 2^60 where the index takes 64-bit keys), float64 and uint32 columns, as
    many as the index takes."""
    rng = np.random.default_rng(seed)
    base = 2**60 if ctx.wide else 0
    cols: dict[str, np.ndarray] = {
        "a": (base + rng.integers(0, 40, N)).astype(np.int64),
        "b": rng.integers(-20, 20, N).astype(np.float64) / 4,
        "c": rng.integers(0, 30, N).astype(np.uint32),
    }
    if not ctx.wide:  # 32-bit keys only: int32 and float32 columns in place of 64-bit ones
        cols["a"], cols["b"] = cols["a"].astype(np.int32), cols["b"].astype(np.float32)
    picked = dict(list(cols.items())[:min(3, ctx.caps.dims)])
    return dict(zip(picked, distinct_rows(ctx, list(picked.values())), strict=True))


def _lookups(cols: dict[str, np.ndarray], seed: int) -> tuple[list[Any], list[Any], list[Any]]:
    rng = np.random.default_rng(seed)
    arrays = list(cols.values())
    n = arrays[0].shape[0]
    rows = rng.integers(0, n, 120)
    points = [c[rows] for c in arrays]
    lo = [np.minimum(c[rng.integers(0, n, 120)], c[rows]) for c in arrays]
    hi = [np.maximum(c[rng.integers(0, n, 120)], c[rows]) for c in arrays]
    return points, lo, hi


def _same_answers(ctx: Context, a: GpuIndex, b: GpuIndex, points: Any, bounds: Any,
                  label: str) -> None:
    for mode in ctx.modes:
        pairs = []
        if ctx.caps.point:
            pairs.append(("point", a.point(points, out=mode), b.point(points, out=mode)))
        if ctx.caps.range:
            pairs.append(("range", a.range(*bounds, out=mode), b.range(*bounds, out=mode)))
        for kind, x, y in pairs:
            hx, hy = x.to_host(), y.to_host()
            for field in ("rowid", "count", "sum", "offsets", "bitmap"):
                got, want = getattr(hx, field), getattr(hy, field)
                if want is not None:
                    np.testing.assert_array_equal(
                        got, want, err_msg=f"{ctx.name}: {label}, {kind} out={mode!r}: {field}")
            if hy.rowids is not None:
                for i in range(hy.offsets.shape[0] - 1):
                    s, e = int(hy.offsets[i]), int(hy.offsets[i + 1])
                    assert sorted(hx.rowids[s:e].tolist()) == sorted(hy.rowids[s:e].tolist()), \
                        f"{ctx.name}: {label}, {kind} out='rowids': lookup {i}"


@check("columns", needs=("multi", "pandas"))
def check_a_table_of_mixed_dtypes_answers_like_its_list_of_columns(ctx: Context) -> None:
    """A pandas DataFrame of int64, float64 and uint32 columns (int32/float32 for 32-bit
    indexes) answers every lookup and out mode like the list of its columns; lookups given as
    DataFrames too."""
    import pandas

    cols = _mixed_columns(ctx, 81)
    table = pandas.DataFrame(cols)
    index = ctx.new().build(table)
    reference = ctx.new().build(list(cols.values()))
    assert index.key_dtypes == tuple(c.dtype for c in cols.values()), index.key_dtypes
    points, lo, hi = _lookups(cols, 81)
    _same_answers(ctx, index, reference, points, (lo, hi), "DataFrame keys")
    names = list(cols)
    frame = pandas.DataFrame(dict(zip(names, points, strict=True)))
    _same_answers(ctx, index, reference, frame, (lo, hi), "DataFrame lookups")


@check("columns", needs=("multi", "pandas"))
def check_changing_the_callers_table_after_build_changes_nothing(ctx: Context) -> None:
    """Overwriting every column of the DataFrame passed to build() afterwards changes no
    answer (the index holds its own copy, whatever the table shares with NumPy)."""
    import pandas

    cols = _mixed_columns(ctx, 91)
    table = pandas.DataFrame({k: v.copy() for k, v in cols.items()})
    index = ctx.new().build(table)
    for name in list(table.columns):
        column = table[name].to_numpy()
        if column.flags.writeable:
            column[:] = column[::-1].copy()  # writes through where pandas shares the buffer
        table[name] = table[name].to_numpy()[::-1].copy()
    points, lo, hi = _lookups(cols, 91)
    verify_columns(ctx, index, list(cols.values()), points=points, bounds=(lo, hi),
                   label="table changed after build")


@check("dtypes", needs=("pandas", "pyarrow", "polars"))
def check_a_series_or_arrow_array_answers_like_its_numpy_array(ctx: Context) -> None:
    """One key column given as a pandas Series, an Arrow array or a Polars Series (int64, or
    uint32 for 32-bit indexes) answers like the NumPy array it holds."""
    import pandas
    import polars
    import pyarrow

    rng = np.random.default_rng(71)
    dtype = np.int64 if ctx.wide else np.uint32
    keys = (rng.integers(0, 500, N) if ctx.caps.duplicates else rng.permutation(N)).astype(dtype)
    q = rng.integers(0, 520, 200).astype(dtype)
    lo = np.minimum(q, rng.integers(0, 520, 200).astype(dtype))
    for label, column in (("pandas Series", pandas.Series(keys.copy())),
                          ("Arrow array", pyarrow.array(keys)),
                          ("Polars Series", polars.Series(keys))):
        index = ctx.new().build(column)
        verify(ctx, index, keys, points=q, rng=(lo, q), label=label)
