"""The suite can fail: each deliberately broken index is reported, by the check that guards
the promise it breaks, and the correct index it wraps passes those checks."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from support.broken_indexes import EXPECTED_FAILURE

from indexzoo.conformance import make_context, run_checks, summary
from indexzoo.plugins.sorted_array import SortedArrayIndex
from indexzoo.tools.cli import main

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("broken", list(EXPECTED_FAILURE), ids=lambda c: c.name)
def test_suite_reports_the_broken_index(broken: type) -> None:
    results = run_checks(make_context(broken, device="cpu"), labels=[EXPECTED_FAILURE[broken]])
    failed = {r.label for r in results if r.status in ("failed", "error")}
    assert EXPECTED_FAILURE[broken] in failed, summary(results)


def test_the_wrapped_index_passes_the_same_checks() -> None:
    results = run_checks(make_context(SortedArrayIndex, device="cpu"))
    # nothing skipped but what sorted-array does not offer: several key columns, updates
    assert all(r.status == "passed" or (r.status == "skipped" and (
        r.check.group == "columns" or "updates" in r.check.needs)) for r in results), \
        summary(results)
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


def test_check_command_sets_parameters_and_rejects_bad_ones(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    out = io.StringIO()
    assert main(["check", "btree", "--group", "ranges", "--set", "node_width=8"], out=out) == 0
    assert "btree node_width=8 on cpu" in out.getvalue() and "0 failed" in out.getvalue()
    assert main(["check", "btree", "--set", "node_width"], out=io.StringIO()) == 2
    assert "expected PARAM=VALUE" in capsys.readouterr().err
    assert main(["check", "btree", "--set", "no_such=1"], out=io.StringIO()) == 2
    assert "no_such" in capsys.readouterr().err


def test_inapplicable_checks_are_reported_as_skipped_with_the_reason() -> None:
    results = run_checks(make_context("warpcore-hash", device="cpu"), groups=["ranges"])
    assert results and all(r.status == "skipped" for r in results)
    assert "range=False" in results[0].message
    text = summary(results)
    assert "skipped" in text and "ranges/range_bounds_are_inclusive: the index declares " \
        "range=False" in text


def test_declared_expected_failures_are_reported_and_must_fail() -> None:
    broken = next(iter(EXPECTED_FAILURE))
    label = EXPECTED_FAILURE[broken]
    ctx = make_context(broken, device="cpu", expected={label: "a known bug of this test index"})
    results = {r.label: r for r in run_checks(ctx, groups=[label.split("/")[0]])}
    assert results[label].status == "xfail" and results[label].ok
    assert "a known bug of this test index" in results[label].message
    # declared on a check that passes: an unexpected pass fails the certification
    ctx = make_context(SortedArrayIndex, device="cpu", expected={label: "not true"})
    results = {r.label: r for r in run_checks(ctx, groups=[label.split("/")[0]])}
    assert results[label].status == "xpass" and not results[label].ok
    with pytest.raises(TypeError, match="unknown checks"):
        make_context(SortedArrayIndex, device="cpu", expected={"ranges/nope": "x"})


def test_run_checks_runs_only_the_checks_it_is_given_by_label() -> None:
    ctx = make_context(SortedArrayIndex, device="cpu")
    label = "ranges/range_bounds_are_inclusive"
    results = run_checks(ctx, labels=[label])
    assert [(r.label, r.status) for r in results] == [(label, "passed")]
    assert run_checks(ctx, groups=["sizes"], labels=[label]) == []  # both filters apply
    with pytest.raises(TypeError, match="unknown checks"):
        run_checks(ctx, labels=["ranges/nope"])


PYTEST_SUITE = """
from support.broken_indexes import OffByOneRangeBound
from indexzoo.conformance import ConformanceSuite


class TestDeclared(ConformanceSuite):
    index = OffByOneRangeBound
    expected_failures = {"ranges/range_bounds_are_inclusive": "upper bound exclusive (known)"}


class TestUndeclared(ConformanceSuite):
    index = OffByOneRangeBound


class TestHash(ConformanceSuite):
    index = "warpcore-hash"
"""


def test_the_pytest_suite_shows_skips_with_reasons_and_strict_expected_failures(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_declared=PYTEST_SUITE)
    pytester.syspathinsert(str(Path(__file__).parents[1]))
    res = pytester.runpytest("-rsx", "-p", "no:cacheprovider", "-k",
                             "range_bounds_are_inclusive")
    res.assert_outcomes(xfailed=1, failed=1, skipped=1)
    res.stdout.fnmatch_lines(["*SKIPPED*the index declares range=False*",
                              "*XFAIL*TestDeclared*upper bound exclusive (known)*"])


GROUPS_SUITE = """
from support.broken_indexes import OffByOneRangeBound
from indexzoo.conformance import ConformanceSuite


class TestOnlyRanges(ConformanceSuite):
    index = OffByOneRangeBound
    groups = ("ranges",)


class TestNoRanges(ConformanceSuite):
    index = OffByOneRangeBound
    groups = ("sizes", "extremes")
"""


def test_a_suite_with_groups_runs_only_their_checks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_groups=GROUPS_SUITE)
    pytester.syspathinsert(str(Path(__file__).parents[1]))
    res = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line for line in res.stdout.lines if "::" in line]
    assert {i.split("[")[1].split("/")[0] for i in ids if "TestOnlyRanges" in i} == {"ranges"}
    assert {i.split("[")[1].split("/")[0] for i in ids if "TestNoRanges" in i} == {
        "sizes", "extremes"}
    # the off-by-one bound is caught where ranges run, and only there
    res = pytester.runpytest("-q", "-p", "no:cacheprovider", "-k", "range_bounds_are_inclusive")
    res.assert_outcomes(failed=1)


def test_a_suite_naming_an_unknown_group_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_groups="""
from indexzoo.conformance import ConformanceSuite


class TestTypo(ConformanceSuite):
    index = "sorted-array"
    groups = ("range",)
""")
    res = pytester.runpytest("-q", "-p", "no:cacheprovider")
    assert "TestTypo.groups names no group: ['range']" in res.stdout.str()
    assert res.ret != 0
