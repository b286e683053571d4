"""``rx`` on its two engines, side by side on one GPU: indexzoo's software ray tracer and NVIDIA
OptiX (``engine="optix"``; on a GPU without RT cores the driver traverses in software).

    python benchmarks/studies/rt_engines.py rt_engines.json [--keys 26 --lookups 27 --ranges 22]

Per configuration (the paper's: 3D, triangles, compacted; and AABBs, spheres, uncompacted
triangles; generated geometry, the software engine's fastest scene, on the software engine
only): the build, point lookups (``rowid``: the first hit, and ``count``: every hit),
ranges of about 16 keys (``count``) and the footprint, on each engine, with the raw
``cupy.searchsorted`` call timed in the same run as the peer. Uniform uint64 keys drawn from
[0, 2^40) (3D mode spreads them over 2^17 rows), point lookups that all hit, CUDA-event
medians of 5 after a warm-up. Answers of the two engines are compared before timing.
Prints one line per figure and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np

import indexzoo
from indexzoo.tools.timing import time_call

CONFIGS = {"paper": {}, "aabb": {"primitive": "aabb"}, "sphere": {"primitive": "sphere"},
           "uncompacted": {"compact": False},
           # the software engine's fastest RX scene; OptiX has no generated geometry
           "generated": {"geometry": "generated", "leaf_size": 8}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("--keys", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--lookups", type=int, default=27, help="log2 of the point lookups")
    ap.add_argument("--ranges", type=int, default=22, help="log2 of the range lookups")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    args = ap.parse_args(argv)
    import cupy as cp

    from indexzoo.native.rt import optix
    from indexzoo.tools.bench import environment

    commit = environment("cuda")["commit"]  # $INDEXZOO_COMMIT on a copied tree
    out: dict[str, Any] = {"gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                           "commit": commit, "python": platform.python_version(),
                           "optix": optix.status().reason, "keys": 1 << args.keys,
                           "lookups": 1 << args.lookups, "ranges": 1 << args.ranges,
                           "figures": {}}
    print(out["gpu"], commit, out["optix"], flush=True)

    def t(name: str, fn: Any, per: int) -> None:
        ms = statistics.median(time_call(fn, "cuda", repeats=5).seconds) * 1e3
        out["figures"][name] = {"ms": ms, "G_per_s": per / ms / 1e6}
        print(f"{name:<44} {ms:10.3f} ms  {per / ms / 1e6:7.3f} G/s", flush=True)

    rng = np.random.default_rng(7)
    n, m, r = 1 << args.keys, 1 << args.lookups, 1 << args.ranges
    keys = cp.asarray(rng.integers(0, 2**40, n, dtype=np.uint64))
    q = keys[cp.asarray(rng.integers(0, n, m))]
    srt = cp.sort(keys)
    lo = srt[cp.asarray(rng.integers(0, n - 16, r))]
    hi = srt[cp.searchsorted(srt, lo) + 15]
    t("peer: cupy.searchsorted (raw)", lambda: cp.searchsorted(srt, q), m)
    for label in args.configs.split(","):
        cfg = CONFIGS[label]
        got = {}
        engines = ("software",) if cfg.get("geometry") == "generated" else ("software", "optix")
        for engine in engines:
            cp.get_default_memory_pool().free_all_blocks()
            ix = indexzoo.create("rx", device="cuda", engine=engine, **cfg)
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            ix.build(keys)
            cp.cuda.Device().synchronize()
            build = time.perf_counter() - t0
            t0 = time.perf_counter()  # the first build compiled kernels or programs
            ix.build(keys)
            cp.cuda.Device().synchronize()
            build = time.perf_counter() - t0
            fp = ix.memory_footprint()
            key = f"{label}/{engine}"
            out["figures"][f"{key}: build"] = {"s": build, "resident_bytes": fp.resident_bytes,
                                               "breakdown": dict(fp.breakdown)}
            print(f"{key + ': build':<44} {build:10.3f} s   {fp.resident_bytes / 2**30:7.2f} GiB "
                  f"{dict(fp.breakdown)}", flush=True)
            got[engine] = (ix.point(q[: 1 << 20], out="count").count.get(),
                           ix.range(lo[: 1 << 18], hi[: 1 << 18], out="count").count.get())
            t(f"{key}: point rowid", lambda ix=ix: ix.point(q, out="rowid"), m)
            t(f"{key}: point count", lambda ix=ix: ix.point(q, out="count"), m)
            t(f"{key}: range count (16 keys)", lambda ix=ix: ix.range(lo, hi, out="count"), r)
            del ix
        if "optix" in got:
            same = all(np.array_equal(a, b) for a, b in zip(got["software"], got["optix"],
                                                            strict=True))
            out["figures"][f"{label}: answers equal"] = same
            print(f"{label}: answers of the two engines equal: {same}", flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
