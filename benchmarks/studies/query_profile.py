"""Where an SSB query's time goes on the GPU, for `crystal` or `rtcudb-sorted`: the wall time
of the whole query, the same query with every stage timed alone (a synchronisation before and
after each), and a host profile (cProfile), against the query's read floor: the bytes of the
columns it needs over the device's bandwidth, measured in the same run: the faster of a
device-to-device copy of 1 GiB (read plus write) and a plain 16-byte vector read of 1 GiB.

    python benchmarks/studies/query_profile.py --engine rtcudb-sorted --sf 10 --queries q1.1,q3.4

The wall time is what `indexzoo bench --preset ssb` reports (the ORDER BY removed). The stages
are the prepared query's launches (``crystal``: the query's kernel and the compaction;
``rtcudb-sorted``: the slice search, the sorted kernel and the compaction), the reset of the
result buffer, the scan of the slice lengths, the copy back and the host's regrouping; what the
stages leave of the timed wall is the rest of the host's work. A stage timed alone includes its
launch; ``empty launch`` is the cost of a kernel that does nothing, for scale. ``--params``
passes engine parameters as JSON (e.g. '{"shared_slots": 0}'); repeat it to compare settings.
While its stages are timed or marked, a crystal query on the GPU runs its launches one by one
(not as the CUDA graph a run launches from the second run on), so that each is seen; its copy
back is then the wait before ``packed_records`` (or the end, for one slot).

Timing a stage alone adds synchronisations, which a run does not have: a launch's host cost
then hides the GPU's work. So the runs are also marked, without any synchronisation, at the
entry and exit of the same helpers and launches ("marks": median microseconds between
consecutive marks, from the start of ``engine.run`` to its end). The span that ends at the
copy back's exit is the wait for the GPU; the marks before it are the host's part before and
while the GPU works, those after it the host's part after.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import itertools
import json
import pstats
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from indexzoo import query_engine
from indexzoo.query import floor_bytes, ssb
from indexzoo.tools.ssb_bench import copy_bandwidth, read_bandwidth

#: Per engine: the module whose helpers are timed, the helpers, and the prepared query's launches.
STAGES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "crystal": (("indexzoo.native.groupagg", ("zero_prefix", "read_packed", "packed_records")),),
    "rtcudb-sorted": (("indexzoo.native.groupagg", ("zero_prefix", "read_packed")),
                      ("indexzoo.plugins.rtcudb.engine", ("_regroup",))),
}
#: The prepared query's launches, by engine.
LAUNCHES = {"crystal": ("launch", "compact"), "rtcudb-sorted": ("slices", "launch", "compact")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=sorted(STAGES), default="crystal")
    ap.add_argument("--sf", type=float, default=10.0)
    ap.add_argument("--queries", default="q1.1,q2.1,q3.2,q4.3")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--top", type=int, default=12, help="cProfile rows per query")
    ap.add_argument("--params", action="append", default=None,
                    help="the engine's parameters, JSON; repeat to profile several settings")
    args = ap.parse_args(argv)

    copied, read = copy_bandwidth("cuda"), read_bandwidth("cuda")
    bandwidth = max(copied, read or 0.0)
    print(f"copy bandwidth {copied / 1e9:.0f} GB/s (read + write of 1 GiB, median of 10); "
          f"read bandwidth {(read or 0.0) / 1e9:.0f} GB/s (16-byte vector read of 1 GiB); "
          f"the floor uses {bandwidth / 1e9:.0f} GB/s")
    print(f"empty launch {empty_launch_ms():.4f} ms (launch and synchronise, median of 100)")
    t = time.perf_counter()
    table = ssb.generate(args.sf, seed=0)
    print(f"SF {args.sf:g}: {table.n_rows} rows, generated in {time.perf_counter() - t:.1f} s")
    for params in args.params or ["{}"]:
        print(f"{args.engine} {params}")
        profile(args.engine, query_engine(args.engine, device="cuda", **json.loads(params)),
                table, args, bandwidth)
    return 0


def sync() -> None:
    import cupy

    cupy.cuda.get_current_stream().synchronize()


def empty_launch_ms() -> float:
    import cupy

    k = cupy.ElementwiseKernel("", "raw int64 y", "", "indexzoo_empty")
    y = cupy.zeros(1, dtype=cupy.int64)
    times = []
    for _ in range(100):
        t = time.perf_counter()
        k(y, size=1)
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


@contextmanager
def wrapped_stages(engine_name: str, prepared: Any,
                   wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """The engine's stages (its helpers, ``prepared``'s launches, CuPy's scan) replaced by
    ``wrap(name, stage)`` while the block runs."""
    import cupy

    saved = [(mod, h, getattr(mod, h))
             for mod, helpers in ((importlib.import_module(m), hs) for m, hs in STAGES[engine_name])
             for h in helpers]
    saved += [(prepared, a, getattr(prepared, a)) for a in LAUNCHES[engine_name]
              if getattr(prepared, a, None) is not None]
    if getattr(prepared, "graph", None) is not None:  # crystal: launched one by one, so the
        saved.append((prepared, "graph", prepared.graph))  # stages are seen (wrap() not used)
    saved.append((cupy, "cumsum", cupy.cumsum))
    for owner, attr, fn in saved:
        setattr(owner, attr, False if attr == "graph" else wrap(attr, fn))
    try:
        yield
    finally:
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)


@contextmanager
def timed_stages(engine_name: str, prepared: Any) -> Iterator[dict[str, list[float]]]:
    """Every stage of ``prepared``'s runs timed alone, in ms, while the block runs."""
    times: dict[str, list[float]] = defaultdict(list)

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            sync()
            t = time.perf_counter()
            out = fn(*a, **kw)
            sync()
            times[name].append((time.perf_counter() - t) * 1e3)
            return out
        return timed

    with wrapped_stages(engine_name, prepared, wrap):
        yield times


@contextmanager
def marked_stages(engine_name: str, prepared: Any) -> Iterator[list[tuple[str, float]]]:
    """``(mark, perf_counter)`` at the entry (``name>``) and exit (``name<``) of every stage,
    no synchronisation added, appended to the list while the block runs."""
    marks: list[tuple[str, float]] = []

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def marked(*a: Any, **kw: Any) -> Any:
            marks.append((f"{name}>", time.perf_counter()))
            out = fn(*a, **kw)
            marks.append((f"{name}<", time.perf_counter()))
            return out
        return marked

    with wrapped_stages(engine_name, prepared, wrap):
        yield marks


def mark_spans(engine: Any, view: Any, spec: Any, engine_name: str, prepared: Any,
               repeats: int) -> str:
    """The median microseconds between consecutive marks of ``repeats`` runs (the spans of the
    first run's sequence; a run whose marks differ from it is left out)."""
    with marked_stages(engine_name, prepared) as marks:
        runs: list[list[tuple[str, float]]] = []
        for _ in range(repeats):
            marks.clear()
            start = time.perf_counter()
            engine.run(view, spec)
            end = time.perf_counter()
            runs.append([("start", start), *marks, ("end", end)])
    names = [m for m, _ in runs[0]]
    spans = [[b - a for (_, a), (_, b) in itertools.pairwise(r)] for r in runs
             if [m for m, _ in r] == names]
    return ", ".join(f"{a}..{b} {statistics.median(col) * 1e6:.0f}"
                     for (a, b), col in zip(itertools.pairwise(names), zip(*spans, strict=True),
                                            strict=True))


def profile(engine_name: str, engine: Any, table: Any, args: argparse.Namespace,
            bandwidth: float) -> None:
    """Each of ``args.queries`` on ``engine``: wall time, stages, a host profile."""
    for name in args.queries.split(","):
        spec = ssb.QUERIES[name].without_order()
        t = time.perf_counter()
        view = engine.prepare(table, [spec], name=name)
        sync()
        build = time.perf_counter() - t
        engine.run(view, spec)
        sync()

        def wall(view: Any = view, spec: Any = spec) -> float:
            t = time.perf_counter()
            engine.run(view, spec)
            sync()
            return (time.perf_counter() - t) * 1e3

        walls = [wall() for _ in range(args.repeats)]
        prepared = getattr(view, "_queries", None) or view.queries
        with timed_stages(engine_name, prepared[spec]) as stages:
            staged = [wall() for _ in range(args.repeats)]
        marked = mark_spans(engine, view, spec, engine_name, prepared[spec],
                            max(args.repeats, 100))
        prof = cProfile.Profile()
        prof.enable()
        engine.run(view, spec)
        sync()
        prof.disable()
        floor = floor_bytes(table, spec) / bandwidth * 1e3
        med, med_staged = statistics.median(walls), statistics.median(staged)
        parts = {k: statistics.median(v) * len(v) / len(staged) for k, v in stages.items()}
        print(f"== {name} SF {args.sf:g}: wall {med:.3f} ms ({med / floor:.2f}x floor), "
              f"floor {floor:.3f} ms, build {build:.1f} s; stages timed alone "
              f"{med_staged:.3f} ms: "
              + ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
              + f", rest {med_staged - sum(parts.values()):.3f}", flush=True)
        print(f"   marks (us, no synchronisation): {marked}", flush=True)
        if args.top:
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
            print("\n".join(text.getvalue().splitlines()[6:6 + args.top + 2]), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
