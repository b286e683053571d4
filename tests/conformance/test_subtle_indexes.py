"""The suite catches subtly wrong indexes, each at the suite size the plugin-author guide
names for its kind of bug (docs/plugin-authors.md, "What certification covers"): the check
that must fail is named, and the correct index each one breaks passes that same check at that
same size. The large-size cases run in the exhaustive tier (tens of seconds each)."""

from __future__ import annotations

import pytest
from support.broken_indexes import SUBTLE_BASE, SUBTLE_FAILURE

from indexzoo.conformance import make_context, run_checks, summary

#: a fixed seed: the same data on every run (the checks catch these at any seed; the
#: exhaustive test below runs a few more)
SEED = 20261129


def _cases() -> list[object]:
    return [pytest.param(cls, size, label, id=f"{cls.name}-{size}",
                         marks=[pytest.mark.exhaustive] if size == "large" else [])
            for cls, (size, label) in SUBTLE_FAILURE.items()]


@pytest.mark.parametrize(("broken", "size", "label"), _cases())
def test_the_check_named_for_the_subtle_index_fails_at_its_size(broken: type, size: str,
                                                                 label: str) -> None:
    results = run_checks(make_context(broken, device="cpu", size=size, seed=SEED),
                         labels=[label])
    assert [(r.label, r.status) for r in results] == [(label, "failed")], summary(results)


@pytest.mark.parametrize(("broken", "size", "label"), _cases())
def test_the_index_it_breaks_passes_that_check(broken: type, size: str, label: str) -> None:
    results = run_checks(make_context(SUBTLE_BASE[broken], device="cpu", size=size, seed=SEED),
                         labels=[label])
    assert [(r.label, r.status) for r in results] == [(label, "passed")], summary(results)


@pytest.mark.exhaustive
@pytest.mark.parametrize("seed", [1, 22, 333])
def test_the_scale_checks_catch_the_scale_bugs_at_other_seeds(seed: int) -> None:
    for broken, (size, label) in SUBTLE_FAILURE.items():
        if size == "large":
            results = run_checks(make_context(broken, device="cpu", size=size, seed=seed),
                                 labels=[label])
            assert results[0].status == "failed", summary(results)
