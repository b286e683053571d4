"""Capabilities decide what runs: a correct index that lacks a capability (a hash table without
ranges, duplicate keys or sums; an index of 32-bit keys only; one that answers counts only;
a multi-column index without duplicate rows) certifies. No check fails or errors on it, the
checks that need what it lacks are skipped, each with a reason that names what it lacks, and
every other check runs."""

from __future__ import annotations

import importlib.util

import pytest
from support.narrowed_indexes import NARROWED
from support.point_hash import NarrowPointHash, PointHash

from indexzoo import OUT_MODES, Capabilities
from indexzoo.conformance import make_context, run_checks, summary

INDEXES = (PointHash, NarrowPointHash, *NARROWED)


def _lacks(caps: Capabilities, need: str) -> bool:
    """Whether an index of ``caps`` lacks what a check's ``need`` names (a capability flag,
    a key dtype, an out mode, several key columns, or an optional library)."""
    if need in ("pandas", "polars", "pyarrow"):
        return importlib.util.find_spec(need) is None
    if need == "multi":
        return caps.dims == 1
    if need in ("uint32", "uint64"):
        return need not in caps.key_dtypes
    if need in OUT_MODES:
        return need not in caps.out_modes
    return not getattr(caps, need)


#: What a skip reason says for each lack (the need's own name, but for several key columns).
SAYS = {"multi": "capabilities.dims = 1", "sum": "out='sum'", "bitmap": "out='bitmap'",
        "rowid": "out='rowid'", "rowids": "out='rowids'", "count": "out='count'",
        "range": "range=False", "duplicates": "duplicates=False", "updates": "updates=False"}


@pytest.mark.parametrize("cls", INDEXES, ids=lambda c: c.name)
def test_a_correct_index_certifies_with_exactly_the_checks_it_cannot_take_skipped(
        cls: type) -> None:
    results = run_checks(make_context(cls, device="cpu"))
    assert all(r.status in ("passed", "skipped") for r in results), summary(results)
    for r in results:
        lacking = [n for n in r.check.needs if _lacks(cls.capabilities, n)]
        if not lacking:
            assert r.status == "passed", f"{r.label} applies to {cls.name}, yet: {r.message}"
            continue
        assert r.status == "skipped", f"{r.label} needs {lacking}, which {cls.name} lacks"
        for need in lacking:
            assert SAYS.get(need, need) in r.message, (r.label, need, r.message)


def test_a_point_only_hash_table_runs_every_check_but_ranges_duplicates_and_sums() -> None:
    """The hash table declares no ranges, no duplicate keys and out modes without sum: the
    checks of custom values in sums and of keys through the key map (whose key sets would
    repeat a key) run where they can and skip where they cannot, with the reason."""
    results = {r.label: r for r in run_checks(make_context(PointHash, device="cpu"),
                                               groups=["differential", "dtypes", "ranges"])}
    summed = results["differential/custom_values_are_summed"]
    assert (summed.status, summed.message) == (
        "skipped", "the index does not offer out='sum' (capabilities.out_modes)")
    assert results["ranges/range_bounds_are_inclusive"].message == (
        "the index declares range=False in its capabilities")
    assert results["differential/differential_duplicates"].message == (
        "the index declares duplicates=False in its capabilities")
    assert results["dtypes/signed_and_float_keys_through_the_key_map"].status == "passed"
    assert results["dtypes/uint32_and_uint64_keys_agree"].status == "passed"
    series = results["dtypes/a_series_or_arrow_array_answers_like_its_numpy_array"]
    assert series.status == "passed" or "is not installed" in series.message, series.message
