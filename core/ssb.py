"""``indexzoo.ssb``: the name the README documented for the SSB flat benchmark before it moved
into the query package, kept so that code written against it still imports. Everything is
:mod:`indexzoo.query.ssb`'s; new code imports that."""

from __future__ import annotations

from .query.ssb import (
    EXPECTED,
    PAPER_SELECTIVITY,
    QUERIES,
    SQL,
    TABLE,
    Table,
    duckdb_answer,
    generate,
    selectivity,
    sql,
    to_arrow,
)

__all__ = ["EXPECTED", "PAPER_SELECTIVITY", "QUERIES", "SQL", "TABLE", "Table", "duckdb_answer",
           "generate", "selectivity", "sql", "to_arrow"]
