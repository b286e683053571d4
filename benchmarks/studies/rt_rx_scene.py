"""The RX scene on the software ray tracer: build a GAS over one triangle per key and trace one
perpendicular point ray per lookup (the targets: build <= 126.5 ms for 2^26 triangles,
>= 1.78 G rays/s with 2^27 rays; the RX paper's OptiX figures on an RTX 4090).

Keys: uniform unique 64-bit, split 23/23/18 bits into x, y, z (RX's 3D mode). Triangle around the
key's point c with e = 0.5: (x-e, y+e, z-e), (x-e, y-e, z-e), (x+e, y, z+e) (RX's artifact
triangle); point ray: origin (x, y, z - 0.5), direction (0, 0, 1), t in (0, 1).

    python benchmarks/studies/rt_rx_scene.py [--keys 26] [--rays 27] [--leaf 4] [--device cuda] [--generated]

``--generated``: the GAS keeps the 8-byte keys and makes each triangle from its key during
traversal (geometry generated on the fly) instead of storing 36 bytes of vertices.

Timings: CUDA events (wall clock on the CPU), median of 3 after a warm-up; peer: searchsorted
over the same keys and lookups, in the same run.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from numba.extending import register_jitable

from indexzoo.tools.timing import time_call


@register_jitable
def rx_triangle(keys, i):  # type: ignore[no-untyped-def]
    """RX's 3D-mode triangle (23/23/18 bits) around key ``keys[i]``, made on the fly."""
    k = keys[i]
    x = np.float32(k & np.uint64((1 << 23) - 1))
    y = np.float32((k >> np.uint64(23)) & np.uint64((1 << 23) - 1))
    z = np.float32(k >> np.uint64(46))
    e = np.float32(0.5)
    return x - e, y + e, z - e, x - e, y - e, z - e, x + e, y, z + e


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--rays", type=int, default=27, help="log2 of the number of point rays")
    ap.add_argument("--leaf", type=int, default=4, help="primitives per BVH leaf")
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--generated", action="store_true", help="triangles generated from the keys")
    ap.add_argument("--uncompacted", action="store_true", help="keep the worst-case node buffer")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    if args.device == "cuda":
        import cupy as xp
    else:
        xp = np

    def timer(fn):  # type: ignore[no-untyped-def]
        return time_call(fn, args.device, repeats=3).median

    from indexzoo.native.rt import geometry as geo
    from indexzoo.native.rt.trace import TERMINATE_ON_FIRST_HIT, build_gas, trace

    n, r = 1 << args.keys, 1 << args.rays
    rs = xp.random.RandomState(7)
    keys = xp.unique(rs.randint(0, 2**63 - 1, size=int(n * 1.01), dtype=xp.int64).astype(xp.uint64))
    keys = keys[rs.permutation(keys.shape[0])[:n]]
    x = (keys & np.uint64((1 << 23) - 1)).astype(xp.float32)
    y = ((keys >> np.uint64(23)) & np.uint64((1 << 23) - 1)).astype(xp.float32)
    z = (keys >> np.uint64(46)).astype(xp.float32)
    e = np.float32(0.5)
    tri = xp.stack([x - e, y + e, z - e, x - e, y - e, z - e, x + e, y, z + e], axis=1)
    tri = xp.ascontiguousarray(tri.astype(xp.float32))
    pick = rs.randint(0, n, size=r)
    o = xp.stack([x[pick], y[pick], z[pick] - e], axis=1).astype(xp.float32)
    d = xp.zeros((r, 3), dtype=xp.float32)
    d[:, 2] = 1
    gas = None

    def build() -> None:
        nonlocal gas
        if args.generated:
            gas = build_gas(geo.TRIANGLES, keys, leaf_size=args.leaf, geometry=rx_triangle,
                            compact=not args.uncompacted)
        else:
            gas = build_gas(geo.TRIANGLES, tri, leaf_size=args.leaf, compact=not args.uncompacted)

    build_s = timer(build)
    tri = None  # free the vertices before tracing (the GAS holds its own copy)
    hits = trace(gas, o, d, 0.0, 1.0, flags=TERMINATE_ON_FIRST_HIT)
    ok = bool((hits.prim == pick).all())
    trace_s = timer(lambda: trace(gas, o, d, 0.0, 1.0, flags=TERMINATE_ON_FIRST_HIT))
    sk = xp.sort(keys)
    q = keys[pick]
    peer_s = timer(lambda: xp.searchsorted(sk, q))
    fp = gas.footprint()
    out = {
        "device": args.device, "keys": n, "rays": r, "leaf_size": args.leaf,
        "geometry": "generated from the keys" if args.generated else "stored vertices",
        "compacted": gas.compacted, "bvh_nodes": gas.bvh.n_nodes, "bvh_depth": gas.bvh.depth,
        "build_ms": build_s * 1e3, "build_target_ms": 126.5,
        "rays_per_s": r / trace_s, "rays_target": 1.78e9,
        "searchsorted_per_s": r / peer_s, "ratio_to_searchsorted": peer_s / trace_s,
        "all_rays_hit_their_key": ok,
        "bytes_per_primitive": fp.resident_bytes / n,
        "bvh_bytes_per_primitive": (fp.breakdown["bvh_nodes"] + fp.breakdown["bvh_order"]) / n,
        "peak_build_bytes": fp.peak_build_bytes,
    }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
