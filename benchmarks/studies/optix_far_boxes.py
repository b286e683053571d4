"""Does OptiX find custom-primitive boxes far from the origin? rx's extended mode puts a key's
x coordinate anywhere in [0.5, 1.7e38]; on an H100 OptiX missed its boxes from x = 2^41 up, and
found them all scaled under one instance (the engine now builds far AABB scenes that way).

    python benchmarks/studies/optix_far_boxes.py

For each centre X (powers of two from 2^20 to 2^126) and box half-width (one ulp of X, X/4096,
X/4), one box per X, traced by rays along z, along y and along x through the box's centre,
with an intersection program that reports every box OptiX hands it: a miss means OptiX's
traversal never called it. Three scenes: the boxes in a GAS as they are; the boxes scaled by
2^-100 in x in a GAS under one instance whose transform scales x by 2^100 (exact: powers of
two); and the software engine's GAS for reference. Prints hits per ray direction and scene.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.rt import geometry as geo
from indexzoo.native.rt import query
from indexzoo.native.rt.trace import Instance, build_gas

CUDA = """
static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  return (long long)prim;
}
#define IZ_HAS_INTERSECTION 1
extern "C" __global__ void __intersection__iz() {
  optixReportIntersection(0.5f * (optixGetRayTmin() + optixGetRayTmax()), 0);
}
"""


@register_jitable
def every_hit(ray, inst, prim, t, front, params):
    return np.int64(prim)


PROGRAMS = query.QueryPrograms(match=every_hit, cuda=CUDA)
SCALE = 2.0 ** 100


class NoFields(NamedTuple):
    pass


def main() -> int:
    import cupy as cp

    from indexzoo.native.rt.optix.accel import build_gas as optix_gas
    from indexzoo.native.rt.optix.accel import build_ias as optix_ias

    exps = list(range(20, 127, 3))
    centres = np.array([2.0 ** e for e in exps], np.float32)
    for label, half in (("ulp", np.spacing(centres)), ("X/4096", centres / 4096),
                        ("X/4", centres / 4)):
        half = half.astype(np.float32)
        # one box per centre, each on its own y line so rays hit one box only
        ys = np.arange(centres.shape[0], dtype=np.float32) * 4
        boxes = np.stack([centres - half, ys - 0.5, np.full_like(ys, -0.5),
                          centres + half, ys + 0.5, np.full_like(ys, 0.5)], axis=1)
        n = centres.shape[0]
        rays = {}
        for axis in ("z", "y", "x"):
            o = np.stack([centres, ys, np.zeros_like(ys)], axis=1).astype(np.float32)
            d = np.zeros((n, 3), np.float32)
            if axis == "z":
                o[:, 2], d[:, 2], t1 = -1, 1, np.full(n, 2, np.float32)
            elif axis == "y":
                o[:, 1] -= 1
                d[:, 1], t1 = 1, np.full(n, 2, np.float32)
            else:
                o[:, 0] = (centres - 2 * half).astype(np.float32)
                d[:, 0], t1 = 1, (4 * half).astype(np.float32)
            rays[axis] = query.Rays(cp.asarray(o), cp.asarray(d), cp.zeros(n, np.float32),
                                    cp.asarray(t1))
        scaled = boxes.copy()
        scaled[:, [0, 3]] /= np.float32(SCALE)
        scenes: dict[str, Any] = {
            "software": build_gas(geo.AABBS, cp.asarray(boxes)),
            "optix": optix_gas(geo.AABBS, cp.asarray(boxes)),
            "optix scaled": optix_ias([Instance(optix_gas(geo.AABBS, cp.asarray(scaled)),
                                                np.array([[SCALE, 0, 0, 0], [0, 1, 0, 0],
                                                          [0, 0, 1, 0]], np.float32))]),
        }
        print(f"half-width {label}; X = 2^{exps[0]} .. 2^{exps[-1]} step 2^3")
        for axis, r in rays.items():
            line = []
            for name, scene in scenes.items():
                b = query.FunctionBatch.of(
                    None, lambda s, e, owner, r=r: query.Rays(r.origins[s:e], r.directions[s:e],
                                                              r.tmin[s:e], r.tmax[s:e]),
                    lambda s, e, owner: NoFields(), n_queries=n, xp=cp)
                c = query.count(scene, b, PROGRAMS, max_rays=1000).get()
                miss = [f"2^{exps[i]}" for i in np.nonzero(c != 1)[0]]
                line.append(f"{name}: {int((c == 1).sum())}/{n}"
                            + (f" (not: {miss[0]}..{miss[-1]})" if miss else ""))
            print(f"  rays along {axis}: " + "; ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
