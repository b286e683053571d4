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

This module is the command line; the runner is :mod:`.benchrun`, the table
:mod:`.benchtable`, the JSON :mod:`.benchjson` (their public names are exported here too).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from indexzoo.devices import resolve_device
from indexzoo.display import printable, shown
from indexzoo.envvars import RANK_BUDGET
from indexzoo.errors import ConfigError, MissingDependency
from indexzoo.registry import named
from indexzoo.resources import check_fits, estimate_workload

from . import interrupts
from .benchjson import (
    ResultsFile,
    header,
    prepare_output,
    publish_plots,
    remove_if_empty,
    timestamp,
    write_json,
)
from .benchrun import (
    LATENCY_BATCHES,
    PEER,
    PRESETS,
    SWEEPS,
    Contender,
    bench_entries,
    keep_built,
    rank_rounds,
    run_bench,
    sweep_workloads,
    time_interleaved,
)
from .benchtable import (
    format_latency,
    format_references,
    format_table,
    format_warnings,
    overlap_groups,
)
from .compare import SavedRun, compare, format_report, load_saved, regressions
from .environment import environment
from .estimate import SAMPLE, DurationEstimate, estimate_bench, time_budget, within_budget
from .options import load_workload, option_value, parse_assignment
from .plots import PlotInfo, plot_files
from .progress import Progress
from .publish import Member
from .records import Entry, Record
from .workloads import Workload

__all__ = ["LATENCY_BATCHES", "PEER", "PRESETS", "SWEEPS", "Contender", "Entry", "Record",
           "ResultsFile", "add_cli", "bench_entries", "environment", "format_latency",
           "format_references", "format_table", "format_warnings", "header", "keep_built",
           "overlap_groups", "prepare_output", "publish_plots", "rank_rounds", "remove_if_empty",
           "run_bench", "sweep_workloads", "time_interleaved", "timestamp", "write_json"]

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


#: The names :func:`indexzoo.tools.plots.plot_files` gives a run's PNGs, after the JSON's stem.
_PLOT_SUFFIXES = (".png", "-pareto.png")


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
    return publish_plots(stem, members)


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
    created = prepare_output(folder)  # before any work: results are never lost at the end
    try:
        return _bench(args, out, device, workloads, entries, latency, folder, with_plot, saved)
    finally:
        if created:
            remove_if_empty(folder)  # nothing was written (an error, an interrupt)


def _saved_run(args: argparse.Namespace) -> SavedRun | None:
    """The run named by --compare, read and checked before any work (with --fail-above)."""
    if args.fail_above is not None:
        if args.compare is None:
            raise ConfigError("--fail-above needs --compare OLD.json (the run to compare with)")
        if not (math.isfinite(args.fail_above) and args.fail_above >= 0):
            raise ConfigError(f"--fail-above must be a percentage >= 0, got {args.fail_above}")
    return load_saved(Path(args.compare)) if args.compare is not None else None
def _check_duration(args: argparse.Namespace, device: str, workloads: list[Workload],
                    entries: list[Entry], steps: Progress) -> None:
    """Refuse (ConfigError) a run estimated (:mod:`indexzoo.tools.estimate`) to exceed
    --time-budget unless --yes is given; state the estimate of any other on standard error."""
    def estimate(limit: float | None) -> DurationEstimate | None:
        return estimate_bench(workloads, bench_entries(entries), device, args.repeats,
                              args.out_mode, steps, limit=limit,
                              rank_budget=0.0 if args.sequential else args.rank_budget)

    within_budget(estimate, time_budget(args.time_budget, device), args.yes, device,
                  f"samples of 2^{SAMPLE.bit_length() - 1} keys")


def _bench(args: argparse.Namespace, out: TextIO, device: str, workloads: list[Workload],
           entries: list[Entry], latency: bool, folder: Path, with_plot: bool,
           saved: SavedRun | None = None) -> int:
    biggest = max(workloads, key=lambda w: estimate_workload(w, args.out_mode).total)
    check_fits(estimate_workload(biggest, args.out_mode), device,
               f"the benchmark's largest workload ({biggest.describe()})")
    env = environment(device)
    sys.stderr.write(header(device, env) + "\n")
    stamp = timestamp(_dt.datetime.now())
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
