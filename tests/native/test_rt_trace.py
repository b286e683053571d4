"""``trace`` against the brute-force oracle (every ray against every primitive, through the same
intersection functions): closest hits, ties, ray flags, culling, and every program kind, on
random and adversarial scenes."""

from __future__ import annotations

import numpy as np
import pytest
from numba.extending import register_jitable

from indexzoo import InvalidInput
from indexzoo.native.rt import geometry as geo
from indexzoo.native.rt.trace import (
    CULL_BACK_FACING,
    CULL_FRONT_FACING,
    DISABLE_ANYHIT,
    DISABLE_CLOSESTHIT,
    TERMINATE_ON_FIRST_HIT,
    Programs,
    box_rows,
    build_gas,
    closest_hit_query,
    sphere_rows,
    trace,
    triangle_rows,
)
from indexzoo.native.targets import Kernel

MISS = np.uint64(2**64 - 1)


def _scene(kind: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    if kind == geo.TRIANGLES:
        base = rng.uniform(0, 100, (n, 1, 3))
        tri = base + rng.uniform(-4, 4, (n, 3, 3))
        return tri.reshape(n, 9).astype(np.float32), 0.0
    if kind == geo.SPHERES:
        return rng.uniform(0, 100, (n, 3)).astype(np.float32), 2.5
    lo = rng.uniform(0, 100, (n, 3))
    return np.concatenate([lo, lo + rng.uniform(0, 6, (n, 3))], axis=1).astype(np.float32), 0.0


def _rays(r: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    o = rng.uniform(-10, 110, (r, 3)).astype(np.float32)
    target = rng.uniform(0, 100, (r, 3)).astype(np.float32)
    d = (target - o).astype(np.float32)
    d[: r // 8, 1:] = 0  # axis-parallel rays
    tmin = np.where(rng.random(r) < 0.2, np.float32(0.3), np.float32(0)).astype(np.float32)
    tmax = np.where(rng.random(r) < 0.2, np.float32(0.7), np.float32(np.inf)).astype(np.float32)
    return o, d, tmin, tmax


def _check_closest(gas, data, radius, kind, o, d, tmin, tmax, **kw) -> None:  # type: ignore[no-untyped-def]
    hits = trace(gas, o, d, tmin, tmax, **kw)
    t, prim, front = geo.brute_force(kind, data, radius, o, d, tmin, tmax)
    np.testing.assert_array_equal(hits.prim, prim)
    np.testing.assert_array_equal(hits.t, t)
    np.testing.assert_array_equal(hits.front[prim >= 0], front[prim >= 0])


@pytest.mark.parametrize("kind", [geo.TRIANGLES, geo.SPHERES, geo.AABBS])
@pytest.mark.parametrize("n, leaf_size", [(1, 4), (2, 1), (37, 4), (3000, 4), (3000, 1)])
def test_closest_hits_equal_the_brute_force_oracle(kind: int, n: int, leaf_size: int) -> None:
    rng = np.random.default_rng(n * 7 + kind)
    data, radius = _scene(kind, n, rng)
    gas = build_gas(kind, data, radius, leaf_size=leaf_size)
    _check_closest(gas, data, radius, kind, *_rays(2000, rng))


def _query_kernel(kind: int, geometry: object) -> Kernel:
    """A kernel that casts ray ``i`` of the arrays itself through ``closest_hit_query``."""
    closest = closest_hit_query(kind, geometry)

    @register_jitable
    def body(i, nodes, words, n_nodes, prims, order, rad, o, d, tmin, tmax, t, p, f):  # type: ignore[no-untyped-def]
        t[i], p[i], f[i] = closest(nodes, words, n_nodes, prims, order, rad, o[i, 0], o[i, 1],
                                   o[i, 2], d[i, 0], d[i, 1], d[i, 2], tmin[i], tmax[i])

    return Kernel(body)


@pytest.mark.parametrize("kind", [geo.TRIANGLES, geo.SPHERES, geo.AABBS])
@pytest.mark.parametrize("n", [0, 1, 3000])
def test_a_closest_hit_query_inside_a_kernel_equals_the_brute_force_oracle(kind: int,
                                                                          n: int) -> None:
    """``closest_hit_query`` (optixTrace from a ray-generation program): a kernel that casts
    its own rays gets the oracle's closest hits, on stored and generated geometry."""
    rng = np.random.default_rng(n + kind)
    data, radius = _scene(kind, n, rng)
    o, d, tmin, tmax = _rays(1500, rng)
    t_ref, p_ref, f_ref = geo.brute_force(kind, data, radius, o, d, tmin, tmax)
    geometry = {geo.TRIANGLES: triangle_rows, geo.SPHERES: sphere_rows, geo.AABBS: box_rows}[kind]
    for gas in (build_gas(kind, data, radius, leaf_size=4),
                build_gas(kind, data, radius, leaf_size=3, geometry=geometry)):
        t = np.empty(1500, np.float32)
        p = np.empty(1500, np.int64)
        f = np.empty(1500, np.bool_)
        _query_kernel(kind, gas.geometry)("cpu", 1500, *gas.query_args(), o, d, tmin, tmax, t,
                                          p, f)
        np.testing.assert_array_equal(p, p_ref)
        np.testing.assert_array_equal(t, t_ref)
        np.testing.assert_array_equal(f[p_ref >= 0], f_ref[p_ref >= 0])


def test_an_empty_scene_misses_every_ray() -> None:
    gas = build_gas(geo.AABBS, np.zeros((0, 6), np.float32))
    o, d, tmin, tmax = _rays(50, np.random.default_rng(0))
    hits = trace(gas, o, d, tmin, tmax)
    assert (hits.prim == -1).all() and np.isinf(hits.t).all()


def test_one_ray_and_read_only_rays_reuse_the_kernel_compiled_for_many() -> None:
    """numba compiles a kernel per argument type, and read-only is part of a NumPy array's
    type: one ray's broadcast bounds, or a caller's read-only arrays, must not compile the
    trace kernel a second time (and answer as the writable arrays do)."""
    from indexzoo.native.rt import trace as trace_module

    @register_jitable
    def count_hits(ray, inst, prim, t, front, payload, params):  # a program set of its own
        payload[ray, 0] += np.uint64(1)
        return 1  # IGNORE: every primitive on the way

    programs = Programs(anyhit=count_hits)
    rng = np.random.default_rng(5)
    data, radius = _scene(geo.SPHERES, 200, rng)
    gas = build_gas(geo.SPHERES, data, radius=radius)
    o, d, tmin, tmax = _rays(64, rng)
    many = trace(gas, o, d, tmin, tmax, programs=programs)
    one = trace(gas, o[:1], d[:1], 0.0, np.inf, programs=programs)  # broadcast, read-only bounds
    ro = [a.copy() for a in (o, d, tmin, tmax)]
    for a in ro:
        a.flags.writeable = False
    again = trace(gas, *ro, programs=programs)
    np.testing.assert_array_equal(again.payload, many.payload)
    full = trace(gas, o[:1], d[:1], np.zeros(1, np.float32), np.full(1, np.inf, np.float32),
                 programs=programs)
    np.testing.assert_array_equal(one.payload, full.payload)
    kernel = trace_module._trace_kernel(gas.kind, trace_module.geometry_of(gas), False, None,
                                        count_hits, None, None, None)
    compiled = [kernel._compiled[k] for k in ("cpu", "cpu-serial") if k in kernel._compiled]
    assert compiled and all(len(fn.signatures) == 1 for fn in compiled), \
        [fn.signatures for fn in compiled]


@pytest.mark.parametrize("scene", ["duplicates", "plane", "far"])
def test_adversarial_scenes(scene: str) -> None:
    """Thousands of primitives at the same place (key duplicates: the smallest index wins),
    everything in one plane, coordinates up to 2^23."""
    rng = np.random.default_rng(5)
    if scene == "duplicates":
        box = np.array([[10, 10, 10, 11, 11, 11]], np.float32)
        data = np.concatenate([np.repeat(box, 3000, 0), _scene(geo.AABBS, 100, rng)[0]])
        data = data[rng.permutation(data.shape[0])]
    elif scene == "plane":
        data = _scene(geo.AABBS, 3000, rng)[0]
        data[:, 2], data[:, 5] = 0, 0
    else:
        keys = rng.choice(1 << 23, 3000, replace=False).astype(np.float32)
        data = np.stack([keys, np.zeros_like(keys), np.zeros_like(keys)] * 2, axis=1)
    gas = build_gas(geo.AABBS, data)
    r = 1500
    o, d, tmin, tmax = _rays(r, rng)
    if scene == "far":  # perpendicular point rays at every key, as RX shoots them
        o = np.stack([data[:r, 0], np.zeros(r), -np.ones(r)], axis=1).astype(np.float32)
        d = np.tile(np.array([[0, 0, 1]], np.float32), (r, 1))
    _check_closest(gas, data, 0.0, geo.AABBS, o, d, tmin, tmax)


@register_jitable
def _count_and_ignore(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    payload[ray, 0] += np.uint64(1)
    payload[ray, 1] ^= np.uint64(prim) * np.uint64(0x9E3779B97F4A7C15)
    return 1  # IGNORE


def test_anyhit_sees_every_primitive_exactly_once() -> None:
    rng = np.random.default_rng(9)
    data, _ = _scene(geo.AABBS, 2000, rng)
    data[:500] = data[0]  # duplicates
    gas = build_gas(geo.AABBS, data)
    o, d, tmin, tmax = _rays(1000, rng)
    payload = np.zeros((1000, 2), np.uint64)
    hits = trace(gas, o, d, tmin, tmax, Programs(anyhit=_count_and_ignore), payload=payload)
    every = geo.all_hits(geo.AABBS, data, 0.0, o, d, tmin, tmax)
    assert (hits.prim == -1).all()  # every hit ignored
    for i, prims in enumerate(every):
        assert payload[i, 0] == len(prims), i
        mix = np.bitwise_xor.reduce(prims.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) \
            if len(prims) else np.uint64(0)
        assert payload[i, 1] == mix, i
    # disabled any-hit: the program is not called, the closest hit is reported
    payload[:] = 0
    hits = trace(gas, o, d, tmin, tmax, Programs(anyhit=_count_and_ignore), flags=DISABLE_ANYHIT,
                 payload=payload)
    assert (payload == 0).all()
    np.testing.assert_array_equal(hits.prim, geo.brute_force(geo.AABBS, data, 0.0, o, d, tmin, tmax)[1])


@register_jitable
def _terminate(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    return 2  # TERMINATE


def test_terminate_on_first_hit_reports_some_hit() -> None:
    rng = np.random.default_rng(4)
    data, _ = _scene(geo.AABBS, 2000, rng)
    gas = build_gas(geo.AABBS, data)
    o, d, tmin, tmax = _rays(800, rng)
    every = geo.all_hits(geo.AABBS, data, 0.0, o, d, tmin, tmax)
    for kw in ({"flags": TERMINATE_ON_FIRST_HIT}, {"programs": Programs(anyhit=_terminate)}):
        hits = trace(gas, o, d, tmin, tmax, **kw)
        for i, prims in enumerate(every):
            assert (hits.prim[i] in set(prims.tolist())) if len(prims) else hits.prim[i] == -1


@register_jitable
def _record(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    payload[ray, 0] = np.uint64(prim)


@register_jitable
def _missed(ray, payload, params):  # type: ignore[no-untyped-def]
    payload[ray, 0] = np.uint64(2**64 - 1)


def test_closesthit_and_miss_programs_write_the_payload() -> None:
    rng = np.random.default_rng(2)
    data, radius = _scene(geo.SPHERES, 500, rng)
    gas = build_gas(geo.SPHERES, data, radius)
    o, d, tmin, tmax = _rays(600, rng)
    prim = geo.brute_force(geo.SPHERES, data, radius, o, d, tmin, tmax)[1]
    programs = Programs(closesthit=_record, miss=_missed)
    hits = trace(gas, o, d, tmin, tmax, programs)
    expected = np.where(prim >= 0, prim.astype(np.uint64), MISS)
    np.testing.assert_array_equal(hits.payload[:, 0], expected)
    hits = trace(gas, o, d, tmin, tmax, programs, flags=DISABLE_CLOSESTHIT)
    np.testing.assert_array_equal(hits.payload[:, 0], np.where(prim >= 0, 0, MISS).astype(np.uint64))


def test_face_culling_keeps_only_the_wanted_side() -> None:
    rng = np.random.default_rng(8)
    data, _ = _scene(geo.TRIANGLES, 1500, rng)
    gas = build_gas(geo.TRIANGLES, data)
    o, d, tmin, tmax = _rays(1500, rng)
    every = trace(gas, o, d, tmin, tmax)
    for flag, keep in ((CULL_BACK_FACING, True), (CULL_FRONT_FACING, False)):
        hits = trace(gas, o, d, tmin, tmax, flags=flag)
        assert (hits.front[hits.prim >= 0] == keep).all()
        same = (every.prim >= 0) & (every.front == keep)
        np.testing.assert_array_equal(hits.prim[same], every.prim[same])  # the closest was kept


@register_jitable
def _odd_boxes_only(boxes, i, inst, p, ox, oy, oz, dx, dy, dz, tmin, tmax, params):  # type: ignore[no-untyped-def]
    if p % 2 == 0:
        return np.float32(np.inf), False
    return geo.hit_aabb_reference(boxes, i, ox, oy, oz, dx, dy, dz, tmin, tmax)


def test_a_custom_intersection_program_decides_what_custom_primitives_hit() -> None:
    rng = np.random.default_rng(6)
    data, _ = _scene(geo.AABBS, 1000, rng)
    gas = build_gas(geo.AABBS, data)
    o, d, tmin, tmax = _rays(700, rng)
    hits = trace(gas, o, d, tmin, tmax, Programs(intersection=_odd_boxes_only))
    odd = data.copy()
    odd[0::2] = np.array([1e6, 1e6, 1e6, 1e6, 1e6, 1e6], np.float32)  # far away: never hit
    np.testing.assert_array_equal(hits.prim, geo.brute_force(geo.AABBS, odd, 0.0, o, d, tmin, tmax)[1])


@register_jitable
def _keyed_boxes(boxes, i, inst, p, ox, oy, oz, dx, dy, dz, tmin, tmax, params):  # type: ignore[no-untyped-def]
    keys, wanted = params  # launch parameters: an array and a scalar
    if keys[p] != wanted:
        return np.float32(np.inf), False
    return geo.hit_aabb_reference(boxes, i, ox, oy, oz, dx, dy, dz, tmin, tmax)


@register_jitable
def _collect(ray, inst, p, t, front, payload, params):  # type: ignore[no-untyped-def]
    keys = params[0]
    payload[ray, 0] += np.uint64(keys[p])
    return 1  # IGNORE: keep looking


def test_launch_params_reach_every_program() -> None:
    rng = np.random.default_rng(16)
    data, _ = _scene(geo.AABBS, 1200, rng)
    keys = rng.integers(0, 3, size=1200).astype(np.uint64)
    gas = build_gas(geo.AABBS, data)
    o, d, tmin, tmax = _rays(500, rng)
    payload = np.zeros((500, 1), np.uint64)
    trace(gas, o, d, tmin, tmax, Programs(intersection=_keyed_boxes, anyhit=_collect),
          payload=payload, params=(keys, np.uint64(2)))
    every = geo.all_hits(geo.AABBS, data, 0.0, o, d, tmin, tmax)
    expected = [2 * int((keys[prims] == 2).sum()) for prims in every]
    np.testing.assert_array_equal(payload[:, 0], np.array(expected, np.uint64))


def test_refit_follows_moved_primitives() -> None:
    rng = np.random.default_rng(12)
    data, radius = _scene(geo.TRIANGLES, 2000, rng)
    gas = build_gas(geo.TRIANGLES, data)
    moved = (data + rng.uniform(-20, 20, (2000, 1)).astype(np.float32)).astype(np.float32)
    refitted = gas.refit(moved)
    _check_closest(refitted, moved, radius, geo.TRIANGLES, *_rays(1500, rng))
    with pytest.raises(InvalidInput):
        gas.refit(moved[:10])


def test_footprint_counts_primitives_and_bvh() -> None:
    data, _ = _scene(geo.AABBS, 1000, np.random.default_rng(1))
    fp = build_gas(geo.AABBS, data).footprint()
    assert fp.breakdown["primitives"] == data.nbytes
    gas = build_gas(geo.AABBS, data)
    assert fp.breakdown["bvh_nodes"] == gas.bvh.n_nodes * 32 and fp.breakdown["bvh_order"] == 4000
    assert fp.peak_build_bytes >= fp.resident_bytes


def test_bad_input_is_rejected() -> None:
    with pytest.raises(InvalidInput):
        build_gas(geo.TRIANGLES, np.zeros((3, 6), np.float32))
    with pytest.raises(InvalidInput):
        build_gas(geo.SPHERES, np.zeros((3, 3), np.float32), radius=-1)
    gas = build_gas(geo.AABBS, np.zeros((1, 6), np.float32))
    with pytest.raises(InvalidInput):
        trace(gas, np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32), 0, 1)
    with pytest.raises(InvalidInput):
        trace(gas, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), 0, 1, flags=64)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", [geo.TRIANGLES, geo.SPHERES, geo.AABBS])
def test_the_gpu_traces_like_the_cpu(kind: int) -> None:
    """Same primitives hit; distances equal up to the GPU's fused multiply-adds (triangles and
    spheres differ in the last bits, boxes not at all)."""
    import cupy

    rng = np.random.default_rng(30 + kind)
    data, radius = _scene(kind, 20000, rng)
    o, d, tmin, tmax = _rays(50000, rng)
    gas = build_gas(kind, cupy.asarray(data), radius)
    hits = trace(gas, cupy.asarray(o), cupy.asarray(d), cupy.asarray(tmin), cupy.asarray(tmax))
    t, prim, _ = geo.brute_force(kind, data, radius, o, d, tmin, tmax)
    got_p, got_t = cupy.asnumpy(hits.prim), cupy.asnumpy(hits.t)
    assert (got_p == prim).mean() >= 0.999
    same = (got_p == prim) & (prim >= 0)
    np.testing.assert_allclose(got_t[same], t[same], rtol=1e-3, atol=1e-5)
    if kind == geo.AABBS:
        np.testing.assert_array_equal(got_p, prim)
        np.testing.assert_array_equal(got_t, t)
    payload = cupy.zeros((50000, 2), dtype=cupy.uint64)
    trace(gas, cupy.asarray(o), cupy.asarray(d), cupy.asarray(tmin), cupy.asarray(tmax),
          Programs(anyhit=_count_and_ignore), payload=payload)
    every = geo.all_hits(kind, data, radius, o, d, tmin, tmax)
    counts = np.array([len(x) for x in every])
    assert (np.abs(cupy.asnumpy(payload[:, 0]).astype(np.int64) - counts) <= 1).mean() >= 0.999
