"""Query engines exact on every value a user holds, judged by DuckDB: int64 and uint64 at
their ends, sums past 2^63, products that overflow (refused where DuckDB refuses), NULLs
with SQL's semantics, tables of every library, quoted identifiers; then seeded random tables
and queries that reach the edges (tests/support/query_edges.py), every engine against DuckDB."""

from __future__ import annotations

import numpy as np
import pytest
from support.query_edges import ENGINES, agree, run_case

import indexzoo
from indexzoo import query as q

duckdb = pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def duckdb_says(table: object, spec: q.Query) -> list[tuple] | Exception:
    con = duckdb.connect()
    con.register("t", table)
    try:
        return con.execute(spec.sql("t")).fetchall()
    except Exception as exc:
        return exc


def assert_every_engine_agrees(table: object, spec: q.Query, device: str = "cpu",
                               duck_table: object = None) -> list[tuple] | Exception:
    want = duckdb_says(table if duck_table is None else duck_table, spec)
    for name in ENGINES:
        try:
            got: object = indexzoo.query_engine(name, device=device).run(table, spec).rows()
        except indexzoo.IndexZooError as exc:
            got = exc
        problem = agree(got, want)  # type: ignore[arg-type]
        assert problem is None, f"{name}: {spec.sql('t')}: {problem}"
    return want


# ----------------------------------------------------------------------------- int64, uint64
def test_filters_keep_int64_values_beyond_two_to_the_62(device: str) -> None:
    t = pa.table({"x": np.array([-(2**62) - 1, -1, 0, 2**62 + 1, I64_MIN, I64_MAX])})
    for f in (q.col("x").lt(0), q.col("x").ge(0), q.col("x").gt(2**62), q.col("x").le(I64_MIN),
              q.col("x").between(I64_MIN, I64_MAX), q.col("x").ne(0)):
        want = assert_every_engine_agrees(t, q.Query(where=[f], select=[q.count()]), device)
        assert want != [(0,)] or f.kind == "le"


def test_sums_are_exact_past_int64_as_duckdbs_hugeint(device: str) -> None:
    t = pa.table({"x": np.full(4, 2**62), "g": np.array([1, 1, 2, 2])})
    got = indexzoo.query_engine("crystal", device=device).run(t, q.Query(select=[q.sum("x")]))
    assert got.rows() == [(2**64,)] and got.columns["sum_x"].dtype == object
    assert_every_engine_agrees(t, q.Query(select=[q.sum("x"), q.avg("x")]), device)
    assert_every_engine_agrees(t, q.Query(group_by=["g"], select=[q.sum("x")], order_by=["g"]),
                               device)


def test_a_product_that_overflows_bigint_is_refused_as_duckdb_refuses_it(device: str) -> None:
    t = pa.table({"a": np.array([2**40, 3]), "b": np.array([2**40, 5]), "k": np.array([0, 1])})
    spec = q.Query(select=[q.sum(q.col("a") * q.col("b"), "s")])
    want = assert_every_engine_agrees(t, spec, device)
    assert isinstance(want, duckdb.OutOfRangeException)
    with pytest.raises(indexzoo.OutOfRange, match=r"multiplication of BIGINT .* row 0"):
        indexzoo.query_engine("crystal", device=device).run(t, spec)
    # the row that overflows does not qualify: answered
    only = q.Query(where=[q.col("k").eq(1)], select=[q.sum(q.col("a") * q.col("b"), "s")])
    assert assert_every_engine_agrees(t, only, device) == [(15,)]


def test_uint64_values_at_and_above_two_to_the_63_stay_unsigned(device: str) -> None:
    u = np.array([2**63, 5, 2**64 - 1, 7, 2**63], dtype=np.uint64)
    t = pa.table({"u": u, "small": np.array([1, 2, 3, 4, 5], dtype=np.int32)})
    assert assert_every_engine_agrees(
        t, q.Query(where=[q.col("u").eq(2**63)], select=[q.count()]), device) == [(2,)]
    assert assert_every_engine_agrees(
        t, q.Query(select=[q.min("u"), q.max("u"), q.sum(q.col("small") + 4, "s")]),
        device) == [(5, 2**64 - 1, 35)]
    got = indexzoo.query_engine("rtcudb-sorted", device=device).run(
        t, q.Query(group_by=["u"], select=[q.count()], order_by=["u"]))
    assert got.columns["u"].dtype == np.uint64
    assert got.rows() == [(5, 1), (7, 1), (2**63, 2), (2**64 - 1, 1)]


def test_aggregates_over_no_row_are_null_and_the_query_answers_one_row(device: str) -> None:
    t = pa.table({"x": np.array([1, 2, 3]), "g": np.array([0, 0, 1])})
    spec = q.Query(where=[q.col("x").gt(10)],
                   select=[q.min("x"), q.max("x"), q.sum("x"), q.avg("x"), q.count()])
    assert assert_every_engine_agrees(t, spec, device) == [(None, None, None, None, 0)]
    got = indexzoo.query_engine("crystal", device=device).run(t, spec).columns
    assert np.ma.is_masked(got["min_x"]) and got["count"].tolist() == [0]


def test_ssb_q11_of_a_year_without_orders_answers_null() -> None:
    from indexzoo.query import ssb

    table = ssb.generate(0.001, seed=1)
    spec = q.Query(where=[q.col("d_year").eq(1999)],
                   select=[q.sum(q.col("lo_extendedprice") * q.col("lo_discount"), "revenue")])
    for name in ENGINES:
        assert indexzoo.query_engine(name, device="cpu").run(table, spec).rows() == [(None,)]


def test_rtcudb_takes_int64_extremes_and_uint64_past_int64() -> None:
    t = {"x": np.array([I64_MIN, I64_MAX, 0]), "u": np.array([0, 2**64 - 1, 2**63], np.uint64),
         "g": np.array([1, 1, 2])}
    spec = q.Query(where=[q.col("x").ge(I64_MIN)], group_by=["g"],
                   select=[q.min("x"), q.max("u"), q.sum("u"), q.count()], order_by=["g"])
    assert_every_engine_agrees(t, spec, duck_table=pa.table(t))


# ----------------------------------------------------------------------------- DuckDB's rewrites
def test_steps_duckdb_never_evaluates_never_raise() -> None:
    """DuckDB sums x + C as SUM(x) + C * COUNT(x) without GROUP BY, folds (x + 1) + 1 into
    2 + x, drops x * 1 and x + 0, and evaluates nothing under LIMIT 0: no error where it
    raises none, and one where it does."""
    t = pa.table({"x": np.array([I64_MAX, 5]), "z": np.array([I64_MAX - 1, 5]),
                  "i8": np.array([127, 1], dtype=np.int8), "g": np.array([1, 1])})
    answered = [q.Query(select=[q.sum(q.col("x") + 1, "s")]),
                q.Query(select=[q.sum(q.col("z") + 1 + 1, "s")]),
                q.Query(select=[q.sum(q.col("x") * 1 + 1, "s")]),
                q.Query(select=[q.min(q.col("x") * 1 + 0, "m")]),
                q.Query(group_by=["g"], select=[q.sum(q.col("x") * 2, "s")], limit=0)]
    refused = [q.Query(group_by=["g"], select=[q.sum(q.col("x") + 1, "s")]),
               q.Query(select=[q.avg(q.col("x") + 1, "s")]),
               q.Query(select=[q.count(q.col("z") + 1 + 1, "c")]),
               q.Query(select=[q.sum(q.col("i8") + 1, "s")]),
               q.Query(select=[q.sum(q.col("i8") * 0 + 100 + 100, "s")])]
    for spec in answered:
        assert not isinstance(assert_every_engine_agrees(t, spec), Exception), spec.sql()
    for spec in refused:
        assert isinstance(assert_every_engine_agrees(t, spec), duckdb.OutOfRangeException), \
            spec.sql()


# ----------------------------------------------------------------------------- NULLs
def test_nulls_have_sqls_semantics(device: str) -> None:
    t = pa.table({"x": pa.array([1, None, 3, None, 5], type=pa.int64()),
                  "g": pa.array([None, 1, None, 1, 2], type=pa.int32()),
                  "s": pa.array(["a", None, "b", "a", None])})
    specs = [
        q.Query(group_by=["g"], select=[q.count(), q.count("x", "cx"), q.sum("x"), q.min("x"),
                                        q.max("s"), q.avg("x")], order_by=["g"]),
        q.Query(where=[q.col("x").ne(3)], select=[q.count()]),
        q.Query(where=[q.col("x").is_null()], select=[q.count(), q.sum("x")]),
        q.Query(where=[q.col("s").not_in(["a", None])], select=[q.count()]),
        q.Query(where=[q.col("x").not_between(None, 2)], select=[q.count()]),
        q.Query(group_by=["s"], select=[q.sum(q.col("x") * q.col("g"), "p")],
                order_by=["-s"]),
    ]
    for spec in specs:
        assert_every_engine_agrees(t, spec, device)
    got = indexzoo.query_engine("crystal", device=device).run(t, specs[0])
    assert got.rows()[-1] == (None, 2, 2, 4, 1, "b", 2.0)  # the NULL group, sorted last
    frame = got.to_pandas()
    assert str(frame["g"].dtype) == "Int32" and frame["g"].isna().tolist()[-1]
    assert got.to_arrow().column("g").null_count == 1


# ----------------------------------------------------------------------------- tables, names
@pytest.mark.parametrize("form", ["pandas", "arrow", "polars", "duckdb"])
def test_crystal_on_the_cpu_reads_tables_of_every_library(form: str) -> None:
    data = {"a": np.arange(20, dtype=np.int64), "g": np.arange(20) % 3}
    table = {"pandas": lambda: pytest.importorskip("pandas").DataFrame(data),
             "arrow": lambda: pa.table(data),
             "polars": lambda: pytest.importorskip("polars").DataFrame(data),
             "duckdb": lambda: duckdb.sql("select range as a, range % 3 as g from range(20)")}[
        form]()
    got = indexzoo.query_engine("crystal", device="cpu").run(
        table, q.Query(group_by=["g"], select=[q.sum("a")], order_by=["g"]))
    assert got.rows() == [(0, 63), (1, 70), (2, 57)]


def test_identifiers_are_quoted_in_every_sql_the_project_writes() -> None:
    t = pa.table({"order": np.array([1, 2, 3]), 'we"ird': np.array([4, 5, 6])})
    spec = q.Query(where=[q.col("order").gt(1)],
                   select=[q.sum('we"ird', 'x" FROM t; --'), q.count(alias="select")])
    assert '"order" > 1' in spec.sql() and '"we""ird"' in spec.sql()
    assert assert_every_engine_agrees(t, spec) == [(11, 2)]


def test_no_engine_lets_a_python_or_numba_error_reach_the_user() -> None:
    weird = [pa.table({"x": pa.array([], type=pa.int64())}),
             pa.table({"x": pa.array([None, None], type=pa.uint64())}),
             pa.table({"x": np.array([I64_MIN, I64_MAX]), "y": np.array([2**64 - 1, 0],
                                                                          dtype=np.uint64)})]
    specs = [q.Query(group_by=["x"], select=[q.sum("x"), q.min("x"), q.count()]),
             q.Query(where=[q.col("x").between(-(2**70), 2**70)],
                     select=[q.max(q.col("x") * q.col("x") - q.col("x"), "m")])]
    for t in weird:
        for spec in specs:
            for name in ENGINES:
                try:
                    indexzoo.query_engine(name, device="cpu").run(t, spec)
                except indexzoo.IndexZooError as exc:
                    assert "\n" not in str(exc)


# ----------------------------------------------------------------------------- random, DuckDB
def _random_chunk(first: int, count: int, device: str) -> None:
    problems: list[str] = []
    for seed in range(first, first + count):
        problems += run_case(seed, ENGINES, device)
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("first", range(0, 40, 10))
def test_every_engine_equals_duckdb_on_random_edge_tables(first: int, device: str) -> None:
    """40 seeded tables of edge values in four forms, four queries each, every engine."""
    _random_chunk(first, 10, device)


@pytest.mark.exhaustive
@pytest.mark.parametrize("first", range(40, 400, 40))
def test_every_engine_equals_duckdb_on_many_random_edge_tables(first: int, device: str) -> None:
    """360 more seeded tables (1,440 queries), every engine."""
    _random_chunk(first, 40, device)
