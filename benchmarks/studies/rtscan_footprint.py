"""RTScan's layouts against the scan floor (at most 4x the table): the footprint of each layout
and its time per query next to a plain read of the columns, in one process.

    python benchmarks/studies/rtscan_footprint.py --device cuda            # 1e8 x 3 uint32
    python benchmarks/studies/rtscan_footprint.py --device cpu --rows 20000 --repeats 1

A table of ``--columns`` uniform uint32 columns (the paper's workload, ``rtscan_workloads``).
Each variant (``--variants``, by label; all by default) is built in turn, timed, and freed:

* ``rtscan``, ``rtscan-direct``: the default (compact) layout: keys, orders, sorted samples,
  a two-level sieve of 32 x 32 bins (``rtscan`` refines directly on the software engine, so
  on a GPU without RT cores the two run the same code);
* ``rtscan-paper``, ``rtscan-paper-direct``: the paper's layout (codes, mapping tables, 127
  sieve vectors a column), ``refine`` as ``rtscan``'s and ``direct``;
* ``rtscan-k64``: the compact layout with one sieve level of 63 vectors (64 bins), the other
  way to fit 4x the table, for comparison.

Queries, one per call as the paper times them: ``x_j < c_j`` on every column at
per-predicate selectivity ``--selectivities`` (0.01, 0.1, 0.3, 0.5, 0.9), and windows
``a_j <= x_j <= b_j`` of the same widths (``--kinds``). Every bitmap is checked against
NumPy. Times are medians of ``--repeats`` (9) after ``--warmup`` (2) calls, CUDA events on the
GPU. The floor is the fastest plain read of the table (``scan_floor.py``'s: on the GPU the
16-byte-load read of ``indexzoo.tools.floor_kernel`` and CuPy's reductions; on the CPU
NumPy's), measured again before each variant; ``x floor`` is the floor's time over the
query's (2.0: twice as fast as reading the table once). Each variant ends with a line of
the issue's targets: at least 2x the floor at selectivity 0.01-0.5, at least 1x up to 0.9,
resident at most 4x the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import rtscan_workloads as wl
import scan_floor as sf

import indexzoo
from indexzoo.devices import to_device, to_numpy
from indexzoo.tools.timing import time_call

#: label -> (registered index, params)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "rtscan": ("rtscan", {}),
    "rtscan-direct": ("rtscan-direct", {}),
    "rtscan-paper": ("rtscan-paper", {}),
    "rtscan-paper-direct": ("rtscan-paper", {"refine": "direct"}),
    "rtscan-k64": ("rtscan", {"sieve_vectors": 64, "sieve_fine": 0}),
}
SELECTIVITIES = "0.01,0.1,0.3,0.5,0.9"


def targets(rows: list[dict[str, Any]], resident_x: float) -> str:
    """The issue's targets over one variant's query rows."""
    low = [r["x_floor"] for r in rows if r["selectivity"] <= 0.5]
    high = [r["x_floor"] for r in rows]
    parts = [f"resident {resident_x:.2f}x the table ({'ok' if resident_x <= 4 else 'OVER 4x'})"]
    if low:
        parts.append(f"x floor {min(low):.2f}-{max(low):.2f} at 0.01-0.5 "
                     f"({'ok' if min(low) >= 2 else 'BELOW 2x'})")
    if high:
        parts.append(f"lowest {min(high):.2f} up to 0.9 "
                     f"({'ok' if min(high) >= 1 else 'SLOWER THAN THE FLOOR'})")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--columns", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--selectivities", default=SELECTIVITIES)
    ap.add_argument("--kinds", default="lt,window", help="lt, window or both")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--stages", action="store_true",
                    help="also each query's stage times and candidate rows (a second, "
                         "untimed-for-the-table set of calls with a stage timer)")
    ap.add_argument("--vector", default="1x256,2x256,4x256,8x256,4x256xpass",
                    help="GPU: the floor's vector reads (scan_floor.py --vector)")
    ap.add_argument("--json", default="rtscan_footprint.json")
    args = ap.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v and v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; use {', '.join(VARIANTS)}")
    dev, n, d = args.device, args.rows, args.columns
    cols = wl.columns("uniform", n, d, seed=1)
    sorted_cols = [np.sort(c) for c in cols]
    table = to_device(np.asfortranarray(np.column_stack(cols)), dev)
    nbytes = int(table.nbytes)
    sels = [float(s) for s in args.selectivities.split(",") if s.strip()]
    kinds = [k for k in args.kinds.split(",") if k]
    if set(kinds) - {"lt", "window"}:
        ap.error(f"--kinds takes lt and window, got {args.kinds!r}")
    queries = []
    for kind in kinds:
        for s in sels:
            lo, hi = (wl.lt_query(cols, s, sorted_cols) if kind == "lt"
                      else sf.window(cols, sorted_cols, s))
            queries.append((kind, s, lo, hi, sf.oracle(cols, lo, hi)))
    if not queries:
        ap.error("no queries: give --kinds and --selectivities")
    reads = sf.table_reads(table, sf.Truth(cols, [1 << 31] * d), dev,
                           sf.launch_configs(args.vector), [])
    rows: list[dict[str, Any]] = []

    def timed(fn: Callable[[], Any]) -> float:
        return time_call(fn, dev, repeats=args.repeats, warmup=args.warmup).median

    print(f"{n} rows x {d} uint32 columns ({nbytes / 1e9:.2f} GB) on {dev}, median of "
          f"{args.repeats} after {args.warmup}", flush=True)
    summary = []
    for label in [v for v in args.variants.split(",") if v]:
        name, params = VARIANTS[label]
        index = indexzoo.create(name, device=dev, **params).build(table)
        fp = index.memory_footprint()
        rx = fp.resident_bytes / nbytes
        print(f"{label} ({name} {params or ''}): resident {fp.resident_bytes / 1e9:.3f} GB = "
              f"{rx:.3f}x the table, peak build {fp.peak_build_bytes / nbytes:.2f}x", flush=True)
        for part, b in fp.breakdown.items():
            print(f"    {part:16} {b / 1e6:12.1f} MB  {b / nbytes:7.4f}x", flush=True)
        floor = sf.measure_reads(reads, nbytes, timed, {"variant": label}, rows)
        floor_s = floor["floor_seconds"]
        mine = []
        for kind, s, lo, hi, want in queries:
            dlo, dhi = to_device(lo, dev), to_device(hi, dev)

            def call(dlo: Any = dlo, dhi: Any = dhi, index: Any = index) -> Any:
                return index.range(dlo, dhi, out="bitmap").bitmap

            ok = bool(np.array_equal(to_numpy(call()).reshape(-1), want))
            t = timed(call)
            row = {"what": "query", "variant": label, "index": name, "params": params,
                   "predicate": kind, "selectivity": s, "seconds": t, "x_floor": floor_s / t,
                   "resident_bytes": fp.resident_bytes, "check": "ok" if ok else "FAILED"}
            staged = ""
            if args.stages and hasattr(index, "stage_timer"):
                from indexzoo.plugins.rtscan import StageTimes

                index.stage_timer = timer = StageTimes(dev)
                call()
                index.stage_timer = None
                row["stage_seconds"] = timer.seconds()
                row["counts"] = dict(timer.counts)
                staged = "  " + " ".join(f"{k} {v * 1e3:.3f}" for k, v in
                                         row["stage_seconds"].items())
                staged += f"  candidates {row['counts'].get('candidates', 0):,}"
            rows.append(row)
            mine.append(row)
            print(f"  {label:20} {kind:6} {s:4.2f}  {t * 1e3:8.3f} ms  x floor "
                  f"{floor_s / t:5.2f}{'' if ok else '  WRONG ANSWER'}{staged}", flush=True)
        line = targets(mine, rx)
        summary.append(f"{label:20} {line}")
        print(f"  {label}: {line}", flush=True)
        del index, call  # the next variant builds on a freed device
        gc.collect()
        if dev == "cuda":
            import cupy

            cupy.get_default_memory_pool().free_all_blocks()
    print("summary", flush=True)
    for line in summary:
        print(f"  {line}", flush=True)
    Path(args.json).write_text(json.dumps({
        "device": dev, "rows": n, "columns": d, "table_bytes": nbytes,
        "repeats": args.repeats, "warmup": args.warmup, "rows_measured": rows}, indent=2))
    return 1 if any(r.get("check") == "FAILED" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
