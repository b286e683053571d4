"""The query layer on the OptiX engine against the software engine, for every hit operation
(FIRST, COUNT, SUM, COLLECT, CLOSEST, BITMAP) and every primitive kind, with rays given as
arrays (some with a negative tmin, some with scalar bounds), the default box test and an
index's own programs. Marked ``optix``: skipped, with what is missing, where OptiX cannot run.

The scenes are unambiguous for float arithmetic: primitives at integer grid points, rays along
an axis at 0.1 from a column of points (inside every primitive of the column) or between
columns (missing all), so both engines must find exactly the same hits.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest
from numba.extending import register_jitable

from indexzoo.native.rt import geometry as geo
from indexzoo.native.rt import query
from indexzoo.native.rt.trace import build_gas

pytestmark = [pytest.mark.optix, pytest.mark.gpu]

GRID = 12
CUDA = """
static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  return (long long)prim + 1000000ll * inst;
}
"""


@register_jitable
def every_hit(ray, inst, prim, t, front, params):
    return np.int64(prim) + np.int64(1000000) * np.int64(inst)


PROGRAMS = query.QueryPrograms(match=every_hit, cuda=CUDA)


class NoFields(NamedTuple):
    pass


def _scene(kind: int) -> np.ndarray:
    g = np.arange(GRID, dtype=np.float32)
    c = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    c = c[np.random.default_rng(0).permutation(c.shape[0])]
    h = np.float32(0.25)
    if kind == geo.SPHERES:
        return c
    if kind == geo.AABBS:
        return np.concatenate([c - h, c + h], axis=1)
    x, y, z = c[:, 0], c[:, 1], c[:, 2]  # rx's triangle around each point (e = 0.25)
    return np.stack([x - h, y + h, z - h, x - h, y - h, z - h, x + h, y, z + h], axis=1)


def _rays(n: int, seed: int) -> query.Rays:
    rng = np.random.default_rng(seed)
    axis = rng.integers(0, 3, n)
    # inside the primitives of a column, off every triangle's edges and out of its plane
    # (rx's triangle lies in the plane z - cz = x - cx)
    o = rng.integers(0, GRID, (n, 3)).astype(np.float32) + np.array([0.1, 0.05, 0.05],
                                                                    np.float32)
    o[rng.random(n) < 0.2] += np.float32(0.4)  # between columns: no hit
    o[np.arange(n), axis] = np.float32(-1.0)
    d = np.zeros((n, 3), np.float32)
    d[np.arange(n), axis] = 1
    tmin = rng.integers(-2, GRID // 2, n).astype(np.float32)  # some negative
    tmax = tmin + rng.integers(1, GRID + 2, n).astype(np.float32)
    return query.Rays(o, d, tmin, tmax)


def _batch(rays: query.Rays, xp: Any) -> query.RayBatch:
    n = int(rays.tmin.shape[0])
    dev = query.Rays(*(xp.asarray(a) for a in (rays.origins, rays.directions, rays.tmin,
                                                 rays.tmax)))
    return query.FunctionBatch.of(
        None, lambda s, e, owner: query.Rays(dev.origins[s:e], dev.directions[s:e],
                                             dev.tmin[s:e], dev.tmax[s:e]),
        lambda s, e, owner: NoFields(), n_queries=n, xp=xp)


def _host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _hit_answers(scene: Any, b: query.RayBatch, values: Any, rowid_dtype: Any,
                 max_rays: int) -> dict[str, Any]:
    """The hit operations' answers for one batch on one scene, on the host: COUNT, SUM,
    FIRST, CLOSEST, and COLLECT's sets sorted per ray."""
    res = {"count": _host(query.count(scene, b, PROGRAMS, max_rays=max_rays)),
           "sum": _host(query.sum_values(scene, b, PROGRAMS, values, max_rays=max_rays)),
           "first": _host(query.first(scene, b, PROGRAMS, max_rays=max_rays)),
           "closest": _host(query.closest(scene, b, PROGRAMS, max_rays=max_rays))}
    off, ids = query.collect(scene, b, PROGRAMS, rowid_dtype=rowid_dtype, max_rays=max_rays)
    off, ids = _host(off), _host(ids)
    res["sets"] = [np.sort(ids[off[k]:off[k + 1]]) for k in range(off.shape[0] - 1)]
    return res


@pytest.mark.parametrize("kind", [geo.TRIANGLES, geo.SPHERES, geo.AABBS],
                         ids=["triangles", "spheres", "aabbs"])
def test_every_hit_operation_matches_the_software_engine(kind: int) -> None:
    import cupy as cp

    from indexzoo.native.rt.optix.accel import build_gas as optix_gas

    rows = cp.asarray(_scene(kind))
    radius = 0.25 if kind == geo.SPHERES else 0.0
    scenes = {"software": build_gas(kind, rows, radius=radius),
              "optix": optix_gas(kind, rows, radius=radius, keep_boxes=True)}
    rays = _rays(3000, seed=kind)
    values = cp.asarray(np.random.default_rng(1).integers(0, 2**63, rows.shape[0],
                                                          dtype=np.uint64))
    got: dict[str, dict[str, Any]] = {}
    for name, scene in scenes.items():
        b = _batch(rays, cp)
        res = _hit_answers(scene, b, values, np.uint32, 1000)
        words = cp.zeros((b.n_queries, (rows.shape[0] + 31) // 32), np.uint32)
        query.mark_bits(scene, b, PROGRAMS, words, max_rays=1000)
        res["bits"] = _host(words)
        got[name] = res
    sw, ox = got["software"], got["optix"]
    assert int(sw["count"].sum()) > 1000  # the rays do hit
    np.testing.assert_array_equal(ox["count"], sw["count"])
    np.testing.assert_array_equal(ox["sum"], sw["sum"])
    np.testing.assert_array_equal(ox["closest"], sw["closest"])
    np.testing.assert_array_equal(ox["bits"], sw["bits"])
    for i, (a, b) in enumerate(zip(ox["sets"], sw["sets"], strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"ray {i}")
        if b.size:  # FIRST: some hit of the ray
            assert ox["first"][i] in b
        else:
            assert ox["first"][i] == query.MISS


def test_scalar_ray_bounds_are_broadcast() -> None:
    import cupy as cp

    from indexzoo.native.rt.optix.accel import build_gas as optix_gas

    rows = cp.asarray(_scene(geo.AABBS))
    o = np.random.default_rng(7).integers(0, GRID, (500, 3)).astype(np.float32) + \
        np.float32(0.1)
    d = np.zeros_like(o)
    d[:, 2] = 1
    o[:, 2] = -1
    scalar = query.Rays(o, d, np.float32(0), np.float32(GRID + 2))  # every ray: the column
    counts = {}
    for name, scene in {"software": build_gas(geo.AABBS, rows),
                        "optix": optix_gas(geo.AABBS, rows, keep_boxes=True)}.items():
        dev = query.Rays(cp.asarray(o), cp.asarray(d), scalar.tmin, scalar.tmax)
        b = query.FunctionBatch.of(None, lambda s, e, owner, dev=dev: query.Rays(
            dev.origins[s:e], dev.directions[s:e], dev.tmin, dev.tmax),
            lambda s, e, owner: NoFields(), n_queries=500, xp=cp)
        counts[name] = _host(query.count(scene, b, PROGRAMS, max_rays=1 << 10))
    np.testing.assert_array_equal(counts["optix"], counts["software"])
    assert (counts["optix"] == GRID).all()


def test_an_aabb_scene_without_boxes_or_an_intersection_program_is_refused() -> None:
    import cupy as cp

    from indexzoo.native.rt.optix.accel import build_gas as optix_gas

    scene = optix_gas(geo.AABBS, cp.asarray(_scene(geo.AABBS)))
    with pytest.raises(ValueError, match="keep_boxes=True"):
        query.count(scene, _batch(_rays(10, 1), cp), PROGRAMS, max_rays=16)


@pytest.mark.parametrize("kind", [geo.TRIANGLES, geo.AABBS], ids=["triangles", "aabbs"])
def test_an_ias_with_transforms_ids_and_masks_matches_the_software_engine(kind: int) -> None:
    import cupy as cp

    from indexzoo.native.rt.optix.accel import build_gas as optix_gas
    from indexzoo.native.rt.optix.accel import build_ias as optix_ias
    from indexzoo.native.rt.trace import Instance, build_ias

    rows = cp.asarray(_scene(kind))
    gases = {"software": build_gas(kind, rows), "optix": optix_gas(kind, rows, keep_boxes=True)}

    def instances(g: Any) -> list[Instance]:
        out = []
        for k in range(4):  # stacked along z, 20 apart; the third one invisible (mask 0)
            t = np.eye(3, 4, dtype=np.float32)
            t[2, 3] = 20 * k
            out.append(Instance(g, t, instance_id=10 + k, mask=0 if k == 2 else 0xFF))
        return out

    scenes = {"software": build_ias(instances(gases["software"])),
              "optix": optix_ias(instances(gases["optix"]))}
    rng = np.random.default_rng(3)
    n = 800
    o = rng.integers(0, GRID, (n, 3)).astype(np.float32) + np.array([0.1, 0.05, 0.05],
                                                                    np.float32)
    o[rng.random(n) < 0.2] += np.float32(0.4)
    o[:, 2] = -1
    d = np.zeros((n, 3), np.float32)
    d[:, 2] = 1
    rays = query.Rays(o, d, np.zeros(n, np.float32), np.full(n, 100, np.float32))
    got: dict[str, dict[str, Any]] = {}
    for name, scene in scenes.items():
        res = _hit_answers(scene, _batch(rays, cp), None, np.uint64, 300)
        got[name] = res
    sw, ox = got["software"], got["optix"]
    assert set(np.unique(sw["count"])) <= {0, 3 * GRID} and int(sw["count"].max()) == 3 * GRID
    np.testing.assert_array_equal(ox["count"], sw["count"])
    np.testing.assert_array_equal(ox["sum"], sw["sum"])
    np.testing.assert_array_equal(ox["closest"], sw["closest"])
    for i, (a, b) in enumerate(zip(ox["sets"], sw["sets"], strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"ray {i}")
        assert (ox["first"][i] in b) if b.size else ox["first"][i] == query.MISS
    assert scenes["optix"].footprint().breakdown["ias"] > 0


def test_far_boxes_are_found_as_on_the_software_engine() -> None:
    # OptiX's traversal misses custom-primitive boxes from 2^41 up; such scenes are built
    # scaled down under one scaling instance, with the kept boxes in that (scaled) space
    import cupy as cp

    from indexzoo.errors import InvalidInput
    from indexzoo.native.rt.optix.accel import OptixScaledGas
    from indexzoo.native.rt.optix.accel import build_gas as optix_gas

    exps = np.arange(20, 127, 3)
    x = np.ldexp(np.float32(1), exps).astype(np.float32)
    half = (x / 4096).astype(np.float32)
    ys = np.arange(x.shape[0], dtype=np.float32) * 4
    boxes = np.stack([x - half, ys - 0.5, np.full_like(ys, -0.5),
                      x + half, ys + 0.5, np.full_like(ys, 0.5)], axis=1)
    n = x.shape[0]
    o = np.stack([x, ys, np.full_like(ys, -1)], axis=1).astype(np.float32)
    d = np.tile(np.array([0, 0, 1], np.float32), (n, 1))
    o_par = np.stack([x - 2 * half, ys, np.zeros_like(ys)], axis=1).astype(np.float32)
    d_par = np.tile(np.array([1, 0, 0], np.float32), (n, 1))
    rays = query.Rays(np.concatenate([o, o_par]), np.concatenate([d, d_par]),
                      np.zeros(2 * n, np.float32),
                      np.concatenate([np.full(n, 2, np.float32), 4 * half]))
    rows = cp.asarray(boxes)
    far = optix_gas(geo.AABBS, rows, keep_boxes=True)
    assert isinstance(far, OptixScaledGas) and far.exponents[0] > 0 and far.exponents[1:] == (0, 0)
    for name, scene in {"software": build_gas(geo.AABBS, rows), "optix": far,
                        "optix refit": far.refit(rows)}.items():
        count = _host(query.count(scene, _batch(rays, cp), PROGRAMS, max_rays=1000))
        np.testing.assert_array_equal(count, np.ones(2 * n), err_msg=name)
    assert far.footprint().breakdown["gas"] > 0
    with pytest.raises(InvalidInput, match="software engine"):
        optix_gas(geo.SPHERES, cp.asarray(np.stack([x, ys, ys], axis=1)), radius=0.25)
