"""The runner of ``indexzoo bench``: workload presets and sweeps, and :func:`run_bench`, which
builds, checks and times every index of every workload (interleaved rounds,
:func:`time_interleaved`; :func:`rank_rounds`) into :class:`~indexzoo.tools.records.Record`
objects. The table is :mod:`.benchtable`, the JSON :mod:`.benchjson`, the command line
:mod:`.bench`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO

import numpy as np

from indexzoo.devices import to_numpy
from indexzoo.display import byte_size, one_line, printable, shown
from indexzoo.errors import ConfigError, DeviceUnavailable
from indexzoo.registry import available, create
from indexzoo.resources import available_memory, estimate_workload
from indexzoo.results import Out

from . import interrupts
from .calls import (
    REWARM_BELOW_S,
    build_call,
    calls_per_repetition,
    lookup_call,
)
from .progress import NO_PROGRESS, Progress
from .ranking import PairVerdict, Timed, open_pairs
from .records import PEER, Entry, Record, rounds_text
from .references import GATHER, RAW, SCANS, lookups_per_call, reference_calls, scan_floor
from .timing import Timing, synchronize, time_call, time_once
from .workloads import Dataset, Workload, generate

__all__ = ["LATENCY_BATCHES", "MAX_ROUNDS", "PEER", "PRESETS", "SWEEPS", "Contender",
           "bench_entries", "keep_built", "rank_rounds", "run_bench", "sweep_workloads",
           "time_interleaved"]


# ---------------------------------------------------------------------- presets
_QUICK = Workload(name="quick", n_keys=1 << 20, n_lookups=1 << 20)
_PAPER = Workload(name="paper", n_keys=1 << 26, n_lookups=1 << 27)
_L2 = Workload(name="l2", n_keys=1 << 22, n_lookups=1 << 27)  # 2^22 x (8+4) B = 48 MB: fits L2

PRESETS: dict[str, Workload] = {
    "quick": _QUICK,
    "paper": _PAPER,
    "paper-u32": _PAPER.model_copy(update={"name": "paper-u32", "key_bits": 32}),
    "l2": _L2,
    # The lightweight paper's build size: 2^28 keys (its default, 32-bit), 2^27 lookups.
    "paper-28": _PAPER.model_copy(update={"name": "paper-28", "n_keys": 1 << 28}),
    "paper-28-u32": _PAPER.model_copy(update={"name": "paper-28-u32", "n_keys": 1 << 28,
                                              "key_bits": 32}),
    "latency": Workload(name="latency", n_keys=1 << 20, n_lookups=1 << 12),
    "tiny": Workload(name="tiny", n_keys=1 << 12, n_lookups=1 << 12, hit_rate=0.9),
    "quick-range": Workload(name="quick-range", n_keys=1 << 20, n_lookups=1 << 14, range_hits=64),
    "paper-range": Workload(name="paper-range", n_keys=1 << 26, n_lookups=1 << 16, range_hits=64),
    "paper-range-wide": Workload(name="paper-range-wide", n_keys=1 << 26, n_lookups=1 << 16,
                                 range_hits=1 << 14),
}

# Sweeps mirror the papers' figures: dimension -> (workload field, values).
SWEEPS: dict[str, tuple[str, list[Any]]] = {
    "keys": ("n_keys", [1 << k for k in range(15, 27)]),
    "lookups": ("n_lookups", [1 << k for k in range(13, 28, 2)]),
    "hit_rate": ("hit_rate", [1.0, 0.9, 0.75, 0.5, 0.25, 0.1, 0.0]),
    "multiplicity": ("multiplicity", [1 << k for k in range(0, 9)]),
    "zipf": ("lookup_zipf", [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]),
    # 2^0..2^14 batches: beyond, one Python call per batch dominates (the paper's Fig. 13
    # degrades from 2^16 batches for the same reason: launch overhead and under-utilisation).
    "batches": ("batches", [1 << k for k in range(0, 15, 2)]),
    "range_hits": ("range_hits", [1 << k for k in range(0, 11)]),
}

LATENCY_BATCHES = [1, 16, 256, 4096]


def sweep_workloads(base: Workload, dim: str, device: str) -> list[Workload]:
    """``base`` with ``dim`` set to each value of the sweep (sizes capped on the CPU)."""
    if dim not in SWEEPS:
        raise ConfigError(f"unknown sweep {shown(dim, 40)}; allowed: {', '.join(SWEEPS)}")
    fname, values = SWEEPS[dim]
    out = []
    for v in values:
        upd: dict[str, Any] = {fname: v, "name": f"{base.name}:{dim}={v}"}
        if dim == "multiplicity":
            upd["n_keys"] = max(v, base.n_keys // v * v)
        if dim == "batches" and v > base.n_lookups:
            continue
        if dim == "range_hits":
            upd["n_lookups"] = min(base.n_lookups, 1 << 16)
        if dim in ("lookups", "range_hits"):  # at most one batch a lookup (Workload's rule)
            upd["batches"] = min(base.batches, max(upd["n_lookups"], 1))
        if device == "cpu" and dim in ("keys", "lookups") and v > (1 << 22):
            continue
        out.append(base.model_copy(update=upd))
    return [Workload.model_validate(w.model_dump()) for w in out]


# ---------------------------------------------------------------------- running
def _count_signature(index: Any, data: Dataset) -> np.ndarray | None:
    """Per-lookup match counts (untimed), to compare answers with the peer."""
    if "count" not in index.capabilities.out_modes:
        return None
    parts = lookup_call(index, data, "count")()
    return np.concatenate([to_numpy(p.count).astype(np.int64) for p in parts]) if parts else \
        np.zeros(0, np.int64)


def _latency(index: Any, data: Dataset, device: str, repeats: int) -> dict[str, float]:
    """Wall time per call (µs, median) for small batches, Python and launch overhead included."""
    res: dict[str, float] = {}
    src = data.queries if data.queries is not None else data.lo
    for b in LATENCY_BATCHES:
        if b > src.shape[0]:
            break
        args = (data.queries[:b],) if data.queries is not None else (data.lo[:b], data.hi[:b])
        fn = index.point if data.queries is not None else index.range

        def call(fn: Any = fn, args: tuple[Any, ...] = args) -> None:
            fn(*args)
            synchronize(device)

        times = []
        call()
        for _ in range(max(repeats, 20)):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        res[str(b)] = float(np.median(times) * 1e6)
    return res




@dataclass
class Contender:
    """One built index waiting for (or done with) its timed lookups."""

    entry: Entry
    index: Any
    run: Any  # the timed call (None once released)
    build: Timing
    params: dict[str, Any] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)  # per call, one per repetition
    rounds: list[int] = field(default_factory=list)  # the interleaved round of each repetition
    order: str = "interleaved"
    calls: int = 1  # calls per repetition

    def calibrate(self, device: str) -> None:
        """Warm up (compile, fill caches) and pick the calls per repetition."""
        self.run()
        synchronize(device)
        t = time_once(self.run, device)
        self.calls = calls_per_repetition(t)

    def repetition(self, device: str) -> float:
        """Seconds per call of one timed repetition."""
        if self.calls == 1:
            return time_once(self.run, device)
        run, calls = self.run, self.calls
        return time_once(lambda: [run() for _ in range(calls)], device) / calls

    @property
    def name(self) -> str:
        return self.entry.title


def time_interleaved(contenders: Sequence[Contender], device: str, repeats: int,
                     log: TextIO | None = None, first_round: int = 0) -> None:
    """Time every contender ``repeats`` times, in rounds: each round times each contender once,
    starting one further along the list than the round before. A machine that gets slower
    for a while (another process, a clock change) then slows every contender alike, instead
    of all repetitions of the one that happened to run then; the spreads show it. Contenders
    must be warmed up (compiled) already; a contender whose calls take under
    :data:`REWARM_BELOW_S` gets one untimed call before each timed one (always in round 1).
    ``first_round``: rounds already timed (their rotation continues)."""
    live = [c for c in contenders if c.order == "interleaved"]
    for r in range(first_round, first_round + repeats):
        k = r % len(live) if live else 0
        for c in live[k:] + live[:k]:
            interrupts.check()
            if not c.seconds or c.seconds[-1] * c.calls < REWARM_BELOW_S:
                c.run()
                synchronize(device)
            c.seconds.append(c.repetition(device))
            c.rounds.append(r)
        if log is not None and live:
            log.write(f"    round {r + 1}/{first_round + repeats} timed\n")


#: The most timing rounds of one workload, however undecided its ranking.
MAX_ROUNDS = 60


def _timings(contenders: Sequence[Contender]) -> list[Timed]:
    """What the ranking compares of each timed contender, fastest first by median."""
    timed = [c for c in contenders if c.seconds]
    timed.sort(key=lambda c: Timing(tuple(c.seconds)).median)
    return [(c.name, c.seconds, c.rounds if c.order == "interleaved" else None) for c in timed]


def _pairs_text(pairs: Sequence[PairVerdict]) -> str:
    return ", ".join(f"{printable(p.faster)} / {printable(p.slower)}" for p in pairs)


def rank_rounds(contenders: Sequence[Contender], refs: Sequence[Contender], device: str,
                repeats: int, budget_s: float, log: TextIO | None = None,
                max_rounds: int = MAX_ROUNDS) -> str:
    """Time ``repeats`` interleaved rounds of ``contenders`` and the references; then, while
    the ranking of the contenders is not established (:func:`indexzoo.tools.ranking.open_pairs`),
    time more rounds of just the contenders of the open pairs, as long as one more round
    still fits in ``budget_s`` seconds (beyond the first rounds) and fewer than
    ``max_rounds`` rounds have run. Returns how it ended: ``"established"``, ``"budget"``,
    ``"rounds"``, or ``"fixed"`` where ``budget_s`` is 0 (exactly ``repeats`` rounds)."""
    many = sum(c.order == "interleaved" for c in contenders) > 1
    time_interleaved([*refs, *contenders], device, repeats, log if many else None)
    if budget_s <= 0:
        return "fixed"
    by_name = {c.name: c for c in contenders}
    rounds, spent, last = repeats, 0.0, 0.0
    while True:
        pending = open_pairs(_timings(contenders))
        if not pending:
            state = "established"
        elif rounds >= max_rounds:
            state = "rounds"
        elif spent + last > budget_s:
            state = "budget"
        else:
            names = dict.fromkeys(n for p in pending for n in (p.faster, p.slower))
            extra = [by_name[n] for n in names if by_name[n].order == "interleaved"]
            if not extra:  # only pairs with an index timed alone: more rounds cannot help
                state = "alone"
                break
            t0 = time.perf_counter()
            time_interleaved(extra, device, 1, None, first_round=rounds)
            last = time.perf_counter() - t0
            spent += last
            rounds += 1
            continue
        break
    if log is not None and many:
        if state == "established":
            log.write(f"    ranking established after {rounds_text(rounds)}\n")
        else:
            why = {"budget": f"the ranking budget of {budget_s:g} s reached",
                   "rounds": f"the most rounds ({max_rounds}) reached",
                   "alone": "the open pairs have an index timed alone"}[state]
            log.write(f"    ranking not established after {rounds_text(rounds)} ({why}): "
                      f"open {_pairs_text(pending)}\n")
    return state


def keep_built(reserve: int, device: str) -> bool:
    """Whether one more built index may stay alive for interleaved timing: the memory still
    available must cover the workload's own estimate (the memory check's figure) again."""
    avail = available_memory(device)
    return avail is None or avail[0] >= reserve


def bench_entries(indexes: Sequence[str | Entry]) -> list[Entry]:
    """The configurations :func:`run_bench` runs: ``indexes`` with the peer added where it is
    registered and missing, the peer first."""
    entries = [e if isinstance(e, Entry) else Entry(e) for e in indexes]
    if PEER in available() and not any(e.name == PEER and not e.params for e in entries):
        entries.insert(0, Entry(PEER))
    entries.sort(key=lambda e: e.name != PEER or bool(e.params))
    return entries


def run_bench(workloads: Sequence[Workload], indexes: Sequence[str | Entry], device: str,
              repeats: int = 5, out: Out | None = None, latency: bool = False,
              progress: TextIO | None = None, sweep: str | None = None,
              interleave: bool = True, rank_budget: float = 0.0,
              on_workload_done: Callable[[list[Record]], None] | None = None,
              steps: Progress = NO_PROGRESS) -> list[Record]:
    """Run every index configuration on every workload; the peer runs first on each.

    Per workload, every index is built (``repeats`` timed builds), warmed up and checked
    against the peer; then the lookups of all of them are timed in ``repeats`` interleaved
    rounds (:func:`time_interleaved`). An index that would leave less memory than the
    workload's estimate is timed right after its build (``timing: sequential``) and released;
    ``interleave=False`` does that for every index. ``rank_budget`` > 0: rounds go on, up to
    that many seconds per workload, until the ranking is established (:func:`rank_rounds`).
    ``on_workload_done`` gets the records of every workload finished so far, after each
    workload. Report lines go to ``progress`` (default standard error); each step shows its
    progress on ``steps``."""
    log = steps.beside(progress or sys.stderr)
    entries = bench_entries(indexes)
    records: list[Record] = []
    for wi, w in enumerate(workloads, 1):
        interrupts.check()
        where = f"bench {printable(w.name)}" + (f", workload {wi}/{len(workloads)}"
                                                 if len(workloads) > 1 else "")
        with steps.step(f"{where}, generating the data", keep=False):
            gen = time_call(partial(generate, w, device), device, repeats=1, warmup=1)
            data = generate(w, device)
        log.write(f"[{wi}/{len(workloads)}] {w.describe()}: data generated in "
                  f"{gen.median * 1e3:.1f} ms\n")
        mode: Out = out or ("rowid" if data.queries is not None else "count")
        reserve = estimate_workload(w, mode).total
        done: list[tuple[Contender, Any, np.ndarray | None, dict[str, float]]] = []
        for k, entry in enumerate(entries, 1):
            interrupts.check()
            name = printable(entry.title)
            with steps.step(f"{where}, index {k}/{len(entries)} {name}", keep=False) as st:
                index = create(entry.name, device=device, **entry.params)
                if data.queries is None and not index.capabilities.range:
                    log.write(f"    {name:<16} skipped: no range lookups\n")
                    continue
                if mode not in index.capabilities.out_modes:
                    log.write(f"    {name:<16} skipped: no out={mode!r}\n")
                    continue
                try:
                    build = time_call(st.calls(build_call(index, data.keys), repeats, "building"),
                                      device, repeats=repeats)
                except DeviceUnavailable as exc:  # e.g. engine="optix" where OptiX cannot run
                    log.write(f"    {name:<16} skipped: {one_line(str(exc))}\n")
                    continue
                fp = index.memory_footprint()
                st.update("checking the answers")
                sig = _count_signature(index, data)
                c = Contender(entry, index, lookup_call(index, data, mode), build,
                              index.params.model_dump())
                st.update("warming up the lookups")
                c.calibrate(device)
                st.update("timing single calls")
                lat = _latency(index, data, device, repeats) if latency else {}
                if not (interleave and keep_built(reserve, device)):
                    st.update(f"timing {repeats} repetitions")
                    c.order = "sequential"
                    c.seconds = [c.repetition(device) for _ in range(repeats)]
                    c.index = c.run = None  # release the index: only its figures are kept
            log.write(f"    {name:<16} built in {build.median * 1e3:8.2f} ms, resident "
                      f"{byte_size(fp.resident_bytes)}"
                      + (", timed at once (memory)" if c.order == "sequential" and interleave
                         else "") + "\n")
            done.append((c, fp, sig, lat))
            del index
        more = "+" if rank_budget > 0 and interleave else ""  # rounds go on until ranked
        with steps.step(f"{where}, timing {len(done)} index(es), {repeats}{more} round(s)",
                        keep=False):
            refs = [Contender(Entry(label), None, fn, Timing((0.0,)))
                    for label, fn in reference_calls(data, device).items()]
            for c in refs:
                c.calibrate(device)
            ranking = rank_rounds([d[0] for d in done], refs, device, repeats,
                                  rank_budget if interleave else 0.0, log)
        medians = {c.name: Timing(tuple(c.seconds)).median for c in refs if c.seconds}
        ref_tp = {k: lookups_per_call(k, data) / m for k, m in medians.items() if m > 0}
        scan_name, scan_tp = scan_floor(ref_tp)
        del refs
        if ref_tp:
            log.write("    references: " + ", ".join(
                f"{k} {1e3 / v:.3f} ms a read" if k in SCANS else f"{k} {v / 1e6:.1f} M lookups/s"
                for k, v in ref_tp.items()) + "\n")
        peer_tp: float | None = None
        peer_sig: np.ndarray | None = None
        for c, _fp, sig, _lat in done:
            if c.entry.name == PEER and not c.entry.params:
                t = Timing(tuple(c.seconds))
                peer_tp = data.n_lookups / t.median if t.median > 0 else float("inf")
                peer_sig = sig
        for c, fp, sig, lat in done:
            t = Timing(tuple(c.seconds))
            tp = data.n_lookups / t.median if t.median > 0 else float("inf")
            agrees = None if sig is None or peer_sig is None else bool(np.array_equal(sig, peer_sig))
            rec = Record(
                index=c.name, workload=w.name, device=device, n_keys=w.n_keys,
                n_lookups=data.n_lookups, out=mode, lookup_s=t.median,
                lookup_spread=t.spread, throughput=tp, build_s=c.build.median,
                resident_bytes=fp.resident_bytes, peak_build_bytes=fp.peak_build_bytes,
                ratio_to_peer=(tp / peer_tp) if peer_tp else None, agrees_with_peer=agrees,
                sweep=sweep, sweep_value=getattr(w, SWEEPS[sweep][0]) if sweep else None,
                params=c.params, workload_spec=w.model_dump(),
                generate_s=gen.median, index_name=c.entry.name, param=c.entry.param,
                param_value=c.entry.value, latency_us=lat,
                lookup_seconds=list(c.seconds), build_seconds=list(c.build.seconds),
                lookup_rounds=list(c.rounds) if c.order == "interleaved" else [],
                timing=c.order, raw_searchsorted=ref_tp.get(RAW),
                random_gather=ref_tp.get(GATHER), scan_floor=scan_tp,
                scan_floor_reference=scan_name,
                scan_references={k: v for k, v in ref_tp.items() if k in SCANS},
                ranking=ranking,
            )
            records.append(rec)
            if agrees is False:  # the figures themselves are the table's, ranked, at the end
                log.write(f"    {printable(c.name):<16} MISMATCH with the peer\n")
        del done
        if on_workload_done is not None:
            on_workload_done(list(records))
    return records


