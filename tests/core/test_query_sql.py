"""SQL text in: ``indexzoo.query.parse`` and ``QueryEngine.sql`` give the builder's Query for
the subset the engines run, refuse anything else in one line naming the construct, and the
13 SSB queries run from their text with DuckDB's answers."""

from __future__ import annotations

import dataclasses
import decimal

import numpy as np
import pytest
from support.query_edges import draw_query, draw_table

import indexzoo
from indexzoo import Unsupported
from indexzoo import query as q
from indexzoo.query import ssb

pytest.importorskip("sqlglot")


def test_the_subset_parses_to_the_builders_query() -> None:
    text = ('SELECT g, sum((a - b) * 3) AS s, count(*) AS n, count(c) AS m FROM t '
            "WHERE a BETWEEN -5 AND 7 AND b IN (1, 2) AND c <> 'it''s' AND d IS NULL "
            "AND e IS NOT NULL AND f NOT IN (3) AND x NOT BETWEEN 1 AND 2 AND y >= DATE '1994-01-01' "
            "AND (z = 1 OR z > 9) AND 4 < w "
            "GROUP BY g HAVING sum((a - b) * 3) > 10 ORDER BY s DESC, g LIMIT 5")
    want = q.Query(
        where=[q.col("a").between(-5, 7), q.col("b").isin([1, 2]), q.col("c").ne("it's"),
               q.col("d").is_null(), q.col("e").is_not_null(), q.col("f").not_in([3]),
               q.col("x").not_between(1, 2), q.col("y").ge(np.datetime64("1994-01-01")),
               q.col("z").eq(1) | q.col("z").gt(9), q.col("w").gt(4)],
        group_by=["g"],
        select=[q.sum((q.col("a") - q.col("b")) * 3, "s"), q.count(alias="n"),
                q.count("c", "m")],
        having=[q.col("s").gt(10)], order_by=["-s", "g"], limit=5)
    assert q.parse(text) == want


def test_select_order_hidden_aggregates_and_positions_are_kept() -> None:
    got = q.parse("SELECT sum(x) AS s, g FROM t GROUP BY 2 HAVING count(*) > 1 ORDER BY 1")
    assert got.outputs == ("s", "g")
    assert [a.alias for a in got.select] == ["s", "count_star()"]
    assert got.having == (q.col("count_star()").gt(1),) and got.order_by == ("s",)
    t = {"g": np.array([1, 1, 2]), "x": np.array([5, 6, 7])}
    assert indexzoo.query_engine("crystal", device="cpu").sql(
        "SELECT sum(x) AS s, g FROM t GROUP BY 2 HAVING count(*) > 1 ORDER BY 1", t=t
    ).rows() == [(11, 1)]


@pytest.mark.parametrize(("text", "construct"), [
    ("SELECT a FROM t JOIN u ON t.a = u.a GROUP BY a", "JOIN"),
    ("SELECT sum(a) FROM (SELECT a FROM t)", "FROM"),
    ("SELECT DISTINCT a FROM t GROUP BY a", "DISTINCT"),
    ("SELECT sum(a) FROM t LIMIT 3 OFFSET 1", "OFFSET"),
    ("SELECT sum(a / 2) FROM t", "division"),
    ("SELECT sum(abs(a)) FROM t", "ABS"),
    ("SELECT sum(CASE WHEN a > 1 THEN a END) FROM t", "CASE"),
    ("SELECT count(*) FROM t WHERE a = 1 OR b = 2", "OR across columns"),
    ("SELECT count(*) FROM t WHERE a < b", "comparison"),
    ("SELECT count(DISTINCT a) FROM t", "DISTINCT"),
    ("SELECT a, count(*) FROM t GROUP BY a ORDER BY a NULLS FIRST", "NULLS FIRST"),
    ("SELECT sum(a) OVER () FROM t", "window"),
    ("UPDATE t SET a = 1", "UPDATE"),
])
def test_anything_else_is_refused_in_one_line_naming_the_construct(text: str,
                                                                   construct: str) -> None:
    with pytest.raises(Unsupported, match=construct) as got:
        q.parse(text)
    assert "\n" not in str(got.value)


def test_sql_text_names_its_table() -> None:
    engine = indexzoo.query_engine("crystal", device="cpu")
    with pytest.raises(indexzoo.InvalidInput, match="reads table 'orders'; pass it as orders="):
        engine.sql("SELECT count(*) FROM orders", t={"a": np.arange(3)})
    with pytest.raises(indexzoo.InvalidInput, match="cannot parse"):
        q.parse("SELEC count(*) FROM t")


def _floats(spec: q.Query) -> q.Query:
    """``spec`` with its decimal literals as floats (SQL's 0.1 is exact, a float's is not) and
    each HAVING on the first of equal aggregates (SQL names them by their expression)."""
    def fix(f: q.Filter) -> q.Filter:
        if f.kind == "or":
            return dataclasses.replace(f, values=tuple(fix(p) for p in f.values))
        return dataclasses.replace(f, values=tuple(
            float(v) if isinstance(v, decimal.Decimal) else v for v in f.values))

    first = {}
    for a in spec.select:
        first.setdefault((a.op, a.expr), a.alias)
    same = {a.alias: first[a.op, a.expr] for a in spec.select}
    return dataclasses.replace(spec, where=tuple(fix(f) for f in spec.where),
                               having=tuple(dataclasses.replace(h, column=same[h.column])
                                            for h in spec.having))


@pytest.mark.parametrize("seed", range(60))
def test_every_query_the_builder_makes_reads_back_from_its_sql(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cols = draw_table(rng)
    for _ in range(3):
        spec = draw_query(rng, cols)
        assert _floats(q.parse(spec.sql("t"))) == _floats(spec), spec.sql("t")


def test_the_13_ssb_queries_run_from_their_text_with_duckdbs_answers() -> None:
    duckdb = pytest.importorskip("duckdb")
    table = ssb.generate(0.01, seed=4)
    con = duckdb.connect()
    con.register(ssb.TABLE, ssb.to_arrow(table))
    engine = indexzoo.query_engine("crystal", device="cpu")
    for name, text in ssb.SQL.items():
        got = engine.sql(text, lineorder_flat=table)
        assert got.rows() == con.execute(text).fetchall(), name
        assert dataclasses.replace(q.parse(text), name=name) == ssb.QUERIES[name]
