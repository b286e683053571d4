"""``indexzoo bench --preset ssb``: the 13 SSB queries over SSB flat, every query engine and
DuckDB side by side.

Per scale factor (default: 1 on the CPU, 10 and 20 on a GPU; ``--sf``) the flat table is
generated (:mod:`indexzoo.query.ssb`), each engine prepares one view per query (the paper's BVH per
query template; build time reported apart) and every answer, ORDER BY kept, is checked
against DuckDB's. Then each query without ORDER BY (as the paper timed it) is timed
``--repeats`` times after warm-up runs (:data:`WARM_UP_SECONDS` of them, one at least: after
the GPU sat idle while DuckDB ran, one warm-up run left a sub-millisecond engine's times
uneven), per engine and for DuckDB, and a table prints per
query: the median time, the engine's bytes read against the bandwidth floor (one read of the
columns the query needs), the time against the read floor (those bytes over the device's copy
bandwidth, measured in the same run: a copy of 1 GiB on a GPU, 256 MiB on the CPU, read plus
write), and the ratios to ``crystal`` and to DuckDB. A wrong answer is reported and makes the
command exit 1.

Results are written as ``indexzoo bench`` writes them (:mod:`indexzoo.tools.bench`): the run
starts with the commit header on standard error, where its progress goes too; the JSON
(``format_version``, ``complete``) gets a name of its own, ``ssb-DEVICE-sfSF-YYYYmmdd-HHMMSS``
(``-2``, ``-3``, ... where that is taken: an earlier run is never replaced), after the first
scale factor, and is rewritten after each further one; the PNG follows, named after it.

Before it starts, the run estimates its duration (:func:`estimate_ssb`, on SSB flat at
:data:`SAMPLE_SF`) and keeps to ``--time-budget`` exactly as ``bench`` does
(:func:`indexzoo.tools.estimate.within_budget`): a run estimated past it is refused, in one
line, unless ``--yes``; any other states its estimate on standard error.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from indexzoo import query_engine, query_engines
from indexzoo.display import printable
from indexzoo.errors import MissingDependency
from indexzoo.query import QueryResult, Table, floor_bytes, ssb

from . import interrupts
from .benchjson import (
    ResultsFile,
    header,
    prepare_output,
    publish_plots,
    remove_if_empty,
    timestamp,
)
from .environment import environment
from .estimate import DurationEstimate, time_budget, within_budget
from .progress import NO_PROGRESS, Progress
from .publish import Member

__all__ = ["SAMPLE_SF", "cmd_ssb", "estimate_ssb", "publish_plot", "results_file", "run_ssb"]

DUCKDB = "duckdb"


def _sync(device: str) -> None:
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()


#: Seconds of warm-up runs (one at least) before a query's timed runs on an engine.
WARM_UP_SECONDS = 0.25


def _timed(fn: Callable[[], Any], device: str, repeats: int,
           warm_up: float | None = None) -> tuple[float, float, Any]:
    """(median s, spread s, last result) of ``repeats`` runs after ``warm_up`` seconds
    (default :data:`WARM_UP_SECONDS`) of warm-up runs, at least one."""
    warm_up = WARM_UP_SECONDS if warm_up is None else warm_up
    start = time.perf_counter()
    out = fn()
    _sync(device)
    while time.perf_counter() - start < warm_up:
        out = fn()
        _sync(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times), max(times) - min(times), out


#: The array ``copy_bandwidth`` copies, in bytes, by device.
COPY_BYTES = {"cuda": 1 << 30, "cpu": 1 << 28}
#: Copies ``copy_bandwidth`` makes by default: two warm-ups and ten timed.
COPIES = 12


def copy_bandwidth(device: str, repeats: int = COPIES - 2) -> float:
    """Bytes a second ``device`` moves in a copy of one array into another (read plus write;
    the median of ``repeats`` after two warm-ups): 1 GiB on a GPU, 256 MiB on the CPU."""
    nbytes = COPY_BYTES[device]
    if device == "cuda":
        import cupy

        src = cupy.ones(nbytes // 4, dtype=cupy.int32)
        dst = cupy.empty_like(src)
        times = []
        for _ in range(repeats + 2):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            cupy.copyto(dst, src)
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    else:
        import numpy as np

        a = np.ones(nbytes // 4, dtype=np.int32)
        b = np.empty_like(a)
        times = []
        for _ in range(repeats + 2):
            t = time.perf_counter()
            np.copyto(b, a)
            times.append(time.perf_counter() - t)
    return 2 * nbytes / statistics.median(times[2:])


def read_bandwidth(device: str, repeats: int = COPIES - 2) -> float | None:
    """Bytes a second the GPU reads in one plain 16-byte vector read of 1 GiB
    (:class:`~indexzoo.tools.floor_kernel.VectorRead`; the median of ``repeats`` after two
    warm-ups), None on the CPU. On a GPU a read alone can beat a copy's read plus write
    (an H200 read 3.98 TB/s where a copy moved 4.18), so the floor takes the faster."""
    if device != "cuda":
        return None
    import cupy

    from indexzoo.tools.floor_kernel import VectorRead

    nbytes = COPY_BYTES[device]
    read = VectorRead(cupy.ones(nbytes // 4, dtype=cupy.uint32))
    times = []
    for _ in range(repeats + 2):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        read()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    if read.total() != (nbytes // 4) & 0xFFFFFFFF:
        raise RuntimeError("the vector read did not read every word")  # never a false floor
    return nbytes / statistics.median(times[2:])


def _duckdb_run(con: Any, text: str) -> Any:
    return con.execute(text).fetchall()


def _same(got: QueryResult, want: QueryResult) -> bool:
    import numpy as np

    if list(got.columns) != list(want.columns):
        return False
    for k, w in want.columns.items():
        g = got.columns[k]
        if g.shape != w.shape:
            return False
        if not w.size:
            continue
        if w.dtype.kind == "f":
            if not np.allclose(g, w, rtol=1e-12):
                return False
        elif not np.array_equal(g.astype(w.dtype), w):
            return False
    return True


def run_ssb(sfs: Sequence[float], engines: Sequence[str], device: str, repeats: int,
            queries: Sequence[str], out: TextIO, seed: int = 0,
            on_sf_done: Callable[[list[dict[str, Any]]], object] | None = None,
            steps: Progress = NO_PROGRESS, log: TextIO | None = None) -> list[dict[str, Any]]:
    """Every (scale factor, query, engine) record: times, bytes, answer check. The tables go
    to ``out``; progress to ``steps`` (status lines) and ``log`` (standard error by default);
    ``on_sf_done`` gets the records so far after each scale factor."""
    import duckdb

    log = sys.stderr if log is None else log
    records: list[dict[str, Any]] = []
    for sf in sfs:
        t0 = time.perf_counter()
        with steps.step(f"bench ssb SF {sf:g}: generating the table", keep=False):
            table: Table = ssb.generate(sf, seed=seed)
        print(f"SF {sf:g}: {table.n_rows:,} rows generated in {time.perf_counter() - t0:.1f} s",
              file=log, flush=True)
        with steps.step(f"bench ssb SF {sf:g}: measuring the copy bandwidth", keep=False):
            copied = copy_bandwidth(device)
            read = read_bandwidth(device)
        bandwidth = copied if read is None else max(copied, read)
        print(f"copy bandwidth of {device}: {copied / 1e9:.0f} GB/s (read + write)", file=out,
              flush=True)
        if read is not None:
            print(f"read bandwidth of {device}: {read / 1e9:.0f} GB/s (16-byte vector read); the "
                  f"read floor uses the faster, {bandwidth / 1e9:.0f} GB/s", file=out, flush=True)
        con = duckdb.connect()
        con.register(ssb.TABLE, ssb.to_arrow(table))
        for i, name in enumerate(queries, 1):
            interrupts.check()
            with steps.step(f"bench ssb SF {sf:g}, query {i}/{len(queries)} {name}",
                            keep=False) as st:
                rows = _query_rows(con, table, name, engines, device, repeats, st.update)
            records.extend(_with_ratios(rows, table, name, sf, bandwidth))
            print(format_rows(list(rows.values())), file=out, flush=True)
        if on_sf_done is not None:
            on_sf_done(records)
    return records


#: The scale factors the duration estimate is calibrated on (:func:`estimate_ssb`): this one
#: and half of it.
SAMPLE_SF = 0.01
#: What a refused run can change.
ADVICE = ("smaller scale factors (--sf), fewer engines (--engines) or queries (--queries), or "
          "fewer --repeats")


#: Timed calls of each query's run in the estimate (the fastest counts: the others met a
#: busy machine).
RUNS_TIMED = 3


def _seconds(fn: Callable[[], Any], device: str, times: int = 1) -> float:
    """The fewest seconds of ``times`` calls of ``fn``, after an untimed one (which
    compiles)."""
    fn()
    _sync(device)
    interrupts.check()
    best = math.inf
    for _ in range(times):
        t = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t)
    return best


def _runs(t: float, repeats: int) -> float:
    """Seconds :func:`_timed` spends on ``repeats`` runs of ``t`` seconds (the warm-up runs
    for :data:`WARM_UP_SECONDS`, one at least)."""
    return max(t, WARM_UP_SECONDS) + repeats * t


@dataclass(frozen=True)
class _Line:
    """Seconds of one call as a line in the scale factor through its times on the two
    samples: a fixed part (launches, allocations, DuckDB's planning), which a line through the
    origin would multiply with the rows, and a part per unit of scale factor (never negative:
    a call timed faster on the larger sample is taken as all fixed)."""

    fixed: float
    per_sf: float

    @staticmethod
    def through(small: float, large: float) -> _Line:
        """The line through both times, its slope kept between none and that of the line
        through the origin and ``large`` (timing noise on calls of a millisecond would
        otherwise multiply into minutes at a large scale factor)."""
        s1, s2 = SAMPLE_SF / 2, SAMPLE_SF
        per = min(max((large - small) / (s2 - s1), 0.0), large / s2)
        return _Line(large - per * s2, per)

    def at(self, sf: float) -> float:
        return self.fixed + self.per_sf * sf


def _lines(samples: Iterable[tuple[float, ...]]) -> list[_Line]:
    """The calls' lines from their times on the small sample and on the large one."""
    small, large = samples
    return [_Line.through(a, b) for a, b in zip(small, large, strict=True)]


def _duckdb_calls(con: Any, table: Table, spec: Any) -> tuple[float, float]:
    """Seconds of DuckDB's answer to ``spec`` over ``table`` (registered in ``con``) and of
    one timed run of it, ORDER BY removed."""
    answer = _seconds(functools.partial(ssb.duckdb_answer, table, spec, con), "cpu")
    run = _seconds(functools.partial(_duckdb_run, con, ssb.sql(spec.without_order())), "cpu",
                   RUNS_TIMED)
    return answer, run


def _engine_calls(eng: Any, table: Table, spec: Any, name: str,
                  device: str) -> tuple[float, float, float]:
    """Seconds of ``eng`` preparing its view of ``spec`` over ``table``, of the checked run
    and of one timed run (ORDER BY removed), each after an untimed call (which compiles)."""
    eng.prepare(table, [spec], name=name)
    _sync(device)
    interrupts.check()
    t = time.perf_counter()
    view = eng.prepare(table, [spec], name=name)
    _sync(device)
    prepare = time.perf_counter() - t
    check = _seconds(functools.partial(eng.run, view, spec), device)
    run = _seconds(functools.partial(eng.run, view, spec.without_order()), device, RUNS_TIMED)
    return prepare, check, run


def estimate_ssb(sfs: Sequence[float], engines: Sequence[str], device: str, repeats: int,
                 queries: Sequence[str], steps: Progress = NO_PROGRESS,
                 limit: float | None = None) -> DurationEstimate | None:
    """How long :func:`run_ssb` will take, as ``bench`` estimates its own
    (:mod:`indexzoo.tools.estimate`), calibrated right before the run on SSB flat at
    :data:`SAMPLE_SF` and at half of it: DuckDB answers and runs each query, and each engine
    prepares, checks and runs it, each after an untimed call (which compiles), timed once (a
    run: the fastest of :data:`RUNS_TIMED`). Each
    call's two times give a line in the scale factor (:class:`_Line`: a fixed part and a part
    that grows with the rows), read at each scale factor and counted as often as the run makes
    that call (the answer, the check, the warm-up and the ``repeats``); the table's generation
    is scaled with the rows, and the copies of :func:`copy_bandwidth` are timed at their size
    (three of them). None where every scale factor is within the sample's; once the estimate
    passes ``limit`` seconds it stops, incomplete (a lower bound)."""
    if all(sf <= SAMPLE_SF for sf in sfs):
        return None
    import duckdb

    est = DurationEstimate()
    sizes = (SAMPLE_SF / 2, SAMPLE_SF)
    with steps.step("estimating the duration") as st:
        st.update(f"generating SSB flat at SF {SAMPLE_SF / 2:g} and {SAMPLE_SF:g}")
        tables = [ssb.generate(sizes[0])]
        t = time.perf_counter()
        tables.append(ssb.generate(sizes[1]))
        est.generation = (time.perf_counter() - t) * sum(sfs) / SAMPLE_SF
        st.update("the copy bandwidth")
        copy = 2 * COPY_BYTES[device] / copy_bandwidth(device, repeats=1)
        est.add("copy bandwidth", len(sfs) * COPIES * copy)
        cons = []
        for table in tables:
            cons.append(duckdb.connect())
            cons[-1].register(ssb.TABLE, ssb.to_arrow(table))
        for i, name in enumerate(queries, 1):
            spec = ssb.QUERIES[name]
            st.update(f"query {i}/{len(queries)} {name}: {DUCKDB}")
            answer, run = _lines(_duckdb_calls(con, table, spec)
                                 for con, table in zip(cons, tables, strict=True))
            est.add(DUCKDB, sum(answer.at(sf) + _runs(run.at(sf), repeats) for sf in sfs))
            for e in engines:
                st.update(f"query {i}/{len(queries)} {name}: {e}")
                eng = query_engine(e, device=device)
                prepare, check, run = _lines(_engine_calls(eng, table, spec, name, device)
                                             for table in tables)
                est.add(e, sum(prepare.at(sf) + check.at(sf) + _runs(run.at(sf), repeats)
                               for sf in sfs))
                if limit is not None and est.seconds > limit:
                    est.complete = False
                    return est
    return est


def _query_rows(con: Any, table: Table, name: str, engines: Sequence[str], device: str,
                repeats: int, say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """One query's measurements, DuckDB's first then each engine's, by engine."""
    spec = ssb.QUERIES[name]
    timed = spec.without_order()
    say("duckdb")
    want = ssb.duckdb_answer(table, spec, con)
    text = ssb.sql(timed)
    med, spread, _ = _timed(functools.partial(_duckdb_run, con, text), "cpu", repeats)
    rows: dict[str, dict[str, Any]] = {DUCKDB: {"engine": DUCKDB, "seconds": med, "spread": spread,
                                                "bytes_read": None, "build_seconds": 0.0,
                                                "correct": True}}
    for e in engines:
        say(e)
        eng = query_engine(e, device=device)
        t = time.perf_counter()
        view = eng.prepare(table, [spec], name=name)
        build = time.perf_counter() - t
        ok = _same(eng.run(view, spec), want)
        med, spread, res = _timed(functools.partial(eng.run, view, timed), device, repeats)
        rows[e] = {"engine": e, "seconds": med, "spread": spread,
                   "bytes_read": int(res.bytes_read), "build_seconds": build,
                   "correct": ok, "stats": {k: v for k, v in res.stats.items()
                                            if isinstance(v, (int, float, str))}}
    return rows


def _with_ratios(rows: dict[str, dict[str, Any]], table: Table, name: str, sf: float,
                 bandwidth: float) -> list[dict[str, Any]]:
    """The rows of one query with the floor, the selectivity and the ratios."""
    spec = ssb.QUERIES[name]
    floor = floor_bytes(table, spec)
    base = rows.get("crystal", {}).get("seconds")
    for r in rows.values():
        r.update(sf=sf, query=name, floor_bytes=floor, bandwidth=bandwidth,
                 floor_seconds=floor / bandwidth,
                 x_floor=(None if r["engine"] == DUCKDB  # the CPU's, not the device's
                          else r["seconds"] / (floor / bandwidth)),
                 selectivity=ssb.selectivity(table, spec),
                 vs_crystal=(r["seconds"] / base) if base else None,
                 vs_duckdb=r["seconds"] / rows[DUCKDB]["seconds"])
    return list(rows.values())


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_rows(rows: Sequence[dict[str, Any]]) -> str:
    """One query's rows: engine, time, bytes vs floor, ratios."""
    r0 = rows[0]
    head = (f"{r0['query']} (SF {r0['sf']:g}, selectivity {r0['selectivity']:.2e}, floor "
            f"{_bytes(r0['floor_bytes'])}, read floor {r0['floor_seconds'] * 1e3:.3f} ms)")
    lines = [head, f"  {'engine':<22}{'ms':>10}{'x floor':>9}{'bytes read':>12}{'/floor':>8}"
                   f"{'x crystal':>11}{'x duckdb':>10}{'build s':>9}  answer"]
    for r in rows:
        share = "-" if r["bytes_read"] is None else f"{r['bytes_read'] / r['floor_bytes']:.3f}"
        vc = "-" if r["vs_crystal"] is None else f"{r['vs_crystal']:.2f}"
        xf = "-" if r["engine"] == DUCKDB else f"{r['x_floor']:.2f}"
        lines.append(f"  {r['engine']:<22}{r['seconds'] * 1e3:>10.3f}{xf:>9}"
                     f"{_bytes(r['bytes_read']):>12}{share:>8}{vc:>11}{r['vs_duckdb']:>10.2f}"
                     f"{r['build_seconds']:>9.2f}  {'= duckdb' if r['correct'] else 'WRONG'}")
    return "\n".join(lines)


def plot(records: Sequence[dict[str, Any]], env: dict[str, Any], file: Path | BinaryIO) -> None:
    """Per scale factor, time per query and engine (log scale), as a PNG to ``file`` (a path
    or an open binary file). The legend stands right of the bars, never over them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sfs = sorted({r["sf"] for r in records})
    fig, axes = plt.subplots(len(sfs), 1, figsize=(12.5, 3.6 * len(sfs)), squeeze=False)
    for ax, sf in zip(axes[:, 0], sfs, strict=True):
        rs = [r for r in records if r["sf"] == sf]
        queries = list(dict.fromkeys(r["query"] for r in rs))
        engines = list(dict.fromkeys(r["engine"] for r in rs))
        width = 0.8 / len(engines)
        for j, e in enumerate(engines):
            ys = [next(r["seconds"] * 1e3 for r in rs if r["query"] == q and r["engine"] == e)
                  for q in queries]
            ax.bar([i + j * width for i in range(len(queries))], ys, width, label=e)
        floors = [next(r["floor_seconds"] * 1e3 for r in rs if r["query"] == q) for q in queries]
        ax.scatter([i + 0.4 - width / 2 for i in range(len(queries))], floors, marker="_",
                   s=400, color="black", label="read floor", zorder=3)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(queries))], queries)
        ax.set_yscale("log")
        ax.set_ylabel("ms (median)")
        ax.set_title(f"SSB flat, SF {sf:g}, {env.get('device_name', env.get('device', ''))}, "
                     f"commit {str(env.get('commit', ''))[:10]}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fig.savefig(file, dpi=110, format="png")
    plt.close(fig)


def results_file(folder: Path, device: str, sfs: Sequence[float], queries: Sequence[str],
                 env: dict[str, Any], with_plot: bool, log: TextIO | None = None,
                 stamp: str | None = None) -> ResultsFile:
    """The run's JSON (:class:`indexzoo.tools.benchjson.ResultsFile`, as ``bench`` writes
    its own): ``ssb-DEVICE-sfSF[-QUERIES]-YYYYmmdd-HHMMSS.json``, ``-2``, ``-3``, ... where
    that name or the PNG's is taken; written after each scale factor, ``complete`` with the
    last."""
    stem = f"ssb-{device}-sf{'-'.join(f'{s:g}' for s in sfs)}"
    if list(queries) != list(ssb.QUERIES):
        stem += "-" + "-".join(queries)
    stem += "-" + (timestamp() if stamp is None else stamp)
    return ResultsFile(folder / stem, env, len(sfs), log, (".png",) if with_plot else (),
                       to_json=dict, unit="scale factor")


def publish_plot(records: Sequence[dict[str, Any]], env: dict[str, Any], stem: Path) -> Path:
    """The PNG, named after the JSON's ``stem`` (``STEM.png``), never over a file there
    (:func:`indexzoo.tools.benchjson.publish_plots`)."""
    (path,) = publish_plots(stem, [Member(".png", functools.partial(plot, records, env))])
    return path


def cmd_ssb(args: argparse.Namespace, device: str, out: TextIO) -> int:
    sfs = [float(s) for s in args.sf.split(",")] if args.sf else \
        ([1.0] if device == "cpu" else [10.0, 20.0])
    known = list(query_engines())
    engines = known if args.engines in (None, "all") else args.engines.split(",")
    unknown = [e for e in engines if e not in known]
    if unknown:
        from indexzoo import ConfigError

        raise ConfigError(f"unknown query engines {', '.join(unknown)}; registered: "
                          f"{', '.join(known)}")
    if "crystal" in engines:  # the peer first: the others' ratios read its time
        engines = ["crystal", *(e for e in engines if e != "crystal")]
    queries = list(ssb.QUERIES) if not getattr(args, "queries", None) else args.queries.split(",")
    bad = [q for q in queries if q not in ssb.QUERIES]
    if bad:
        from indexzoo import ConfigError

        raise ConfigError(f"unknown SSB queries {', '.join(bad)}; they are "
                          f"{', '.join(ssb.QUERIES)}")
    for option, given in (("--compare", getattr(args, "compare", None)),
                          ("--fail-above", getattr(args, "fail_above", None))):
        if given is not None:
            from indexzoo import ConfigError

            raise ConfigError(f"{option} does not apply to --preset ssb (it has no comparison "
                              "with a saved run)")
    budget = time_budget(getattr(args, "time_budget", None), device)  # checked before any work
    with_plot = not args.no_plot
    if with_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise MissingDependency("matplotlib", "bench", "writing benchmark plots") from None
    folder = Path(args.output)
    created = prepare_output(folder)  # before any work: results are never lost at the end
    try:
        return _ssb(args, device, out, sfs, engines, queries, folder, with_plot, budget)
    finally:
        if created:
            remove_if_empty(folder)  # nothing was written (an error, an interrupt)


def _ssb(args: argparse.Namespace, device: str, out: TextIO, sfs: list[float],
         engines: list[str], queries: list[str], folder: Path, with_plot: bool,
         budget: float | None) -> int:
    env = environment(device)
    sys.stderr.write(header(device, env, "indexzoo bench --preset ssb") + "\n")
    steps = Progress()

    def estimate(limit: float | None) -> DurationEstimate | None:
        return estimate_ssb(sfs, engines, device, args.repeats, queries, steps, limit)

    within_budget(estimate, budget, getattr(args, "yes", False), device,
                  f"SSB flat at SF {SAMPLE_SF:g}", ADVICE)
    results = results_file(folder, device, sfs, queries, env, with_plot, sys.stderr)
    records = run_ssb(sfs, engines, device, args.repeats, queries, out,
                      on_sf_done=results.update, steps=steps)
    interrupts.check()
    written = [results.path] if results.path is not None else []
    if written and with_plot and records:
        written.append(publish_plot(records, env, results.named_stem))
    for f in written:
        out.write(f"wrote {printable(str(f))}\n")
    wrong = sorted({f"{r['query']}/{r['engine']}" for r in records if not r["correct"]})
    if wrong:
        print(f"WRONG answers: {', '.join(wrong)}", file=out)
        return 1
    return 0
