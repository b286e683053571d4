"""``fused-scan`` against the scan floor, through the index, timed in interleaved pairs.

    python benchmarks/studies/fused_scan_floor.py [--rows 100000000] [--repeats 15]
        [--tables u32x1,u32x2,u32x3,u32x4,u64x1,u64x2,u64x3,u64x4] [--bodies vector,numba]
        [--json out.json]

For each table (uniform keys of one dtype, Fortran order, ``--rows`` rows) and each GPU body of
``fused-scan`` (``params.body``), the index is built once and asked one query per call
(``index.range(lo, hi, out="bitmap")`` with CuPy bounds: the prepared path; and the body's
kernel called directly, without the index's call), a window of
per-column selectivity 0.01, 0.1, 0.3, 0.5 and 0.9 in every column, each answer checked against
CuPy's own evaluation of the predicates. The floor is the vector read of the same columns
(``indexzoo.tools.floor_kernel.VectorRead``: every byte once with 16-byte loads, the bench's
scan floor). A GPU's memory clock and temperature drift over a run by up to 15% (seen on an
H200), so the floor and the scan are timed in pairs, one after the other, ``--repeats`` times
after a warm-up; ``x floor`` is the median floor time over the median scan time of the same
pairs (CUDA events). Each case is timed twice: one call between the events (a query alone, its
launch and the index's host work included: at 0.1 ms a query these show), and ``--stream``
calls one after the other (a stream of queries: the host queues the next while the GPU runs
the last), per call. GPU only.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

import indexzoo
from indexzoo.tools.floor_kernel import VectorRead

SELECTIVITIES = (0.01, 0.1, 0.3, 0.5, 0.9)
DTYPES = {"u32": np.uint32, "u64": np.uint64}


def commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                             capture_output=True, text=True, timeout=10)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def paired(cupy: Any, first: Any, second: Any, repeats: int,
           calls: int = 1) -> tuple[float, float]:
    """Median milliseconds a call of ``first()`` and of ``second()``, timed alternately, each
    time over ``calls`` calls one after the other (the host queues the next launch while the
    GPU runs the last: a stream of queries; 1: one query alone, its launch included)."""
    def once(fn: Any) -> float:
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        return float(cupy.cuda.get_elapsed_time(a, b)) / calls

    for _ in range(3):
        first()
        second()
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(once(first))
        tb.append(once(second))
    return float(np.median(ta)), float(np.median(tb))


def window(cupy: Any, table: Any, sel: float) -> tuple[Any, Any]:
    """Per column the window of ``sel`` of the rows' ranks in the middle of its values (from
    a sample of every 101st row), as (1, d) CuPy bounds."""
    lo, hi = [], []
    for j in range(table.shape[1]):
        s = cupy.sort(table[::101, j])
        m = int(s.shape[0])
        a = int((1 - sel) / 2 * m)
        b = min(a + max(int(sel * m), 1), m) - 1
        lo.append(int(s[a]))
        hi.append(int(s[b]))
    return (cupy.asarray([lo], dtype=table.dtype), cupy.asarray([hi], dtype=table.dtype))


def truth(cupy: Any, table: Any, lo: Any, hi: Any) -> Any:
    n = int(table.shape[0])
    match = cupy.ones(n, dtype=bool)
    for j in range(table.shape[1]):
        match &= (table[:, j] >= lo[0, j]) & (table[:, j] <= hi[0, j])
    pad = cupy.zeros((-n) % 32, dtype=bool)
    return cupy.packbits(cupy.concatenate([match, pad]), bitorder="little").view(cupy.uint32)


def via_index(index: Any, lo: Any, hi: Any) -> Any:
    return index.range(lo, hi, out="bitmap").bitmap


def bound_kernel(table: Any, body: str) -> Any:
    """The body's kernel with the columns bound, called without the index: ``(lo, hi) ->
    bitmaps``."""
    from indexzoo.plugins.fused_scan import kernels, vector

    if body == "vector":
        return vector.bind_vector_scan(vector.vector_table(table)[0], int(table.shape[0]))
    params = indexzoo.create("fused-scan", params={"body": body}).params
    return kernels.bind_scan(table, items=params.items, unroll=params.unroll,
                             threads_per_block=params.threads_per_block)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--tables", default="u32x1,u32x2,u32x3,u32x4,u64x1,u64x2,u64x3,u64x4")
    ap.add_argument("--bodies", default="vector,numba")
    ap.add_argument("--stream", type=int, default=10,
                    help="calls one after the other in the second timing of each case")
    ap.add_argument("--json", default="fused_scan_floor.json")
    args = ap.parse_args(argv)
    import cupy

    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"fused-scan against the scan floor on {gpu}, commit {commit()}, {args.rows} rows, "
          f"medians of {args.repeats} interleaved pairs", flush=True)
    rng = cupy.random.default_rng(2026)
    records, wrong = [], 0
    for spec in args.tables.split(","):
        kind, d = spec.split("x")
        dtype = DTYPES[kind]
        top = int(np.iinfo(dtype).max)
        table = cupy.asfortranarray(rng.integers(0, top, size=(args.rows, int(d)), dtype=dtype,
                                                 endpoint=True))
        floor = VectorRead(table)
        for body in args.bodies.split(","):
            index = indexzoo.create("fused-scan", device="cuda", params={"body": body})
            index.build(table)
            kernel = bound_kernel(table, body)
            for sel in SELECTIVITIES:
                lo, hi = window(cupy, table, sel)
                want = truth(cupy, table, lo, hi)
                calls = {"index": functools.partial(via_index, index, lo, hi),
                         "kernel": functools.partial(kernel, lo, hi)}
                for via, call in calls.items():
                    ok = bool(cupy.array_equal(call().reshape(-1), want))
                    wrong += not ok
                    for stream in (1, args.stream):
                        t_floor, t_scan = paired(cupy, floor, call, args.repeats, stream)
                        records.append({"table": spec, "body": body, "via": via,
                                        "calls": stream, "selectivity": sel,
                                        "floor_ms": t_floor, "scan_ms": t_scan,
                                        "x_floor": t_floor / t_scan, "correct": ok})
                        print(f"{spec:6s} {body:6s} {via:6s} x{stream:<3d} sel {sel:<4} floor "
                              f"{t_floor:.4f} ms  scan {t_scan:.4f} ms  x floor "
                              f"{t_floor / t_scan:.3f}{'' if ok else '  WRONG'}", flush=True)
        del table, floor
        cupy.get_default_memory_pool().free_all_blocks()
    for body in args.bodies.split(","):
        for via in ("index", "kernel"):
            for stream in (1, args.stream):
                xs = [r["x_floor"] for r in records
                      if r["body"] == body and r["via"] == via and r["calls"] == stream]
                print(f"{body} through the {via}, {stream} call(s) a timing: x floor "
                      f"{min(xs):.3f} to {max(xs):.3f} over {len(xs)} cases")
    Path(args.json).write_text(json.dumps({"gpu": gpu, "commit": commit(), "rows": args.rows,
                                           "repeats": args.repeats, "records": records},
                                          indent=1))
    print(f"wrong answers: {wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
