"""Where a BVH build's time goes: the phases of ``indexzoo.native.rt.bvh.build_bvh`` timed one by
one (median of ``--repeats`` after a warm-up), for the scenes of cgRX (the representatives of
2^scale uniform uint64 keys) and for uniform random boxes, with the tree's depth and the host
calls of one build (cProfile).

    python benchmarks/studies/bvh_build_profile.py --device cuda [--scale 26] [--json out.json]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
from typing import Any

import numpy as np

import indexzoo
from indexzoo.native.rt import bvh as B
from indexzoo.native.rt.scene import _bounds
from indexzoo.tools.timing import time_call


def phases(device: str, lo: Any, hi: Any, leaf_size: int, repeats: int) -> dict[str, Any]:
    xp = np if device == "cpu" else __import__("cupy")

    def t(fn: Any) -> float:
        return time_call(fn, device, repeats=repeats).median

    out: dict[str, Any] = {"prims": int(lo.shape[0]), "leaf_size": leaf_size}
    out["whole build"] = t(lambda: B.build_bvh(lo, hi, leaf_size=leaf_size))
    out["morton"] = t(lambda: B._morton(xp, lo, hi))
    codes = B._morton(xp, lo, hi)
    out["argsort"] = t(lambda: xp.argsort(codes))
    perm = xp.argsort(codes)
    sc = codes[perm]
    out["topology"] = t(lambda: B._topology(xp, sc, leaf_size))
    words, levels, n_nodes = B._topology(xp, sc, leaf_size)
    order = perm.astype(np.int32)
    slo, shi = lo[order], hi[order]
    nodes = xp.empty((n_nodes, 8), dtype=xp.float32)
    nodes[:, 6:8] = words.view(xp.float32)
    out["boxes"] = t(lambda: B._boxes(xp, nodes, words, levels, slo, shi, leaf_size))
    out["depth"] = len(levels.pre)
    out["nodes"] = n_nodes
    prof = cProfile.Profile()
    prof.enable()
    B.build_bvh(lo, hi, leaf_size=leaf_size)
    if device == "cuda":
        xp.cuda.runtime.deviceSynchronize()
    prof.disable()
    st = pstats.Stats(prof)
    out["host_calls"] = int(st.total_calls)  # type: ignore[attr-defined]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--scale", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    xp = np if args.device == "cpu" else __import__("cupy")
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**64 - 1, 1 << args.scale, dtype=np.uint64, endpoint=True)
    res: dict[str, Any] = {"device": args.device, "scale": args.scale}
    for name in ("cgrx-5x4", "cgrx-8x4"):
        ix = indexzoo.create(name, device=args.device).build(keys)
        gas = ix.state.scene.gas
        lo, hi = _bounds(gas.kind, gas.data, gas.radius, gas.geometry)
        res[name] = phases(args.device, lo, hi, ix.params.leaf_size, args.repeats)
        print(name, json.dumps(res[name]), flush=True)
        del ix, gas
    for n in (1 << 21, 1 << 24):
        lo = xp.asarray(rng.random((n, 3)).astype(np.float32))
        res[f"uniform boxes {n}"] = phases(args.device, lo, lo + np.float32(1e-3), 4,
                                           args.repeats)
        print(f"uniform boxes {n}", json.dumps(res[f"uniform boxes {n}"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
