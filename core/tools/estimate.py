"""How long ``indexzoo bench`` will take, estimated before it starts.

The estimate is calibrated on this machine, on this device, right before the run: each index
is built and queried once on a *sample* of each workload (the same workload with at most
:data:`SAMPLE` keys and lookups, the same share of lookups per batch), after one untimed
build and lookup that compile its kernels (the run then finds them compiled). Each sample time
is scaled to the workload's size:

* a build: by ``r * log2(n) / log2(n_sample) * (1 + log2(r) * MEMORY_GROWTH)``, with
  ``r = n / n_sample`` keys: an ``n log n`` sort, slowed down further as the data outgrows
  the caches (:data:`MEMORY_GROWTH` per doubling, from measurements on a CPU; a GPU sample
  mostly measures launch overhead, so there the estimate is likely high, and unchecked);
* a pass of lookups: linearly in the number of lookups, times the same key factor without
  the ``r``: a lookup's cost grows with the depth of the structure and the cache misses;
* generating the data: like a build of keys and lookups together.

These scaled times are then counted as often as ``bench`` runs them: three data generations
per workload (a warm-up, the timed one, the one kept), per index one warm-up build and
``repeats`` timed ones, an untimed pass for the answer check, two calibration passes and
``repeats`` timed repetitions (each with its re-warming call where a call is short, and as many
calls as fill :data:`~indexzoo.tools.calls.MIN_REPETITION_S`), and the two references alike.

It is a rough figure: for the ``quick`` preset on a shared 2-core CPU it gave 0.9 and 1.25
times the time the run then took; far beyond the sample (``paper`` on a CPU) it gives the
order of magnitude, unchecked against a whole run.
A run of workloads no larger than the sample gets no estimate (it is over in moments once
compiled).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

from indexzoo.display import printable
from indexzoo.errors import ConfigError, DeviceUnavailable
from indexzoo.registry import create
from indexzoo.results import Out

from . import interrupts
from .calls import REWARM_BELOW_S, build_call, calls_per_repetition, lookup_call
from .progress import NO_PROGRESS, Progress, duration
from .references import reference_calls
from .timing import synchronize, time_once
from .workloads import Dataset, Workload, generate

__all__ = ["BENCH_ADVICE", "CPU_TIME_BUDGET", "MEMORY_GROWTH", "SAMPLE", "DurationEstimate",
           "check_budget", "estimate_bench", "parse_duration", "sample_workload", "time_budget",
           "within_budget"]

#: Keys and lookups of the sample an estimate is calibrated on.
SAMPLE = 1 << 16
#: Extra cost per doubling of the keys beyond the sample (see the module docstring).
MEMORY_GROWTH = 0.125


@dataclass
class DurationEstimate:
    """Seconds a bench run should take, by index (references included) and for generating
    the data; ``complete`` is False where the estimate stopped early, past a limit, so that
    it is a lower bound."""

    by_index: dict[str, float] = field(default_factory=dict)
    generation: float = 0.0
    complete: bool = True
    ranking: float = 0.0  # the most that rounds beyond --repeats may add (--rank-budget)

    @property
    def seconds(self) -> float:
        return sum(self.by_index.values()) + self.generation + self.ranking

    def add(self, name: str, seconds: float) -> None:
        self.by_index[name] = self.by_index.get(name, 0.0) + seconds

    def describe(self) -> str:
        """``about 4 min 10 s (rx 1 min 30 s, btree 40 s, ...; data generation 12 s)``, or
        ``at least 2 h 10 min (...)`` for an estimate that stopped early."""
        top = sorted(((k, v) for k, v in self.by_index.items() if v > 0), key=lambda kv: -kv[1])
        shown = top if len(top) <= 4 else top[:3]
        parts = [f"{printable(name)} {duration(s)}" for name, s in shown]
        if len(top) > len(shown):
            parts.append(f"{len(top) - 3} more {duration(sum(s for _, s in top[3:]))}")
        parts_text = ", ".join(parts) + "; " if parts else ""
        ranking = (f"; at most {duration(self.ranking)} of rounds to establish the ranking"
                   if self.ranking > 0 else "")
        return (f"{'about' if self.complete else 'at least'} {duration(self.seconds)} "
                f"({parts_text}data generation {duration(self.generation)}{ranking}"
                + ("" if self.complete else "; the estimate stopped there") + ")")


def sample_workload(w: Workload, size: int = SAMPLE) -> Workload:
    """``w`` with at most ``size`` keys and lookups (whole copies of a key, enough distinct
    keys for its ranges) and the same number of lookups per batch."""
    m = w.multiplicity
    n = min(w.n_keys, max(size // m, (w.range_hits or 1)) * m)
    q = min(w.n_lookups, size)
    batches = max(1, min(q, round(w.batches * q / w.n_lookups))) if w.n_lookups else 1
    return Workload.model_validate({**w.model_dump(), "n_keys": n, "n_lookups": q,
                                    "batches": batches})


def _key_factor(n: int, n_sample: int) -> float:
    """How much slower one operation gets from ``n_sample`` to ``n`` keys: the structure's
    depth and the data outgrowing the caches (1 at or below the sample's size)."""
    if n <= n_sample or n_sample < 2:
        return 1.0
    depth = math.log2(n) / math.log2(n_sample)
    return depth * (1 + math.log2(n / n_sample) * MEMORY_GROWTH)


def _repetitions(t: float, repeats: int) -> float:
    """Seconds that calibrating and timing ``repeats`` repetitions of a call of ``t`` seconds
    take in ``bench`` (see :class:`~indexzoo.tools.bench.Contender`)."""
    calls = calls_per_repetition(t)
    rewarm = t if calls * t < REWARM_BELOW_S else 0.0
    return 2 * t + repeats * (calls * t + rewarm)


def _timed(fn: Callable[[], Any], device: str) -> float:
    """Seconds of one call of ``fn`` after an untimed one (which compiles)."""
    fn()
    synchronize(device)
    interrupts.check()
    return time_once(fn, device)


@dataclass(frozen=True)
class _Scale:
    """Factors from a sample to its workload."""

    keys: float  # a build
    lookups: float  # a pass of lookups
    data: float  # generating the data

    @staticmethod
    def of(w: Workload, s: Workload) -> _Scale:
        depth = _key_factor(w.n_keys, s.n_keys)
        items = (w.n_keys + w.n_lookups) / max(s.n_keys + s.n_lookups, 1)
        return _Scale(keys=w.n_keys / max(s.n_keys, 1) * depth,
                      lookups=w.n_lookups / max(s.n_lookups, 1) * depth,
                      data=items * _key_factor(max(w.n_keys, w.n_lookups),
                                               max(s.n_keys, s.n_lookups)))


def _sample_seconds(name: str, params: dict[str, Any], data: Dataset, device: str,
                    mode: Out) -> tuple[float, float, float] | None:
    """One index on the sample ``data``, built once: seconds of a build, a pass of ``mode``
    lookups and a pass of the answer check; None where ``bench`` skips it (no range lookups,
    no such out mode, its device unusable)."""
    index = create(name, device=device, **params)
    caps = index.capabilities
    if (data.queries is None and not caps.range) or mode not in caps.out_modes:
        return None
    try:
        build = _timed(build_call(index, data.keys), device)
    except DeviceUnavailable:
        return None
    lookups = _timed(lookup_call(index, data, mode), device)
    check = _timed(lookup_call(index, data, "count"), device) \
        if "count" in caps.out_modes else 0.0
    return build, lookups, check


def _index_seconds(sample: tuple[float, float, float], repeats: int, scale: _Scale) -> float:
    """Seconds ``bench`` will spend on one index for a workload, from its sample's seconds."""
    build, lookups, check = sample
    return ((1 + repeats) * build * scale.keys + check * scale.lookups
            + _repetitions(lookups * scale.lookups, repeats))


def _references_seconds(data: Dataset, device: str, repeats: int, scale: _Scale) -> float:
    return sum(_repetitions(_timed(fn, device) * scale.lookups, repeats)
               for fn in reference_calls(data, device).values())


def estimate_bench(workloads: Sequence[Workload], entries: Sequence[Any], device: str,
                   repeats: int, out: Out | None = None, steps: Progress = NO_PROGRESS,
                   limit: float | None = None, rank_budget: float = 0.0
                   ) -> DurationEstimate | None:
    """The estimate (see the module docstring) for ``bench`` running ``entries`` (its
    :class:`~indexzoo.tools.records.Entry` list, the peer included) on ``workloads``; None
    where every workload is within the sample's size. Once the estimate passes ``limit``
    seconds it stops there, incomplete: the run is known to be too long. ``rank_budget``:
    seconds of extra timing rounds each workload may take (counted in full)."""
    if all(w.n_keys <= SAMPLE and w.n_lookups <= SAMPLE for w in workloads):
        return None
    est = DurationEstimate(ranking=rank_budget * len(workloads))
    measured: dict[str, tuple[Dataset, float]] = {}
    # per sample, entry and mode: each index is built on a sample once, however many
    # workloads share that sample (a sweep's large workloads all do)
    samples: dict[tuple[str, str, str], tuple[float, float, float] | None] = {}
    several = len(workloads) > 1
    with steps.step("estimating the duration") as st:
        for wi, w in enumerate(workloads, 1):
            where = f"workload {wi}/{len(workloads)}, " if several else ""
            s = sample_workload(w)
            key = s.model_copy(update={"name": ""}).model_dump_json()
            if key not in measured:
                st.update(f"{where}generating a sample")
                gen = _timed(partial(generate, s, device), device)
                measured[key] = (generate(s, device), gen)
            data, gen = measured[key]
            scale = _Scale.of(w, s)
            est.generation += 3 * gen * scale.data
            mode: Out = out or ("rowid" if data.queries is not None else "count")
            for k, e in enumerate(entries, 1):
                st.update(f"{where}index {k}/{len(entries)} {printable(e.title)}")
                at = (key, e.title, mode)
                if at not in samples:
                    samples[at] = _sample_seconds(e.name, e.params, data, device, mode)
                got = samples[at]
                if got is not None:
                    est.add(e.title, _index_seconds(got, repeats, scale))
                if limit is not None and est.seconds > limit:
                    est.complete = False
                    return est
            est.add("references", _references_seconds(data, device, repeats, scale))
    return est


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|min|h)?", re.IGNORECASE)


def parse_duration(text: str) -> float | None:
    """Seconds of ``90``, ``90s``, ``10m``, ``10min``, ``1.5h``; None for ``none`` (no limit).
    ConfigError for anything else."""
    word = text.strip().lower()
    if word in ("none", "off", "0"):
        return None
    m = _DURATION.fullmatch(word)
    if not m:
        raise ConfigError(f"--time-budget {text!r} is not a duration; give e.g. 600, 90s, 10m "
                          "or 2h, or none for no limit")
    return float(m.group(1)) * _UNITS[(m.group(2) or "").lower()]


#: The default --time-budget on the CPU, in seconds (none on a GPU).
CPU_TIME_BUDGET = 600.0
#: What a refused ``bench`` run can change.
BENCH_ADVICE = "a smaller workload, fewer indexes (--indexes) or fewer --repeats"


def time_budget(text: str | None, device: str) -> float | None:
    """Seconds of ``--time-budget`` (None: no limit); not given, :data:`CPU_TIME_BUDGET` on
    the CPU and no limit on a GPU."""
    if text is not None:
        return parse_duration(text)
    return CPU_TIME_BUDGET if device == "cpu" else None


def check_budget(est: DurationEstimate, budget: float | None, device: str,
                 advice: str = BENCH_ADVICE) -> None:
    """ConfigError, in one line, where the estimate exceeds the time budget; ``advice`` says
    what to pick instead."""
    if budget is None or est.seconds <= budget:
        return
    raise ConfigError(f"this benchmark would take {est.describe()} on {device}, more than "
                      f"--time-budget {duration(budget)}; pass --yes to run it anyway, or pick "
                      f"{advice}")


def within_budget(estimate: Callable[[float | None], DurationEstimate | None],
                  budget: float | None, yes: bool, device: str, calibrated: str,
                  advice: str = BENCH_ADVICE, log: TextIO | None = None) -> None:
    """What ``bench`` does before it runs: ``estimate(limit)`` (the limit is the budget, none
    with ``yes``: an estimate may stop there, a lower bound); a run estimated past the budget
    is refused (ConfigError, :func:`check_budget`) unless ``yes``; any other states its
    estimate on ``log`` (standard error), ``estimated duration: about ..., calibrated on
    {calibrated}``. No estimate (a run within the sample's size): nothing."""
    est = estimate(None if yes else budget)
    if est is None:
        return
    if not yes:
        check_budget(est, budget, device, advice)
    (log or sys.stderr).write(f"estimated duration: {est.describe()}, calibrated on "
                              f"{calibrated}\n")
