"""The measurements behind ``rx-opt``'s targets (``docs/plugins/rx-opt.md``), each ratio from one
run on one GPU.

    python benchmarks/studies/rx_opt_targets.py --json out.json [--scale 26] [--only ranges,points]

Targets (2^26 uniform uint64 keys unless stated):
  ranges      2^16 ranges with exactly 2^10 hits each (dense keys), out="sum":
              rx-opt vs rx and vs sorted-array
  points      2^27 random hits: rx-opt vs rx's lean preset; rx-opt sort_probes on vs off
  dups        multiplicity 2^10, point lookups: compression on vs off
  peak        peak build memory with 256 partitions vs 1
  inverse     build 2^23 keys, 2^21 probes: inverse mapping on vs off (point lookup time, the
              per-batch BVH build included), and build + lookups
  join        2^26 x 2^26 keys, about 2^26 pairs: indexzoo.join(index="rx-opt") and
              join(index="sorted-array") vs a CuPy sort-merge join
  build       warpcore-hash build: 2^26 unique keys vs multiplicity 2^8

Times are CUDA-event medians of ``--repeats`` runs after a warm-up (indexzoo.tools.timing). Prints a
table and writes JSON.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from steps import run_steps

import indexzoo
from indexzoo.tools.timing import time_call
from indexzoo.tools.workloads import Workload, generate


def _t(fn: Any, repeats: int) -> float:
    return time_call(fn, "cuda", repeats=repeats).median


def ranges(scale: int, repeats: int) -> dict[str, Any]:
    w = Workload(name="range-1024", n_keys=1 << scale, distribution="dense",
                 n_lookups=1 << 16, range_hits=1 << 10)
    d = generate(w, "cuda")
    out: dict[str, Any] = {"workload": w.describe()}
    for label, name, params in (("rx-opt", "rx-opt", {}), ("rx", "rx", {}),
                                ("sorted-array", "sorted-array", {}),
                                ("rx-opt unsorted", "rx-opt", {"sort_probes": False}),
                                ("rx-opt rx-like", "rx-opt", {"range_method": "anyhit",
                                                              "compress_duplicates": False,
                                                              "partitions": 1,
                                                              "sort_probes": False})):
        ix = indexzoo.create(name, device="cuda", **params).build(d.keys)
        t = _t(lambda ix=ix: ix.range(d.lo, d.hi, out="sum"), repeats)
        out[label] = {"seconds": t, "ranges_per_s": d.n_lookups / t}
        del ix
    return out


def points(scale: int, repeats: int) -> dict[str, Any]:
    w = Workload(name="paper", n_keys=1 << scale, n_lookups=1 << (scale + 1))
    d = generate(w, "cuda")
    out: dict[str, Any] = {"workload": w.describe()}
    for label, name, params in (("rx-opt", "rx-opt", {}),
                                ("rx-opt unsorted", "rx-opt", {"sort_probes": False}),
                                ("rx-opt lean", "rx-opt", {"geometry": "generated",
                                                           "leaf_size": 24}),
                                ("rx lean", "rx", {"geometry": "generated", "leaf_size": 24}),
                                ("sorted-array", "sorted-array", {})):
        ix = indexzoo.create(name, device="cuda", **params).build(d.keys)
        t = _t(lambda ix=ix: ix.point(d.queries), repeats)
        out[label] = {"seconds": t, "lookups_per_s": d.n_lookups / t,
                      "resident_bytes": ix.memory_footprint().resident_bytes}
        del ix
    return out


def dups(scale: int, repeats: int) -> dict[str, Any]:
    w = Workload(name="mult-1024", n_keys=1 << scale, multiplicity=1 << 10,
                 n_lookups=1 << (scale - 1))
    d = generate(w, "cuda")
    out: dict[str, Any] = {"workload": w.describe()}
    for label, params in (("compressed", {}), ("uncompressed", {"compress_duplicates": False})):
        ix = indexzoo.create("rx-opt", device="cuda", **params).build(d.keys)
        t = _t(lambda ix=ix: ix.point(d.queries, out="sum"), repeats)
        out[label] = {"seconds": t, "lookups_per_s": d.n_lookups / t}
        del ix
    return out


def peak(scale: int, repeats: int) -> dict[str, Any]:
    w = Workload(name="paper", n_keys=1 << scale, n_lookups=0)
    d = generate(w, "cuda")
    out: dict[str, Any] = {"workload": w.describe()}
    for parts in (1, 16, 256):
        ix = indexzoo.create("rx-opt", device="cuda", partitions=parts)
        t = _t(lambda ix=ix: ix.build(d.keys), max(repeats // 2, 1))
        fp = ix.memory_footprint()
        out[f"partitions={parts}"] = {"build_seconds": t, "peak_build_bytes": fp.peak_build_bytes,
                                      "resident_bytes": fp.resident_bytes}
        del ix
    return out


def inverse(scale: int, repeats: int) -> dict[str, Any]:
    w = Workload(name="inverse", n_keys=1 << (scale - 3), n_lookups=1 << (scale - 5))
    d = generate(w, "cuda")
    out: dict[str, Any] = {"workload": w.describe()}
    for label, mode in (("inverse on", "on"), ("inverse off", "off")):
        ix = indexzoo.create("rx-opt", device="cuda", inverse_mapping=mode)
        build = _t(lambda ix=ix: ix.build(d.keys), max(repeats // 2, 1))
        t = _t(lambda ix=ix: ix.point(d.queries, out="sum"), repeats)
        out[label] = {"lookup_seconds": t, "build_seconds": build, "total": build + t}
        del ix
    return out


def join(scale: int, repeats: int) -> dict[str, Any]:
    import cupy

    rng = cupy.random.default_rng(3)
    n = 1 << scale
    left = rng.integers(0, n, n, dtype=cupy.uint64)
    right = rng.integers(0, n, n, dtype=cupy.uint64)

    def merge() -> Any:
        order = cupy.argsort(right)
        sr = right[order]
        a = cupy.searchsorted(sr, left, side="left")
        b = cupy.searchsorted(sr, left, side="right")
        counts = b - a
        offsets = cupy.zeros(n + 1, dtype=cupy.int64)
        cupy.cumsum(counts, out=offsets[1:])
        total = int(offsets[-1])
        lrow = cupy.repeat(cupy.arange(n, dtype=cupy.int64), counts)
        rpos = cupy.arange(total, dtype=cupy.int64) - cupy.repeat(offsets[:-1] - a, counts)
        return lrow, order[rpos]

    out: dict[str, Any] = {"left": n, "right": n}
    t = _t(merge, repeats)
    out["cupy sort-merge"] = {"seconds": t, "pairs": int(merge()[0].shape[0])}
    for name in ("rx-opt", "sorted-array"):
        t = _t(lambda name=name: indexzoo.join(left, right, index=name, device="cuda"), repeats)
        res = indexzoo.join(left, right, index=name, device="cuda")
        out[f"join {name}"] = {"seconds": t, "pairs": len(res)}
    return out


def build(scale: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, mult in (("unique", 1), ("multiplicity 256", 256)):
        w = Workload(name=label, n_keys=1 << scale, multiplicity=mult, n_lookups=1 << 20)
        d = generate(w, "cuda")
        ix = indexzoo.create("warpcore-hash", device="cuda")
        t = _t(lambda ix=ix, d=d: ix.build(d.keys), repeats)
        ix.build(d.keys)
        q = _t(lambda ix=ix, d=d: ix.point(d.queries, out="count"), repeats)
        out[label] = {"build_seconds": t, "inserts_per_s": w.n_keys / t,
                      "count_lookups_per_s": d.n_lookups / q,
                      "resident_bytes": ix.memory_footprint().resident_bytes}
        del ix, d
    return out


STEPS = {"ranges": ranges, "points": points, "dups": dups, "peak": peak, "inverse": inverse,
         "join": join, "build": build}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default=",".join(STEPS))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    results: dict[str, Any] = {"scale": args.scale, "repeats": args.repeats}
    run_steps({k: (lambda f=f: f(args.scale, args.repeats)) for k, f in STEPS.items()},
              args.only, "cuda", results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
