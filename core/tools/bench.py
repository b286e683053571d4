"""``indexzoo bench``: run workloads over chosen indexes on one device; print a table, write
JSON and plots (:mod:`indexzoo.tools.plots`).

Every figure comes with its ratio to the ``searchsorted`` peer measured in the same run, on
the same data. Data generation and the build are timed apart from the lookups; lookups are
timed after a warm-up, ``repeats`` times, in interleaved rounds over all indexes of a workload
(:func:`time_interleaved`; CUDA events on the GPU, ``perf_counter`` on the CPU). The table
ranks the indexes by the median, states each spread as ``±x%`` (half the range of the
repetitions, relative to the median) and warns, under the table, about indexes whose
ranges overlap (their order is not reliable); the JSON keeps every repetition. Each index
also answers the workload with ``out="count"`` (untimed), compared with the peer's answers:
a row marked ``NO`` in ``agrees`` means an index answered wrongly.

The JSON exists from the end of the first workload on and is rewritten whole after each
workload (:class:`ResultsFile`), so a run that fails or is interrupted late keeps the
workloads it finished; the PNGs are written at the end. ``--compare OLD.json`` compares the
run with a saved one (:mod:`indexzoo.tools.compare`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np

from indexzoo.config import check_writable_folder
from indexzoo.devices import resolve_device, to_numpy
from indexzoo.display import byte_size, one_line, printable, shown, shown_path
from indexzoo.envvars import RANK_BUDGET
from indexzoo.errors import ConfigError, DeviceUnavailable, MissingDependency
from indexzoo.registry import available, create, named
from indexzoo.resources import available_memory, check_fits, estimate_workload
from indexzoo.results import Out

from . import interrupts
from .calls import (
    REWARM_BELOW_S,
    build_call,
    calls_per_repetition,
    lookup_call,
)
from .compare import FORMAT_VERSION, SavedRun, compare, format_report, load_saved, regressions
from .environment import environment
from .estimate import SAMPLE, check_budget, estimate_bench, parse_duration
from .options import load_workload, option_value, parse_assignment
from .plots import PlotInfo, plot_files
from .progress import NO_PROGRESS, Progress
from .publish import Member, numbered, publish, rewrite
from .ranking import CONFIDENCE, MIN_PAIRED_ROUNDS, TIE, PairVerdict, Timed, open_pairs, verdicts
from .records import Entry, Record
from .references import GATHER, RAW, SCAN, lookups_per_call, reference_calls
from .timing import Timing, synchronize, time_call, time_once
from .workloads import Dataset, Workload, generate

__all__ = ["PEER", "PRESETS", "SWEEPS", "Entry", "Record", "add_cli", "environment",
           "format_latency", "format_references", "format_table", "format_warnings",
           "overlap_groups", "run_bench", "time_interleaved"]

PEER = "searchsorted"

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
            log.write(f"    ranking established after {_rounds_text(rounds)}\n")
        else:
            why = {"budget": f"the ranking budget of {budget_s:g} s reached",
                   "rounds": f"the most rounds ({max_rounds}) reached",
                   "alone": "the open pairs have an index timed alone"}[state]
            log.write(f"    ranking not established after {_rounds_text(rounds)} ({why}): "
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
        del refs
        if ref_tp:
            log.write("    references: " + ", ".join(f"{k} {v / 1e6:.1f} M lookups/s"
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
                random_gather=ref_tp.get(GATHER), scan_floor=ref_tp.get(SCAN),
                ranking=ranking,
            )
            records.append(rec)
            flag = "" if agrees in (True, None) else "  MISMATCH with the peer"
            log.write(f"    {printable(c.name):<16} {tp / 1e6:10.1f} M lookups/s {t.spread_text()}{flag}\n")
        del done
        if on_workload_done is not None:
            on_workload_done(list(records))
    return records


# ---------------------------------------------------------------------- output
def _ranked(records: Sequence[Record]) -> list[Record]:
    """Records grouped by workload (in run order), fastest first within each."""
    order = {w: i for i, w in enumerate(dict.fromkeys(r.workload for r in records))}
    return sorted(records, key=lambda r: (order[r.workload], -r.throughput))


def format_table(records: Sequence[Record]) -> str:
    """A plain-text table, one row per (workload, index), fastest first per workload; the
    spread of each throughput next to it, memory in the unit that fits. Records with
    latency figures (``--latency``, the latency preset) get a second table of their own
    (:func:`format_latency`) under it."""
    head = ["workload", "index", "M lookups/s", "spread", f"x {PEER}", "x raw", "x gather",
            "x scan", "build ms", "resident", "peak", "lookups/s/B", "agrees"]
    rows = []

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    for r in _ranked(records):
        rows.append([
            printable(r.workload), printable(r.index), f"{r.throughput / 1e6:.1f}",
            r.lookup_timing.spread_text() or "-",
            ratio(r.ratio_to_peer), ratio(r.ratio_to_raw), ratio(r.ratio_to_gather),
            "-" if r.ratio_to_scan is None else f"{r.ratio_to_scan:.3g}",
            f"{r.build_s * 1e3:.2f}", byte_size(r.resident_bytes),
            byte_size(r.peak_build_bytes), f"{r.throughput_per_byte:.3g}",
            {True: "yes", False: "NO", None: "-"}[r.agrees_with_peer],
        ])
    table = _plain_table(head, rows, right=set(range(2, 12)))
    latency = format_latency(records)
    return f"{table}\n\n{latency}" if latency else table


def _plain_table(head: list[str], rows: list[list[str]], right: set[int]) -> str:
    """``head`` and ``rows`` as aligned columns under a rule; columns in ``right`` are
    right-aligned, trailing blanks dropped."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]

    def cell(text: str, i: int) -> str:
        return text.rjust(widths[i]) if i in right else text.ljust(widths[i])

    lines = ["  ".join(cell(h, i) for i, h in enumerate(head)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(cell(c, i) for i, c in enumerate(row)).rstrip() for row in rows]
    return "\n".join(lines)


def _us(v: float) -> str:
    """Microseconds per call: whole numbers from 10 on, one decimal below."""
    return f"{v:.0f}" if v >= 9.95 else f"{v:.1f}"


def format_latency(records: Sequence[Record]) -> str:
    """The small-batch latencies of the records that have them, as a table of their own:
    one row per (workload, index) as ranked in the main table, one column per batch size
    (lookups per call), wall time per call in µs (median); "" when no record has them."""
    timed = [r for r in _ranked(records) if r.latency_us]
    if not timed:
        return ""
    sizes = list(dict.fromkeys(k for r in timed for k in r.latency_us))
    rows = [[printable(r.workload), printable(r.index),
             *(_us(r.latency_us[k]) if k in r.latency_us else "-" for k in sizes)]
            for r in timed]
    title = "latency: wall time per call (us, median), by lookups per call"
    return title + "\n" + _plain_table(["workload", "index", *sizes], rows,
                                        right=set(range(2, 2 + len(sizes))))


def overlap_groups(records: Sequence[Record]) -> list[list[Record]]:
    """Records of one workload whose throughput ranges (slowest to fastest repetition)
    overlap, chained: in a group, each record's range meets the range of another member, so
    the group's order in a ranked table may change from run to run. Groups of two or more,
    fastest first; records of a single repetition state no range and are left out."""
    groups: list[list[Record]] = []
    for w in dict.fromkeys(r.workload for r in records):
        rows = sorted((r for r in records if r.workload == w and len(r.lookup_seconds) > 1),
                      key=lambda r: -r.throughput_range[1])
        current: list[Record] = []
        low = float("inf")
        for r in rows:
            lo, hi = r.throughput_range
            if current and hi >= low:
                current.append(r)
                low = min(low, lo)
                continue
            if len(current) > 1:
                groups.append(sorted(current, key=lambda r: -r.throughput))
            current, low = [r], lo
        if len(current) > 1:
            groups.append(sorted(current, key=lambda r: -r.throughput))
    return groups


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _m(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:.1f}"


_ENDED = {"budget": "the ranking budget was spent", "rounds": "the most rounds were run",
          "fixed": "no rounds beyond --repeats were asked for",
          "alone": "an index timed alone, for memory, cannot be compared round by round"}


def _chains(pairs: Sequence[PairVerdict]) -> list[list[str]]:
    """Neighbouring open pairs joined into chains of names: a/b and b/c give [a, b, c]."""
    chains: list[list[str]] = []
    for p in pairs:
        if chains and chains[-1][-1] == p.faster:
            chains[-1].append(p.slower)
        else:
            chains.append([p.faster, p.slower])
    return chains


def _rounds_text(n: int) -> str:
    return f"{n} round" + ("" if n == 1 else "s")


def _rounds_of(r: Record) -> list[int] | None:
    """The record's rounds; records written before rounds were kept number theirs in order."""
    if r.timing != "interleaved":
        return None
    return r.lookup_rounds or list(range(len(r.lookup_seconds)))


def ranking_lines(records: Sequence[Record]) -> list[str]:
    """Per workload: whether the table's order is established (every neighbouring pair
    ordered or tied, :mod:`indexzoo.tools.ranking`) and, where not, which indexes may swap."""
    lines = []
    several = len({r.workload for r in records}) > 1
    for w in dict.fromkeys(r.workload for r in records):
        rows = [r for r in _ranked(records) if r.workload == w and r.lookup_seconds]
        if len(rows) < 2:
            continue
        where = f" ({w})" if several else ""
        rounds = max(len(r.lookup_seconds) for r in rows)
        found = verdicts([(r.index, r.lookup_seconds, _rounds_of(r)) for r in rows])
        pending = [v for v in found if v.state == "open"]
        tied = [v for v in found if v.state == "tied"]
        ties = ("; " + "; ".join(f"{v.faster} and {v.slower} tied within {TIE:.0%}"
                                 for v in tied)) if tied else ""
        if not pending:
            lines.append(f"ranking{where}: established after {_rounds_text(rounds)} (each neighbour "
                         f"ordered at {CONFIDENCE:.0%} confidence{ties})")
            continue
        ended = _ENDED.get(rows[0].ranking or "", "")
        few = (f", and a paired comparison needs at least {MIN_PAIRED_ROUNDS}"
               if rounds < MIN_PAIRED_ROUNDS else "")
        sets = "; of ".join(_and(c) for c in _chains(pending))
        lines.append(f"warning{where}: the order of {sets} is not established after "
                     f"{_rounds_text(rounds)} ({ended or 'as run'}{few}); it may change from run "
                     "to run")
    return lines


def format_warnings(records: Sequence[Record]) -> list[str]:
    """Lines for under the table: whether the ranking is established (:func:`ranking_lines`),
    the hardware references (:func:`format_references`), and a note when the figures come
    from one repetition each."""
    lines = ranking_lines(records)
    lines += format_references(records)
    if records and max(len(r.lookup_seconds) for r in records) < 2:
        lines.append("note: one timed repetition per figure, so no spread is stated and the "
                     "order of close figures is unverified (use --repeats 5)")
    return [printable(line) for line in lines]


def format_references(records: Sequence[Record]) -> list[str]:
    """Lines on the hardware references of the run's point workloads: what ``x raw`` and
    ``x gather`` compare with, said once, then one short line of figures per workload (the
    workload named when the run has several, as a sweep has)."""
    figures = []
    points = scans = False
    for w in dict.fromkeys(r.workload for r in records):
        r = next(r for r in records if r.workload == w)
        if r.raw_searchsorted or r.random_gather:
            points = True
            figures.append((w, f"raw {_m(r.raw_searchsorted)}, gather {_m(r.random_gather)} "
                               "M lookups/s"))
        if r.scan_floor:
            scans = True
            figures.append((w, f"scan floor {1e3 / r.scan_floor:.3f} ms a read of the keys"))
    if not figures:
        return []
    several = len({r.workload for r in records}) > 1
    lines = ["references, same run:"]
    if points:
        lines[0] += " x raw against the array library's own searchsorted (positions only),"
        lines.append("  x gather against one random read per lookup (the floor for one "
                     "random access)")
    if scans:
        lines.append("  x scan: range lookups answered in the time of one plain read of the "
                     "keys (a scan's floor for one lookup)")
    return [*lines, *(f"  {w}: {text}" if several else f"  {text}" for w, text in figures)]


def write_json(records: Sequence[Record], env: dict[str, Any], file: BinaryIO,
               complete: bool = True) -> None:
    """The run's records and environment as JSON, to an open binary file: format
    :data:`~indexzoo.tools.compare.FORMAT_VERSION`; ``complete`` is false while workloads
    are still to run (and stays so in the file of a run that ended early)."""
    payload = {"format_version": FORMAT_VERSION, "complete": complete, "environment": env,
               "records": [
        {**asdict(r), "throughput_per_byte": r.throughput_per_byte,
         "half_spread": r.half_spread, "ratio_to_raw": r.ratio_to_raw,
         "ratio_to_gather": r.ratio_to_gather, "ratio_to_scan": r.ratio_to_scan,
         "throughput_slowest": r.throughput_range[0],
         "throughput_fastest": r.throughput_range[1]} for r in records]}
    file.write((json.dumps(payload, indent=2, default=str) + "\n").encode())


# ---------------------------------------------------------------------- CLI
def add_cli(sub: Any) -> None:
    s = sub.add_parser("bench", help="compare indexes on a workload: table, JSON and plots")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--preset", default="quick", choices=sorted([*PRESETS, "ssb"]),
                   help="named workload (default: quick); ssb: the 13 SSB queries over SSB "
                   "flat for every query engine and DuckDB (see --sf, --engines)")
    g.add_argument("--workload", metavar="FILE", help="workload file (YAML/TOML/JSON)")
    s.add_argument("--indexes", default="builtin",
                   help="comma-separated index names, 'builtin' (default: those shipped with "
                   "indexzoo) or 'all' (every registered index)")
    s.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    s.add_argument("--sweep", choices=sorted(SWEEPS), help="vary one dimension of the workload")
    s.add_argument("--set", action="append", default=[], metavar="NAME.PARAM=VALUE",
                   help="a parameter of one index, e.g. warpcore-hash.load_factor=0.5 (repeatable)")
    s.add_argument("--param-sweep", metavar="NAME.PARAM=V1,V2,...",
                   help="run one index once per value of one of its parameters")
    s.add_argument("--repeats", type=int, default=5,
                   help="timed runs per figure (default 5): the table shows their median and "
                   "spread")
    s.add_argument("--rank-budget", dest="rank_budget", type=float, default=None,
                   metavar="SECONDS",
                   help="after --repeats rounds, time more rounds of the indexes whose order is "
                   "not established yet, for at most this many seconds per workload (default "
                   f"{RANK_BUDGET.default:g}, or {RANK_BUDGET.name}; 0: exactly --repeats "
                   "rounds)")
    s.add_argument("--sequential", action="store_true",
                   help="time each index's repetitions back to back instead of in interleaved "
                   "rounds over all indexes")
    s.add_argument("--out-mode", dest="out_mode", choices=("rowid", "count", "sum", "rowids"),
                   help="what lookups return (default: rowid for points, count for ranges)")
    s.add_argument("--latency", action="store_true",
                   help="also time single calls of 1..4096 lookups (wall time per call)")
    s.add_argument("--output", default="bench-results", metavar="DIR",
                   help="folder for the JSON and PNG (default: bench-results)")
    s.add_argument("--no-plot", action="store_true", help="skip the PNGs")
    s.add_argument("--compare", metavar="OLD.json",
                   help="compare with a saved run of bench: per index and workload faster, "
                   "slower or within noise (the spreads of both runs)")
    s.add_argument("--fail-above", dest="fail_above", type=float, metavar="PCT",
                   help="with --compare: exit 1 when an index is slower than in OLD.json by more "
                   "than PCT percent, beyond noise")
    s.add_argument("--time-budget", metavar="DURATION",
                   help="refuse to start a run estimated to take longer, e.g. 600, 90s, 10m, "
                   "2h, or none (default: 10m on the CPU, none on a GPU)")
    s.add_argument("--yes", action="store_true",
                   help="run even where the estimated duration exceeds --time-budget")
    s.add_argument("--sf", metavar="SF1,SF2", help="with --preset ssb: scale factors "
                   "(default: 1 on the CPU, 10,20 on a GPU)")
    s.add_argument("--engines", metavar="NAMES", help="with --preset ssb: comma-separated "
                   "query engines (default: all registered)")
    s.add_argument("--queries", metavar="NAMES", help="with --preset ssb: comma-separated "
                   "SSB queries, e.g. q1.1,q4.3 (default: all 13)")
    s.set_defaults(func=cmd_bench)


def _entries(names: list[str], sets: list[str], sweep: str | None) -> list[Entry]:
    """Index configurations from --indexes, --set and --param-sweep (checked before any run)."""
    from indexzoo.config import validate_params
    from indexzoo.registry import lookup

    fixed: dict[str, dict[str, Any]] = {}
    given: dict[str, str] = {}
    for text in sets:
        name, param, value = parse_assignment(text, "--set")
        fixed.setdefault(name, {})[param] = option_value(value)
        given.setdefault(name, text)
    swept = parse_assignment(sweep, "--param-sweep")[0] if sweep else None
    selected = list(names) + ([swept] if swept and swept not in names else [])
    if not selected:
        raise ConfigError("--indexes: no index selected; give index names separated by commas, "
                          "'builtin' or 'all' (see `indexzoo list`)")
    for name, text in given.items():
        if name not in selected:
            raise ConfigError(
                f"--set {shown(text)}: index {shown(name, 40)} is not among the selected indexes "
                f"({', '.join(selected)}); add it to --indexes or drop the --set")
    entries = [Entry(n, dict(fixed.get(n, {}))) for n in names]
    if sweep:
        name, param, values = parse_assignment(sweep, "--param-sweep")
        if name not in names:
            entries.append(Entry(name, dict(fixed.get(name, {}))))
        entries = [e for e in entries if e.name != name] + [
            Entry(name, {**fixed.get(name, {}), param: option_value(v)}, f"{name} {param}={v}",
                  param, option_value(v)) for v in values.split(",")]
    for e in entries:
        cls = lookup(e.name)
        validate_params(cls.Params, e.params, e.name)  # ConfigError before any device work
    return entries


def _prepare_output(folder: Path) -> bool:
    """Make sure results can be written to ``folder`` before any work: create it, write and
    remove a probe file. ConfigError if it cannot be; returns whether it was created."""
    name = shown_path(folder)
    try:
        exists = folder.exists()
        if exists and not folder.is_dir():
            raise ConfigError(f"--output {name} exists and is not a directory")
        folder.mkdir(parents=True, exist_ok=True)
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--output {name}: the directory cannot be created "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    check_writable_folder(folder, f"--output {name}")
    return not exists


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds when empty


#: The names :func:`indexzoo.tools.plots.plot_files` gives a run's PNGs, after the JSON's stem.
_PLOT_SUFFIXES = (".png", "-pareto.png")


class ResultsFile:
    """The run's JSON, written after each workload: the first time under a name of its own
    (:func:`indexzoo.tools.publish.publish`: ``STEM.json`` or, where that is taken, ``STEM-2.json``,
    ...), then rewritten whole in place (:func:`indexzoo.tools.publish.rewrite`), so the file
    always holds the workloads finished so far. ``complete`` turns true with the last one.
    A name is taken only where the files to come after it (``also``: the PNGs' suffixes) are
    free as well."""

    def __init__(self, stem: Path, env: dict[str, Any], workloads: int,
                 log: TextIO | None = None, also: Sequence[str] = ()) -> None:
        self.stem, self.env, self.workloads, self.log = stem, env, workloads, log
        self.also = also
        self.path: Path | None = None
        self.done = 0

    def _names(self) -> Iterator[str]:
        folder = self.stem.parent
        return (n for n in numbered(self.stem.name)
                if not any(os.path.lexists(folder / (n + suffix)) for suffix in self.also))

    def update(self, records: list[Record]) -> None:
        """Write the records of the workloads finished so far (one more than last time)."""
        self.done += 1
        write = partial(write_json, records, self.env, complete=self.done >= self.workloads)
        if self.path is not None:
            rewrite(self.path, write)
            return
        try:
            (self.path,) = publish(self.stem.parent, self._names(), [Member(".json", write)])
        except FileExistsError:
            raise ConfigError(f"--output {shown_path(self.stem.parent)}: every name tried for "
                              f"this run's results is taken ({shown(self.stem.name, 60)}-2 to "
                              "-1000)") from None
        if self.log is not None and self.workloads > 1:
            self.log.write(printable(f"indexzoo bench: results so far in {self.path} (rewritten "
                                     "after each workload)") + "\n")

    @property
    def named_stem(self) -> Path:
        """The stem of the name the JSON got (the PNGs are named after it)."""
        assert self.path is not None
        return self.path.with_name(self.path.name[:-len(".json")])


def _write_plots(records: Sequence[Record], env: dict[str, Any], stem: Path,
                 label: str) -> list[Path]:
    """Publish the PNGs as one group named after the JSON's ``stem``
    (:func:`indexzoo.tools.publish.publish`): ``STEM.png``, ``STEM-pareto.png``. Where one of
    these names is taken, ConfigError; on any error or interrupt, no PNG of this call stays."""
    info = PlotInfo(label, str(env.get("device_name", "")), str(env.get("commit", "")))
    members = []
    for final, draw in plot_files(records, stem, info):
        if not final.name.startswith(stem.name) or final.parent != stem.parent:
            raise ValueError(f"plot file {final} is not named after {stem}")
        members.append(Member(final.name[len(stem.name):], draw))
    try:
        return publish(stem.parent, [stem.name], members)
    except FileExistsError:
        raise ConfigError(f"--output {shown_path(stem.parent)}: the plots' names after "
                          f"{shown(stem.name, 60)} are taken; the JSON is written") from None


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    if args.repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {args.repeats}")
    if args.rank_budget is None:
        args.rank_budget = RANK_BUDGET.value()
    if not (args.rank_budget >= 0 and math.isfinite(args.rank_budget)):
        raise ConfigError(f"--rank-budget must be a finite number of seconds >= 0, got "
                          f"{args.rank_budget}")
    device = resolve_device(args.device)
    if not args.workload and args.preset == "ssb":
        from .ssb_bench import cmd_ssb

        return cmd_ssb(args, device, out)
    base = load_workload(args.workload) if args.workload else PRESETS[args.preset]
    latency = args.latency or (not args.workload and args.preset == "latency")
    workloads = sweep_workloads(base, args.sweep, device) if args.sweep else [base]
    if not workloads:
        raise ConfigError(f"--sweep {args.sweep}: no value of the sweep applies to workload "
                          f"{shown(base.name, 40)} on {device}")
    names = named(args.indexes, out)
    entries = _entries(names, args.set, args.param_sweep)
    saved = _saved_run(args)
    with_plot = not args.no_plot
    if with_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise MissingDependency("matplotlib", "bench", "writing benchmark plots") from None
    folder = Path(args.output)
    created = _prepare_output(folder)  # before any work: results are never lost at the end
    try:
        return _bench(args, out, device, workloads, entries, latency, folder, with_plot, saved)
    finally:
        if created:
            _remove_if_empty(folder)  # nothing was written (an error, an interrupt)


def _saved_run(args: argparse.Namespace) -> SavedRun | None:
    """The run named by --compare, read and checked before any work (with --fail-above)."""
    if args.fail_above is not None:
        if args.compare is None:
            raise ConfigError("--fail-above needs --compare OLD.json (the run to compare with)")
        if not (math.isfinite(args.fail_above) and args.fail_above >= 0):
            raise ConfigError(f"--fail-above must be a percentage >= 0, got {args.fail_above}")
    return load_saved(Path(args.compare)) if args.compare is not None else None
#: The default --time-budget on the CPU, in seconds (none on a GPU).
CPU_TIME_BUDGET = 600.0


def _check_duration(args: argparse.Namespace, device: str, workloads: list[Workload],
                    entries: list[Entry], steps: Progress) -> None:
    """Refuse (ConfigError) a run estimated (:mod:`indexzoo.tools.estimate`) to exceed
    --time-budget unless --yes is given; state the estimate of any other on standard error."""
    budget = parse_duration(args.time_budget) if args.time_budget is not None else \
        CPU_TIME_BUDGET if device == "cpu" else None
    est = estimate_bench(workloads, bench_entries(entries), device, args.repeats,
                         args.out_mode, steps, limit=None if args.yes else budget,
                         rank_budget=0.0 if args.sequential else args.rank_budget)
    if est is None:
        return
    if not args.yes:
        check_budget(est, budget, device)
    sys.stderr.write(f"estimated duration: {est.describe()}, calibrated on samples of "
                     f"2^{SAMPLE.bit_length() - 1} keys\n")


def _bench(args: argparse.Namespace, out: TextIO, device: str, workloads: list[Workload],
           entries: list[Entry], latency: bool, folder: Path, with_plot: bool,
           saved: SavedRun | None = None) -> int:
    biggest = max(workloads, key=lambda w: estimate_workload(w, args.out_mode).total)
    check_fits(estimate_workload(biggest, args.out_mode), device,
               f"the benchmark's largest workload ({biggest.describe()})")
    env = environment(device)
    sys.stderr.write(f"indexzoo bench on {device} ({env['device_name']}), commit {env['commit']}\n")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    label = (Path(args.workload).stem if args.workload else args.preset) + \
        (f"-{args.sweep}" if args.sweep else "") + \
        (f"-{args.param_sweep.split('=')[0].replace('.', '-')}" if args.param_sweep else "")
    steps = Progress()
    _check_duration(args, device, workloads, entries, steps)
    results = ResultsFile(folder / f"{label}-{device}-{stamp}", env, len(workloads), sys.stderr,
                          _PLOT_SUFFIXES if with_plot else ())
    records = run_bench(workloads, entries, device, repeats=args.repeats, out=args.out_mode,
                        latency=latency, sweep=args.sweep, interleave=not args.sequential,
                        rank_budget=args.rank_budget, on_workload_done=results.update,
                        steps=steps)
    interrupts.check()
    out.write(format_table(records) + "\n")
    for line in format_warnings(records):
        out.write(line + "\n")
    code = _compared(saved, records, env, args.fail_above, out) if saved is not None else 0
    written = [results.path] if results.path is not None else []
    if written and with_plot and records:
        written += _write_plots(records, env, results.named_stem, label)
    for f in written:
        out.write(f"wrote {printable(str(f))}\n")
    bad = [r for r in records if r.agrees_with_peer is False]
    if bad:
        sys.stderr.write(printable("indexzoo bench: answers differ from the peer for: "
                                   + ", ".join(f"{r.index} on {r.workload}" for r in bad)) + "\n")
        return 1
    return code


def _compared(saved: SavedRun, records: Sequence[Record], env: dict[str, Any],
              fail_above: float | None, out: TextIO) -> int:
    """Print the comparison with the saved run; 1 if an index is slower than ``fail_above``
    percent allows (beyond noise), else 0."""
    report = compare(saved, records, env)
    for line in format_report(report, saved):
        out.write(line + "\n")
    worse = regressions(report, fail_above) if fail_above is not None else []
    if worse:
        sys.stderr.write(printable(
            f"indexzoo bench: slower than {saved.path} by more than {fail_above:g}%: "
            + ", ".join(f"{c.index} on {c.workload} ({c.change * 100:+.0f}%)" for c in worse))
            + "\n")
        return 1
    return 0
