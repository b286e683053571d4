"""The ``columns`` checks can fail: a brute-force multi-column index passes the whole suite
(one-column checks included, a multi-column index takes one column too), and each broken
variant is reported by the check that guards the promise it breaks."""

from __future__ import annotations

import pytest
from support.column_indexes import EXPECTED_FAILURE, ColumnScan

from indexzoo.conformance import make_context, run_checks, summary


def test_the_brute_force_column_index_passes_every_check() -> None:
    results = run_checks(make_context(ColumnScan, device="cpu"))
    # every check runs but those of updates, which the brute-force index does not offer
    assert all(r.status == "passed" or (r.status == "skipped" and "updates" in r.check.needs)
               for r in results), summary(results)
    assert any(r.label.startswith("columns/") for r in results)


@pytest.mark.parametrize("broken", list(EXPECTED_FAILURE), ids=lambda c: c.name)
def test_suite_reports_the_broken_index(broken: type) -> None:
    results = run_checks(make_context(broken, device="cpu"), labels=[EXPECTED_FAILURE[broken]])
    failed = {r.label for r in results if r.status in ("failed", "error")}
    assert EXPECTED_FAILURE[broken] in failed, summary(results)


def test_one_column_indexes_skip_the_columns_checks_with_the_reason() -> None:
    results = run_checks(make_context("sorted-array", device="cpu"), groups=["columns"])
    assert results and all(r.status == "skipped" for r in results)
    assert "capabilities.dims = 1" in results[0].message
