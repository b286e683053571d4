"""The suite can fail: each deliberately broken index is reported, by the check that guards
the promise it breaks, and the correct index it wraps passes those checks."""

from __future__ import annotations

import io
import sys

import pytest
from broken_indexes import EXPECTED_FAILURE

from indexzoo.cli import main
from indexzoo.conformance import make_context, run_checks, summary
from indexzoo.plugins.sorted_array import SortedArrayIndex


@pytest.mark.parametrize("broken", list(EXPECTED_FAILURE), ids=lambda c: c.name)
def test_suite_reports_the_broken_index(broken: type) -> None:
    results = run_checks(make_context(broken, device="cpu"))
    failed = {r.label for r in results if r.status != "passed"}
    assert EXPECTED_FAILURE[broken] in failed, summary(results)


def test_the_wrapped_index_passes_the_same_checks() -> None:
    results = run_checks(make_context(SortedArrayIndex, device="cpu"))
    assert all(r.status == "passed" for r in results), summary(results)
    labels = {r.label for r in results}
    assert set(EXPECTED_FAILURE.values()) <= labels


def test_check_command_summarises_per_group() -> None:
    out = io.StringIO()
    assert main(["check", "searchsorted", "--group", "ranges", "--group", "sizes"], out=out) == 0
    text = out.getvalue()
    assert "ranges" in text and "sizes" in text and "0 failed" in text
    assert "differential" not in text.split("\n", 1)[1]


def test_check_command_exits_1_on_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    import indexzoo
    from indexzoo import registry

    registry.reset()
    broken = next(iter(EXPECTED_FAILURE))
    mod = type(sys)("broken_plugin")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register):  # type: ignore[no-untyped-def]
        register(broken)

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    indexzoo.register_plugin(mod, name="broken-plugin")
    try:
        out = io.StringIO()
        assert main(["check", broken.name, "--group", "ranges"], out=out) == 1
        assert "FAILED ranges/range_bounds_are_inclusive" in out.getvalue()
    finally:
        registry.reset()


def test_check_command_rejects_unknown_groups() -> None:
    assert main(["check", "searchsorted", "--group", "nope"], out=io.StringIO()) == 2
