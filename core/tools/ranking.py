"""Whether a benchmark's ranking is established: paired comparisons over interleaved rounds.

Interleaved timing (:func:`indexzoo.tools.bench.time_interleaved`) times every index once per
round, so repetition ``i`` of two indexes ran seconds apart under the same machine state. A
machine that slows down for a while slows both alike: the ratio of their seconds in one
round cancels it, where the ranges of their repetitions (slowest to fastest) only widen.

For two neighbours of the ranking, ``a`` above ``b``, each round gives the ratio
``b_seconds / a_seconds`` (above 1: ``a`` was faster in that round). A distribution-free
confidence interval of the median of these ratios (order statistics; the sign test's
interval) decides the pair:

* ``ordered``: the whole interval lies above 1, ``a`` is faster;
* ``tied``: the whole interval lies within ``1 ± tie`` (2% by default): the two are equally
  fast for any practical purpose, so their order does not matter;
* ``open``: neither; more rounds may decide it (the interval narrows as rounds accumulate,
  where the range of repetitions never does).

A ranking is established when every neighbouring pair is ordered or tied. The interval needs
at least 6 rounds at 95% confidence (a median interval from fewer rounds covers less than
95%), so a pair is never decided before that. Records timed one after another (``timing:
sequential``, an index that could not stay in memory) have no partner per round; a pair
with one of them falls back to the ranges of repetitions: ordered when they do not overlap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["CONFIDENCE", "MIN_PAIRED_ROUNDS", "TIE", "PairVerdict", "Timed", "median_interval",
           "open_pairs", "pair_verdict", "verdicts"]

#: Confidence of the interval of the median ratio.
CONFIDENCE = 0.95
#: Two indexes whose interval lies within 1 ± TIE are equally fast.
TIE = 0.02



def _min_rounds(confidence: float) -> int:
    n = 1
    while median_interval([1.0] * n, confidence) is None:
        n += 1
    return n


State = Literal["ordered", "tied", "open"]


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE
                    ) -> tuple[float, float] | None:
    """The distribution-free interval of the median of ``values``: the ``j``-th smallest and
    ``j``-th largest value, ``j`` the largest rank whose tail keeps the coverage at least
    ``confidence``; None when there are too few values for that coverage."""
    n = len(values)
    alpha = (1 - confidence) / 2
    j = 0
    while j < n // 2 and _binom_cdf(j, n) <= alpha:
        j += 1
    if j == 0:
        return None
    s = sorted(values)
    return s[j - 1], s[n - j]


@dataclass(frozen=True)
class PairVerdict:
    """How two neighbours of a ranking compare: ``faster`` above ``slower`` by the medians."""

    faster: str
    slower: str
    state: State
    low: float | None = None  # the interval of the per-round ratio slower/faster seconds
    high: float | None = None
    paired: bool = True  # False: one of them was timed alone (ranges compared)


def pair_verdict(faster: str, fast_seconds: Sequence[float], slower: str,
                 slow_seconds: Sequence[float], paired: bool = True, tie: float = TIE,
                 confidence: float = CONFIDENCE) -> PairVerdict:
    """Decide the order of two indexes from their seconds per call, one per repetition.
    ``paired``: repetition ``i`` of both ran in the same round."""
    if not paired or len(fast_seconds) != len(slow_seconds):
        if len(fast_seconds) < 2 or len(slow_seconds) < 2:
            return PairVerdict(faster, slower, "open", paired=False)
        ordered = max(fast_seconds) < min(slow_seconds)
        return PairVerdict(faster, slower, "ordered" if ordered else "open", paired=False)
    ratios = [b / a for a, b in zip(fast_seconds, slow_seconds, strict=True) if a > 0]
    ci = median_interval(ratios, confidence) if len(ratios) == len(fast_seconds) else None
    if ci is None:
        return PairVerdict(faster, slower, "open")
    lo, hi = ci
    if lo > 1:
        state: State = "ordered"
    elif 1 / (1 + tie) <= lo and hi <= 1 + tie:
        state = "tied"
    else:
        state = "open"
    return PairVerdict(faster, slower, state, lo, hi)


#: (name, seconds per repetition, the round of each repetition or None where the index was
#: timed alone, repetitions back to back)
Timed = tuple[str, Sequence[float], Sequence[int] | None]


def _common(a: Timed, b: Timed) -> tuple[list[float], list[float]]:
    """The two indexes' seconds in the rounds both took part in, in round order."""
    assert a[2] is not None and b[2] is not None
    sb = dict(zip(b[2], b[1], strict=True))
    both = [(r, x) for r, x in zip(a[2], a[1], strict=True) if r in sb]
    return [x for _, x in both], [sb[r] for r, _ in both]


def verdicts(timings: Sequence[Timed]) -> list[PairVerdict]:
    """Verdicts of each neighbouring pair of a ranking, ``timings`` fastest first by median:
    paired over the rounds both took part in, by ranges where one was timed alone."""
    out = []
    for a, b in itertools.pairwise(timings):
        if a[2] is None or b[2] is None:
            out.append(pair_verdict(a[0], a[1], b[0], b[1], paired=False))
        else:
            sa, sb = _common(a, b)
            out.append(pair_verdict(a[0], sa, b[0], sb))
    return out


def open_pairs(timings: Sequence[Timed]) -> list[PairVerdict]:
    """The neighbouring pairs whose order is not established yet."""
    return [v for v in verdicts(timings) if v.state == "open"]


#: The fewest rounds whose median interval reaches :data:`CONFIDENCE` (6 at 95%).
MIN_PAIRED_ROUNDS = _min_rounds(CONFIDENCE)
