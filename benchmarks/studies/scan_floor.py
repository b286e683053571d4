"""The scan floor: how fast the device reads the columns of a selection, and how close the fused
scan (and, optionally, RTScan's indexes) come to it, in one run.

    python benchmarks/studies/scan_floor.py --device cuda --rows 100000000 [--indexes rtscan,rtscan-direct]
        [--repeats 7] [--json scan_floor.json]
    python benchmarks/studies/scan_floor.py --rows 100000 --device cpu     # small, on the CPU

A table of ``d`` uniform uint32 columns (3 by default; the RTScan paper's uniform workload).

* The floor: plain reads of the same columns, each reading every byte once, timed in one
  process: on the GPU the vector read (``indexzoo.tools.floor_kernel.VectorRead``: a CUDA
  C++ kernel with 16-byte loads that writes one word per block; ``--vector`` picks its
  unroll x threads, several by default) and CuPy's (CUB's) reductions: the max and the sum of
  each column and ``count_nonzero`` of the table (on the CPU, NumPy's). The fastest read is
  the scan floor, in bytes/s; a scan that must read every row of every column can not beat
  it. The bitmap floor (GPU; ``floor_kernel.BitmapRead``, ``--bitmap``): the columns read
  the same way and one bit per row written (``x_j < t_j`` on every column, the fused scan's
  bitmap), the least a scan that writes a bitmap does.
* The floors at every column count and key width (``--floor-columns``, default 1 to 4;
  ``--floor-bits``, default 32 and 64): each read on a Fortran-order table of ``--rows`` rows,
  so that the vector read, the reductions and the bitmap write are compared at the same
  bytes, before the queries.
* The fused scan (``indexzoo.plugins.fused_scan.kernels``) with each warp body (1, 4, 8, 16 words per warp;
  the column loop and the written-out body), one query per call, as the paper times
  RTScan: ``x_j < c_j`` at per-predicate selectivity 0.01 .. 0.9, and windows
  ``a_j <= x_j <= b_j`` of the same widths.
* ``--indexes``: each index built once over the table, the same queries through
  ``index.range(lo, hi, out="bitmap")``; ``--stages`` adds the time of each stage of a query
  where the index has a stage timer (rtscan) and its counters.
* ``--runs R``: the floor and every variant timed R times over (the indexes built once), each
  run against its own floor, for the spread between runs of one process.

Every answer is checked against NumPy (the reads' sums, maxima and bitmaps too). Times are
medians of ``--repeats`` after a warm-up (CUDA events on the GPU). Each line gives the time,
the bytes of the table per second, ``x floor`` (the fastest plain read's time over this
time: 1.0 is at the floor; an index may pass 1.0 by reading less than the whole table) and,
on the GPU, ``x bitmap floor`` (the same against the bitmap floor, which also writes the
N/8 bytes every query writes).
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
from indexzoo.tools.floor_kernel import BitmapRead, VectorRead, word_sum
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


def launch_configs(text: str) -> list[tuple[int, int, str]]:
    """``'1x256,4x256xpass'`` -> ``[(1, 256, 'full'), (4, 256, 'pass')]``: unroll x threads
    per block, and the grid (``floor_kernel.GRIDS``; default ``full``)."""
    out = []
    for spec in (p.strip() for p in text.split(",")):
        if spec:
            parts = spec.split("x")
            out.append((int(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else "full"))
    return out


class Truth:
    """What NumPy says of the first ``d`` columns of a host table, each column's part computed
    once (the floors of 1 to 4 columns share them)."""

    def __init__(self, cols: list[np.ndarray], bounds: list[int]) -> None:
        self.cols, self.bounds = cols, bounds
        self._facts: dict[int, tuple[int, int, int, int]] = {}
        self._match = [np.ones(cols[0].shape[0], dtype=bool)]
        self._bitmaps: dict[int, np.ndarray] = {}

    def _fact(self, j: int) -> tuple[int, int, int, int]:
        """Column j's max, sum mod 2^64, nonzero count and sum of 32-bit words mod 2^32."""
        if j not in self._facts:
            c = self.cols[j]
            self._facts[j] = (int(c.max()) if c.size else 0, int(c.sum(dtype=np.uint64)),
                              int(np.count_nonzero(c)), word_sum([c]))
        return self._facts[j]

    def maxima(self, d: int) -> list[int]:
        return [self._fact(j)[0] for j in range(d)]

    def sums(self, d: int) -> list[int]:
        return [self._fact(j)[1] for j in range(d)]

    def nonzero(self, d: int) -> int:
        return sum(self._fact(j)[2] for j in range(d))

    def words(self, d: int) -> int:
        return sum(self._fact(j)[3] for j in range(d)) & 0xFFFFFFFF

    def bitmap(self, d: int) -> np.ndarray:
        """The bitmap of ``x_j < bounds[j]`` on the first d columns (:class:`BitmapRead`'s)."""
        if d in self._bitmaps:
            return self._bitmaps[d]
        while len(self._match) <= d:
            j = len(self._match) - 1
            c = self.cols[j]
            self._match.append(self._match[-1] & (c < c.dtype.type(self.bounds[j])))
        n = self._match[d].shape[0]
        bits = np.zeros(-(-n // 32) * 32, dtype=bool)
        bits[:n] = self._match[d]
        self._bitmaps[d] = np.packbits(bits, bitorder="little").view("<u4")
        return self._bitmaps[d]


#: One read of a table: (kind, name, call, check of the call's result).
Read = tuple[str, str, Callable[[], Any], Callable[[Any], bool]]


def table_reads(table: Any, truth: Truth, dev: str, vector: list[tuple[int, int, str]],
                bitmap: list[tuple[int, int, str]]) -> list[Read]:
    """The plain reads of ``table`` (kind ``vector`` and ``reduction``) and, on the GPU, its
    bitmap writes (kind ``bitmap``), each with the check of its answer."""
    xp = array_module(dev)
    d = int(table.shape[1])
    reads: list[Read] = [
        ("reduction", "max of each column", lambda: [table[:, j].max() for j in range(d)],
         lambda got: [int(x) for x in got] == truth.maxima(d)),
        ("reduction", "sum of each column",
         lambda: [table[:, j].sum(dtype=np.uint64) for j in range(d)],
         lambda got: [int(x) for x in got] == truth.sums(d)),
        ("reduction", "count_nonzero of the table", lambda: xp.count_nonzero(table),
         lambda got: int(got) == truth.nonzero(d)),
    ]
    if dev != "cuda":
        return reads
    for unroll, threads, grid in vector:
        read = VectorRead(table, unroll=unroll, threads=threads, grid=grid)
        reads.append(("vector", f"vector read u={unroll} tpb={threads} {grid} "
                                f"({sum(read.blocks)} blocks)",
                      read, lambda _got, read=read: read.total() == truth.words(d)))
    for unroll, threads, grid in bitmap:
        write = BitmapRead(table, truth.bounds[:d], unroll=unroll, threads=threads, grid=grid)
        reads.append(("bitmap", f"bitmap write u={unroll} tpb={threads} {grid} "
                                f"({write.blocks} blocks)",
                      write, lambda got: bool(np.array_equal(to_numpy(got), truth.bitmap(d)))))
    return reads


def measure_reads(reads: list[Read], nbytes: int, timed: Callable[[Callable[[], Any]], float],
                  extra: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Time every read (its answer checked first); print and record each. Returns the scan
    floor (the fastest plain read), the fastest of each kind and the bitmap floor."""
    best: dict[str, tuple[float, str]] = {}
    for kind, name, call, check in reads:
        ok = check(call())
        t = timed(call)
        rows.append({"what": "floor", "read": kind, "variant": name, **extra, "seconds": t,
                     "bytes_per_s": nbytes / t, "check": "ok" if ok else "FAILED"})
        print(f"  floor  {name:44} {t * 1e3:8.3f} ms  {nbytes / t / 1e9:7.1f} GB/s"
              f"{'' if ok else '  WRONG ANSWER'}", flush=True)
        if ok and t < best.get(kind, (float("inf"), ""))[0]:
            best[kind] = (t, name)
    plain = {k: v for k, v in best.items() if k != "bitmap"}
    floor_s, floor_name = min(plain.values()) if plain else (float("nan"), "")
    out = {"floor_seconds": floor_s, "floor_variant": floor_name,
           "vector_seconds": best.get("vector", (None,))[0],
           "reduction_seconds": best.get("reduction", (None,))[0],
           "bitmap_floor_seconds": best.get("bitmap", (None,))[0],
           "bitmap_floor_variant": best.get("bitmap", (None, None))[1]}
    line = f"  scan floor: {floor_name} {floor_s * 1e3:.3f} ms ({nbytes / floor_s / 1e9:.1f} GB/s)"
    if out["vector_seconds"] and out["reduction_seconds"]:
        line += (f"; the vector read {out['reduction_seconds'] / out['vector_seconds']:.2f}x "
                 "the fastest reduction")
    print(line, flush=True)
    if out["bitmap_floor_seconds"]:
        b = out["bitmap_floor_seconds"]
        print(f"  bitmap floor: {out['bitmap_floor_variant']} {b * 1e3:.3f} ms "
              f"({nbytes / b / 1e9:.1f} GB/s of columns, one bit a row written; "
              f"{floor_s / b:.2f}x the scan floor)", flush=True)
    rows.append({"what": "floor summary", **extra, **out})
    return out


def floor_sweep(args: argparse.Namespace, timed: Callable[[Callable[[], Any]], float],
                rows: list[dict[str, Any]]) -> None:
    """The floors of Fortran-order tables of 1 .. 4 uint32 and uint64 columns of ``--rows``
    rows (``--floor-columns``, ``--floor-bits``)."""
    counts = sorted({int(x) for x in args.floor_columns.split(",") if x.strip()})
    if not counts:
        return
    dev, n = args.device, args.rows
    vector, bitmap = launch_configs(args.vector), launch_configs(args.bitmap)
    for bits in [int(x) for x in args.floor_bits.split(",") if x.strip()]:
        dtype = np.dtype(np.uint32 if bits == 32 else np.uint64)
        rng = np.random.default_rng(bits)
        host = np.empty((n, max(counts)), dtype=dtype, order="F")
        for j in range(host.shape[1]):
            host[:, j] = rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True)
        truth = Truth([host[:, j] for j in range(host.shape[1])], [1 << (bits - 1)] * 4)
        table = array_module(dev).asfortranarray(to_device(host, dev))
        for d in counts:
            part = table[:, :d]
            nbytes = int(part.nbytes)
            print(f"floors of {n} rows x {d} uint{bits} columns ({nbytes / 1e9:.2f} GB)",
                  flush=True)
            measure_reads(table_reads(part, truth, dev, vector, bitmap), nbytes, timed,
                          {"table": "sweep", "key_bits": bits, "columns": d}, rows)
        del table, host, truth


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
    ap.add_argument("--vector", default="1x256,2x256,4x256,8x256,4x256xpass",
                    help="GPU: the vector read of the floor (16-byte loads) at these "
                         "UNROLLxTHREADS[xGRID] (loads in flight per thread x threads per "
                         "block; GRID 'full', one wave of resident blocks striding, the "
                         "default, or 'pass', a block per THREADS*UNROLL loads)")
    ap.add_argument("--bitmap", default="1x256,2x256,4x256,2x256xpass",
                    help="GPU: the bitmap floor (the read plus one bit a row written) at these "
                         "UNROLLxTHREADS[xGRID] (steps of 32 row groups per warp x threads "
                         "per block)")
    ap.add_argument("--floor-columns", default="1,2,3,4",
                    help="the floors of tables of these column counts first (empty: none)")
    ap.add_argument("--floor-bits", default="32,64",
                    help="the key widths of those tables (32: uint32, 64: uint64)")
    args = ap.parse_args(argv)
    dev, n, d = args.device, args.rows, args.columns
    cols = wl.columns("uniform", n, d, seed=1)
    sorted_cols = [np.sort(c) for c in cols]
    table = to_device(np.asfortranarray(np.column_stack(cols)), dev)
    nbytes = int(table.nbytes)
    rows: list[dict[str, Any]] = []

    def timed(fn: Callable[[], Any]) -> float:
        return time_call(fn, dev, repeats=args.repeats, warmup=2).median

    print(f"{n} rows x {d} uint32 columns ({nbytes / 1e9:.2f} GB) on {dev}, median of "
          f"{args.repeats}", flush=True)
    floor_sweep(args, timed, rows)
    print(f"queries over {n} rows x {d} uint32 columns", flush=True)
    reads = table_reads(table, Truth(cols, [1 << 31] * d), dev, launch_configs(args.vector),
                        launch_configs(args.bitmap))
    floor: dict[str, Any] = {}
    floor_s, bitmap_s, run = float("inf"), None, 0

    def measure_floor() -> tuple[float, float | None]:
        floor.clear()
        floor.update(measure_reads(reads, nbytes, timed, {"table": "queries", "run": run}, rows))
        return floor["floor_seconds"], floor["bitmap_floor_seconds"]

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
                   "x_floor": floor_s / t,
                   "x_bitmap_floor": bitmap_s / t if bitmap_s else None,
                   "check": "ok" if ok else "FAILED", **extra}
            staged = ""
            if args.stages and index is not None and hasattr(index, "stage_timer"):
                row["stage_seconds"], row["counts"] = stage_times(index, call, dlo, dhi)
                staged = "  " + " ".join(f"{k} {v * 1e3:.3f}"
                                         for k, v in row["stage_seconds"].items())
                staged += "".join(f"  {k} {v:,}" for k, v in row["counts"].items()
                                  if k == "candidates")
            rows.append(row)
            versus = f"  x bitmap floor {bitmap_s / t:5.2f}" if bitmap_s else ""
            print(f"  {label:30} {kind:6} {s:4.2f}  {t * 1e3:8.3f} ms  "
                  f"{nbytes / t / 1e9:7.1f} GB/s  x floor {floor_s / t:5.2f}{versus}"
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
        floor_s, bitmap_s = measure_floor()
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
        "floor_variant": floor.get("floor_variant"), "bitmap_floor_seconds": bitmap_s,
        "bitmap_floor_variant": floor.get("bitmap_floor_variant"),
        "rows_measured": rows}, indent=2))
    failed = [r for r in rows if r.get("check") == "FAILED"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
