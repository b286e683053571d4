"""Where a `crystal` SSB query's time goes on the GPU: the wall time of the whole query, the
kernel alone (CUDA events around each kernel launch), and the host functions (cProfile),
against the query's read floor: the bytes of the columns it needs over the device's copy
bandwidth, measured in the same run (a device-to-device copy of 1 GiB, read plus write).

    python benchmarks/crystal_profile.py --sf 10 --queries q1.1,q2.1,q3.2,q4.3

The wall time is what `indexzoo bench --preset ssb` reports (the ORDER BY removed); the gap to
the kernel time is the host's part: planning, resetting the result slots, copying back the
filled ones. ``--params`` passes engine parameters as JSON (e.g. '{"shared_slots": 0}').
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from typing import Any

from indexzoo import query_engine, ssb
from indexzoo.query import floor_bytes
from indexzoo.tools.ssb_bench import copy_bandwidth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=10.0)
    ap.add_argument("--queries", default="q1.1,q2.1,q3.2,q4.3")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--top", type=int, default=12, help="cProfile rows per query")
    ap.add_argument("--params", action="append", default=None,
                    help="crystal's parameters, JSON; repeat to profile several settings")
    args = ap.parse_args(argv)

    bandwidth = copy_bandwidth("cuda")
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s (read + write of 1 GiB, median of 10)")
    table = ssb.generate(args.sf, seed=0)
    for params in args.params or ["{}"]:
        print(f"crystal {params}")
        profile(query_engine("crystal", device="cuda", **json.loads(params)), table, args,
                bandwidth)
    return 0


def profile(engine: Any, table: Any, args: argparse.Namespace, bandwidth: float) -> None:
    """Each of ``args.queries`` on ``engine``: wall and kernel times, a host profile."""
    import cupy

    def sync() -> None:
        cupy.cuda.get_current_stream().synchronize()

    kernel_ms: list[float] = []

    def timed(launch: Any) -> Any:
        def timed_launch(*a: Any, **kw: Any) -> Any:
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            out = launch(*a, **kw)
            end.record()
            end.synchronize()
            kernel_ms.append(cupy.cuda.get_elapsed_time(start, end))
            return out
        return timed_launch

    for name in args.queries.split(","):
        spec = ssb.QUERIES[name].without_order()
        view = engine.prepare(table, [spec], name=name)
        engine.run(view, spec)
        sync()
        walls = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            engine.run(view, spec)
            sync()
            walls.append((time.perf_counter() - t) * 1e3)
        kernel_ms.clear()
        prepared = view._queries[spec]  # the query's bound kernel launch, timed alone
        launch = prepared.launch
        prepared.launch = timed(launch)
        try:
            for _ in range(args.repeats):
                engine.run(view, spec)
        finally:
            prepared.launch = launch
        prof = cProfile.Profile()
        prof.enable()
        engine.run(view, spec)
        sync()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        floor = floor_bytes(table, spec) / bandwidth * 1e3
        wall, kernel = statistics.median(walls), statistics.median(kernel_ms)
        print(f"== {name} SF {args.sf:g}: wall {wall:.3f} ms ({wall / floor:.2f}x floor), "
              f"kernel {kernel:.3f} ms ({kernel / floor:.2f}x), floor {floor:.3f} ms, "
              f"{'shared-memory' if prepared.private else 'device-memory'} kernel",
              flush=True)
        if args.top:
            print("\n".join(text.getvalue().splitlines()[6:6 + args.top + 2]), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
