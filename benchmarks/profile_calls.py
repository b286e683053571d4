"""Where one lookup call's time goes: host wall time, device time, kernel launches, and the
host functions that take it (cProfile), for chosen indexes at one size.

    python benchmarks/profile_calls.py --device cuda --indexes cgrx,rx --keys 20 --lookups 20
    python benchmarks/profile_calls.py --device cuda --indexes rtscan,fused-scan --scan-rows 24
    ncu --profile-from-start off --clock-control none python benchmarks/profile_calls.py \
        --device cuda --indexes btree --keys 26 --lookups 27 --ncu

A call whose wall time is far above its device time is bound by the host (Python, launches,
device-to-host round trips); the cProfile table then names the functions, and calls such as
``get``, ``__int__`` or ``__bool__`` of device arrays are the round trips. Kernel launches are
counted through :mod:`indexzoo.native.targets` (every kernel of the project launches there).
Point workloads: uniform uint64 keys, random hit lookups; ``--range-hits K``: ranges with K
hits each, ``out="sum"``; ``--scan-rows LOG2``: three uniform uint32 columns and one range
query per column of selectivity 0.3 (``out="bitmap"``), for the scan indexes.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import json
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import indexzoo
from indexzoo.devices import to_device
from indexzoo.native import targets
from indexzoo.tools.timing import synchronize, time_call
from indexzoo.tools.workloads import Workload, generate


class LaunchCounter:
    """Counts kernel launches by kernel name while active."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.active = False
        # GroupKernel runs through a Kernel, so it is not counted itself
        for cls in (targets.Kernel, targets.BlockKernel):
            original = cls.__call__

            def counted(kernel: Any, *args: Any, __original: Any = original, **kw: Any) -> Any:
                if self.active:
                    self.counts[getattr(kernel, "name", type(kernel).__name__)] += 1
                return __original(kernel, *args, **kw)

            cls.__call__ = counted  # type: ignore[method-assign]


def workload_call(name: str, args: argparse.Namespace) -> tuple[Any, Callable[[], Any], int]:
    """A built index and one call of its lookups; the number of lookups per call."""
    device = args.device
    index = indexzoo.create(name, device=device)
    if args.scan_rows is not None:
        n = 1 << args.scan_rows
        rng = np.random.default_rng(1)
        cols = rng.integers(0, 2**32, size=(n, 3), dtype=np.uint64).astype(np.uint32)
        index.build(to_device(np.asfortranarray(cols), device))
        lo = to_device(np.zeros((1, 3), np.uint32), device)
        hi = to_device(np.full((1, 3), int(0.3 * 2**32), np.uint32), device)
        return index, lambda: index.range(lo, hi, out="bitmap"), 1
    w = Workload(name="profile", n_keys=1 << args.keys, n_lookups=1 << args.lookups,
                 range_hits=args.range_hits)
    data = generate(w, device)
    index.build(data.keys)
    if data.queries is not None:
        q = data.queries
        return index, lambda: index.point(q, out="rowid"), data.n_lookups
    lo, hi = data.lo, data.hi
    return index, lambda: index.range(lo, hi, out="sum"), data.n_lookups


def profile(name: str, args: argparse.Namespace, counter: LaunchCounter) -> dict[str, Any]:
    index, call, n = workload_call(name, args)
    for _ in range(2):  # compile and warm up
        call()
    synchronize(args.device)
    if args.ncu:
        # one call inside the profiler's range: `ncu --profile-from-start off` sees only it
        import cupy

        cupy.cuda.profiler.start()
        call()
        synchronize(args.device)
        cupy.cuda.profiler.stop()
        return {"index": name, "lookups_per_call": n, "ncu": True}
    walls = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        call()
        synchronize(args.device)
        walls.append(time.perf_counter() - t)
    device_s = time_call(call, args.device, repeats=args.repeats).median
    counter.counts.clear()
    counter.active = True
    call()
    synchronize(args.device)
    counter.active = False
    launches = dict(counter.counts)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.repeats):
        call()
    synchronize(args.device)
    prof.disable()
    text = io.StringIO()
    stats: Any = pstats.Stats(prof, stream=text)
    # per call in microseconds (pstats prints seconds to three decimals: zeros at this scale)
    per = args.repeats
    text.write(f"{'own us':>9} {'cum us':>9} {'calls':>6}  function (per lookup call)\n")
    for (path, line, fn), (_, ncalls, tt, ct, _) in sorted(
            stats.stats.items(), key=lambda kv: -kv[1][2])[:args.top]:
        text.write(f"{tt / per * 1e6:9.2f} {ct / per * 1e6:9.2f} {ncalls / per:6.1f}  "
                   f"{'/'.join(path.split('/')[-2:])}:{line} {fn}\n")
    wall = float(np.median(walls))
    return {"index": name, "lookups_per_call": n, "wall_s": wall, "device_events_s": device_s,
            "launches": launches, "launch_total": sum(launches.values()),
            "cprofile_tottime_top": text.getvalue(),
            "resident_bytes": index.memory_footprint().resident_bytes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--indexes", default="sorted-array,rx")
    ap.add_argument("--keys", type=int, default=20, help="log2 of the number of keys")
    ap.add_argument("--lookups", type=int, default=20, help="log2 of the lookups per call")
    ap.add_argument("--range-hits", type=int, default=None)
    ap.add_argument("--scan-rows", type=int, default=None,
                    help="log2 rows of three columns: profile scan indexes instead")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--top", type=int, default=25, help="cProfile rows per index")
    ap.add_argument("--json", default=None)
    ap.add_argument("--ncu", action="store_true",
                    help="only one warm call inside a CUDA profiler range, for Nsight Compute")
    args = ap.parse_args(argv)
    args.device = indexzoo.resolve_device(args.device)
    counter = LaunchCounter()
    rows = []
    for name in [s.strip() for s in args.indexes.split(",") if s.strip()]:
        r = profile(name, args, counter)
        if args.ncu:
            continue
        rows.append(r)
        print(f"=== {name}: host functions by own time ({args.repeats} calls)")
        print(r["cprofile_tottime_top"])
    print(f"device {args.device}; per call: wall (host clock, synchronised), device (CUDA "
          "events on the GPU), kernel launches")
    for r in rows:
        print(f"  {r['index']:<16} wall {r['wall_s'] * 1e3:9.3f} ms  device "
              f"{r['device_events_s'] * 1e3:9.3f} ms  launches {r['launch_total']:3d}  "
              + ", ".join(f"{k} {v}" for k, v in sorted(r["launches"].items())))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
