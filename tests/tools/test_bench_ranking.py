"""A ranking a user can act on: bench compares neighbouring indexes round by round (paired
over interleaved rounds, so a machine that slows down for a while slows both alike), goes on
timing the undecided ones until the order is established or a budget is spent, and says which
it was. The timings here are scripted, never measured."""

from __future__ import annotations

import io
import json
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from indexzoo.tools.bench import Contender, Entry, Record, format_warnings, rank_rounds
from indexzoo.tools.cli import main
from indexzoo.tools.ranking import MIN_PAIRED_ROUNDS, median_interval, pair_verdict, verdicts
from indexzoo.tools.timing import Timing


# ---------------------------------------------------------------------- the statistics
def test_the_median_interval_needs_six_values_at_95_percent() -> None:
    assert MIN_PAIRED_ROUNDS == 6
    assert median_interval([1.0] * 5) is None
    assert median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)
    # 10 values: the second smallest to the second largest (coverage 97.9%)
    assert median_interval(list(range(10))) == (1, 8)
    assert median_interval(list(range(20))) == (5, 14)


def machine_noise(n: int, seed: int = 1) -> list[float]:
    """A machine whose speed swings by up to 3x from one round to the next."""
    rng = random.Random(seed)
    return [rng.uniform(1.0, 3.0) for _ in range(n)]


def test_a_steady_10_percent_lead_under_heavy_common_noise_is_an_order() -> None:
    load = machine_noise(12)
    fast = [1.0 * x for x in load]
    slow = [1.1 * x for x in load]
    # the ranges of the repetitions overlap by far: they could not order these two
    assert Timing(tuple(fast)).overlaps(Timing(tuple(slow)))
    v = pair_verdict("a", fast, "b", slow)
    assert v.state == "ordered" and v.low == pytest.approx(1.1) and v.paired


def test_equal_speeds_within_two_percent_are_tied() -> None:
    load = machine_noise(12)
    v = pair_verdict("a", load, "b", [x * (1.005 if i % 2 else 0.996) for i, x in
                                       enumerate(load)])
    assert v.state == "tied"


def test_a_coin_toss_stays_open_and_so_does_a_reversal() -> None:
    rng = random.Random(7)
    a = [rng.uniform(1, 2) for _ in range(12)]
    b = [rng.uniform(1, 2) for _ in range(12)]
    assert pair_verdict("a", a, "b", b).state == "open"
    # "faster" by the medians but slower in every round: not an order in the stated direction
    assert pair_verdict("a", [1.0] * 8, "b", [0.9] * 8).state == "open"


def test_five_rounds_decide_nothing_however_clear() -> None:
    assert pair_verdict("a", [1.0] * 5, "b", [2.0] * 5).state == "open"
    assert pair_verdict("a", [1.0] * 6, "b", [2.0] * 6).state == "ordered"


def test_pairs_are_compared_over_the_rounds_both_took_part_in() -> None:
    # b and c ran extra rounds 6..9 without a; a/b is paired over rounds 0..5 only
    a = ("a", [1.0] * 6, list(range(6)))
    b = ("b", [2.0] * 6 + [2.0, 2.1, 1.9, 2.0], list(range(10)))
    c = ("c", [2.1, 1.9] * 3 + [2.05, 2.0, 1.95, 2.05], list(range(10)))
    found = verdicts([a, b, c])
    assert [v.state for v in found] == ["ordered", "open"]


def test_an_index_timed_alone_is_ordered_by_ranges() -> None:
    found = verdicts([("a", [1.0, 1.1], [0, 1]), ("b", [1.2, 1.3], None),
                      ("c", [1.25, 1.4], [0, 1])])
    assert [(v.state, v.paired) for v in found] == [("ordered", False), ("open", False)]


# ---------------------------------------------------------------------- the rounds
class Scripted(Contender):
    """A contender whose seconds per call are scripted per round: ``speed`` times the
    machine's load in that round (and a small private jitter)."""

    def __init__(self, name: str, speed: float | Callable[[int], float],
                 load: Callable[[int], float], jitter: float = 0.0) -> None:
        super().__init__(Entry(name), None, lambda: None, Timing((0.0,)))
        self.speed, self.load, self.jitter = speed, load, jitter
        self.rng = random.Random(name)

    def repetition(self, device: str) -> float:
        r = len(self.seconds)
        speed = self.speed(r) if callable(self.speed) else self.speed
        return speed * self.load(r) * (1 + self.rng.uniform(-self.jitter, self.jitter))


def load(r: int) -> float:
    return 1.0 + 2.0 * ((r * 7919) % 13) / 13  # swings by 3x from round to round


def test_rounds_go_on_until_the_ranking_is_established() -> None:
    cs = [Scripted("a", 1.0, load, 0.01), Scripted("b", 1.15, load, 0.01),
          Scripted("c", 3.0, load, 0.01)]
    assert rank_rounds(cs, [], "cpu", repeats=5, budget_s=60) == "established"
    assert all(len(c.seconds) == MIN_PAIRED_ROUNDS for c in cs)


def test_only_the_undecided_indexes_get_more_rounds_and_the_budget_ends_them() -> None:
    # b is 30% slower than a in one round and 25% faster in the next: undecidable;
    # c is 3x slower than both
    def seesaw(r: int) -> float:
        return 1.3 if r % 2 else 0.75

    cs = [Scripted("a", 1.0, load), Scripted("b", seesaw, load),
          Scripted("c", 3.0, load, 0.01)]
    assert rank_rounds(cs, [], "cpu", repeats=5, budget_s=60, max_rounds=20) == "rounds"
    assert len(cs[0].seconds) == len(cs[1].seconds) == 20
    assert len(cs[2].seconds) == MIN_PAIRED_ROUNDS
    assert cs[0].rounds == list(range(20)) and cs[2].rounds == list(range(6))


def test_the_budget_counts_the_rounds_beyond_repeats() -> None:
    cs = [Scripted("a", 1.0, load), Scripted("b", lambda r: 1.3 if r % 2 else 0.75, load)]
    assert rank_rounds(cs, [], "cpu", repeats=5, budget_s=1e-9) == "budget"
    assert len(cs[0].seconds) == 6  # one extra round, then the budget is known to be spent


def test_a_zero_budget_times_exactly_the_repeats() -> None:
    cs = [Scripted("a", 1.0, load), Scripted("b", 2.0, load)]
    assert rank_rounds(cs, [], "cpu", repeats=5, budget_s=0) == "fixed"
    assert [len(c.seconds) for c in cs] == [5, 5]


# ---------------------------------------------------------------------- what the user reads
def rec(name: str, seconds: list[float], rounds: list[int] | None = None, ranking: str = "",
        workload: str = "w") -> Record:
    t = Timing(tuple(seconds))
    return Record(index=name, workload=workload, device="cpu", n_keys=100, n_lookups=1000,
                  out="rowid", lookup_s=t.median, lookup_spread=t.spread,
                  throughput=1000 / t.median, build_s=0.001, resident_bytes=1,
                  peak_build_bytes=1, lookup_seconds=list(seconds),
                  lookup_rounds=rounds if rounds is not None else list(range(len(seconds))),
                  ranking=ranking or None)


def test_an_established_ranking_is_said_so_with_its_rounds_and_ties() -> None:
    L = [load(r) for r in range(8)]
    rows = [rec("a", L, ranking="established"), rec("b", [x * 1.3 for x in L]),
            rec("c", [x * 1.3 * (1.001 if i % 2 else 0.999) for i, x in enumerate(L)])]
    lines = format_warnings(rows)
    assert lines[0] == ("ranking: established after 8 rounds (each neighbour ordered at 95% "
                        "confidence; b and c tied within 2%)")


def test_an_open_ranking_names_the_indexes_that_may_swap_and_why() -> None:
    rng = random.Random(3)
    L = [load(r) for r in range(10)]
    rows = [rec("a", L, ranking="budget"), rec("b", [x * 2 for x in L]),
            rec("c", [x * 2 * rng.uniform(0.9, 1.1) for x in L]),
            rec("d", [x * 6 for x in L])]
    lines = format_warnings(rows)
    assert re.fullmatch(r"warning: the order of (b and c|c and b) is not established after 10 "
                        r"rounds \(the ranking budget was spent\); it may change from run to run",
                        lines[0])


def test_too_few_rounds_are_named_as_the_reason() -> None:
    rows = [rec("a", [1.0, 1.0, 1.0]), rec("b", [2.0, 2.0, 2.0])]
    assert format_warnings(rows)[0] == (
        "warning: the order of a and b is not established after 3 rounds (as run, and a paired "
        "comparison needs at least 6); it may change from run to run")


def test_bench_rank_budget_must_be_a_finite_non_negative_number(
        capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("-1", "nan", "inf"):
        assert main(["bench", "--preset", "tiny", "--rank-budget", bad, "--no-plot"],
                    out=io.StringIO()) == 2
        assert "--rank-budget must be a finite number of seconds >= 0" in capsys.readouterr().err


def test_bench_goes_on_past_repeats_and_records_how_the_ranking_ended(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    code = main(["bench", "--preset", "tiny", "--device", "cpu", "--repeats", "3",
                 "--indexes", "sorted-array,btree", "--rank-budget", "5", "--no-plot",
                 "--output", str(tmp_path)], out=out)
    assert code == 0, out.getvalue()
    records = json.loads(next(tmp_path.glob("tiny-cpu-*.json")).read_text())["records"]
    assert {r["ranking"] for r in records} <= {"established", "budget", "rounds"}
    assert len({r["ranking"] for r in records}) == 1
    # a paired comparison needs 6 rounds, so bench went past --repeats 3
    assert max(len(r["lookup_seconds"]) for r in records) >= 6
    for r in records:
        assert len(r["lookup_rounds"]) == len(r["lookup_seconds"])
    said = [line for line in out.getvalue().splitlines()
            if line.startswith(("ranking: established", "warning: the order of"))]
    assert len(said) == 1
    assert "ranking" in capsys.readouterr().err
