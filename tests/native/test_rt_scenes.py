"""Scenes beyond one stored GAS: geometry generated from compact records, compaction, and
instance acceleration structures (transforms, instance ids, visibility masks), each against the
brute-force oracle or against the stored-geometry GAS they must equal."""

from __future__ import annotations

import numpy as np
import pytest
from numba.extending import register_jitable

from indexzoo import InvalidInput
from indexzoo.native.rt import geometry as geo
from indexzoo.native.rt.trace import (
    TERMINATE_ON_FIRST_HIT,
    Instance,
    Programs,
    build_gas,
    build_ias,
    build_sliced_ias,
    launch,
    scene_query,
    trace,
)
from indexzoo.native.targets import Kernel

HALF = np.float32(0.5)


@register_jitable
def key_triangle(keys, i):  # type: ignore[no-untyped-def]
    """RX's triangle around the key's point (x = low 12 bits, y = next 12, z = the rest)."""
    k = keys[i]
    x = np.float32(k & np.uint64(0xFFF))
    y = np.float32((k >> np.uint64(12)) & np.uint64(0xFFF))
    z = np.float32(k >> np.uint64(24))
    e = np.float32(0.5)
    return x - e, y + e, z - e, x - e, y - e, z - e, x + e, y, z + e


def stored_triangles(keys: np.ndarray) -> np.ndarray:
    x = (keys & np.uint64(0xFFF)).astype(np.float32)
    y = ((keys >> np.uint64(12)) & np.uint64(0xFFF)).astype(np.float32)
    z = (keys >> np.uint64(24)).astype(np.float32)
    return np.stack([x - HALF, y + HALF, z - HALF, x - HALF, y - HALF, z - HALF, x + HALF, y, z + HALF],
                    axis=1).astype(np.float32)


@register_jitable
def grid_centre(cells, i):  # type: ignore[no-untyped-def]
    """A sphere centre from a packed (x, y, z) cell: 10 bits each."""
    c = cells[i]
    return np.float32(c & 1023), np.float32((c >> 10) & 1023), np.float32(c >> 20)


@register_jitable
def unit_box(corners, i):  # type: ignore[no-untyped-def]
    """A box of side 2 from its lower corner (an (N, 3) int32 record)."""
    x, y, z = np.float32(corners[i, 0]), np.float32(corners[i, 1]), np.float32(corners[i, 2])
    return x, y, z, x + np.float32(2), y + np.float32(2), z + np.float32(2)


def _rays(r: int, rng: np.random.Generator, hi: float) -> tuple[np.ndarray, np.ndarray]:
    o = rng.uniform(-5, hi + 5, (r, 3)).astype(np.float32)
    d = (rng.uniform(0, hi, (r, 3)) - o).astype(np.float32)
    d[: r // 4, :2] = 0  # axis-parallel
    return o, d


def test_generated_triangles_answer_like_stored_ones() -> None:
    rng = np.random.default_rng(1)
    keys = np.unique(rng.integers(0, 2**30, 4000).astype(np.uint64))
    tri = stored_triangles(keys)
    stored = build_gas(geo.TRIANGLES, tri)
    made = build_gas(geo.TRIANGLES, keys, geometry=key_triangle)
    # point rays through each key's centre, and random rays
    x, y, z = tri[:, 0] + HALF, tri[:, 4] + HALF, tri[:, 2] + HALF
    o = np.concatenate([np.stack([x, y, z - HALF], axis=1), _rays(3000, rng, 4096)[0]])
    d = np.concatenate([np.tile(np.float32([0, 0, 1]), (keys.size, 1)), _rays(3000, rng, 4096)[1]])
    tmax = np.concatenate([np.ones(keys.size, np.float32), np.full(3000, np.inf, np.float32)])
    a = trace(stored, o, d, 0.0, tmax)
    b = trace(made, o, d, 0.0, tmax)
    np.testing.assert_array_equal(a.prim, b.prim)
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_array_equal(a.prim[: keys.size], np.arange(keys.size))  # each ray its key
    _, prim, _ = geo.brute_force(geo.TRIANGLES, tri, 0.0, o, d, np.zeros(len(o), np.float32), tmax)
    np.testing.assert_array_equal(b.prim, prim)
    fs, fm = stored.footprint(), made.footprint()
    assert fm.breakdown["records"] == keys.nbytes and fs.breakdown["primitives"] == tri.nbytes
    assert fm.resident_bytes < fs.resident_bytes


def test_generated_spheres_and_boxes_match_the_oracle() -> None:
    rng = np.random.default_rng(2)
    cells = rng.integers(0, 2**30, 3000).astype(np.int64)
    centres = np.stack([cells & 1023, (cells >> 10) & 1023, cells >> 20], axis=1).astype(np.float32)
    corners = rng.integers(0, 200, (3000, 3)).astype(np.int32)
    boxes = np.concatenate([corners, corners + 2], axis=1).astype(np.float32)
    for kind, records, data, fn, radius, hi in (
            (geo.SPHERES, cells, centres, grid_centre, 3.0, 1024),
            (geo.AABBS, corners, boxes, unit_box, 0.0, 200)):
        gas = build_gas(kind, records, radius, geometry=fn)
        o, d = _rays(4000, rng, hi)
        hits = trace(gas, o, d, 0.0, np.inf)
        t, prim, front = geo.brute_force(kind, data, radius, o, d, 0.0, np.inf)
        np.testing.assert_array_equal(hits.prim, prim)
        np.testing.assert_array_equal(hits.t, t)
        np.testing.assert_array_equal(hits.front[prim >= 0], front[prim >= 0])


def test_generated_geometry_is_checked() -> None:
    @register_jitable
    def inverted(records, i):  # type: ignore[no-untyped-def]
        return np.float32(1), np.float32(1), np.float32(1), np.float32(0), np.float32(0), np.float32(0)

    with pytest.raises(InvalidInput, match="min > max"):
        build_gas(geo.AABBS, np.zeros(4, np.int32), geometry=inverted)
    with pytest.raises(InvalidInput, match="records"):
        build_gas(geo.AABBS, np.zeros((4, 2, 2), np.int32), geometry=unit_box)


def test_refit_of_generated_geometry_follows_new_records() -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2**30, 2000).astype(np.uint64)
    gas = build_gas(geo.TRIANGLES, keys, geometry=key_triangle)
    moved = rng.integers(0, 2**30, 2000).astype(np.uint64)
    o, d = _rays(3000, rng, 4096)
    hits = trace(gas.refit(moved), o, d, 0.0, np.inf)
    _, prim, _ = geo.brute_force(geo.TRIANGLES, stored_triangles(moved), 0.0, o, d, 0.0, np.inf)
    np.testing.assert_array_equal(hits.prim, prim)


def test_an_uncompacted_gas_answers_alike_and_compacts_to_the_tight_one() -> None:
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2**30, 3000).astype(np.uint64)
    tri = stored_triangles(keys)
    loose = build_gas(geo.TRIANGLES, tri, compact=False)
    tight = build_gas(geo.TRIANGLES, tri)
    assert not loose.compacted and tight.compacted
    assert loose.footprint().resident_bytes > tight.footprint().resident_bytes
    assert loose.compact().footprint().resident_bytes == tight.footprint().resident_bytes
    o, d = _rays(2000, rng, 4096)
    np.testing.assert_array_equal(trace(loose, o, d, 0.0, np.inf).prim, trace(tight, o, d, 0.0, np.inf).prim)


@register_jitable
def _point_ray(i, params):  # type: ignore[no-untyped-def]
    """A z-perpendicular point ray through key ``params[0][i]``'s point (RX's point lookup)."""
    k = params[0][i]
    x = np.float32(k & np.uint64(0xFFF))
    y = np.float32((k >> np.uint64(12)) & np.uint64(0xFFF))
    z = np.float32(k >> np.uint64(24))
    return x, y, z - np.float32(0.5), 0.0, 0.0, 1.0, 0.0, 1.0


@register_jitable
def _count_hits(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    payload[ray, 0] += np.uint64(1)
    return 1


def test_a_raygen_launch_traces_the_rays_it_makes() -> None:
    rng = np.random.default_rng(9)
    keys = rng.integers(0, 2**30, 3000).astype(np.uint64)
    keys[:200] = keys[0]  # duplicates: every copy is found
    gas = build_gas(geo.TRIANGLES, keys, geometry=key_triangle)
    q = np.concatenate([keys[rng.permutation(3000)[:1000]], rng.integers(0, 2**30, 500).astype(np.uint64)])
    tri = stored_triangles(q)
    o = np.stack([tri[:, 0] + HALF, tri[:, 4] + HALF, tri[:, 2]], axis=1).astype(np.float32)
    d = np.tile(np.float32([0, 0, 1]), (q.size, 1))
    want = trace(gas, o, d, 0.0, 1.0, flags=TERMINATE_ON_FIRST_HIT)
    got = launch(gas, q.size, Programs(raygen=_point_ray), flags=TERMINATE_ON_FIRST_HIT, params=(q,))
    np.testing.assert_array_equal(got.prim, want.prim)
    assert (keys[got.prim[:1000]] == q[:1000]).all()
    counts = launch(gas, q.size, Programs(raygen=_point_ray, anyhit=_count_hits), params=(q,)).payload[:, 0]
    np.testing.assert_array_equal(counts, [(keys == k).sum() for k in q])
    with pytest.raises(InvalidInput, match="ray-generation"):
        launch(gas, 3, Programs())
    with pytest.raises(InvalidInput, match="launch"):
        trace(gas, o, d, 0.0, 1.0, Programs(raygen=_point_ray))


# ----------------------------------------------------------------------------------- IAS
# Exact transforms (integer translations, axis permutations with signs, powers of two) on an
# integer grid keep every float32 operation exact, so the IAS must equal the world-space oracle
# bit for bit.

def _grid_triangles(n: int, rng: np.random.Generator) -> np.ndarray:
    base = rng.integers(0, 64, (n, 1, 3))
    return (base + rng.integers(-3, 4, (n, 3, 3))).reshape(n, 9).astype(np.float32)


def _transforms() -> list[np.ndarray]:
    t1 = np.eye(3, 4)
    t1[:, 3] = [100, 0, -20]
    t2 = np.zeros((3, 4))
    t2[0, 1], t2[1, 2], t2[2, 0] = 1, -1, 1  # axis permutation with a flip
    t2[:, 3] = [0, 200, 40]
    t3 = np.eye(3, 4) * 2  # scale by 2
    t3[:, 3] = [-150, -150, 0]
    return [np.eye(3, 4), t1, t2, t3]


def _world(tri: np.ndarray, m: np.ndarray) -> np.ndarray:
    v = tri.reshape(-1, 3).astype(np.float64)
    return (v @ m[:, :3].T + m[:, 3]).reshape(-1, 9).astype(np.float32)


def test_instances_trace_like_their_world_space_geometry() -> None:
    rng = np.random.default_rng(5)
    a, b = _grid_triangles(800, rng), _grid_triangles(500, rng)
    ga, gb = build_gas(geo.TRIANGLES, a), build_gas(geo.TRIANGLES, b)
    ts = _transforms()
    instances = [Instance(ga, ts[0], 10), Instance(gb, ts[1], 11), Instance(ga, ts[2], 12),
                 Instance(gb, ts[3], 13)]
    ias = build_ias(instances)
    assert ias.nodes.shape[0] == ga.bvh.n_nodes + gb.bvh.n_nodes  # each GAS pooled once
    world = np.concatenate([_world(a, ts[0]), _world(b, ts[1]), _world(a, ts[2]), _world(b, ts[3])])
    owner = np.repeat([10, 11, 12, 13], [800, 500, 800, 500])
    local = np.concatenate([np.arange(800), np.arange(500), np.arange(800), np.arange(500)])
    o = rng.integers(-200, 300, (5000, 3)).astype(np.float32)
    d = (rng.integers(-200, 300, (5000, 3)) - o).astype(np.float32)
    hits = trace(ias, o, d, 0.0, np.inf)
    t, prim, _ = geo.brute_force(geo.TRIANGLES, world, 0.0, o, d, 0.0, np.inf)
    assert (prim >= 0).sum() > 200
    hit = prim >= 0
    np.testing.assert_array_equal(hits.t, t)
    np.testing.assert_array_equal(hits.prim >= 0, hit)
    # equal t across instances may pick another instance; the primitive's distance is the same
    same = hits.inst[hit] == owner[prim[hit]]
    assert same.mean() > 0.99
    np.testing.assert_array_equal(hits.prim[hit][same], local[prim[hit]][same])


@register_jitable
def _count_per_instance(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    payload[ray, inst] += np.uint64(1)
    return 1  # IGNORE


def test_visibility_masks_and_instance_ids_reach_the_programs() -> None:
    rng = np.random.default_rng(6)
    boxes = rng.integers(0, 50, (300, 3)).astype(np.float32)
    boxes = np.concatenate([boxes, boxes + 3], axis=1)
    gas = build_gas(geo.AABBS, boxes)
    shift = np.eye(3, 4)
    shift[0, 3] = 60
    ias = build_ias([Instance(gas, None, 0, mask=0b01), Instance(gas, shift, 1, mask=0b10)])
    o = np.tile(np.float32([-10, 0, 0]), (2000, 1))
    o[:, 1:] = rng.integers(0, 53, (2000, 2))
    d = np.tile(np.float32([1, 0, 0]), (2000, 1))
    every = geo.all_hits(geo.AABBS, boxes, 0.0, o, d, 0.0, np.inf)
    counts = np.array([len(x) for x in every], np.uint64)
    for mask, want in ((0b11, (1, 1)), (0b01, (1, 0)), (0b10, (0, 1)), (0, (0, 0))):
        payload = np.zeros((2000, 2), np.uint64)
        trace(ias, o, d, 0.0, np.inf, Programs(anyhit=_count_per_instance), payload=payload, mask=mask)
        np.testing.assert_array_equal(payload[:, 0], counts * np.uint64(want[0]))
        np.testing.assert_array_equal(payload[:, 1], counts * np.uint64(want[1]))
    hits = trace(ias, o, d, 0.0, np.inf, flags=TERMINATE_ON_FIRST_HIT, mask=0b10)
    assert ((hits.inst == 1) | (hits.prim < 0)).all()


def test_an_ias_of_one_identity_instance_equals_its_gas() -> None:
    rng = np.random.default_rng(7)
    tri = _grid_triangles(2000, rng)
    gas = build_gas(geo.TRIANGLES, tri)
    empty = build_gas(geo.TRIANGLES, np.zeros((0, 9), np.float32))
    ias = build_ias([Instance(gas), Instance(empty, instance_id=5)])
    o = rng.integers(-10, 80, (3000, 3)).astype(np.float32)
    d = (rng.integers(-10, 80, (3000, 3)) - o).astype(np.float32)
    a, b = trace(gas, o, d, 0.0, np.inf), trace(ias, o, d, 0.0, np.inf)
    np.testing.assert_array_equal(a.prim, b.prim)
    np.testing.assert_array_equal(a.t, b.t)
    assert ias.footprint().resident_bytes > gas.footprint().resident_bytes


def test_bad_instances_are_rejected() -> None:
    gas = build_gas(geo.AABBS, np.zeros((1, 6), np.float32))
    tri = build_gas(geo.TRIANGLES, np.zeros((1, 9), np.float32))
    with pytest.raises(InvalidInput):
        build_ias([])
    with pytest.raises(InvalidInput, match="share"):
        build_ias([Instance(gas), Instance(tri)])
    with pytest.raises(InvalidInput, match="invertible"):
        build_ias([Instance(gas, np.zeros((3, 4)))])
    with pytest.raises(InvalidInput, match="mask"):
        build_ias([Instance(gas, mask=256)])
    with pytest.raises(InvalidInput, match="mask"):
        trace(build_ias([Instance(gas)]), np.zeros((1, 3), np.float32), np.ones((1, 3), np.float32),
              0, 1, mask=300)


@pytest.mark.gpu
def test_the_gpu_traces_instances_and_generated_geometry_like_the_cpu() -> None:
    import cupy

    rng = np.random.default_rng(8)
    keys = rng.integers(0, 2**30, 20000).astype(np.uint64)
    o, d = _rays(40000, rng, 4096)
    cpu = trace(build_gas(geo.TRIANGLES, keys, geometry=key_triangle), o, d, 0.0, np.inf)
    gpu = trace(build_gas(geo.TRIANGLES, cupy.asarray(keys), geometry=key_triangle), cupy.asarray(o),
                cupy.asarray(d), 0.0, np.inf)
    assert (cupy.asnumpy(gpu.prim) == cpu.prim).mean() > 0.999
    a, b = _grid_triangles(3000, rng), _grid_triangles(2000, rng)
    ts = _transforms()
    scenes = []
    for xp in (np, cupy):
        ga, gb = build_gas(geo.TRIANGLES, xp.asarray(a)), build_gas(geo.TRIANGLES, xp.asarray(b))
        scenes.append(build_ias([Instance(ga, ts[0], 1), Instance(gb, ts[1], 2), Instance(ga, ts[3], 3)]))
    o = (rng.integers(-200, 300, (40000, 3)) + rng.uniform(0.1, 0.9, (40000, 3))).astype(np.float32)
    # start and aim between grid points: a ray through a vertex is decided by rounding, and the GPU's
    # fused multiply-adds round differently from the CPU
    d = (rng.integers(-200, 300, (40000, 3)) + rng.uniform(0.1, 0.9, (40000, 3)) - o).astype(np.float32)
    c = trace(scenes[0], o, d, 0.0, np.inf)
    g = trace(scenes[1], cupy.asarray(o), cupy.asarray(d), 0.0, np.inf)
    # rays that graze a shared edge may still pick the neighbour: compare where both hit
    gp, gi, gt = cupy.asnumpy(g.prim), cupy.asnumpy(g.inst), cupy.asnumpy(g.t)
    assert ((gp >= 0) == (c.prim >= 0)).mean() > 0.995
    both = (gp >= 0) & (c.prim >= 0)
    assert ((gp == c.prim) & (gi == c.inst))[both].mean() > 0.99
    close = np.isclose(gt[both], c.t[both], rtol=1e-3, atol=1e-3)
    assert close.mean() > 0.999, np.flatnonzero(~close)[:10]


@register_jitable
def _skip_multiples_of_three(ray, inst, prim, t, front, payload, params):  # type: ignore[no-untyped-def]
    return 1 if (prim + inst) % 3 == 0 else 0  # IGNORE them, ACCEPT the rest


def _scene_query_kernel(kind: int, geometry: object, two_level: bool, intersection: object,
                        anyhit: object) -> Kernel:
    """A kernel that casts ray ``i`` of the arrays itself through ``scene_query``."""
    query = scene_query(kind, geometry, two_level, intersection, anyhit)

    @register_jitable
    def body(i, scene, o, d, flags, params, t, p, inst):  # type: ignore[no-untyped-def]
        t[i], p[i], _, inst[i] = query(scene, i, o[i, 0], o[i, 1], o[i, 2], d[i, 0], d[i, 1],
                                       d[i, 2], np.float32(0), np.float32(np.inf), flags, params)

    return Kernel(body)


@pytest.mark.parametrize("programs", [pytest.param("none", marks=pytest.mark.exhaustive),
                                      "anyhit", "intersection"])
def test_a_scene_query_inside_a_kernel_traces_like_trace(programs: str) -> None:
    """``scene_query`` (optixTrace from a ray-generation program, with the index's programs)
    gives ``trace``'s closest hit, primitive and instance through a GAS and through an IAS of
    transformed instances; with TERMINATE_ON_FIRST_HIT it reports an accepted hit wherever
    ``trace`` finds one."""
    rng = np.random.default_rng(11)
    kind = geo.AABBS if programs == "intersection" else geo.TRIANGLES
    if kind == geo.AABBS:
        a = rng.integers(0, 50, (600, 3)).astype(np.float32)
        a = np.concatenate([a, a + 2], axis=1)
        b = a[:400] + np.float32(1)
    else:
        a, b = _grid_triangles(800, rng), _grid_triangles(500, rng)
    intersection = _keyed_boxes_of_scene if programs == "intersection" else None
    anyhit = _skip_multiples_of_three if programs == "anyhit" else None
    ga, gb = build_gas(kind, a), build_gas(kind, b)
    ts = _transforms()
    ias = build_ias([Instance(ga, ts[0], 0), Instance(gb, ts[1], 1), Instance(ga, ts[2], 2)])
    o = rng.integers(-200, 300, (3000, 3)).astype(np.float32)
    d = (rng.integers(-200, 300, (3000, 3)) - o).astype(np.float32)
    params = (np.uint64(1),)
    for scene in (ga, ias):
        two = scene is ias
        kernel = _scene_query_kernel(kind, None, two, intersection, anyhit)
        want = trace(scene, o, d, 0.0, np.inf, Programs(intersection=intersection, anyhit=anyhit),
                     params=params)
        assert (want.prim >= 0).sum() > 40
        for flags in (0, TERMINATE_ON_FIRST_HIT):
            t = np.empty(3000, np.float32)
            p = np.empty(3000, np.int64)
            inst = np.empty(3000, np.int64)
            kernel("cpu", 3000, scene.query_args(), o, d, np.int64(flags), params, t, p, inst)
            if flags == 0:
                np.testing.assert_array_equal(t, want.t)
                np.testing.assert_array_equal(p, want.prim)
                np.testing.assert_array_equal(inst[p >= 0], want.inst[p >= 0])
            else:
                np.testing.assert_array_equal(p >= 0, want.prim >= 0)
                if anyhit is not None:
                    assert ((p[p >= 0] + inst[p >= 0]) % 3 != 0).all()


@register_jitable
def _keyed_boxes_of_scene(boxes, i, inst, p, ox, oy, oz, dx, dy, dz, tmin, tmax, params):  # type: ignore[no-untyped-def]
    if (p + params[0]) % 2 == 0:  # a launch parameter decides: odd primitives never hit
        return np.float32(np.inf), False
    return geo.hit_aabb_reference(boxes, i, ox, oy, oz, dx, dy, dz, tmin, tmax)


@pytest.mark.parametrize("cuts", [[0, 1000, 2000, 3000], [0, 10, 10, 1500, 3000], [0, 3000]])
def test_a_sliced_ias_traces_like_its_primitives_and_pools_its_nodes(cuts: list[int]) -> None:
    """``build_sliced_ias``: one GAS per slice in one pooled node buffer (sized from the first
    slice, grown when a later one needs more, empty slices included) traces like the brute
    force over all primitives, and the pool's headroom is counted in the footprint."""
    rng = np.random.default_rng(21)
    lo = rng.integers(0, 200, (3000, 3)).astype(np.float32)
    boxes = np.concatenate([lo, lo + 2], axis=1)
    ias = build_sliced_ias(geo.AABBS, cuts, lambda s, e: boxes[s:e], leaf_size=4)
    # origins off the integer grid: no ray grazes a box's edge exactly (where the top level's
    # and the brute force's rounding may disagree)
    o = (rng.integers(-20, 220, (2000, 3)) + 0.37).astype(np.float32)
    d = (rng.integers(-20, 220, (2000, 3)) - o).astype(np.float32)
    hits = trace(ias, o, d, 0.0, np.inf)
    t, prim, _ = geo.brute_force(geo.AABBS, boxes, 0.0, o, d, 0.0, np.inf)
    assert (prim >= 0).sum() > 500
    np.testing.assert_array_equal(hits.t, t)
    hit = hits.prim >= 0
    np.testing.assert_array_equal(hit, prim >= 0)
    glob = np.asarray(cuts)[hits.inst[hit]] + hits.prim[hit]
    np.testing.assert_array_equal(boxes[glob], boxes[prim[hit]])  # ties may name a twin box
    fp = ias.footprint().breakdown
    assert fp.get("gas_node_headroom", 0) == ias.node_slack_bytes
    assert ias.node_slack_bytes <= 0.5 * fp["gas_nodes"] + 64 * 32
