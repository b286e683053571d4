"""The scan floor: how fast the device reads the columns of a selection, and how close the fused
scan (and, optionally, RTScan's indexes) come to it, in one run.

    python benchmarks/studies/scan_floor.py --device cuda --rows 100000000 [--indexes rtscan,rtscan-direct]
        [--repeats 7] [--json scan_floor.json]
    python benchmarks/studies/scan_floor.py --rows 100000 --device cpu     # small, on the CPU

A table of ``d`` uniform uint32 columns (3 by default; the RTScan paper's uniform workload).

* The floor: a plain read of the same columns, timed three ways, each reading every byte
  once and writing almost nothing: CuPy's (CUB's) max and sum reductions of each column and
  ``cupy.count_nonzero`` of the whole table. The fastest is the scan floor, in bytes/s; a
  scan that must read every row of every column can not beat it.
* The fused scan (``indexzoo.plugins.fused_scan.kernels``) with each warp body (1, 4, 8, 16 words per warp;
  the column loop and the written-out body), one query per call, as the paper times
  RTScan: ``x_j < c_j`` at per-predicate selectivity 0.01 .. 0.9, and windows
  ``a_j <= x_j <= b_j`` of the same widths.
* ``--indexes``: each index built once over the table, the same queries through
  ``index.range(lo, hi, out="bitmap")``; ``--stages`` adds the time of each stage of a query
  where the index has a stage timer (rtscan) and its counters.
* ``--runs R``: the floor and every variant timed R times over (the indexes built once), each
  run against its own floor, for the spread between runs of one process.

Every answer is checked against NumPy. Times are medians of ``--repeats`` after a warm-up
(CUDA events on the GPU). Each line gives the time, the bytes of the table per second, and
``x floor`` (the floor's time over this time: 1.0 is at the floor; an index may pass 1.0 by
reading less than the whole table).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import rtscan_workloads as wl

import indexzoo
from indexzoo.devices import array_module, to_device, to_numpy
from indexzoo.plugins.fused_scan.kernels import ITEMS_CHOICES, scan_bitmaps
from indexzoo.tools.timing import synchronize, time_call

SELECTIVITIES = (0.01, 0.1, 0.2, 0.5, 0.9)


def oracle(cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    match = np.ones(cols[0].shape[0], dtype=bool)
    for j, c in enumerate(cols):
        match &= (c >= lo[0, j]) & (c <= hi[0, j])
    bits = np.zeros(-(-match.shape[0] // 32) * 32, dtype=bool)
    bits[:match.shape[0]] = match
    return np.packbits(bits, bitorder="little").view("<u4")


def window(cols: list[np.ndarray], sorted_cols: list[np.ndarray],
           sel: float) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (1, d): per column a window of ``sel * N`` ranks in the middle of the values."""
    n = cols[0].shape[0]
    lo, hi = [], []
    for s in sorted_cols:
        a = int((1 - sel) / 2 * n)
        b = min(a + max(int(sel * n), 1), n) - 1
        lo.append(int(s[a]))
        hi.append(int(s[b]))
    return np.array([lo], dtype=np.uint32), np.array([hi], dtype=np.uint32)


#: A hand-written CUDA scan to compare the fused scan's numba bodies with (``--raw``; GPU,
#: uint32 columns whose row count is a multiple of 4): each thread loads four consecutive rows
#: of every column with one 16-byte load, ``ITEMS`` such groups per thread, tests them, and
#: the eight lanes that hold one 32-row word OR their 4-bit results with three shuffles.
RAW_SOURCE = r"""
extern "C" __global__ void raw_scan(const unsigned int* __restrict__ cols, long long n,
                                    const unsigned int* __restrict__ lo,
                                    const unsigned int* __restrict__ hi,
                                    unsigned int* __restrict__ out, long long words) {
  uint4 v[ITEMS][D];
  long long r[ITEMS];
#pragma unroll
  for (int c = 0; c < ITEMS; c++) {
    r[c] = (((long long)blockIdx.x * ITEMS + c) * blockDim.x + threadIdx.x) * 4;
#pragma unroll
    for (int j = 0; j < D; j++)
      v[c][j] = r[c] < n ? *reinterpret_cast<const uint4*>(cols + j * n + r[c])
                         : make_uint4(0, 0, 0, 0);
  }
  unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < ITEMS; c++) {
    unsigned a = r[c] < n ? 15u : 0u;
#pragma unroll
    for (int j = 0; j < D; j++) {
      unsigned l = lo[j], h = hi[j];
      a &= ((v[c][j].x >= l) & (v[c][j].x <= h)) | (((v[c][j].y >= l) & (v[c][j].y <= h)) << 1)
         | (((v[c][j].z >= l) & (v[c][j].z <= h)) << 2) | (((v[c][j].w >= l) & (v[c][j].w <= h)) << 3);
    }
    unsigned word = a << (4 * (lane & 7));
    word |= __shfl_xor_sync(0xffffffffu, word, 1);
    word |= __shfl_xor_sync(0xffffffffu, word, 2);
    word |= __shfl_xor_sync(0xffffffffu, word, 4);
    if ((lane & 7) == 0 && r[c] < n) out[r[c] / 32] = word;
  }
}
"""


def raw_scan(table: Any, items: int, threads: int) -> Callable[[Any, Any], Any]:
    """The hand-written scan of :data:`RAW_SOURCE` over the Fortran-order uint32 ``table``:
    ``(lo, hi) -> bitmap`` for one query."""
    import cupy

    n, d = int(table.shape[0]), int(table.shape[1])
    if n % 4 or table.dtype != np.uint32 or not table.flags.f_contiguous:
        raise SystemExit("--raw needs a Fortran-order uint32 table of a multiple of 4 rows")
    kernel = cupy.RawKernel(RAW_SOURCE, "raw_scan", options=(f"-DITEMS={items}", f"-DD={d}"))
    words = -(-n // 32)
    groups = n // 4
    blocks = -(-groups // (threads * items))

    def call(lo: Any, hi: Any) -> Any:
        out = cupy.empty(words, dtype=np.uint32)  # every word is written
        kernel((blocks,), (threads,), (table, np.int64(n), lo.reshape(-1), hi.reshape(-1), out,
                                       np.int64(words)))
        return out

    return call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--columns", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--indexes", default="", help="comma-separated indexes to time as well")
    ap.add_argument("--stages", action="store_true",
                    help="also time the stages of each index query where the index has a "
                         "stage timer (rtscan's encode, sieve, refine, merge; CUDA events) "
                         "and count its candidates")
    ap.add_argument("--runs", type=int, default=1,
                    help="time the floor and every variant this many times over, one after "
                         "the other (each run's figures against its own floor)")
    ap.add_argument("--json", default="scan_floor.json")
    ap.add_argument("--threads-per-block", default="256",
                    help="comma-separated block sizes to time each fused-scan body with")
    ap.add_argument("--bodies", default="",
                    help="only these fused-scan bodies, e.g. 'items=4 unroll,items=8'")
    ap.add_argument("--raw", default="",
                    help="GPU: also the hand-written CUDA scan (16-byte loads), as "
                         "ITEMSxTHREADS pairs, e.g. '1x256,2x256,4x128'")
    args = ap.parse_args(argv)
    dev, n, d = args.device, args.rows, args.columns
    xp = array_module(dev)
    cols = wl.columns("uniform", n, d, seed=1)
    sorted_cols = [np.sort(c) for c in cols]
    table = to_device(np.asfortranarray(np.column_stack(cols)), dev)
    nbytes = int(table.nbytes)
    rows: list[dict[str, Any]] = []

    def timed(fn: Callable[[], Any]) -> float:
        return time_call(fn, dev, repeats=args.repeats, warmup=2).median

    print(f"{n} rows x {d} uint32 columns ({nbytes / 1e9:.2f} GB) on {dev}, median of "
          f"{args.repeats}", flush=True)
    floors = {
        "max of each column": lambda: [table[:, j].max() for j in range(d)],
        "sum of each column": lambda: [table[:, j].sum(dtype=np.uint64) for j in range(d)],
        "count_nonzero of the table": lambda: xp.count_nonzero(table),
    }
    floor_s, run = float("inf"), 0

    def measure_floor() -> float:
        best = float("inf")
        for name, fn in floors.items():
            t = timed(fn)
            best = min(best, t)
            rows.append({"what": "floor", "variant": name, "run": run, "seconds": t,
                         "bytes_per_s": nbytes / t})
            print(f"  floor  {name:34} {t * 1e3:8.3f} ms  {nbytes / t / 1e9:7.1f} GB/s",
                  flush=True)
        print(f"  scan floor: {best * 1e3:.3f} ms ({nbytes / best / 1e9:.1f} GB/s)", flush=True)
        return best

    queries = [("lt", s, *wl.lt_query(cols, s, sorted_cols)) for s in SELECTIVITIES]
    queries += [("window", s, *window(cols, sorted_cols, s)) for s in SELECTIVITIES]
    wants = {(kind, s): oracle(cols, lo, hi) for kind, s, lo, hi in queries}

    bodies: list[tuple[str, dict[str, Any]]] = [("fused-scan cpu", {})]
    if dev == "cuda":
        bodies = [(f"items={k}" + (" unroll" if u else ""), {"items": k, "unroll": u})
                  for k in ITEMS_CHOICES for u in ((False, True) if k > 1 else (False,))]
        wanted = {b.strip() for b in args.bodies.split(",") if b.strip()}
        bodies = [(f"fused-scan {label}" + (f" tpb={t}" if t != "256" else ""),
                   {**kw, "threads_per_block": int(t)})
                  for label, kw in bodies if not wanted or label in wanted
                  for t in args.threads_per_block.split(",")]
    def run_variant(label: str, call: Callable[[Any, Any], Any], extra: dict[str, Any],
                    index: Any = None) -> None:
        for kind, s, lo, hi in queries:
            dlo, dhi = to_device(lo, dev), to_device(hi, dev)
            got = to_numpy(call(dlo, dhi)).reshape(-1)
            ok = bool(np.array_equal(got, wants[(kind, s)]))
            t = timed(lambda dlo=dlo, dhi=dhi: call(dlo, dhi))
            row = {"what": "query", "variant": label, "predicate": kind, "run": run,
                   "selectivity": s, "seconds": t, "bytes_per_s": nbytes / t,
                   "x_floor": floor_s / t, "check": "ok" if ok else "FAILED", **extra}
            staged = ""
            if args.stages and index is not None and hasattr(index, "stage_timer"):
                row["stage_seconds"], row["counts"] = stage_times(index, call, dlo, dhi)
                staged = "  " + " ".join(f"{k} {v * 1e3:.3f}"
                                         for k, v in row["stage_seconds"].items())
                staged += "".join(f"  {k} {v:,}" for k, v in row["counts"].items()
                                  if k == "candidates")
            rows.append(row)
            print(f"  {label:30} {kind:6} {s:4.2f}  {t * 1e3:8.3f} ms  "
                  f"{nbytes / t / 1e9:7.1f} GB/s  x floor {floor_s / t:5.2f}"
                  f"{'' if ok else '  WRONG ANSWER'}{staged}", flush=True)

    def stage_times(index: Any, call: Callable[[Any, Any], Any], lo: Any, hi: Any,
                    ) -> tuple[dict[str, float], dict[str, int]]:
        """Mean seconds per stage and counters per query over ``args.repeats`` calls."""
        from indexzoo.plugins.rtscan import StageTimes

        timer = StageTimes(dev)
        index.stage_timer = timer
        try:
            for _ in range(args.repeats):
                call(lo, hi)
            synchronize(dev)
        finally:
            index.stage_timer = None
        return ({k: v / args.repeats for k, v in timer.seconds().items()},
                {k: v // args.repeats for k, v in timer.counts.items()})

    indexes = {}
    for name in [s for s in args.indexes.split(",") if s]:
        index = indexzoo.create(name, device=dev).build([c for c in cols])
        fp = index.memory_footprint()
        print(f"  {name}: resident {fp.resident_bytes / 1e9:.2f} GB "
              f"({fp.resident_bytes / nbytes:.1f}x the table)", flush=True)
        indexes[name] = (index, fp.resident_bytes)
    for run in range(args.runs):
        if args.runs > 1:
            print(f"run {run + 1} of {args.runs}", flush=True)
        floor_s = measure_floor()
        for label, kw in bodies:
            run_variant(label, lambda lo, hi, kw=kw: scan_bitmaps(table, lo, hi, **kw), kw)
        for spec in [s for s in args.raw.split(",") if s] if dev == "cuda" else []:
            items, threads = (int(x) for x in spec.split("x"))
            run_variant(f"raw cuda items={items} tpb={threads}",
                        raw_scan(table, items, threads),
                        {"raw_items": items, "threads_per_block": threads})
        for name, (index, resident) in indexes.items():
            run_variant(name,
                        lambda lo, hi, index=index: index.range(lo, hi, out="bitmap").bitmap,
                        {"resident_bytes": resident}, index)
    Path(args.json).write_text(json.dumps({
        "device": dev, "rows": n, "columns": d, "table_bytes": nbytes,
        "repeats": args.repeats, "runs": args.runs, "floor_seconds": floor_s,
        "rows_measured": rows}, indent=2))
    failed = [r for r in rows if r.get("check") == "FAILED"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
