"""The fixed cost of one ``rtscan`` range call: wall time per one-query call (median of many)
and the Python function calls it makes (cProfile: the total per call and the top functions).

    python benchmarks/studies/rtscan_overhead.py                       # 2^16 x 3 rows, on the CPU
    python benchmarks/studies/rtscan_overhead.py --rows 20 --calls 200 --out overhead.json

Columns: three uniform uint32 columns (seed 1). Queries: ``x_j < 0.3 * 2^32`` on every column
(``--query lt``, as ``benchmarks/profile_calls.py --scan-rows``) or ``a_j <= x_j <= b_j`` with
random bounds per call around 40% of each column (``--query between``). Every answer is
checked against NumPy once; compilation is warmed up before anything is timed.
"""

from __future__ import annotations

import argparse
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
from indexzoo import pipeline
from indexzoo.conformance.oracle import packed
from indexzoo.devices import to_device, to_numpy
from indexzoo.tools.timing import synchronize


def oracle(cols: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Packed bitmaps (Q, ceil(N/32)) of the conjunction, LSB first (the conformance oracle's
    packing)."""
    mask = np.all((cols[None, :, :] >= lo[:, None, :]) & (cols[None, :, :] <= hi[:, None, :]),
                  axis=2)
    return packed(mask)


def queries(kind: str, count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` one-query bound pairs, (1, 3) uint32 each."""
    if kind == "lt":
        lo = np.zeros((1, 3), np.uint32)
        hi = np.full((1, 3), int(0.3 * 2**32), np.uint32)
        return [(lo, hi)] * count
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        a = rng.integers(0, int(0.6 * 2**32), (1, 3), dtype=np.uint64)
        out.append((a.astype(np.uint32), (a + int(0.4 * 2**32)).astype(np.uint32)))
    return out


def measure(name: str, cols: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    device = args.device
    t = time.perf_counter()
    index = indexzoo.create(name, device=device).build(to_device(cols, device))
    build_s = time.perf_counter() - t
    qs = [(to_device(lo, device), to_device(hi, device))
          for lo, hi in queries(args.query, max(args.calls, args.profile_calls), seed=7)]

    def call(i: int) -> Any:
        lo, hi = qs[i % len(qs)]
        return index.range(lo, hi, out="bitmap").bitmap

    for i in range(min(len(qs), 8)):  # compile, warm up, and check the answers
        got = to_numpy(call(i))
        lo, hi = (to_numpy(a) for a in qs[i])
        if not np.array_equal(got, oracle(cols, lo, hi)):
            raise AssertionError(f"{name}: query {i} differs from NumPy")
    synchronize(device)
    walls = []
    for i in range(args.calls):
        t = time.perf_counter()
        call(i)
        synchronize(device)
        walls.append(time.perf_counter() - t)
    prof = cProfile.Profile()
    reps = args.profile_calls
    prof.enable()
    for i in range(reps):
        call(i)
    synchronize(device)
    prof.disable()
    stats: Any = pstats.Stats(prof)
    total = sum(v[1] for v in stats.stats.values()) / reps  # ncalls (recursion included)
    top: Callable[[Any], Any] = lambda kv: -kv[1][1]  # noqa: E731
    rows = []
    for (path, line, fn), (_, ncalls, tt, ct, _) in sorted(stats.stats.items(), key=top)[:15]:
        rows.append({"function": f"{'/'.join(path.split('/')[-2:])}:{line} {fn}",
                     "calls": ncalls / reps, "own_us": tt / reps * 1e6,
                     "cum_us": ct / reps * 1e6})
    # the plugin's own share: its bitmap hook on bounds the contract has already encoded
    st = index.state
    enc = [pipeline._range_columns(st, lo, hi, device) for lo, hi in qs[:reps]]
    hook = cProfile.Profile()
    hook.enable()
    for elo, ehi in enc:
        index._range_bitmap(st, elo, ehi)
    synchronize(device)
    hook.disable()
    hook_stats: Any = pstats.Stats(hook)
    hook_calls = sum(v[1] for v in hook_stats.stats.values()) / len(enc)
    areas: dict[str, float] = {}
    for (path, _, _), (_, ncalls, _, _, _) in stats.stats.items():
        key = _area(path)
        areas[key] = areas.get(key, 0.0) + ncalls / reps
    return {"index": name, "device": device, "rows": int(cols.shape[0]), "query": args.query,
            "build_s": build_s, "ms_per_call_median": float(np.median(walls)) * 1e3,
            "ms_per_call_p10": float(np.percentile(walls, 10)) * 1e3,
            "ms_per_call_p90": float(np.percentile(walls, 90)) * 1e3,
            "python_calls_per_call": total, "hook_calls_per_call": hook_calls,
            "calls_by_area": areas, "top_by_calls": rows}


def _area(path: str) -> str:
    """Where a profiled function lives: the project's folder (core, native, plugins/<name>),
    numpy/cupy/numba, or Python's built-ins."""
    parts = path.replace("\\", "/").split("/")
    for top in ("core", "native", "conformance"):
        if top in parts[:-1] and "site-packages" not in parts:
            return top
    if "plugins" in parts[:-1] and "site-packages" not in parts:
        i = parts.index("plugins")
        return "/".join(parts[i:i + 2])
    for lib in ("numpy", "cupy", "numba"):
        if lib in parts[:-1]:
            return lib
    return "builtins" if path == "~" else "other"


def report(r: dict[str, Any]) -> str:
    text = io.StringIO()
    text.write(f"{r['index']} ({r['device']}, {r['rows']} rows x 3, query {r['query']}): "
               f"{r['ms_per_call_median']:.3f} ms a call (p10 {r['ms_per_call_p10']:.3f}, "
               f"p90 {r['ms_per_call_p90']:.3f}), {r['python_calls_per_call']:.0f} Python "
               f"calls a call\n")
    text.write(f"  of which the plugin's bitmap hook (_range_bitmap): "
               f"{r['hook_calls_per_call']:.0f} calls\n")
    by = sorted(r["calls_by_area"].items(), key=lambda kv: -kv[1])
    text.write("  calls by area: " + ", ".join(f"{k} {v:.0f}" for k, v in by) + "\n")
    text.write(f"  {'calls':>7} {'own us':>9} {'cum us':>9}  function\n")
    for row in r["top_by_calls"]:
        text.write(f"  {row['calls']:7.1f} {row['own_us']:9.2f} {row['cum_us']:9.2f}  "
                   f"{row['function']}\n")
    return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--indexes", default="rtscan,rtscan-direct")
    ap.add_argument("--rows", type=int, default=16, help="log2 of the rows")
    ap.add_argument("--query", default="lt", choices=("lt", "between"))
    ap.add_argument("--calls", type=int, default=300, help="timed one-query calls")
    ap.add_argument("--profile-calls", type=int, default=50, help="calls under cProfile")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(1)
    cols = rng.integers(0, 2**32, size=(1 << args.rows, 3), dtype=np.uint64).astype(np.uint32)
    results = []
    for name in args.indexes.split(","):
        r = measure(name, cols, args)
        results.append(r)
        sys.stdout.write(report(r))
        sys.stdout.flush()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
