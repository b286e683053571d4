"""``indexzoo bench --compare OLD.json``: this run against a saved one, index by index.

A record of this run and one of the saved run are compared when they have the same workload
name and the same index label (the ``index`` column of the table: the registered name, or
``NAME PARAM=VALUE`` in a ``--param-sweep``). Each comparison gets a verdict that takes the
spread of both figures into account:

* **within noise**: the two throughput ranges (slowest to fastest repetition) overlap, or the
  change of the medians is no larger than the two half spreads together;
* otherwise **faster** or **slower**, with the change of the median throughput,
  ``new / old - 1`` (``-30%``: this run does 30% fewer lookups per second).

A figure of one repetition states no range: its verdict counts every difference, and a note
says so. ``--fail-above PCT`` turns a verdict of *slower* by more than ``PCT`` percent into
exit code 1 (:func:`regressions`).

Saved runs of any format up to :data:`FORMAT_VERSION` are read (records are matched by their
table label: ``label`` from format 3 on, ``index`` before); files written before formats
were numbered (format 1) are read as long as their records carry ``workload``, ``index`` and
``throughput`` (the range comes from ``throughput_slowest``/``throughput_fastest``, else from
the repetitions ``lookup_seconds``, else from ``lookup_spread``). A file of a newer format is
refused with one line. A run measured on another device, or on a GPU with other clocks, power
limit or ECC mode, is compared with a warning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexzoo.display import printable, shown_path
from indexzoo.errors import ConfigError

from .records import Record

__all__ = ["FASTER", "FORMAT_VERSION", "LABEL_FIELD", "NOISE", "SLOWER", "Comparison", "Figure", "Report",
           "SavedRun", "compare", "figure_of", "format_report", "judge", "load_saved",
           "regressions"]

#: The format of the JSON that ``indexzoo bench`` writes (its top-level ``format_version``).
#: 1: no ``format_version`` (written before it was added); 2: ``format_version``,
#: ``complete``, and the GPU's clocks, power limit and ECC mode in ``environment``; 3: one name
#: per field: a record's ``index`` is the registered name and ``label`` the table's label
#: (format 2: ``index`` the label, ``index_name`` the registered name), and the medians
#: ``lookup_s`` and ``build_s``, twins of the repetitions ``lookup_seconds`` and
#: ``build_seconds``, are gone (the median lookup is ``n_lookups / throughput``).
FORMAT_VERSION = 3

#: The record field that holds the table's label (what runs are matched by), per format.
LABEL_FIELD = {1: "index", 2: "index", 3: "label"}

FASTER, SLOWER, NOISE = "faster", "slower", "within noise"


@dataclass(frozen=True)
class Figure:
    """One index on one workload, as far as a comparison needs it (lookups per second)."""

    workload: str
    index: str
    throughput: float  # the median repetition's
    slowest: float
    fastest: float
    half_spread: float  # the table's ``±``: (max - min) / median / 2 of the lookup seconds
    repetitions: int = 0  # 0: not recorded
    params: Mapping[str, Any] = field(default_factory=dict)
    workload_spec: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload, self.index)

    @classmethod
    def of(cls, r: Record) -> Figure:
        lo, hi = r.throughput_range
        return cls(r.workload, r.index, r.throughput, lo, hi, r.half_spread,
                   len(r.lookup_seconds) or 1, r.params, r.workload_spec)


def _positive(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _range(raw: Mapping[str, Any], tp: float) -> tuple[float, float]:
    """(slowest, fastest) throughput of a saved record, from what it carries."""
    lo, hi = _positive(raw.get("throughput_slowest")), _positive(raw.get("throughput_fastest"))
    if lo is not None and hi is not None:
        return min(lo, tp), max(hi, tp)
    seconds = [s for s in map(_positive, raw.get("lookup_seconds") or []) if s is not None]
    n = _positive(raw.get("n_lookups"))
    if seconds and n is not None:
        return min(n / max(seconds), tp), max(n / min(seconds), tp)
    half = (_positive(raw.get("lookup_spread")) or 0.0) / 2
    return tp / (1 + half), (tp / (1 - half) if half < 1 else math.inf)


def figure_of(raw: Any, version: int = FORMAT_VERSION) -> Figure | None:
    """The figure of one saved record of format ``version``; None where it lacks a workload,
    a label (:data:`LABEL_FIELD`) or a positive, finite throughput."""
    if not isinstance(raw, Mapping):
        return None
    tp = _positive(raw.get("throughput"))
    workload, index = raw.get("workload"), raw.get(LABEL_FIELD[min(version, FORMAT_VERSION)])
    if tp is None or not isinstance(workload, str) or not isinstance(index, str):
        return None
    lo, hi = _range(raw, tp)
    half = _positive(raw.get("half_spread"))
    if half is None:
        half = (_positive(raw.get("lookup_spread")) or 0.0) / 2
    seconds = raw.get("lookup_seconds")
    params, spec = raw.get("params"), raw.get("workload_spec")
    return Figure(workload, index, tp, lo, hi, half,
                  len(seconds) if isinstance(seconds, list) else 0,
                  params if isinstance(params, Mapping) else {},
                  spec if isinstance(spec, Mapping) else {})


@dataclass(frozen=True)
class SavedRun:
    """A result file of ``indexzoo bench``, read for comparison."""

    path: Path
    format_version: int
    environment: Mapping[str, Any]
    figures: dict[tuple[str, str], Figure]
    complete: bool = True


def load_saved(path: Path, option: str = "--compare") -> SavedRun:
    """Read a result file; ConfigError (one line naming ``option`` and the file) if it cannot
    be read, is not a result of ``indexzoo bench``, is of a newer format than this code reads,
    or has no record to compare."""
    where = f"{option} {shown_path(path)}"
    try:
        payload = json.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{where}: not a JSON file ({printable(str(exc))[:120]})") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("records"), list):
        raise ConfigError(f"{where}: not a result of indexzoo bench (no list of records)")
    version = payload.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"{where}: format_version must be a whole number >= 1, got "
                          f"{printable(repr(version))[:40]}")
    if version > FORMAT_VERSION:
        raise ConfigError(f"{where}: format_version {version} is newer than this indexzoo reads "
                          f"(up to {FORMAT_VERSION}); compare with the indexzoo that wrote it")
    figures = {f.key: f for f in (figure_of(r, version) for r in payload["records"])
               if f is not None}
    if not figures:
        raise ConfigError(f"{where}: no record with a workload, an index and a throughput")
    env = payload.get("environment")
    return SavedRun(path, version, env if isinstance(env, dict) else {}, figures,
                    payload.get("complete", True) is not False)


@dataclass(frozen=True)
class Comparison:
    """One index on one workload in both runs, and the verdict."""

    old: Figure
    new: Figure
    change: float  # new / old - 1 of the median throughput
    verdict: str  # FASTER, SLOWER or NOISE

    @property
    def workload(self) -> str:
        return self.new.workload

    @property
    def index(self) -> str:
        return self.new.index


def judge(old: Figure, new: Figure) -> Comparison:
    """The verdict on ``new`` against ``old`` (see the module docstring)."""
    change = new.throughput / old.throughput - 1
    overlap = old.slowest <= new.fastest and new.slowest <= old.fastest
    if overlap or abs(change) <= old.half_spread + new.half_spread:
        return Comparison(old, new, change, NOISE)
    return Comparison(old, new, change, FASTER if change > 0 else SLOWER)


@dataclass
class Report:
    """A run against a saved one: the comparisons, what only one of them has, and notes."""

    rows: list[Comparison]
    only_new: list[Figure]
    only_old: list[Figure]
    notes: list[str]


def compare(saved: SavedRun, records: Sequence[Record], env: Mapping[str, Any]) -> Report:
    """Compare this run's records (measured where ``env`` says) with a saved run."""
    news = [Figure.of(r) for r in records]
    rows = [judge(saved.figures[f.key], f) for f in news if f.key in saved.figures]
    keys = {f.key for f in news}
    notes = _machine_notes(saved.environment, env)
    if not saved.complete:
        notes.append("note: the saved run did not finish; it has the workloads it completed")
    notes += _workload_notes(rows) + _param_notes(rows)
    if any(min(c.old.repetitions, c.new.repetitions) == 1 for c in rows):
        notes.append("note: a figure of one repetition states no spread, so its verdict counts "
                     "every difference (use --repeats 5)")
    return Report(rows, [f for f in news if f.key not in saved.figures],
                  [f for k, f in saved.figures.items() if k not in keys], notes)


def regressions(report: Report, above_pct: float) -> list[Comparison]:
    """The comparisons slower (beyond noise) by more than ``above_pct`` percent."""
    return [c for c in report.rows if c.verdict == SLOWER and -c.change * 100 > above_pct]


# ---------------------------------------------------------------------- notes
def _where(env: Mapping[str, Any]) -> str:
    return f"{env.get('device', '?')} ({env.get('device_name', '?')})"


_GPU_STATE = {"power_limit_w": "power limit (W)", "ecc": "ECC"}
_CLOCKS = {"sm_max_mhz": "max SM clock (MHz)", "mem_max_mhz": "max memory clock (MHz)"}


def _machine_notes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """A warning where the saved run was measured on another device, or on a GPU set up
    differently (power limit, ECC, maximum clocks); nothing where either does not say."""
    if (old.get("device"), old.get("device_name")) != (new.get("device"), new.get("device_name")):
        return [f"warning: the saved run was measured on {_where(old)}, this one on "
                f"{_where(new)}: differences may come from the machines"]
    diffs = [f"{label} {old[k]} -> {new[k]}" for k, label in _GPU_STATE.items()
             if old.get(k) not in (None, "unknown") and new.get(k) not in (None, "unknown")
             and old[k] != new[k]]
    old_clocks, new_clocks = old.get("gpu_clocks") or {}, new.get("gpu_clocks") or {}
    diffs += [f"{label} {old_clocks[k]} -> {new_clocks[k]}" for k, label in _CLOCKS.items()
              if old_clocks.get(k) is not None and new_clocks.get(k) is not None
              and old_clocks[k] != new_clocks[k]]
    if diffs:
        return ["warning: the GPU is set up differently from the saved run's ("
                + ", ".join(diffs) + "): differences may come from that"]
    return []


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], skip: set[str]) -> list[str]:
    return [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in dict.fromkeys([*old, *new])
            if k not in skip and old.get(k) != new.get(k)]


def _workload_notes(rows: Sequence[Comparison]) -> list[str]:
    notes = []
    for w in dict.fromkeys(c.workload for c in rows):
        c = next(c for c in rows if c.workload == w)
        if c.old.workload_spec and c.new.workload_spec:
            diff = _differences(c.old.workload_spec, c.new.workload_spec, {"name"})
            if diff:
                notes.append(f"warning: workload {w} is not the saved run's ({', '.join(diff)}): "
                             "its rows compare different work")
    return notes


def _param_notes(rows: Sequence[Comparison]) -> list[str]:
    notes = []
    for c in rows:
        if c.old.params and c.new.params:
            diff = _differences(c.old.params, c.new.params, set())
            if diff:
                notes.append(f"note: {c.index} on {c.workload} has other parameters than in the "
                             f"saved run ({', '.join(diff)})")
    return notes


# ---------------------------------------------------------------------- output
def _rate(x: float) -> str:
    return f"{x / 1e6:.1f}" if x >= 1e6 else f"{x / 1e6:.3f}"


def _figure(f: Figure) -> str:
    h = f.half_spread * 100
    spread = "" if f.repetitions == 1 else f"±{h:.0f}%" if h >= 1 or h == 0 else f"±{h:.1f}%"
    return f"{_rate(f.throughput)} {spread}".rstrip()


def _change(x: float) -> str:
    return f"{x * 100:+.1f}%" if abs(x) < 0.01 else f"{x * 100:+.0f}%"


def _pairs(figures: Sequence[Figure]) -> str:
    return ", ".join(f"{f.index} on {f.workload}" for f in figures)


def format_report(report: Report, saved: SavedRun) -> list[str]:
    """Lines for under the run's table: a heading naming the saved run, one row per compared
    index and workload (old and new M lookups/s with their spreads, the change, the verdict),
    what only one run has, and the notes."""
    env = saved.environment
    lines = [f"compared with {shown_path(saved.path)} (commit {env.get('commit', '?')}, "
             f"{_where(env)})"]
    head = ["workload", "index", "old M lookups/s", "new M lookups/s", "change", "verdict"]
    body = [[c.workload, c.index, _figure(c.old), _figure(c.new), _change(c.change),
             c.verdict] for c in report.rows]
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h)
              for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in (2, 3, 4) else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    lines += [line(head), "  ".join("-" * w for w in widths), *map(line, body)]
    if report.only_new:
        lines.append(f"not in the saved run: {_pairs(report.only_new)}")
    if report.only_old:
        lines.append(f"only in the saved run: {_pairs(report.only_old)}")
    return [printable(t) for t in lines + report.notes]
