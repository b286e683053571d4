"""What one ray costs the software tracer, counted: node records tested, inner nodes entered,
leaves reached, primitives tested and hits, per ray of ``rx`` (the paper's configuration: 3D
keys, triangles), for point rays that stop at the first hit (``rowid``), point rays that go on
(``count``) and the range rays along occupied rows (``count``). Run on the CPU: it replays the
GPU kernel's walk (the same stackless depth-first order with escape indices, the same box and
triangle tests) over the BVH rx builds, and counts instead of timing.

    python benchmarks/studies/rt_walk_profile.py --preset quick --sample 4096 [--json out.json]

Each workload is replayed on two trees over the same primitives: the one rx builds (sorted by
the keys: rows before x, :func:`indexzoo.native.rt.key_codes`) and one sorted by the Morton
codes of the primitives' centres (the engine's default order). Also counted, for each tree:
the node records a stack-based walk of a binary BVH would
load (it tests both children of every node it enters: the same boxes as the escape walk), and
the nodes a 4-wide and an 8-wide BVH collapsed from this tree would load (a wide node holds its
children's boxes, so entering it is one record), which bounds how much fewer dependent loads a
ray needs with wider nodes (what OptiX's BVH uses).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
from numba import njit

import indexzoo
from indexzoo.native.rt import KIND, KeyCoder, key_primitives, perpendicular_rays
from indexzoo.native.rt.bvh import slab_walk
from indexzoo.native.rt.geometry import hit_triangle_v
from indexzoo.native.rt.trace import build_gas
from indexzoo.tools.bench import PRESETS
from indexzoo.tools.workloads import generate


@njit(cache=False)
def _walk(nodes, words, n_nodes, data, org, dirs, tmin, tmax, first_hit, depth_of, out):
    """Replays :func:`indexzoo.native.rt.traversal.walker` for triangles (any-hit that accepts
    every hit; ``first_hit``: stop at the first, as TERMINATE_ON_FIRST_HIT) and counts per ray:
    out[r] = (records tested, inner entered, leaves reached, primitives tested, hits, records
    tested after the first hit, 4-wide nodes entered, 8-wide nodes entered)."""
    inf = np.float32(np.inf)
    for r in range(org.shape[0]):
        ox, oy, oz = org[r, 0], org[r, 1], org[r, 2]
        dx, dy, dz = dirs[r, 0], dirs[r, 1], dirs[r, 2]
        ix = np.float32(1.0) / dx if dx != 0 else inf
        iy = np.float32(1.0) / dy if dy != 0 else inf
        iz = np.float32(1.0) / dz if dz != 0 else inf
        t0, t1 = tmin[r], tmax[r]
        tested = entered = leaves = prims = hits = after = w4 = w8 = 0
        j = 0
        done = False
        while j < n_nodes and not done:
            hit = slab_walk(nodes, j, ox, oy, oz, ix, iy, iz, t0, t1)
            tested += 1
            if hits > 0:
                after += 1
            c = words[j, 6]
            if c >= 0:  # inner node
                if hit:
                    entered += 1
                    d = depth_of[j]
                    if d % 2 == 0:
                        w4 += 1
                    if d % 3 == 0:
                        w8 += 1
                    j += 1
                else:
                    j = c
                continue
            j += 1
            if not hit:
                continue
            leaves += 1
            start = words[j - 1, 7]
            for q in range(start, start - c):
                prims += 1
                t, _front = hit_triangle_v(data[q, 0], data[q, 1], data[q, 2], data[q, 3],
                                          data[q, 4], data[q, 5], data[q, 6], data[q, 7],
                                          data[q, 8], ox, oy, oz, dx, dy, dz, t0, t1)
                if t < t1:
                    hits += 1
                    if first_hit:
                        done = True
                        break
        out[r, 0], out[r, 1], out[r, 2], out[r, 3] = tested, entered, leaves, prims
        out[r, 4], out[r, 5], out[r, 6], out[r, 7] = hits, after, w4, w8


@njit(cache=False)
def _depths(words, n_nodes):
    """The depth of every node of a depth-first node buffer with escape indices (a node's
    children follow it; an inner node's escape index is where its subtree ends)."""
    depth = np.zeros(n_nodes, dtype=np.int64)
    ends = np.empty(64, dtype=np.int64)
    top = 0
    for j in range(n_nodes):
        while top > 0 and j >= ends[top - 1]:
            top -= 1
        depth[j] = top
        c = words[j, 6]
        if c >= 0:
            ends[top] = c
            top += 1
    return depth


FIELDS = ("records tested", "inner entered", "leaves reached", "primitives tested", "hits",
          "tested after the first hit", "4-wide nodes entered", "8-wide nodes entered")


def profile(gas: Any, rays: Any, first_hit: bool) -> dict[str, float]:
    b = gas.bvh
    nodes = np.asarray(b.nodes)
    words = nodes.view(np.int32)
    n = int(b.n_nodes)
    out = np.zeros((int(rays.origins.shape[0]), len(FIELDS)), dtype=np.int64)
    _walk(nodes, words, n, np.asarray(gas.data), np.asarray(rays.origins, dtype=np.float32),
          np.asarray(rays.directions, dtype=np.float32), np.asarray(rays.tmin, np.float32),
          np.asarray(rays.tmax, np.float32), first_hit, _depths(words, n), out)
    return {f: float(out[:, i].mean()) for i, f in enumerate(FIELDS)} | {
        "rays": int(out.shape[0]), "nodes": n,
        "depth (max)": int(_depths(words, n).max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--range-preset", default="quick-range")
    ap.add_argument("--sample", type=int, default=4096, help="lookups replayed per workload")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    coder = KeyCoder.for_params("3d", 23, 23, 18)
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"preset": args.preset, "range preset": args.range_preset}
    data = generate(PRESETS[args.preset], "cpu")
    index = indexzoo.create("rx", device="cpu", engine="software").build(data.keys)
    st = index.state
    point = perpendicular_rays(coder, st.keymap.encode(
        data.queries[rng.choice(data.queries.shape[0], args.sample, replace=False)]))
    rdata = generate(PRESETS[args.range_preset], "cpu")
    rindex = indexzoo.create("rx", device="cpu", engine="software").build(rdata.keys)
    pick = rng.choice(rdata.lo.shape[0], min(args.sample, rdata.lo.shape[0]), replace=False)
    lo, hi = rindex.state.keymap.encode_ranges(rdata.lo[pick], rdata.hi[pick])
    plan = rindex._plan_ranges(rindex.state, lo, hi)
    rays = plan.rays(0, int(plan.starts[-1]))

    def morton(ix: Any) -> Any:  # the same primitives, sorted by Morton codes
        return build_gas(KIND["triangle"], key_primitives(coder, "triangle", ix.state.own_keys))

    for order, g, rg in (("keys", st.gas, rindex.state.gas),
                         ("morton", morton(index), morton(rindex))):
        result[f"{order}: point rowid"] = profile(g, point, True)
        result[f"{order}: point count"] = profile(g, point, False)
        result[f"{order}: range count"] = profile(rg, rays, False)
        result[f"{order}: range count"]["rays per range"] = int(plan.starts[-1]) / len(pick)
    for name, got in result.items():
        if isinstance(got, dict):
            print(f"{name:20} " + ", ".join(
                f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in got.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
