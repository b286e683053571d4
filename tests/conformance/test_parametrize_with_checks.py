"""``parametrize_with_checks``: one decorator over a third party's indexes makes each
(index, check) pair a test named ``<index>-<group>/<check>``; a check the index cannot take is
skipped with the reason, a declared failure is a strict expected failure, and an index that
does not run on the chosen device has its checks skipped with that reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexzoo.conformance import CHECKS, parametrize_with_checks
from indexzoo.conformance.context import skip_reason

pytest_plugins = ["pytester"]

GROUPS = ("out_modes", "ranges")

THIRD_PARTY_TESTS = """
import functools

from support.broken_indexes import OffByOneRangeBound
from support.point_hash import PointHash
from support.toy_index import Brute

from indexzoo.conformance import parametrize_with_checks


@parametrize_with_checks([Brute, PointHash], groups=("out_modes", "ranges"))
def test_checks(conformance_context, conformance_check):
    conformance_check(conformance_context)


@parametrize_with_checks([OffByOneRangeBound], groups=("ranges",), expected_failures={
    "ranges/range_bounds_are_inclusive": "upper bound exclusive (known)"})
def test_declared(conformance_context, conformance_check):
    conformance_check(conformance_context)


@parametrize_with_checks(["sorted-array", {"index": "btree", "params": {"node_width": 8}},
                          functools.partial(Brute, {"max_batch": 64})], groups=("ranges",))
def test_named(conformance_context, conformance_check):
    params = conformance_context.new().params
    given = {"test-brute": {"max_batch": 64}, "btree": {"node_width": 8}}
    for name, value in given.get(conformance_context.name, {}).items():
        assert getattr(params, name) == value
    conformance_check(conformance_context)
"""


@pytest.fixture
def third_party(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_third_party=THIRD_PARTY_TESTS)
    pytester.syspathinsert(str(Path(__file__).parents[1]))
    return pytester


def _ids(res: pytest.RunResult, test: str) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in res.stdout.lines
            if f"::{test}[" in line]


def test_each_index_and_check_is_one_test_named_index_group_check(
        third_party: pytest.Pytester) -> None:
    res = third_party.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    res.stdout.fnmatch_lines(["indexzoo conformance: device=cpu, size=small, seed=*"])
    wanted = [c.label for c in CHECKS if c.group in GROUPS]
    assert _ids(res, "test_checks") == [f"{name}-{label}" for name in ("test-brute",
                                                                      "test-point-hash")
                                        for label in wanted]
    ranges = [c.label for c in CHECKS if c.group == "ranges"]
    assert _ids(res, "test_named") == [f"{name}-{label}" for name in (
        "sorted-array", "btree(node_width=8)", "test-brute(max_batch=64)") for label in ranges]


def test_checks_an_index_cannot_take_are_skipped_with_the_reason(
        third_party: pytest.Pytester) -> None:
    from support.point_hash import PointHash

    res = third_party.runpytest("-q", "-rs", "-p", "no:cacheprovider", "-k", "test_checks")
    cannot = [c for c in CHECKS
              if c.group in GROUPS and skip_reason(c, PointHash.capabilities) is not None]
    assert cannot, "the point-only hash table takes every check of these groups"
    ran = 2 * sum(c.group in GROUPS for c in CHECKS) - len(cannot)
    res.assert_outcomes(passed=ran, skipped=len(cannot))
    res.stdout.fnmatch_lines(["*SKIPPED*the index does not offer out='bitmap'*",
                              "*SKIPPED*the index declares duplicates=False in its capabilities*",
                              "*SKIPPED*the index declares range=False in its capabilities*"])


def test_a_declared_failure_runs_as_a_strict_expected_failure(
        third_party: pytest.Pytester) -> None:
    res = third_party.runpytest("-q", "-rx", "-p", "no:cacheprovider", "-k",
                                "test_declared and range_bounds_are_inclusive")
    res.assert_outcomes(xfailed=1)
    res.stdout.fnmatch_lines(["*XFAIL*range_bounds_are_inclusive*upper bound exclusive*"])


def test_indexes_given_by_name_spec_or_factory_run_with_their_parameters(
        third_party: pytest.Pytester) -> None:
    res = third_party.runpytest("-q", "-p", "no:cacheprovider", "-k",
                                "test_named and range_bounds_are_inclusive")
    res.assert_outcomes(passed=3)


def test_an_index_that_does_not_run_on_the_device_has_its_checks_skipped(
        third_party: pytest.Pytester) -> None:
    res = third_party.runpytest("-q", "-rs", "-p", "no:cacheprovider", "--indexzoo-device=cuda",
                                "-k", "test_checks and point-hash and rowid_is_a_match")
    res.assert_outcomes(skipped=1)
    res.stdout.fnmatch_lines(["*SKIPPED*index 'test-point-hash' does not run on 'cuda': its "
                              "capabilities list the devices cpu*"])


def test_a_group_that_does_not_exist_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"groups names no group: \['range'\]"):
        parametrize_with_checks(["sorted-array"], groups=("range",))
