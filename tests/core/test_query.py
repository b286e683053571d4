"""The query API: expressions, filters lowered to code intervals, tables of any library,
results as small tables, clear errors (unknown columns, views lacking attributes, unknown
engines), and the NumPy reference against DuckDB on random tables."""

from __future__ import annotations

import numpy as np
import pytest

import indexzoo
from indexzoo import ConfigError, InvalidInput, Unsupported
from indexzoo import query as q
from indexzoo.query import ssb


def small() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    n = 2000
    return {"year": rng.integers(1992, 1999, n), "city": rng.choice(["ROME", "OSLO", "LIMA", "BERN"], n),
            "qty": rng.integers(1, 51, n), "price": rng.integers(-500, 90_000, n),
            "disc": rng.integers(0, 11, n)}


def test_expressions_are_kept_as_written_and_read_as_polynomials() -> None:
    e = q.col("a") * q.col("b") - 2 * q.col("c") + 1
    assert e.columns() == ("a", "b", "c")
    assert e.sql() == '(("a" * "b") - (2 * "c")) + 1'
    assert e.terms == ((1, None, None), (-2, "c", None), (1, "a", "b"))
    assert (q.col("a") - q.col("b")) * q.col("c") != q.col("a") * q.col("c") - q.col("b") * q.col("c")


def test_a_product_of_three_columns_is_answered_exactly() -> None:
    t = {"a": np.array([2**20, 3]), "b": np.array([2**20, 5]), "c": np.array([2**21, 7])}
    got = q.reference(t, q.Query(select=[q.sum(q.col("a") * q.col("b") * q.col("c"), "s")]))
    assert got.rows() == [(2**61 + 105,)]


def test_filters_become_sorted_disjoint_code_intervals() -> None:
    t = q.Table.of(small())
    spec = q.Query(where=[q.col("city").isin(["ROME", "BERN", "LIMA"]), q.col("qty").lt(10),
                          q.col("qty").ge(3)], select=[q.count()])
    p = q.plan(t, spec)
    assert p.filters["city"] == [(0, 1), (3, 3)]  # BERN LIMA OSLO ROME
    assert p.filters["qty"] == [(3, 9)]


def test_unknown_columns_are_named_with_the_tables_columns() -> None:
    spec = q.Query(where=[q.col("colour").eq(1)], select=[q.sum("weight")])
    with pytest.raises(InvalidInput, match=r"unknown columns 'colour', 'weight'; the table has year"):
        q.reference(small(), spec)


def test_sums_of_text_columns_are_refused_by_name_and_their_extremes_answered() -> None:
    with pytest.raises(Unsupported, match="city"):
        q.reference(small(), q.Query(select=[q.sum("city")]))
    got = q.reference(small(), q.Query(select=[q.min("city", "lo"), q.max("city", "hi")]))
    assert got.rows() == [("BERN", "ROME")]


def test_having_filters_aggregates_by_alias_and_reads_as_sql() -> None:
    spec = q.Query(group_by=["year"], select=[q.sum("price", "s")], having=[q.col("s").gt(0)])
    assert spec.sql().endswith('GROUP BY "year" HAVING sum("price") > 0')
    with pytest.raises(InvalidInput, match="HAVING names year"):
        q.Query(group_by=["year"], select=[q.count()], having=[q.col("year").gt(0)])


def test_order_by_must_name_an_output() -> None:
    with pytest.raises(InvalidInput, match="ORDER BY names revenue"):
        q.Query(group_by=["year"], select=[q.count()], order_by=["revenue"])


def test_a_view_lacking_attributes_names_them() -> None:
    engine = indexzoo.query_engine("crystal", device="cpu")
    rt = indexzoo.query_engine("rtcudb-sorted", device="cpu")
    view = rt.prepare(small(), scan=["year"], group=["city"], values=["qty"], name="v1")
    spec = q.Query(where=[q.col("disc").eq(3)], group_by=["year"], select=[q.sum("price")])
    with pytest.raises(Unsupported, match=r'view v1 lacks disc \(filter\), year \(group by\), '
                                          r'"price" \(aggregate\)'):
        rt.run(view, spec)
    assert engine.run(small(), spec).columns  # crystal's view holds every column


def test_unknown_engines_and_parameters_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown query engine 'crystl'"):
        indexzoo.query_engine("crystl")
    with pytest.raises(ConfigError, match="grid"):
        indexzoo.query_engine("rtcudb", device="cpu", grid=0)
    assert indexzoo.query_engine({"engine": "rtcudb", "params": {"backend": "sorted"}, "device": "cpu"}
                    ).params.backend == "sorted"


def test_tables_from_pandas_polars_and_arrow_give_the_same_answer() -> None:
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    data = small()
    spec = q.Query(where=[q.col("city").between("LIMA", "ROME")], group_by=["city"],
                   select=[q.sum(q.col("price") * q.col("disc"), "rev")], order_by=["city"])
    want = q.reference(data, spec).columns
    for table in (pd.DataFrame(data), pl.DataFrame(data), pa.table(data)):
        got = indexzoo.query_engine("crystal", device="cpu").run(table, spec).columns
        assert list(got["city"]) == list(want["city"]) == ["LIMA", "OSLO", "ROME"]
        assert np.array_equal(got["rev"], want["rev"])
    assert list(q.reference(data, spec).to_pandas().columns) == ["city", "rev"]


def duckdb_equal(got: q.QueryResult, want: q.QueryResult) -> None:
    assert list(got.columns) == list(want.columns)
    for k, w in want.columns.items():
        g = got.columns[k]
        assert g.shape == w.shape, k
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=k)
        else:
            assert np.array_equal(g.astype(w.dtype), w), k


RANDOM_QUERIES = [
    q.Query(where=[q.col("year").isin([1993, 1995, 1996]), q.col("qty").between(10, 30)],
            group_by=["city", "year"],
            select=[q.sum("price", "s"), q.min("price", "lo"), q.max(q.col("price") - q.col("qty"), "hi"),
                    q.avg("disc", "a"), q.count()],
            order_by=["city", "-s"], limit=7),
    q.Query(where=[q.col("city").eq("OSLO")], select=[q.sum(q.col("price") * q.col("disc"), "r"),
                                                      q.count()]),
    q.Query(where=[q.col("disc").gt(8)], group_by=["disc"], select=[q.max("qty", "m")],
            order_by=["disc"]),
    q.Query(group_by=["city", "disc"], select=[q.sum("price", "s"), q.count()],
            having=[q.col("count").ge(45), q.col("s").between(2_000_000, 4_000_000)],
            order_by=["-s"]),
]


@pytest.mark.parametrize("spec", RANDOM_QUERIES, ids=["grouped", "scalar", "ordered", "having"])
def test_the_reference_equals_duckdb(spec: q.Query) -> None:
    pytest.importorskip("duckdb")
    t = q.Table.of(small())
    duckdb_equal(q.reference(t, spec), ssb.duckdb_answer(t, spec))
