"""``indexzoo recommend``: measure the installed indexes on a sample of the user's keys and
lookups, on the user's device, and write the winner as an :class:`~indexzoo.IndexSpec` file.

    indexzoo recommend KEYS_FILE [--workload SPEC] [--memory-budget BYTES] [--device D]
                       [--out FILE] [--force]
    indexzoo recommend --workload SPEC ...

* Keys come from a key file (``.npy`` of any key dtype, or text with one key per line) or are
  generated from the workload; the workload (a file with the fields of
  :class:`~indexzoo.tools.workloads.Workload`, or a ``bench`` preset name) says what the lookups
  are: point or range (``range_hits``), hit rate, skew, how many.
* **Sampling**: at most :data:`KEY_CAP` keys and :data:`LOOKUP_CAP` lookups are measured
  (per device). Larger key sets are sampled by key value (a hash of the encoded key picks
  whole groups of equal keys, so duplicates stay duplicates and the distribution keeps its
  shape); footprints are then scaled linearly to the full key count, while
  throughput is that of the sample (lookups per second do not scale with their number).
* **Candidates**: every registered index that can answer the workload: indexes without range
  lookups are skipped for ranges, indexes without duplicate keys when the keys repeat, indexes
  without the ``out`` mode or the device. A family of indexes whose plugin suggests its own
  picks (the hook ``indexzoo_suggest_indexes``) is represented by them: the lightweight
  family by the presets its decision trees pick (the paper's tree and the measured one)
  rather than by all six.
* **Measured**: each candidate is built, checked (its answers must agree with a NumPy
  reference on the sample), probed, and timed with the ``bench`` machinery
  (:func:`indexzoo.tools.bench.time_interleaved`: repetitions in interleaved rounds, median and
  spread). A candidate that fails on the keys, answers wrongly, would exceed
  ``--memory-budget`` (its footprint scaled to the full keys), or is too slow to time (a call
  on the sample's lookups would take over :data:`SLOW_LIMIT_S`) is left out with the reason.
* **Pick**: the fastest by median throughput; if the runner-up's spread overlaps the
  fastest's (a tie within this run's noise) and it holds fewer bytes, the runner-up.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from indexzoo.config import IndexSpec, check_regular_file, check_writable_folder
from indexzoo.devices import resolve_device, to_device, to_numpy
from indexzoo.display import one_line, printable, shown, shown_path
from indexzoo.errors import ConfigError
from indexzoo.hookspecs import Suggestion, SuggestQuestion
from indexzoo.keys import KeyMap
from indexzoo.registry import available, builtin, create, named, suggestions
from indexzoo.results import OUT_MODES, Out

from . import interrupts
from .bench import PRESETS, Contender, Entry, keep_built, time_interleaved
from .options import load_workload
from .publish import Member, publish
from .timing import Timing, synchronize, time_once
from .workloads import Workload, generate, generate_lookups, mix64

__all__ = ["KEY_CAP", "LOOKUP_CAP", "SLOW_LIMIT_S", "Outcome", "Recommendation", "add_cli",
           "parse_bytes", "recommend_indexes"]

#: Most keys measured per device; larger key sets are sampled (see the module docstring).
KEY_CAP = {"cpu": 1 << 20, "cuda": 1 << 24}
#: Most lookups measured per device.
LOOKUP_CAP = {"cpu": 1 << 16, "cuda": 1 << 22}
#: A candidate whose one call on the sample's lookups would take longer is not timed.
SLOW_LIMIT_S = {"cpu": 2.0, "cuda": 1.0}
#: Lookups of the probe that projects the call time of an index not shipped with indexzoo
#: (a third-party index may be far slower: ``linear-scan`` compares every lookup with every
#: key). Shipped indexes are not probed: each answers the capped lookups in well under a
#: second, and a probe that small takes another code path (CPU kernels run serially below
#: 2^15 items), whose compilation would cost as much as the measurement.
PROBE_LOOKUPS = 256
DEFAULT_OUT = "index.yaml"


# ---------------------------------------------------------------------- inputs
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}


def parse_bytes(text: str, flag: str = "--memory-budget") -> int:
    """``"2GB"``, ``"512MiB"``, ``"1.5e9"``, ``"800M"`` -> bytes; ConfigError otherwise.
    k/M/G/T and kB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise ConfigError(f"{flag} {shown(text, 40)} is not a number of bytes; e.g. 2000000000, "
                          "2GB, 512MiB")
    value = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{flag} {shown(text, 40)} must be a positive number of bytes")
    return int(value)


def _bytes_text(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def _load_workload(text: str) -> Workload:
    if text in PRESETS:
        return PRESETS[text]
    if not Path(text).suffix:
        raise ConfigError(f"--workload {shown(text, 40)} is neither a preset "
                          f"({', '.join(sorted(PRESETS))}) nor a workload file")
    return load_workload(text)


def _check_output(path: Path, force: bool) -> None:
    """ConfigError before any work if the spec file cannot be written (or exists)."""
    name = shown_path(path)
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise ConfigError(f"--out {name}: the spec file must end in .yaml, .yml or .json")
    if path.is_dir():
        raise ConfigError(f"--out {name} is a directory")
    if os.path.lexists(path) and not force:  # a symbolic link too, even a dangling one
        raise ConfigError(f"--out {name} exists; use --force to overwrite it, or --out FILE")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(f"--out {name}: the folder {shown_path(folder)} does not exist")
    check_writable_folder(folder, f"--out {name}")


# ---------------------------------------------------------------------- sample
@dataclass
class Sample:
    """The measured share of the user's keys and the lookups, on the device."""

    keys: Any  # the user's dtype (host-only dtypes stay on the host)
    ukeys: np.ndarray  # encoded, on the host
    n_total: int  # keys the user has
    duplicates: bool
    workload: Workload  # the lookups' workload (n_lookups capped)
    queries: Any = None
    lo: Any = None
    hi: Any = None
    reference: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    source: str = ""
    encoded: tuple[Any, ...] = ()  # the lookups, encoded, on the host: (q,) or (lo, hi)

    @property
    def n(self) -> int:
        return int(self.ukeys.shape[0])

    @property
    def scale(self) -> float:
        return self.n_total / self.n if self.n else 1.0

    @property
    def n_lookups(self) -> int:
        arr = self.queries if self.queries is not None else self.lo
        return int(arr.shape[0])

    @property
    def point(self) -> bool:
        return self.queries is not None


def _hash_sample(ukeys: np.ndarray, cap: int, seed: int) -> np.ndarray:
    """A mask keeping about ``cap`` keys, chosen by a hash of the key value."""
    share = cap / ukeys.shape[0]
    threshold = np.uint64(min(int(share * 2.0**64), (1 << 64) - 1))
    h = mix64(ukeys.astype(np.uint64) ^ np.uint64(mix64(np.array([seed], np.uint64))[0]))
    return h < threshold


def _reference_counts(ukeys: np.ndarray, q: Any, lo: Any, hi: Any) -> np.ndarray:
    """Matches per lookup (NumPy, on the host): what every candidate must answer."""
    s = np.sort(ukeys)
    if q is not None:
        q = to_numpy(q).astype(s.dtype)
        return (np.searchsorted(s, q, "right") - np.searchsorted(s, q, "left")).astype(np.int64)
    lo_, hi_ = to_numpy(lo).astype(s.dtype), to_numpy(hi).astype(s.dtype)
    c = np.searchsorted(s, hi_, "right") - np.searchsorted(s, lo_, "left")
    return np.where(lo_ <= hi_, c, 0).astype(np.int64)


def make_sample(keys: np.ndarray | None, workload: Workload, device: str,
                key_cap: int, lookup_cap: int, source: str = "") -> Sample:
    """Keys (from a file, or generated from ``workload``) and lookups, capped and moved."""
    if keys is None:
        w = workload
        n_total = w.n_keys
        if n_total > key_cap:  # generate the sample only: whole groups of equal keys
            n = max(w.multiplicity, key_cap // w.multiplicity * w.multiplicity)
            w = w.model_copy(update={"n_keys": n})
        gen = generate(Workload.model_validate(w.model_copy(
            update={"n_lookups": 0, "hit_rate": 0.0, "batches": 1}).model_dump()), "cpu")
        keys = to_numpy(gen.keys)
        km = KeyMap.for_dtype(keys.dtype)
        ukeys = km.encode(keys)
        dups = workload.multiplicity > 1
        source = source or f"generated: {workload.describe()}"
    else:
        n_total = int(keys.shape[0])
        km = KeyMap.for_keys(keys)
        ukeys = km.encode(keys)
        dups = bool(ukeys.shape[0] > 1 and np.unique(ukeys).shape[0] != ukeys.shape[0])
        if n_total > key_cap:
            keep = _hash_sample(ukeys, key_cap, workload.seed)
            keys, ukeys = keys[keep], ukeys[keep]
    wl = workload.model_copy(update={"n_lookups": min(workload.n_lookups, lookup_cap)})
    q, lo, hi, _hits = generate_lookups(wl, ukeys, np)
    reference = _reference_counts(ukeys, q, lo, hi)
    host_only = km.kind in ("datetime", "bytes", "strings")

    def back(a: Any) -> Any:  # lookups in the keys' own dtype, on the device
        if a is None:
            return None
        d = km.decode(a)
        return d if host_only else to_device(d, device)

    dev_keys = keys if host_only else to_device(keys, device)
    encoded = (q,) if q is not None else (lo, hi)
    return Sample(dev_keys, ukeys, n_total, dups, wl, back(q), back(lo), back(hi), reference,
                  source, encoded)


# ---------------------------------------------------------------------- candidates
@dataclass(frozen=True)
class Candidate:
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def label(self) -> str:
        """The name and parameters, for a terminal (control characters escaped)."""
        if not self.params:
            return printable(self.name)
        return printable(self.name + " " + " ".join(f"{k}={v}" for k, v in self.params.items()))


def suggested(sample: Sample, device: str, ordered: bool = False) -> list[Suggestion]:
    """What the plugins' own rules suggest for this sample (``indexzoo_suggest_indexes``): the
    lightweight family answers with its decision trees' picks, ("paper", spec) and
    ("measured", spec) for the user's full key count and ("in-cache", spec) for data that
    fits the L2, so that a device whose caches behave unlike the paper's GPU (a CPU) is
    measured on both sides of the tree's L2 switch."""
    question = SuggestQuestion(n_keys=sample.n_total,
                               key_bytes=4 if sample.ukeys.dtype.itemsize == 4 else 8,
                               kind="point" if sample.point else "range", device=device,
                               ordered=ordered)
    return suggestions(question)


def candidates(names: Sequence[str], suggestions: Sequence[Suggestion]) -> list[Candidate]:
    """Every selected index, each family that made a suggestion replaced by its picks (give
    no ``suggestions`` to measure the named indexes as they are)."""
    family = set().union(*(s.family for s in suggestions))
    out = [Candidate(name) for name in names if name not in family]
    for s in suggestions:
        picked: dict[tuple[str, str], tuple[IndexSpec, list[str]]] = {}
        for label, spec in s.picks:
            if spec.index in available():
                key = (spec.index, json.dumps(spec.params, sort_keys=True, default=str))
                picked.setdefault(key, (spec, []))[1].append(label)
        for spec, which in picked.values():
            out.append(Candidate(spec.index, dict(spec.params),
                                 f"{s.note} ({', '.join(which)})"))
    return out


# ---------------------------------------------------------------------- measuring
@dataclass
class Outcome:
    """One candidate: measured, or left out with the reason."""

    candidate: Candidate
    status: str  # "measured", "skipped", "excluded", "failed"
    reason: str = ""
    timing: Timing | None = None
    throughput: float = 0.0
    resident_bytes: int = 0  # scaled to the full key count
    peak_build_bytes: int = 0  # scaled

    @property
    def label(self) -> str:
        return self.candidate.label


@dataclass
class Recommendation:
    sample: Sample
    device: str
    outcomes: list[Outcome]
    pick: Outcome | None
    why: str
    suggestions: list[Suggestion]
    out: str
    repeats: int

    @property
    def ranked(self) -> list[Outcome]:
        return sorted((o for o in self.outcomes if o.status == "measured"),
                      key=lambda o: -o.throughput)

    def spec(self) -> IndexSpec:
        assert self.pick is not None
        c = self.pick.candidate
        return IndexSpec(index=c.name, params=dict(c.params), device=self.device)


def _reason(exc: BaseException) -> str:
    text = one_line(str(exc)) or type(exc).__name__
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}"


def _answers_right(index: Any, sample: Sample, mode: Out) -> bool:
    """Whether the index answers the sample's lookups as the NumPy reference does, checked on
    the ``out`` mode that is timed (no other mode's kernels are compiled for it), except
    ``sum``, checked through ``count``."""
    check: Out = "count" if mode == "sum" else mode
    res = _call(index, sample, check)().to_host()
    ref = sample.reference
    if check == "count":
        return bool(np.array_equal(res.count.astype(np.int64), ref))
    if check == "rowids":
        return bool(np.array_equal(np.diff(res.offsets).astype(np.int64), ref))
    rowid = res.rowid.astype(np.int64)
    hit = rowid != int(index.miss)
    if not np.array_equal(hit, ref > 0):
        return False
    found = sample.ukeys[rowid[hit]]
    if sample.point:
        return bool(np.array_equal(found, sample.encoded[0][hit]))
    lo, hi = sample.encoded
    return bool(np.all((lo[hit] <= found) & (found <= hi[hit])))


def _call(index: Any, sample: Sample, out: Out, n: int | None = None) -> Any:
    if sample.point:
        q = sample.queries if n is None else sample.queries[:n]
        return lambda: index.point(q, out=out)
    lo = sample.lo if n is None else sample.lo[:n]
    hi = sample.hi if n is None else sample.hi[:n]
    return lambda: index.range(lo, hi, out=out)


def recommend_indexes(sample: Sample, device: str, names: Sequence[str], out: Out | None = None,
                      budget: int | None = None, repeats: int = 5, ordered: bool = False,
                      log: TextIO | None = None, use_tree: bool = True) -> Recommendation:
    """Measure the candidates on ``sample`` and pick one (see the module docstring).
    ``use_tree``: a family that suggests its own picks (the lightweight family's decision
    trees) is represented by them (otherwise the named indexes are measured as they are)."""
    log = log or sys.stderr
    mode: Out = out or ("rowid" if sample.point else "count")
    picks = suggested(sample, device, ordered)
    outcomes: list[Outcome] = []
    contenders: list[tuple[Contender, Outcome]] = []
    reserve = sample.n * 96 + sample.n_lookups * 64  # what the next build and its calls need
    slow = SLOW_LIMIT_S.get(device, 2.0)
    shipped = set(builtin())
    for cand in candidates(names, picks if use_tree else []):
        interrupts.check()
        cls = available()[cand.name]
        caps = cls.capabilities
        skip = None
        if not sample.point and not caps.range:
            skip = "no range lookups (the workload asks for ranges)"
        elif sample.point and not caps.point:
            skip = "no point lookups"
        elif sample.duplicates and not caps.duplicates:
            skip = "does not support duplicate keys (the keys repeat)"
        elif mode not in caps.out_modes:
            skip = f"no out={mode!r}"
        elif device not in caps.devices:
            skip = f"does not run on {device}"
        if skip:
            outcomes.append(Outcome(cand, "skipped", skip))
            log.write(f"    {cand.label:<24} skipped: {skip}\n")
            continue
        try:
            index = create(cand.name, device=device, **cand.params).build(sample.keys)
            fp = index.memory_footprint()
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as exc:
            outcomes.append(Outcome(cand, "failed", f"fails on these keys: {_reason(exc)}"))
            log.write(f"    {cand.label:<24} failed: {_reason(exc)}\n")
            continue
        o = Outcome(cand, "measured", resident_bytes=int(fp.resident_bytes * sample.scale),
                    peak_build_bytes=int(fp.peak_build_bytes * sample.scale))
        outcomes.append(o)
        if budget is not None and o.resident_bytes > budget:
            o.status = "excluded"
            o.reason = (f"needs about {_bytes_text(o.resident_bytes)} for "
                        f"{sample.n_total:,} keys, over the memory budget of {_bytes_text(budget)}")
            log.write(f"    {cand.label:<24} excluded: {o.reason}\n")
            del index
            continue
        try:
            probe_n = min(PROBE_LOOKUPS, sample.n_lookups)
            projected = 0.0
            if cand.name not in shipped:  # see PROBE_LOOKUPS
                probe = _call(index, sample, mode, probe_n)
                probe()
                synchronize(device)
                t = time_once(probe, device)
                projected = t * sample.n_lookups / max(probe_n, 1)
            if projected > slow:
                o.status = "skipped"
                o.reason = (f"too slow to time here: about {probe_n / t / 1e6 if t > 0 else 0:.3g} "
                            f"M lookups/s on a probe of {probe_n} (one call on the sample would "
                            f"take about {projected:.0f} s)")
                log.write(f"    {cand.label:<24} skipped: {o.reason}\n")
                del index
                continue
            if not _answers_right(index, sample, mode):
                o.status = "failed"
                o.reason = "answers differ from the reference (NumPy) on the sample"
                log.write(f"    {cand.label:<24} failed: {o.reason}\n")
                del index
                continue
            c = Contender(Entry(cand.name, dict(cand.params), cand.label), index,
                          _call(index, sample, mode), Timing((0.0,)))
            c.calibrate(device)
        except (KeyboardInterrupt, MemoryError):
            raise
        except Exception as exc:
            o.status, o.reason = "failed", f"fails on these lookups: {_reason(exc)}"
            log.write(f"    {cand.label:<24} failed: {_reason(exc)}\n")
            continue
        if not keep_built(reserve, device):
            c.order = "sequential"
            c.seconds = [c.repetition(device) for _ in range(repeats)]
            c.index = c.run = None
        log.write(f"    {cand.label:<24} built, resident {_bytes_text(o.resident_bytes)}"
                  + (" (scaled)" if sample.scale > 1 else "") + "\n")
        contenders.append((c, o))
        del index
    time_interleaved([c for c, _ in contenders], device, repeats)
    for c, o in contenders:
        o.timing = Timing(tuple(c.seconds))
        o.throughput = sample.n_lookups / o.timing.median if o.timing.median > 0 else math.inf
        c.index = c.run = None
    contenders.clear()
    pick, why = choose([o for o in outcomes if o.status == "measured"])
    return Recommendation(sample, device, outcomes, pick, why, picks, mode, repeats)


def _overlap(a: Outcome, b: Outcome) -> bool:
    assert a.timing is not None and b.timing is not None
    return a.timing.overlaps(b.timing) if len(a.timing.seconds) > 1 and \
        len(b.timing.seconds) > 1 else False


def choose(measured: Sequence[Outcome]) -> tuple[Outcome | None, str]:
    """The pick and why: the fastest; the runner-up instead when their spreads overlap and
    it holds fewer bytes."""
    ranked = sorted(measured, key=lambda o: -o.throughput)
    if not ranked:
        return None, "no index could be measured on this workload"
    best = ranked[0]
    fig = f"{best.throughput / 1e6:.3g} M lookups/s {best.timing.spread_text() if best.timing else ''}"
    size = _bytes_text(best.resident_bytes)
    if len(ranked) == 1:
        return best, f"the only index measured: {fig}, {size}"
    second = ranked[1]
    sfig = f"{second.throughput / 1e6:.3g} M lookups/s {second.timing.spread_text() if second.timing else ''}"
    ratio = best.throughput / second.throughput if second.throughput else math.inf
    if _overlap(best, second):
        if second.resident_bytes < best.resident_bytes:
            return second, (f"tied with {best.label} within the spread ({sfig} against {fig}) "
                            f"and smaller: {_bytes_text(second.resident_bytes)} against {size}")
        return best, (f"fastest, {fig}, tied with {second.label} ({sfig}) within the spread "
                      f"but no larger: {size} against {_bytes_text(second.resident_bytes)}")
    return best, (f"fastest, {fig}: {ratio:.2f}x the runner-up {second.label} ({sfig}), "
                  f"spreads apart; {size}")


# ---------------------------------------------------------------------- output
def cannot(name: str) -> list[str]:
    """What the registered index ``name`` cannot do, from its capabilities, in words (a pick
    measured on point lookups may be asked for ranges later): ``answer range lookups``,
    ``hold duplicate keys``, ``take updates``, ``answer out='bitmap'``, ``run on the GPU``;
    empty where it can do all of them."""
    caps = available()[name].capabilities
    missing = [what for ok, what in ((caps.point, "answer point lookups"),
                                     (caps.range, "answer range lookups"),
                                     (caps.duplicates, "hold duplicate keys"),
                                     (caps.updates, "take updates")) if not ok]
    missing += [f"answer out={m!r}" for m in OUT_MODES if m not in caps.out_modes]
    missing += [f"take {d} keys" for d in ("uint32", "uint64") if d not in caps.key_dtypes]
    missing += [{"cpu": "run on the CPU", "cuda": "run on the GPU"}[d] for d in ("cpu", "cuda")
                if d not in caps.devices]
    return missing


def format_report(rec: Recommendation) -> str:
    s = rec.sample
    lines = []
    sampled = f"{s.n:,} of {s.n_total:,} keys" if s.n < s.n_total else f"all {s.n_total:,} keys"
    kind = "point lookups" if s.point else \
        f"range lookups ({s.workload.range_hits} keys each)"
    lines.append(f"measured on {rec.device}: {sampled}, {s.n_lookups:,} {kind} "
                 f"(out={rec.out}), hit rate {s.workload.hit_rate:g}, "
                 f"{rec.repeats} interleaved repetitions"
                 + ("; duplicate keys" if s.duplicates else ""))
    if s.n < s.n_total:
        lines.append(f"footprints scaled x{s.scale:.3g} to {s.n_total:,} keys; throughput is "
                     "the sample's")
    head = ["rank", "index", "M lookups/s", "spread", "resident", "note"]
    rows = []
    for i, o in enumerate(rec.ranked, 1):
        mark = " <- pick" if o is rec.pick else ""
        rows.append([str(i), o.label, f"{o.throughput / 1e6:.3g}",
                     o.timing.spread_text() if o.timing else "-", _bytes_text(o.resident_bytes),
                     o.candidate.note + mark])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    right = {0, 2, 3, 4}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                         for i, c in enumerate(cells)).rstrip()

    lines += [line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]
    left = [o for o in rec.outcomes if o.status != "measured"]
    if left:
        lines.append("not ranked:")
        lines += [f"  {o.label}: {o.status}, {o.reason}" for o in left]
    ranks = {o.label: i for i, o in enumerate(rec.ranked, 1)}
    for suggestion in rec.suggestions:
        for tree, spec in suggestion.picks:
            if tree == "in-cache":
                continue
            label = Candidate(spec.index, dict(spec.params)).label
            where = f"rank {ranks[label]} of {len(ranks)}" if label in ranks else "not ranked"
            lines.append(f"{suggestion.note} ({tree}): {label}, {where} here")
    if rec.pick is None:
        lines.append(f"no recommendation: {rec.why}")
    else:
        lines.append(f"pick: {rec.pick.label} on {rec.device}: {rec.why}")
        missing = cannot(rec.pick.candidate.name)
        if missing:
            lines.append(f"note: {rec.pick.candidate.name} cannot {', '.join(missing[:-1])}"
                         f"{' or ' if len(missing) > 1 else ''}{missing[-1]}")
    return "\n".join(lines)


def report_json(rec: Recommendation, written: Path | None) -> dict[str, Any]:
    """``recommend --json``: what :func:`format_report` prints, as one JSON object."""
    s = rec.sample

    def named(o: Outcome) -> dict[str, Any]:
        return {"index": o.candidate.name, "params": dict(o.candidate.params),
                "note": o.candidate.note}

    return {
        "device": rec.device, "keys_measured": s.n, "keys_total": s.n_total,
        "lookups": s.n_lookups, "kind": "point" if s.point else "range",
        "range_hits": None if s.point else s.workload.range_hits,
        "hit_rate": s.workload.hit_rate, "out": rec.out, "repeats": rec.repeats,
        "duplicates": s.duplicates,
        "ranked": [{**named(o), "lookups_per_second": o.throughput,
                    "half_spread": o.timing.half_spread if o.timing else None,
                    "lookup_seconds": list(o.timing.seconds) if o.timing else [],
                    "resident_bytes": o.resident_bytes, "peak_build_bytes": o.peak_build_bytes}
                   for o in rec.ranked],
        "not_ranked": [{**named(o), "status": o.status, "reason": o.reason}
                       for o in rec.outcomes if o.status != "measured"],
        "pick": None if rec.pick is None else named(rec.pick),
        "why": rec.why,
        "pick_cannot": [] if rec.pick is None else cannot(rec.pick.candidate.name),
        "spec": None if rec.pick is None else rec.spec().model_dump(mode="json"),
        "written": None if written is None else str(written),
    }


def spec_text(rec: Recommendation, path: Path) -> str:
    """The spec file: YAML (with a comment saying where it comes from) or JSON."""
    spec = rec.spec()
    data = {"index": spec.index, "params": spec.params, "device": spec.device}
    if path.suffix.lower() == ".json":
        return json.dumps(data, indent=2) + "\n"
    assert rec.pick is not None
    s = rec.sample
    return (f"# written by `indexzoo recommend`: {rec.pick.label} on {rec.device}, "
            f"{rec.pick.throughput / 1e6:.3g} M lookups/s, {s.n:,} of {s.n_total:,} keys, "
            f"{s.n_lookups:,} lookups\n"
            f"# load it with indexzoo.create(indexzoo.load_spec({str(path.name)!r}))\n"
            f"index: {json.dumps(spec.index)}\n"
            f"params: {json.dumps(spec.params, default=str)}\n"
            f"device: {json.dumps(spec.device)}\n")


# ---------------------------------------------------------------------- CLI
def add_cli(sub: Any) -> None:
    s = sub.add_parser(
        "recommend", help="measure the installed indexes on your keys and lookups; write the "
        "fastest (or the smaller of two tied) as a spec file")
    s.add_argument("keys", nargs="?", metavar="KEYS_FILE",
                   help=".npy (any key dtype) or text file with one key per line")
    s.add_argument("--workload", metavar="SPEC",
                   help="the lookups (and, without KEYS_FILE, the keys): a workload file "
                   "(YAML/TOML/JSON, the fields of indexzoo.tools.workloads.Workload) or a bench "
                   "preset name; default: point lookups that all hit")
    s.add_argument("--key-dtype", default="uint64", metavar="DTYPE",
                   help="dtype of a text KEYS_FILE (default uint64)")
    s.add_argument("--memory-budget", metavar="BYTES",
                   help="leave out indexes whose footprint for all keys would exceed this "
                   "(e.g. 2GB, 512MiB, 1e9)")
    s.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    s.add_argument("--indexes", default="all",
                   help="'all' (default: every registered index, the lightweight family "
                   "represented by its decision tree's picks), 'builtin', or comma-separated "
                   "index names (measured as named)")
    s.add_argument("--out-mode", dest="out_mode", choices=("rowid", "count", "sum", "rowids"),
                   help="what lookups return (default: rowid for points, count for ranges)")
    s.add_argument("--ordered", action="store_true",
                   help="results must come from an ascending array (the lightweight tree's "
                   "input)")
    s.add_argument("--repeats", type=int, default=5, help="timed repetitions (default 5)")
    s.add_argument("--json", action="store_true",
                   help="print the measurements and the pick as one JSON object instead of "
                   "the table (the spec file is written as without it)")
    s.add_argument("--max-keys", type=int, metavar="N",
                   help=f"keys measured at most (default {KEY_CAP['cpu']:,} on cpu, "
                   f"{KEY_CAP['cuda']:,} on cuda)")
    s.add_argument("--max-lookups", type=int, metavar="N",
                   help=f"lookups measured at most (default {LOOKUP_CAP['cpu']:,} on cpu, "
                   f"{LOOKUP_CAP['cuda']:,} on cuda)")
    s.add_argument("--out", default=DEFAULT_OUT, metavar="FILE",
                   help=f"spec file to write (.yaml/.yml/.json; default {DEFAULT_OUT})")
    s.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    s.set_defaults(func=cmd_recommend)


def cmd_recommend(args: argparse.Namespace, out: TextIO) -> int:
    from .runner import KeyFile, load_keys

    if args.keys is None and args.workload is None:
        raise ConfigError("recommend: give a KEYS_FILE, a --workload, or both")
    budget = parse_bytes(args.memory_budget) if args.memory_budget is not None else None
    for flag, v in (("--repeats", args.repeats), ("--max-keys", args.max_keys),
                    ("--max-lookups", args.max_lookups)):
        if v is not None and v < 1:
            raise ConfigError(f"{flag} must be at least 1, got {v}")
    if args.keys is not None:  # the input first: a missing key file is the first thing to fix
        check_regular_file(Path(args.keys), "key file")
    target = Path(args.out)
    _check_output(target, args.force)
    names = named(args.indexes, out)
    if not names:
        raise ConfigError("--indexes: no index selected")
    workload = _load_workload(args.workload) if args.workload else Workload(name="recommend")
    keys = None
    if args.keys is not None:
        keys = load_keys(KeyFile(path=args.keys, dtype=args.key_dtype))
    device = resolve_device(args.device)
    key_cap = args.max_keys or KEY_CAP[device]
    lookup_cap = args.max_lookups or LOOKUP_CAP[device]
    sample = make_sample(keys, workload, device, key_cap, lookup_cap,
                         source=f"key file {shown_path(args.keys)}" if args.keys else "")
    del keys
    sys.stderr.write(f"indexzoo recommend on {device}: {sample.n:,} keys measured "
                     f"(of {sample.n_total:,}; cap {key_cap:,}), {sample.n_lookups:,} lookups "
                     f"(cap {lookup_cap:,})\n")
    rec = recommend_indexes(sample, device, names, args.out_mode, budget, args.repeats,
                            args.ordered, use_tree=args.indexes in ("all", "builtin"))
    interrupts.check()
    if not args.json:
        out.write(format_report(rec) + "\n")
    if rec.pick is None:
        if args.json:
            json.dump(report_json(rec, None), out, indent=2, default=repr)
            out.write("\n")
        return 1
    text = spec_text(rec, target).encode()
    try:  # checked again: a file may have appeared at --out while the indexes were measured
        publish(target.parent, [target.name], [Member("", lambda f: f.write(text))],
                replace=args.force)
    except FileExistsError:
        raise ConfigError(f"--out {shown_path(target)} appeared while recommend measured; the "
                          "pick above is not written: use --force to overwrite it, or --out "
                          "FILE") from None
    except IsADirectoryError:  # --force never replaces a folder
        raise ConfigError(f"--out {shown_path(target)} is a directory (made while recommend "
                          "measured); the pick above is not written: use --out FILE") from None
    if args.json:
        json.dump(report_json(rec, target), out, indent=2, default=repr)
        out.write("\n")
    else:
        out.write(f"wrote {target}\n")
    return 0
