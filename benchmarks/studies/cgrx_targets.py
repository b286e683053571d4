"""The measurements behind cgRX's targets and sweeps (``docs/plugins/cgrx.md``: memory, build,
points, Zipf points and ranges against ``sorted-array`` and ``rx-opt``), each ratio from one
run on one device.

    python benchmarks/studies/cgrx_targets.py --device cuda --json out.json [--scale 26] [--only ...]

Steps (2^scale uniform uint64 keys, 2^(scale+1) random hit lookups unless stated):
  points     build time, resident bytes and point lookups of sorted-array, rx-opt, cgrx-5x4 and
             cgrx-8x4 (cgRX with and without sorted probes)
  zipf       the same lookups drawn with Zipf skew 1.5 (thesis Fig. 5.23)
  ranges     2^16 ranges with exactly 2^10 hits each (dense keys), out="sum": rx-opt,
             sorted-array, cgRX with its collaborative scan and with one thread per range
  small      2^20 keys and lookups: the fixed cost per call (the quick preset's size)
  buckets    point lookups and build against bucket_log 0..10 (cgrx)
  groups     ranges against scan_group_log 0..5 (cgrx-8x4)
  hits       ranges against hits per range 2^4..2^14 (sorted-array, rx-opt, cgRX)
  skew       point lookups against lookup Zipf 0..1.5 (rx-opt, cgRX)
  paths      rays per lookup of the successor search (2^20 sampled lookups, uniform and Zipf
             1.5; index.ray_paths)
  stages     the build's parts: the pair sort, the scene's arrays, the BVH

Times are medians of ``--repeats`` runs after a warm-up (CUDA events on the GPU,
indexzoo.tools.timing). Prints one JSON block per step and keeps the JSON file up to date after each.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from steps import run_steps

import indexzoo
from indexzoo.tools.timing import time_call
from indexzoo.tools.workloads import Workload, generate

_CGRX = (("cgrx-5x4", "cgrx-5x4", {}), ("cgrx-8x4", "cgrx-8x4", {}))
_POINT_INDEXES = (("sorted-array", "sorted-array", {}), ("rx-opt", "rx-opt", {}), *_CGRX,
                  ("cgrx-5x4 unsorted", "cgrx-5x4", {"sort_probes": False}),
                  ("cgrx-8x4 unsorted", "cgrx-8x4", {"sort_probes": False}))


class Run:
    def __init__(self, device: str, scale: int, repeats: int):
        self.device, self.scale, self.repeats = device, scale, repeats

    def t(self, fn: Any, repeats: int | None = None) -> float:
        return time_call(fn, self.device, repeats=repeats or self.repeats).median

    def lookups(self, w: Workload, indexes: Any, out: str = "rowid",
                builds: bool = False) -> dict[str, Any]:
        d = generate(w, self.device)
        res: dict[str, Any] = {"workload": w.describe()}
        for label, name, params in indexes:
            ix = indexzoo.create(name, device=self.device, **params)
            row: dict[str, Any] = {}
            if builds:
                row["build_seconds"] = self.t(lambda ix=ix: ix.build(d.keys),
                                              max(self.repeats // 2, 1))
            ix.build(d.keys)
            if d.lo is None:
                t = self.t(lambda ix=ix: ix.point(d.queries, out=out))
            else:
                t = self.t(lambda ix=ix: ix.range(d.lo, d.hi, out=out))
            row.update(seconds=t, lookups_per_s=d.n_lookups / t,
                       resident_bytes=ix.memory_footprint().resident_bytes)
            res[label] = row
            del ix
        return res

    def paper(self, **kw: Any) -> Workload:
        return Workload(name="paper", n_keys=1 << self.scale, n_lookups=1 << (self.scale + 1),
                        **kw)

    def range_workload(self, hits: int) -> Workload:
        return Workload(name=f"range-{hits}", n_keys=1 << self.scale, distribution="dense",
                        n_lookups=1 << 16, range_hits=hits)


def points(r: Run) -> dict[str, Any]:
    return r.lookups(r.paper(), _POINT_INDEXES, builds=True)


def zipf(r: Run) -> dict[str, Any]:
    return r.lookups(r.paper(lookup_zipf=1.5), _POINT_INDEXES)


def ranges(r: Run) -> dict[str, Any]:
    one = tuple((f"{label} one thread", name, {"scan_group_log": 0}) for label, name, _ in _CGRX)
    return r.lookups(r.range_workload(1 << 10), (("rx-opt", "rx-opt", {}),
                                                  ("sorted-array", "sorted-array", {}),
                                                  *_CGRX, *one), out="sum")


def small(r: Run) -> dict[str, Any]:
    w = Workload(name="quick-size", n_keys=1 << 20, n_lookups=1 << 20)
    return r.lookups(w, (("sorted-array", "sorted-array", {}), ("rx", "rx", {}),
                         ("rx-opt", "rx-opt", {}), *_CGRX))


def buckets(r: Run) -> dict[str, Any]:
    return r.lookups(r.paper(), tuple((f"bucket_log={b}", "cgrx", {"bucket_log": b})
                                      for b in range(0, 11)), builds=True)


def groups(r: Run) -> dict[str, Any]:
    return r.lookups(r.range_workload(1 << 10),
                     tuple((f"scan_group_log={g}", "cgrx-8x4", {"scan_group_log": g})
                           for g in range(0, 6)), out="sum")


def hits(r: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for h in (1 << 4, 1 << 7, 1 << 10, 1 << 12, 1 << 14):
        out[str(h)] = r.lookups(r.range_workload(h), (("sorted-array", "sorted-array", {}),
                                                      ("rx-opt", "rx-opt", {}), *_CGRX),
                                out="sum")
    return out


def skew(r: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for z in (0.0, 0.5, 1.0, 1.25, 1.5):
        out[str(z)] = r.lookups(r.paper(lookup_zipf=z), (("rx-opt", "rx-opt", {}), *_CGRX))
    return out


def paths(r: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for z in (0.0, 1.5):
        d = generate(r.paper(lookup_zipf=z), r.device)
        sample = d.queries[: 1 << 20]
        for label, name, params in _CGRX:
            ix = indexzoo.create(name, device=r.device, **params).build(d.keys)
            rays = np.array([len(p) for p in ix.ray_paths(sample)])
            out[f"zipf {z} {label}"] = {
                "mean_rays": float(rays.mean()),
                "share_by_rays": {str(k): float((rays == k).mean()) for k in range(6)}}
            del ix
    return out


def stages(r: Run) -> dict[str, Any]:
    from indexzoo.native.rt.geometry import TRIANGLES
    from indexzoo.native.rt.trace import build_gas
    from indexzoo.native.sort import sort_pairs
    from indexzoo.plugins.cgrx.coords import CgCoder
    from indexzoo.plugins.cgrx.scene import build_scene, triangle_function

    d = generate(Workload(name="paper", n_keys=1 << r.scale, n_lookups=0), r.device)
    coder = CgCoder.for_dtype(d.keys.dtype)
    out: dict[str, Any] = {}
    sa = indexzoo.create("sorted-array", device=r.device)
    out["sorted-array build"] = r.t(lambda: sa.build(d.keys))
    out["pair sort"] = r.t(lambda: sort_pairs(d.keys, np.dtype(np.uint32)))
    keys = sort_pairs(d.keys, np.dtype(np.uint32)).keys
    for label, name, params in _CGRX:
        p = indexzoo.create(name, device=r.device, **params).params
        scene = build_scene(coder, keys, 1 << p.bucket_log, p.leaf_size, p.compact)
        out[f"{label} scene with BVH"] = r.t(
            lambda p=p: build_scene(coder, keys, 1 << p.bucket_log, p.leaf_size, p.compact))
        out[f"{label} BVH alone"] = r.t(
            lambda p=p, sc=scene: build_gas(TRIANGLES, sc.gas.data, leaf_size=p.leaf_size,
                                            compact=p.compact, geometry=triangle_function(coder)))
        out[f"{label} triangles"] = int(scene.gas.n_prims)
        ix = indexzoo.create(name, device=r.device, **params)
        out[f"{label} build"] = r.t(lambda ix=ix: ix.build(d.keys))
    return out


STEPS = {"points": points, "zipf": zipf, "ranges": ranges, "small": small, "buckets": buckets,
         "groups": groups, "hits": hits, "skew": skew, "paths": paths, "stages": stages}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--scale", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default=",".join(STEPS))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    run = Run(args.device, args.scale, args.repeats)
    results: dict[str, Any] = {"device": args.device, "scale": args.scale,
                               "repeats": args.repeats}
    run_steps({k: (lambda f=f: f(run)) for k, f in STEPS.items()}, args.only, args.device,
              results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
