"""Ray/primitive intersection of the software ray tracer, against float64 NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from indexzoo import InvalidInput
from indexzoo.native.rt.geometry import (
    AABBS,
    SPHERES,
    TRIANGLES,
    all_hits,
    brute_force,
    hit_primitive,
    prim_bounds,
)

INF = np.float32(np.inf)


@njit
def _pairwise(kind, data, radius, org, dirs, tmin, tmax):  # type: ignore[no-untyped-def]
    """Ray i against primitive i."""
    t = np.empty(org.shape[0], np.float32)
    f = np.empty(org.shape[0], np.bool_)
    for i in range(org.shape[0]):
        t[i], f[i] = hit_primitive(
            kind, data, radius, i, org[i, 0], org[i, 1], org[i, 2], dirs[i, 0], dirs[i, 1], dirs[i, 2],
            tmin, tmax,
        )  # fmt: skip
    return t, f


def pairwise(kind: int, data, org, dirs, tmin=0.0, tmax=np.inf, radius=0.0):  # type: ignore[no-untyped-def]
    f32 = np.float32
    return _pairwise(
        kind, np.asarray(data, f32), f32(radius), np.asarray(org, f32), np.asarray(dirs, f32), f32(tmin),
        f32(tmax),
    )  # fmt: skip


def one(kind: int, data, o, d, tmin=0.0, tmax=np.inf, radius=0.0):  # type: ignore[no-untyped-def]
    """Closest hit of a single ray: ``(t, prim, front)``."""
    t, p, f = brute_force(kind, np.asarray(data, np.float32), radius, [o], [d], tmin, tmax)
    return float(t[0]), int(p[0]), bool(f[0])


# ------------------------------------------------------------------------------------------------
# Bounds
# ------------------------------------------------------------------------------------------------


def test_bounds_triangles() -> None:
    tri = np.array([[0, 5, -1, 2, -3, 4, 1, 1, 9]], np.float32)
    lo, hi = prim_bounds(TRIANGLES, tri)
    assert lo.dtype == np.float32 and lo.shape == (1, 3)
    np.testing.assert_array_equal(lo, [[0, -3, -1]])
    np.testing.assert_array_equal(hi, [[2, 5, 9]])


def test_bounds_spheres_and_boxes() -> None:
    c = np.array([[1, 2, 3], [-1, 0, 0]], np.float32)
    lo, hi = prim_bounds(SPHERES, c, 0.5)
    np.testing.assert_array_equal(lo, c - 0.5)
    np.testing.assert_array_equal(hi, c + 0.5)
    boxes = np.array([[0, 0, 0, 1, 2, 3], [5, 5, 5, 5, 5, 5]], np.float32)
    lo, hi = prim_bounds(AABBS, boxes)
    np.testing.assert_array_equal(lo, boxes[:, :3])
    np.testing.assert_array_equal(hi, boxes[:, 3:])


def test_bounds_rejects_bad_input() -> None:
    boxes = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1], [0, 2, 0, 1, 1, 1]], np.float32)
    with pytest.raises(InvalidInput, match="AABB 2"):
        prim_bounds(AABBS, boxes)
    boxes[1, 0] = np.nan
    with pytest.raises(InvalidInput, match="AABB 1"):
        prim_bounds(AABBS, boxes)
    with pytest.raises(InvalidInput, match="kind"):
        prim_bounds(7, boxes)
    with pytest.raises(InvalidInput, match="shape"):
        prim_bounds(TRIANGLES, boxes)
    with pytest.raises(InvalidInput, match="radius"):
        prim_bounds(SPHERES, boxes[:, :3], -1.0)


# ------------------------------------------------------------------------------------------------
# Triangles
# ------------------------------------------------------------------------------------------------


def _ref_triangles(tri, org, dirs):  # type: ignore[no-untyped-def]
    """Float64 Möller–Trumbore: t (inf off the triangle or behind), min barycentric, front, cos."""
    tri = tri.astype(np.float64)
    o = org.astype(np.float64)
    d = dirs.astype(np.float64)
    v0, v1, v2 = tri[:, 0:3], tri[:, 3:6], tri[:, 6:9]
    e1, e2 = v1 - v0, v2 - v0
    pv = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, pv)
    s = o - v0
    u = np.einsum("ij,ij->i", s, pv) / det
    qv = np.cross(s, e1)
    v = np.einsum("ij,ij->i", d, qv) / det
    t = np.einsum("ij,ij->i", e2, qv) / det
    bary = np.minimum(np.minimum(u, v), 1 - u - v)
    n = np.cross(e1, e2)
    dn = np.einsum("ij,ij->i", d, n)
    cos = np.abs(dn) / (np.linalg.norm(d, axis=1) * np.linalg.norm(n, axis=1))
    return np.where((bary >= 0) & (t > 0), t, np.inf), bary, dn < 0, cos


def test_triangles_match_float64_reference() -> None:
    rng = np.random.default_rng(1)
    n = 20000
    tri = rng.uniform(-1, 1, (n, 9)).astype(np.float32)
    org = rng.uniform(-4, 4, (n, 3)).astype(np.float32)
    w = rng.uniform(-0.3, 1.3, (n, 3))
    target = (w[:, :1] * tri[:, 0:3] + w[:, 1:2] * tri[:, 3:6] + w[:, 2:3] * tri[:, 6:9]) / w.sum(
        1, keepdims=True
    )
    dirs = ((target - org) * rng.uniform(0.2, 3, (n, 1))).astype(np.float32)
    t, front = pairwise(TRIANGLES, tri, org, dirs)
    rt, bary, rfront, cos = _ref_triangles(tri, org, dirs)
    clear = (np.abs(bary) > 1e-4) & (cos > 1e-3) & np.all(np.abs(w.sum(1, keepdims=True)) > 0.1, axis=1)
    assert clear.mean() > 0.9
    hit, rhit = np.isfinite(t), np.isfinite(rt)
    assert 0.3 < rhit[clear].mean() < 0.9
    np.testing.assert_array_equal(hit[clear], rhit[clear])
    both = clear & hit & rhit
    np.testing.assert_allclose(t[both], rt[both], rtol=2e-5, atol=1e-6)
    np.testing.assert_array_equal(front[both], rfront[both])
    assert not front[~hit].any()


def _cube() -> np.ndarray:
    """The unit cube [0, 1]^3 as 12 triangles, counter-clockwise seen from outside."""
    quads = []
    for axis in range(3):
        a, b = (axis + 1) % 3, (axis + 2) % 3
        for side in (0.0, 1.0):
            corners = []
            for ua, ub in ((0, 0), (1, 0), (1, 1), (0, 1)):
                p = [0.0, 0.0, 0.0]
                p[axis], p[a], p[b] = side, ua, ub
                corners.append(p)
            if side == 0.0:  # outward normal is -axis: reverse the winding
                corners = corners[::-1]
            quads.append(corners)
    tris = []
    for c0, c1, c2, c3 in quads:
        tris += [c0 + c1 + c2, c0 + c2 + c3]
    return np.array(tris, np.float32)


def test_cube_is_watertight_from_inside() -> None:
    cube = _cube()
    # Winding: a ray from outside along -z into the top face hits a front face.
    assert one(TRIANGLES, cube, [0.3, 0.6, 2.0], [0, 0, -1])[2] is True
    rng = np.random.default_rng(2)
    n = 20000
    org = rng.uniform(0.01, 0.99, (n, 3)).astype(np.float32)
    dirs = rng.normal(size=(n, 3)).astype(np.float32)
    # Plus rays aimed exactly at the cube's corners and at points of its edges and face diagonals.
    k = 4000
    corners = rng.integers(0, 2, (k, 3)).astype(np.float32)
    s = rng.uniform(0, 1, k).astype(np.float32)
    edge_pts = corners.copy()
    edge_pts[np.arange(k), rng.integers(0, 3, k)] = s
    diag_pts = corners.copy()
    ax = rng.integers(0, 3, k)
    diag_pts[np.arange(k), (ax + 1) % 3] = s
    diag_pts[np.arange(k), (ax + 2) % 3] = s
    targets = np.concatenate([corners, edge_pts, diag_pts])
    o2 = rng.uniform(0.01, 0.99, (len(targets), 3)).astype(np.float32)
    org = np.concatenate([org, o2])
    dirs = np.concatenate([dirs, (targets - o2).astype(np.float32)])
    t, p, front = brute_force(TRIANGLES, cube, 0.0, org, dirs, 0.0, np.inf)
    assert (p >= 0).all(), np.flatnonzero(p < 0)[:10]
    assert not front.any()  # seen from inside: back faces
    assert (t > 0).all() and np.isfinite(t).all()


def test_random_tetrahedra_are_watertight() -> None:
    """Float (non-integer) closed meshes: rays from the inside aimed at vertices and edges."""
    rng = np.random.default_rng(3)
    misses = 0
    for _ in range(50):
        v = rng.normal(size=(4, 3)).astype(np.float32) * np.float32(rng.uniform(0.01, 100))
        faces = [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]
        tri = np.array([np.concatenate([v[a], v[b], v[c]]) for a, b, c in faces], np.float32)
        centre = v.mean(0)
        m = 600
        i, j = rng.integers(0, 4, m), rng.integers(0, 4, m)
        s = rng.uniform(0, 1, (m, 1))
        targets = (v[i] * s + v[j] * (1 - s)).astype(np.float32)  # edges and, for i == j, vertices
        targets[:100] = v[rng.integers(0, 4, 100)]
        org = (centre + (v[rng.integers(0, 4, m)] - centre) * rng.uniform(0, 0.5, (m, 1))).astype(np.float32)
        dirs = ((targets - org) * rng.uniform(0.1, 10, (m, 1))).astype(np.float32)
        _, p, _ = brute_force(TRIANGLES, tri, 0.0, org, dirs, 0.0, np.inf)
        misses += int((p < 0).sum())
    assert misses == 0


def test_quad_shared_edge_and_vertices() -> None:
    rng = np.random.default_rng(4)
    # A non-axis-aligned planar quad split along its diagonal v0-v2.
    v = np.array([[0.1, 0.2, 0.3], [1.3, 0.1, 0.7], [1.2, 1.1, 1.5], [0.0, 1.2, 1.1]], np.float32)
    quad = np.array([np.concatenate([v[0], v[1], v[2]]), np.concatenate([v[0], v[2], v[3]])], np.float32)
    # Rays aimed at points of the shared edge (interior to the quad: rounding cannot matter).
    m = 5000
    s = rng.uniform(0.001, 0.999, (m, 1)).astype(np.float32)
    targets = (v[0] + s * (v[2] - v[0])).astype(np.float32)
    org = (rng.uniform(-3, 3, (m, 3)) + np.array([0.6, 0.6, 0.9])).astype(np.float32)
    _, p, _ = brute_force(TRIANGLES, quad, 0.0, org, targets - org, 0.0, 10.0)
    assert (p >= 0).all(), np.flatnonzero(p < 0)[:10]
    # Axis-parallel rays exactly through each vertex (shared or not), from both sides.
    org, dirs = [], []
    for vert in v:
        for axis in range(3):
            for sign in (-1.0, 1.0):
                d = np.zeros(3, np.float32)
                d[axis] = sign
                org.append(vert - 4 * d)
                dirs.append(d)
    _, p, _ = brute_force(TRIANGLES, quad, 0.0, org, dirs, 0.0, 10.0)
    assert (p >= 0).all(), np.flatnonzero(p < 0)


def test_front_and_back_faces() -> None:
    tri = [[0, 0, 5, 1, 0, 5, 0, 1, 5]]  # counter-clockwise seen from +z: normal +z
    assert one(TRIANGLES, tri, [0.2, 0.2, 9], [0, 0, -1]) == (4.0, 0, True)
    assert one(TRIANGLES, tri, [0.2, 0.2, 0], [0, 0, 1]) == (5.0, 0, False)
    assert one(TRIANGLES, tri, [0.2, 0.2, 0], [0, 0, 2]) == (2.5, 0, False)  # t in units of d
    assert one(TRIANGLES, tri, [0.2, 0.2, 0], [0, 0, -1])[1] == -1  # behind
    assert one(TRIANGLES, tri, [0.2, 0.2, 5], [1, 0, 0])[1] == -1  # in the plane


def test_degenerate_triangles_and_zero_direction_never_hit() -> None:
    tris = [[0, 0, 0, 1, 1, 1, 3, 3, 3], [0, 0, 0, 0, 0, 0, 1, 0, 0], [2, 2, 2, 2, 2, 2, 2, 2, 2]]
    for p in range(3):
        for o, d in (([0.5, 0.5, -1], [0, 0, 1]), ([0, 0, -1], [0, 0, 1]), ([2, 2, 0], [0, 0, 1])):
            assert one(TRIANGLES, tris[p : p + 1], o, d)[1] == -1
    assert one(TRIANGLES, [[0, 0, 5, 1, 0, 5, 0, 1, 5]], [0.2, 0.2, 0], [0, 0, 0])[1] == -1


@pytest.mark.parametrize("kind", [TRIANGLES, SPHERES, AABBS])
def test_interval_is_open(kind: int) -> None:
    data = {TRIANGLES: [[-1, -1, 5, 1, -1, 5, 0, 1, 5]], SPHERES: [[0, 0, 6]], AABBS: [[-1, -1, 5, 1, 1, 7]]}[
        kind
    ]
    o, d = [0, 0, 0], [0, 0, 1]
    assert one(kind, data, o, d, radius=1.0)[0] == 5.0
    assert one(kind, data, o, d, tmax=5.0, radius=1.0)[1] == -1
    assert one(kind, data, o, d, tmax=np.nextafter(np.float32(5), np.float32(9)), radius=1.0)[0] == 5.0
    if kind == TRIANGLES:
        assert one(kind, data, o, d, tmin=5.0, radius=1.0)[1] == -1
    else:  # entry cut off by tmin: the exit at 7 is reported, as a back hit
        assert one(kind, data, o, d, tmin=5.0, radius=1.0) == (7.0, 0, False)
        assert one(kind, data, o, d, tmin=5.0, tmax=7.0, radius=1.0)[1] == -1


# ------------------------------------------------------------------------------------------------
# Spheres
# ------------------------------------------------------------------------------------------------


def test_sphere_entry_exit_centre_tangent_radius0() -> None:
    c = [[0, 0, 10]]
    assert one(SPHERES, c, [0, 0, 0], [0, 0, 1], radius=2.0) == (8.0, 0, True)
    assert one(SPHERES, c, [0, 0, 9], [0, 0, 1], radius=2.0) == (3.0, 0, False)  # inside
    assert one(SPHERES, c, [0, 0, 10], [0, 3, 4], radius=2.0) == (
        np.float32(0.4),
        0,
        False,
    )  # centre, |d| = 5
    assert one(SPHERES, c, [0, 0, 20], [0, 0, 1], radius=2.0)[1] == -1  # behind
    assert one(SPHERES, c, [2, 0, 0], [0, 0, 1], radius=2.0) == (10.0, 0, True)  # tangent
    assert one(SPHERES, c, [2.001, 0, 0], [0, 0, 1], radius=2.0)[1] == -1
    assert one(SPHERES, c, [0, 0, 0], [0, 0, 1], radius=0.0)[1] == -1
    assert one(SPHERES, c, [0, 0, 10], [0, 0, 1], radius=0.0)[1] == -1
    assert one(SPHERES, c, [0, 0, 0], [0, 0, 0], radius=2.0)[1] == -1


def test_spheres_match_float64_reference() -> None:
    rng = np.random.default_rng(5)
    n = 20000
    c = rng.uniform(-100, 100, (n, 3)).astype(np.float32)
    r = np.float32(1.5)
    org = np.concatenate(
        [rng.uniform(-100, 100, (n // 2, 3)), c[n // 2 :] + rng.normal(size=(n - n // 2, 3)) * 0.5]
    ).astype(np.float32)
    aim = c + rng.normal(size=(n, 3)) * 1.2
    dirs = ((aim - org) * rng.uniform(0.1, 10, (n, 1))).astype(np.float32)
    t, front = pairwise(SPHERES, c, org, dirs, radius=r)
    f = org.astype(np.float64) - c
    d = dirs.astype(np.float64)
    a = (d * d).sum(1)
    b = (f * d).sum(1)
    cc = (f * f).sum(1) - float(r) ** 2
    disc = b * b - a * cc
    sq = np.sqrt(np.maximum(disc, 0))
    t0, t1 = (-b - sq) / a, (-b + sq) / a
    rt = np.where(disc < 0, np.inf, np.where(t0 > 0, t0, np.where(t1 > 0, t1, np.inf)))
    rfront = t0 > 0
    clear = (np.abs(disc) > 1e-3 * b * b + 1e-9) & (np.abs(cc) > 1e-3)
    hit = np.isfinite(t)
    np.testing.assert_array_equal(hit[clear], np.isfinite(rt)[clear])
    both = clear & hit
    assert both.mean() > 0.3
    # Relative in t, plus an absolute slack of float32 rounding at the sphere's scale (origins
    # near the surface give tiny t whose absolute error is what float32 can do).
    slack = 4e-7 * (np.linalg.norm(f, axis=1) + float(r)) / np.sqrt(a)
    assert (np.abs(t[both] - rt[both]) <= 1e-5 * rt[both] + slack[both]).all()
    np.testing.assert_array_equal(front[both], rfront[both])


# ------------------------------------------------------------------------------------------------
# AABBs
# ------------------------------------------------------------------------------------------------


def test_aabb_faces_inside_and_point_boxes() -> None:
    box = [[0, 0, 0, 1, 2, 3]]
    assert one(AABBS, box, [0.5, 1, -2], [0, 0, 1]) == (2.0, 0, True)
    assert one(AABBS, box, [0.5, 1, -2], [0, 0, 4]) == (0.5, 0, True)
    assert one(AABBS, box, [0, 1, -2], [0, 0, 1]) == (2.0, 0, True)  # along the x = 0 face
    assert one(AABBS, box, [1, 2, -2], [0, 0, 1]) == (2.0, 0, True)  # along an edge
    assert one(AABBS, box, [1.0001, 1, -2], [0, 0, 1])[1] == -1
    assert one(AABBS, box, [-1, -1, 1], [1, 1, 0]) == (1.0, 0, True)  # through the z-edge at (0, 0)
    assert one(AABBS, box, [0.5, 1, 1], [0, 0, -1]) == (1.0, 0, False)  # inside: exit
    assert one(AABBS, box, [0.5, 1, 1], [0, 0, 0])[1] == -1
    assert one(AABBS, box, [0.5, 1, 5], [0, 0, 1])[1] == -1  # behind
    point = [[2, 3, 4, 2, 3, 4]]
    assert one(AABBS, point, [2, 3, -6], [0, 0, 1]) == (10.0, 0, True)
    assert one(AABBS, point, [-1, 3, 4], [1, 0, 0]) == (3.0, 0, True)
    assert one(AABBS, point, [2, 3.0000002, -6], [0, 0, 1])[1] == -1
    assert one(AABBS, point, [0, 1, 2], [1, 1, 1]) == (2.0, 0, True)  # diagonal, exact


# ------------------------------------------------------------------------------------------------
# Oracles and exactness
# ------------------------------------------------------------------------------------------------


def test_ties_go_to_the_smaller_index_and_all_hits() -> None:
    tri = np.array(
        [[0, 0, 9, 1, 0, 9, 0, 1, 9], [0, 0, 5, 1, 0, 5, 0, 1, 5], [0, 0, 5, 1, 0, 5, 0, 1, 5]], np.float32
    )
    t, p, f = brute_force(
        TRIANGLES, tri, 0.0, [[0.2, 0.2, 0], [0.2, 0.2, 7], [5, 5, 0]], [[0, 0, 1]] * 3, 0, 100
    )
    assert (
        t.tolist() == [5.0, 2.0, np.inf] and p.tolist() == [1, 0, -1] and f.tolist() == [False, False, False]
    )
    hits = all_hits(TRIANGLES, tri, 0.0, [[0.2, 0.2, 0], [0.2, 0.2, 7], [5, 5, 0]], [[0, 0, 1]] * 3, 0, 100)
    assert [h.tolist() for h in hits] == [[0, 1, 2], [0], []]
    boxes = np.array([[0, 0, 0, 1, 1, 1]] * 3, np.float32)
    assert one(AABBS, boxes, [0.5, 0.5, -1], [0, 0, 1])[1] == 0


def test_oracles_agree_on_random_scenes() -> None:
    rng = np.random.default_rng(6)
    tri = rng.uniform(-1, 1, (60, 9)).astype(np.float32)
    org = rng.uniform(-2, 2, (500, 3)).astype(np.float32)
    dirs = rng.normal(size=(500, 3)).astype(np.float32)
    tmin = rng.uniform(0, 0.5, 500).astype(np.float32)
    t, p, _ = brute_force(TRIANGLES, tri, 0.0, org, dirs, tmin, 3.0)
    hits = all_hits(TRIANGLES, tri, 0.0, org, dirs, tmin, 3.0)
    for i, h in enumerate(hits):
        assert (p[i] in h) if len(h) else p[i] == -1
        rep_o, rep_d = np.repeat(org[i : i + 1], len(h), 0), np.repeat(dirs[i : i + 1], len(h), 0)
        tt, _ = pairwise(TRIANGLES, tri[h], rep_o, rep_d, tmin[i], 3.0)
        assert (tt > tmin[i]).all() and (tt < 3).all()
        if len(h):
            assert t[i] == tt.min()


def test_large_integer_coordinates_give_exact_t() -> None:
    big = float(2**23)
    z = big - 1
    tri = [[big - 5, -big, z, big, -big, z, big, -big + 5, z]]
    o, d = [big - 1, -big + 1, -big], [0, 0, 1]
    assert one(TRIANGLES, tri, o, d) == (z + big, 0, False)
    assert one(TRIANGLES, tri, [big - 1, -big + 1, big], [0, 0, -2]) == (0.5, 0, True)
    box = [[big - 8, -big, -big + 3, big, -big + 8, big - 3]]
    assert one(AABBS, box, [big - 1, -big + 1, -big], [0, 0, 1]) == (3.0, 0, True)
    assert one(AABBS, box, [-big, -big + 1, 0], [1, 0, 0]) == (2 * big - 8, 0, True)
    assert one(AABBS, box, [big - 1, -big + 1, 0], [0, 0, -1]) == (big - 3, 0, False)
    c = [[big - 1, -big + 1, -big + 100]]
    assert one(SPHERES, c, [big - 1, -big + 1, -big], [0, 0, 1], radius=3.0) == (97.0, 0, True)
