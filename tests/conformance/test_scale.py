"""Certification at scale: what the ``sizes`` group's scale checks reach at each suite size,
that a seed alone decides their data, that every key is looked up, and what a failure says."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from support.broken_indexes import MissesEveryKthLookupInLargeBatches, SignedUpperBound

from indexzoo.conformance import make_context, oracle, run_checks, scale
from indexzoo.conformance.context import Context
from indexzoo.plugins.sorted_array import SortedArrayIndex
from indexzoo.tools.cli import main

pytest_plugins = ["pytester"]

SEEDS = (0, 1, 2, 99, 123456)


def _context(device: str, size: str, seed: int) -> Context:
    """A context that only plans (no index is made): a GPU's plan is checked without one."""
    return Context(factory=SortedArrayIndex, caps=SortedArrayIndex.capabilities, device=device,
                   size=size, name="sorted-array", seed=seed)  # type: ignore[arg-type]


def _largest(ctx: Context) -> tuple[int, int]:
    """(most distinct keys of a key set, largest batch) of the plan of ``ctx``."""
    keys = max(c.distinct for c in scale.key_cases(ctx))
    batch = max(q for c in scale.batch_cases(ctx) for q in c.batches)
    return keys, batch


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("device", "keys", "batch"), [("cpu", 1 << 21, 1 << 19),
                                                       ("cuda", 1 << 26, 1 << 24)])
def test_large_reaches_past_2_21_keys_and_2_19_lookups_on_the_cpu_2_26_and_2_24_on_a_gpu(
        seed: int, device: str, keys: int, batch: int) -> None:
    most_keys, most_batch = _largest(_context(device, "large", seed))
    assert keys < most_keys <= keys + keys // 4
    assert batch < most_batch <= batch + batch // 4


@pytest.mark.parametrize("seed", SEEDS)
def test_small_stays_within_a_few_thousand_keys_and_lookups(seed: int) -> None:
    most_keys, most_batch = _largest(_context("cpu", "small", seed))
    assert most_keys <= 2560 and most_batch <= 2560


def test_sizes_come_from_the_seed_alone_and_are_no_powers_of_two() -> None:
    plans = {s: (scale.key_cases(_context("cpu", "large", s)),
                 scale.batch_cases(_context("cpu", "large", s))) for s in SEEDS}
    assert plans[1] == (scale.key_cases(_context("cpu", "large", 1)),
                        scale.batch_cases(_context("cpu", "large", 1)))
    sizes = {s: [c.distinct for c in k] + list(b[0].batches) for s, (k, b) in plans.items()}
    assert len({tuple(v) for v in sizes.values()}) == len(SEEDS)
    every = [n for v in sizes.values() for n in v]
    assert sum(n & (n - 1) == 0 for n in every) == 0


def test_every_family_and_dtype_the_index_takes_is_drawn() -> None:
    cases = scale.key_cases(_context("cpu", "large", 5))
    assert {c.family for c in cases} == {"uniform", "skewed", "dense", "duplicates"}
    assert {c.dtype for c in cases} == {"uint32", "uint64", "int64"}
    assert sum(c.wrapping_values for c in cases) == 1


def test_key_sets_reach_the_ends_of_their_dtype() -> None:
    case = scale.KeyCase("uniform", 5000, 0, "uint64", False, 3)
    keys, values = scale.key_set(case, duplicates=False)
    assert values is None and np.unique(keys).shape[0] == keys.shape[0] == 5000
    assert {0, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1} <= set(keys.tolist())
    signed, _ = scale.key_set(case.__class__("uniform", 5000, 0, "int64", False, 3), False)
    assert signed.dtype == np.int64 and {-(2**63), -1, 0, 2**63 - 1} <= set(signed.tolist())
    skewed, _ = scale.key_set(scale.KeyCase("skewed", 5000, 0, "uint64", False, 3), False)
    assert int(skewed.max()) > 2**63 and np.unique(skewed).shape[0] == 5000


def test_duplicates_are_added_only_where_the_index_takes_them() -> None:
    for family in ("uniform", "duplicates"):
        case = scale.KeyCase(family, 4000, 0, "uint32", True, 8)
        keys, values = scale.key_set(case, duplicates=True)
        assert np.unique(keys).shape[0] == 4000 < keys.shape[0]
        assert values is not None and values.shape == keys.shape and values.min() >= 2**62
    keys, _ = scale.key_set(scale.KeyCase("uniform", 4000, 0, "uint32", False, 8), False)
    assert keys.shape[0] == 4000


class _Recording(SortedArrayIndex):
    """sorted-array that keeps every point lookup and range lower bound it is asked."""

    name: ClassVar[str] = "recording"
    asked: ClassVar[dict[str, list[np.ndarray]]] = {"point": [], "range": []}

    def point(self, queries: Any, *, out: Any = "rowid") -> Any:
        self.asked["point"].append(np.asarray(queries).copy())
        return super().point(queries, out=out)

    def range(self, lo: Any, hi: Any, *, out: Any = "count") -> Any:
        self.asked["range"].append(np.asarray(lo).copy())
        return super().range(lo, hi, out=out)


def test_every_distinct_key_is_looked_up_as_a_point_and_as_a_lower_bound() -> None:
    ctx = make_context(_Recording, device="cpu", seed=4)
    case = scale.KeyCase("uniform", 30_000, 700, "uint64", False, 4)  # batches far smaller
    _Recording.asked["point"].clear()
    _Recording.asked["range"].clear()
    scale.run_case(ctx, case, scale.sweep_plan(ctx, case.distinct, case.batch))
    keys, _ = scale.key_set(case, duplicates=True)
    for kind in ("point", "range"):
        asked = np.concatenate(_Recording.asked[kind])
        assert np.isin(np.unique(keys), asked).all(), kind


def test_a_seed_given_to_the_check_command_is_printed_and_used() -> None:
    out = io.StringIO()
    assert main(["check", "sorted-array", "--group", "sizes", "--seed", "31"], out=out) == 0
    first, *_, last = out.getvalue().strip().splitlines()
    assert ", seed 31, " in first and last.endswith("seed 31)")
    assert make_context("sorted-array", seed=31).seed == 31
    assert 0 <= make_context("sorted-array").seed < 1_000_000  # drawn where none is given


class _EveryTenthOver100(MissesEveryKthLookupInLargeBatches):
    name: ClassVar[str] = "every-tenth-over-100"
    BATCH_OVER: ClassVar[int] = 100
    EVERY: ClassVar[int] = 10


def test_the_pytest_suite_takes_its_seed_from_the_command_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_seeded="""
from support.broken_indexes import MissesEveryKthLookupInLargeBatches
from indexzoo.conformance import ConformanceSuite


class EveryTenth(MissesEveryKthLookupInLargeBatches):
    name = "every-tenth"
    BATCH_OVER = 100
    EVERY = 10


class TestSeeded(ConformanceSuite):
    index = EveryTenth
    groups = ("sizes",)
""")
    pytester.syspathinsert(str(Path(__file__).parents[1]))
    res = pytester.runpytest("-q", "-p", "no:cacheprovider", "--indexzoo-seed", "777", "-k",
                             "large_batches_answer_every_lookup")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*replay: indexzoo check every-tenth --size small --device cpu "
                              "--seed 777 --group sizes*"])


def test_a_failure_says_it_depends_on_the_batch_and_how_to_replay_it() -> None:
    ctx = make_context(_EveryTenthOver100, device="cpu", seed=12)
    [res] = run_checks(ctx, labels=["sizes/large_batches_answer_every_lookup"])
    assert res.status == "failed"
    first = re.search(r"first at positions \[([\d ]+)\]", res.message)
    assert first is not None, res.message
    assert all(int(p) % 10 == 9 for p in first.group(1).split())  # every 10th: 9, 19, ...
    assert "they answer right: the answer depends on the batch" in res.message
    assert ("replay: indexzoo check every-tenth-over-100 --size small --device cpu --seed 12 "
            "--group sizes") in res.message


def test_a_failure_says_when_the_wrong_lookups_are_wrong_alone_too() -> None:
    ctx = make_context(SignedUpperBound, device="cpu", seed=12)
    [res] = run_checks(ctx, labels=["sizes/large_key_sets_answer_every_key"])
    assert res.status == "failed"
    assert "they are wrong too: the answer depends on the keys" in res.message


def test_the_oracle_searches_large_batches_like_plain_searchsorted() -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 1000, 5000).astype(np.uint64)
    q = rng.integers(0, 1001, oracle.SORT_SEARCHES_FROM + 5).astype(np.uint64)
    exp = oracle.Oracle(keys).range(q, q + np.uint64(3))
    s = np.sort(keys)
    np.testing.assert_array_equal(exp.start, np.searchsorted(s, q, side="left"))
    np.testing.assert_array_equal(exp.stop, np.searchsorted(s, q + np.uint64(3), side="right"))


def test_rowid_sets_compared_in_parts_find_a_wrong_set_in_any_part(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oracle, "PAIRS_AT_ONCE", 64)  # a batch of ~3,000 pairs: ~50 parts
    keys = np.repeat(np.arange(500, dtype=np.uint32), 3)
    index = SortedArrayIndex(device="cpu").build(keys)
    o = oracle.Oracle(keys)
    q = np.arange(1000, dtype=np.uint32)
    res = index.point(q, out="rowids")
    assert oracle.compare(res, o.point(q), o, "rowids", index, "right") == []
    wrong = res.to_host()
    wrong.rowids[1200] = wrong.rowids[1201]  # lookup 400 lists one row twice, misses one
    found: list[np.ndarray] = []
    problems = oracle.compare(wrong, o.point(q), o, "rowids", index, "wrong", positions=found)
    assert "wrong rowid sets for 1 lookups, first [400]" in problems[0]
    assert "reported twice" in problems[1]
    assert np.concatenate(found).tolist() == [400]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_a_full_scan_is_asked_batches_within_reach_with_a_range_over_every_row(
        device: str, seed: int) -> None:
    from indexzoo.plugins.fused_scan import FusedScanIndex
    ctx = Context(factory=FusedScanIndex, caps=FusedScanIndex.capabilities, device=device,
                  size="large", name="fused-scan", seed=seed, cls=FusedScanIndex)  # type: ignore[arg-type]
    assert ctx.full_scan
    work = ctx.scan_work
    cases = scale.key_cases(ctx)
    assert max(c.distinct for c in cases) > scale.reach("large", device).keys[1]
    for case in cases:
        assert case.batch * case.distinct <= work or case.batch == scale.SCAN_BATCH
        plan = scale.sweep_plan(ctx, case.distinct, case.batch)
        assert len(plan) == 2 * len(scale.SCALE_MODES)  # one batch per kind and mode
    (batches,) = scale.batch_cases(ctx)
    assert scale.SCAN_BATCH_KEYS[0] <= batches.keys.distinct <= scale.SCAN_BATCH_KEYS[1]
    assert max(batches.batches) > scale.reach("large", device).batches[1]


def test_a_full_scan_that_skips_a_row_is_caught_by_the_range_over_every_row() -> None:
    seen: list[tuple[Any, Any]] = []

    class SkipsTheLastRow(SortedArrayIndex):
        """A scan that never reads its last row."""

        name: ClassVar[str] = "test-skips-the-last-row"
        full_scan: ClassVar[bool] = True

        def build(self, keys: Any, values: Any = None, **kw: Any) -> Any:  # type: ignore[override]
            return super().build(keys[:-1], None if values is None else values[:-1], **kw)

        def range(self, lo: Any, hi: Any, **kw: Any) -> Any:  # type: ignore[override]
            seen.append((lo[0], hi[0]))
            return super().range(lo, hi, **kw)

    ctx = Context(factory=SkipsTheLastRow, caps=SkipsTheLastRow.capabilities, device="cpu",
                  size="large", name="test-skips-the-last-row", seed=3,
                  cls=SkipsTheLastRow)  # type: ignore[arg-type]
    case = scale.KeyCase("uniform", 5000, 100, "uint64", False, 4)
    # the range over every row is the batch's first: wrong there whatever else is sampled
    with pytest.raises(AssertionError, match=r"count wrong for \d+ of 100 lookups; first at "
                                             r"positions \[0[ \]]"):
        scale.run_case(ctx, case, [("range", "count", 100)])
    assert seen[0] == (0, 2**64 - 1)
