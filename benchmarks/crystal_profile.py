"""Where a `crystal` SSB query's time goes on the GPU: the wall time of the whole query, the
kernel alone (CUDA events around each kernel launch), and the host functions (cProfile).

    python benchmarks/crystal_profile.py --sf 10 --queries q1.1,q2.1,q3.2,q4.3

The wall time is what `indexzoo bench --preset ssb` reports (the ORDER BY removed); the gap to
the kernel time is the host's part: planning, the result slots' copies back, their compaction.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from typing import Any

from indexzoo import query_engine, ssb
from indexzoo.native import targets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sf", type=float, default=10.0)
    ap.add_argument("--queries", default="q1.1,q2.1,q3.2,q4.3")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--top", type=int, default=12, help="cProfile rows per query")
    args = ap.parse_args(argv)
    import cupy

    def sync() -> None:
        cupy.cuda.get_current_stream().synchronize()

    table = ssb.generate(args.sf, seed=0)
    engine = query_engine("crystal", device="cuda")
    kernel_ms: list[float] = []
    launch = targets.Kernel.__call__

    def timed_launch(kernel: Any, *a: Any, **kw: Any) -> Any:
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        out = launch(kernel, *a, **kw)
        end.record()
        end.synchronize()
        kernel_ms.append(cupy.cuda.get_elapsed_time(start, end))
        return out

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
        targets.Kernel.__call__ = timed_launch  # type: ignore[method-assign]
        try:
            for _ in range(args.repeats):
                engine.run(view, spec)
        finally:
            targets.Kernel.__call__ = launch  # type: ignore[method-assign]
        prof = cProfile.Profile()
        prof.enable()
        engine.run(view, spec)
        sync()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        print(f"== {name} SF {args.sf:g}: wall {statistics.median(walls):.3f} ms, kernel "
              f"{statistics.median(kernel_ms):.3f} ms, "
              f"{len(kernel_ms) / args.repeats:.0f} launch(es) a query", flush=True)
        print("\n".join(text.getvalue().splitlines()[6:6 + args.top + 2]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
