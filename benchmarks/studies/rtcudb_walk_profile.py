"""What a ray of the faithful ``rtcudb`` costs the software tracer, counted per order of the
BVH: node records tested, leaves reached, primitives tested and hits, per ray of an SSB query
(the rays the engine casts: an XY grid over each Z-interval, along +Z). Run on the CPU: it
replays the GPU kernel's walk over the view's BVH (benchmarks/studies/rt_walk_profile.py's replay)
and counts instead of timing, so the figures hold for either device.

    python benchmarks/studies/rtcudb_walk_profile.py --sf 1 --queries q1.1,q3.1,q4.1 --grid 512

Each query's view (one per query, as the benchmark prepares them) is replayed over the BVH
the engine builds and over the same triangles ordered by the other orders of ``bvh_order``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
from rt_walk_profile import FIELDS, profile

import indexzoo
from indexzoo.native.rt.geometry import TRIANGLES
from indexzoo.native.rt.trace import build_gas
from indexzoo.plugins.rtcudb.engine import ORDERS, bvh_codes
from indexzoo.query import plan, ssb


class _Rays:
    def __init__(self, origins: np.ndarray, tmax: np.ndarray):
        self.origins = origins
        n = len(origins)
        self.directions = np.tile(np.array([0, 0, 1], dtype=np.float32), (n, 1))
        self.tmin = np.zeros(n, dtype=np.float32)
        self.tmax = tmax


def rays_of(view: Any, query: Any, sample: int, rng: np.random.Generator) -> tuple[_Rays, int]:
    """A sample of the rays the engine casts for ``query`` and how many it casts."""
    enc = view.encoder
    p = plan(view.table, query)
    ivs, _ = enc.intervals({c: p.filters[c] for c in enc.names if c in p.filters}, 1 << 14)
    px, py = view.points
    per = px.size * py.size
    total = per * len(ivs)
    pick = rng.choice(total, size=min(sample, total), replace=False)
    k, r = pick // per, pick % per
    lo = np.array([a for a, _ in ivs], dtype=np.int64)[k]
    hi = np.array([b for _, b in ivs], dtype=np.int64)[k]
    s = view.z_scale
    org = np.stack([px[r // py.size], py[r % py.size], lo * s - 1], axis=1).astype(np.float32)
    return _Rays(org, ((hi - lo) * s + 2).astype(np.float32)), total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--queries", default="q1.1,q3.1,q4.1")
    ap.add_argument("--grid", type=int, default=512)
    ap.add_argument("--sample", type=int, default=2048)
    ap.add_argument("--orders", default=",".join(ORDERS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    table = ssb.generate(args.sf, seed=0)
    out: dict[str, Any] = {"sf": args.sf, "grid": args.grid, "queries": {}}
    for name in args.queries.split(","):
        spec = ssb.QUERIES[name].without_order()
        engine = indexzoo.query_engine("rtcudb", device="cpu", grid=args.grid)
        view = engine.prepare(table, [spec])
        rays, total = rays_of(view, spec, args.sample, rng)
        tri = np.asarray(view.arrays["tri"])
        res: dict[str, Any] = {"rays cast": total}
        for order in args.orders.split(","):
            t = time.perf_counter()
            gas = build_gas(TRIANGLES, tri, codes=bvh_codes(order, tri, view.z_scale, view.legs))
            built = time.perf_counter() - t
            got = profile(gas, rays, first_hit=False)
            res[order] = got | {"build s": built}
            print(f"{name} {order:12} build {built:5.1f}s  " + "  ".join(
                f"{f} {got[f]:.1f}" for f in FIELDS[:5]) + f"  per hit "
                f"{got['records tested'] / max(got['hits'], 1e-9):.2f}", flush=True)
        out["queries"][name] = res
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
