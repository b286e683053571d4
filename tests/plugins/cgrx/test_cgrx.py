"""``cgrx`` beyond the conformance suite: every ray path of the successor search (rays along
x, y and z, hit or missed) forced by a key set built for it, and seen to run; duplicate runs
across buckets; equal representatives; identical answers across bucket sizes and scan groups;
the presets; the footprint."""

from __future__ import annotations

import textwrap
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pytest
from numba.extending import register_jitable
from support.helpers import agrees_in_the_simulator, assert_matches, reference

import indexzoo
from indexzoo import OUT_MODES, ConfigError
from indexzoo.conformance import ConformanceSuite

_X, _Y = 23, 23  # 64-bit keys: x 23 bits, y 23 bits, z 18 bits


def key(x: int, y: int = 0, z: int = 0) -> int:
    return (z << (_X + _Y)) | (y << _X) | x


def keys_of(*points: tuple[int, ...]) -> np.ndarray:
    return np.array([key(*p) for p in points], dtype=np.uint64)


class Trace:
    """The successor search's rays of one lookup: (axis, hit, flipped) per ray, as 0/1."""

    def __init__(self, path: list[tuple[str, bool, bool]]) -> None:
        self.phases = [(a, int(hit), int(hit and flip)) for a, hit, flip in path]

    @property
    def axes(self) -> str:
        return "".join(a for a, _, _ in self.phases)


def check(keys: np.ndarray, lo: list[int], hi: list[int] | None = None, **params: Any) -> Any:
    """Every out mode of points and ranges agrees with the reference."""
    index = indexzoo.create("cgrx", device="cpu", sort_probes=False, **params).build(keys)
    lo_a = np.array(lo, dtype=np.uint64)
    hi_a = np.array(hi if hi is not None else [2**64 - 1] * len(lo), dtype=np.uint64)
    assert_matches({m: index.range(lo_a, hi_a, out=m) for m in OUT_MODES},
                   reference(keys, lo_a, hi_a), int(index.miss))
    assert_matches({m: index.point(lo_a, out=m) for m in OUT_MODES},
                   reference(keys, lo_a, lo_a), int(index.miss))
    return index


def traced(keys: np.ndarray, lo: int, **params: Any) -> Trace:
    """The rays the successor search casts for the lower bound ``lo``."""
    index = indexzoo.create("cgrx", device="cpu", sort_probes=False, **params).build(keys)
    (path,) = index.ray_paths(np.array([lo], np.uint64))
    return Trace(path)


# ============================================================================ ray paths
def test_successor_in_the_same_row_needs_one_ray() -> None:
    keys = keys_of((10,), (20,), (30,), (5, 1))
    check(keys, [key(15)], bucket_log=0)
    assert traced(keys, key(15), bucket_log=0).phases == [("x", 1, 0)]


def test_a_moved_representative_starts_the_scan_a_bucket_early() -> None:
    # bucket 0 = {row 0: x=10}; bucket 1 starts in row 5: representative 0 moves to the end of
    # row 0 (and is flipped: the only representative there)
    keys = keys_of((10,), (3, 5))
    index = check(keys, [key(50)], bucket_log=0)
    assert index.scene_counts["moved"] == 1 and index.scene_counts["flipped"] == 1
    # the +x ray meets the moved, flipped representative at the row end (a front face)
    assert traced(keys, key(50), bucket_log=0).phases == [("x", 1, 1)]


def test_an_end_of_row_triangle_stands_for_the_next_bucket() -> None:
    # buckets of 2: {x=10, x=20} | {x=30, row 5: x=3}; representative 0 (x=20) is the last
    # representative of row 0, not moved (bucket 1 starts in row 0): an end-of-row triangle
    keys = keys_of((10,), (20,), (30,), (3, 5))
    index = check(keys, [key(25), key(30)], bucket_log=1)
    assert index.scene_counts["end_of_row"] >= 1
    assert traced(keys, key(25), bucket_log=1).phases == [("x", 1, 0)]


def test_a_flipped_only_representative_answers_the_plus_y_ray() -> None:
    # lo in row 1 (empty): the +y ray meets row 3's only representative, moved and flipped
    keys = keys_of((5, 0), (7, 3), (1, 9))
    check(keys, [key(0, 1)], bucket_log=0)
    trace = traced(keys, key(0, 1), bucket_log=0)
    assert trace.phases == [("x", 0, 0), ("y", 1, 1)]  # the front face answers: no third ray


def test_a_marker_with_other_representatives_leads_to_a_row_search() -> None:
    # row 3 holds x=7 and x=9; x=9 is moved (bucket after it starts in row 9) but not flipped
    keys = keys_of((5, 0), (7, 3), (9, 3), (1, 9))
    check(keys, [key(0, 1)], bucket_log=0)
    trace = traced(keys, key(0, 1), bucket_log=0)
    assert trace.phases == [("x", 0, 0), ("y", 1, 0), ("x", 1, 0)]  # back face: search row 3


def test_an_empty_plane_before_a_populated_one_takes_the_plus_z_ray() -> None:
    keys = keys_of((4, 2, 0), (6, 7, 0), (8, 3, 2), (9, 5, 2))
    check(keys, [key(0, 0, 1), key(0, 9, 1), key(7, 7, 0)], bucket_log=0)
    trace = traced(keys, key(0, 0, 1), bucket_log=0)
    assert trace.axes in ("xyzy", "xyzyx")  # +x, +y miss in plane 1; +z to plane 2, +y (+x)
    assert trace.phases[2] == ("z", 1, 0)


def test_the_last_row_of_a_plane_marks_it_for_the_plus_z_ray() -> None:
    top = (1 << _Y) - 1  # the plane's last row: no end-of-plane triangle, the row end marks it
    keys = keys_of((4, 2, 0), (3, top, 2), (7, top, 2))
    check(keys, [key(0, 0, 1), key(5, top, 2), key(0, top, 2)], bucket_log=0)
    check(keys, [key(0, 0, 1)], bucket_log=1)


@pytest.mark.parametrize("points", [
    [(x,) for x in (1, 5, 9, 400, 2**23 - 1)],                     # one row: no markers
    [(x, y) for x, y in ((1, 0), (5, 2), (9, 7), (0, 2**23 - 1))],  # one plane, several rows
])
def test_single_row_and_single_plane_key_sets(points: list[tuple[int, ...]]) -> None:
    keys = keys_of(*points)
    index = check(keys, [int(k) + d for k in keys for d in (-1, 0, 1) if 0 <= int(k) + d
                         < 2**64] + [0], bucket_log=0)
    counts = index.scene_counts
    if len({p[1] if len(p) > 1 else 0 for p in points}) == 1:
        assert counts["moved"] == counts["end_of_row"] == counts["end_of_plane"] == 0
    else:
        assert counts["end_of_plane"] == 0
    assert "z" not in traced(keys, int(keys[2]) - 1, bucket_log=0).axes


def test_32_bit_keys_use_the_19_13_split() -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    keys[:50] = (np.arange(50, dtype=np.uint32) << 19) | 0x7FFFF  # last slots of 50 rows
    lo = np.concatenate([keys[:300], keys[:300] + 1, rng.integers(0, 2**32, 200)]).astype(
        np.uint32)
    hi = lo + np.uint32(1 << 20)
    hi = np.where(hi < lo, np.uint32(2**32 - 1), hi)
    for b in (0, 3, 8):
        index = indexzoo.create("cgrx", device="cpu", bucket_log=b).build(keys)
        assert index.state.coder.x_bits == 19
        assert_matches({m: index.range(lo, hi, out=m) for m in OUT_MODES},
                       reference(keys, lo, hi), int(index.miss))


# ============================================================================ duplicates
def test_duplicate_runs_across_buckets_and_equal_representatives() -> None:
    rng = np.random.default_rng(9)
    base = rng.integers(0, 2**64 - 1, 60, dtype=np.uint64)
    keys = np.repeat(base, rng.choice([1, 2, 33, 300], base.shape[0]))
    keys = keys[rng.permutation(keys.shape[0])]
    q = np.concatenate([base, base + np.uint64(1)])
    for b in (0, 1, 5, 8):
        for g in (0, 4):
            index = indexzoo.create("cgrx", device="cpu", bucket_log=b,
                                    scan_group_log=g).build(keys)
            assert_matches({m: index.point(q, out=m) for m in OUT_MODES},
                           reference(keys, q, q), int(index.miss))


def test_answers_are_identical_across_bucket_sizes_and_scan_groups() -> None:
    rng = np.random.default_rng(4)
    keys = np.concatenate([rng.integers(0, 2**64 - 1, 3000, dtype=np.uint64),
                           np.arange(2**46 - 40, 2**46 + 40, dtype=np.uint64),
                           np.arange(2**23 - 40, 2**23 + 40, dtype=np.uint64)])
    lo = np.sort(rng.integers(0, 2**64 - 1, (2, 500), dtype=np.uint64), axis=0)
    first = None
    for b in range(0, 11, 2):
        for g in (0, 2, 5):
            index = indexzoo.create("cgrx", device="cpu", bucket_log=b, scan_group_log=g)
            index.build(keys)
            got = [index.range(lo[0], lo[1], out=m).to_host() for m in ("count", "sum")]
            sig = [got[0].count.tolist(), got[1].sum.tolist()]
            first = first or sig
            assert sig == first, (b, g)


# ============================================================================ presets, memory
def test_presets_and_bounds() -> None:
    assert indexzoo.create("cgrx-5x4").params.bucket_log == 5
    assert indexzoo.create("cgrx-8x4").params.bucket_log == 8
    assert indexzoo.create("cgrx-8x4").params.scan_group_log == 4
    for bad in ({"bucket_log": 11}, {"scan_group_log": 6}):
        with pytest.raises(ConfigError):
            indexzoo.create("cgrx", **bad)


def test_the_scene_is_small_next_to_the_sorted_pairs() -> None:
    """Resident = pairs + a BVH over about N/B triangles (at most 1.1x sorted-array at
    B = 32)."""
    keys = np.random.default_rng(5).integers(0, 2**64 - 1, 1 << 16, dtype=np.uint64)
    cg = indexzoo.create("cgrx-5x4", device="cpu").build(keys).memory_footprint()
    sa = indexzoo.create("sorted-array", device="cpu").build(keys).memory_footprint()
    scene = cg.resident_bytes - sa.resident_bytes
    assert cg.breakdown["keys"] == sa.breakdown["keys"]
    assert 0 < scene < 0.5 * sa.resident_bytes
    assert cg.peak_build_bytes >= cg.resident_bytes


class TestConformance_cgrx_8x4_no_group(ConformanceSuite):
    index = "cgrx-8x4"
    params: ClassVar[dict[str, Any]] = {"scan_group_log": 0, "sort_probes": False}


class _Ids(NamedTuple):
    ids: Any


@register_jitable
def _cg_id(ray, inst, prim, t, front, params):  # the hit triangle's cgRX id
    return np.int64(params.ids[prim])


def test_stored_triangles_front_faces_agree_with_the_flipped_predicate() -> None:
    """Stored triangles carry the artifact's flipped winding; the lookup kernel asks the keys
    whether a hit triangle is flipped: both must say the same for the marker each +y ray
    meets. The +y ray of the kernel's search (from just past an empty row, where the +x ray
    missed) is cast again here through the query layer, against the stored triangles."""
    from indexzoo.native.rt import query

    rng = np.random.default_rng(6)
    keys = np.sort(rng.integers(0, 2**40, 3000, dtype=np.uint64))
    index = indexzoo.create("cgrx", device="cpu", bucket_log=2, geometry="stored").build(keys)
    st = index.state
    sc = st.scene
    coder = st.coder
    xb = np.uint64(coder.x_bits)
    rows = np.unique(keys >> xb)
    # rows whose previous row is empty and in the same plane: a lookup at x = 0 there misses
    # along its row and casts +y from just below the populated row
    rows = rows[(rows & np.uint64(coder.y_max)) != 0]
    rows = rows[~np.isin(rows - np.uint64(1), np.unique(keys >> xb))]
    lo = (rows - np.uint64(1)) << xb
    keep = (lo > keys[3]) & (lo <= keys[-1])
    rows, lo = rows[keep], lo[keep]
    paths = index.ray_paths(lo)
    assert all(len(p) >= 2 and p[0] == ("x", False, False) and p[1][0] == "y" for p in paths)
    _, y, z = coder.fields(rows << xb)
    origins = np.stack([np.full(rows.shape[0], coder.row_marker_x, np.float32),
                        coder.y_coord(y) - np.float32(2**14), coder.z_coord(z)], axis=1)
    d = np.zeros_like(origins)
    d[:, 1] = 1
    batch = query.FunctionBatch.of(
        None, lambda s, e, o: query.Rays(origins[s:e], d[s:e], np.float32(0),
                                         np.float32(np.inf)),
        lambda s, e, o: _Ids(sc.ids), n_queries=rows.shape[0], xp=np)
    h, _, front = query.closest_rays(sc.gas, batch, query.QueryPrograms(match=_cg_id),
                                     max_rays=1 << 20)
    hit = h != query.MISS
    assert hit.sum() > 10 and front[hit].sum() > 0
    np.testing.assert_array_equal(hit, [p[1][1] for p in paths])
    np.testing.assert_array_equal(front & hit, [p[1][2] for p in paths])


CGRX_SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    import indexzoo
    from indexzoo.plugins.cgrx.search import PATH_WIDTH, lookup_kernel

    rng = np.random.default_rng(8)
    # sparse 64-bit keys (most rows and planes empty: every ray path) and dense 32-bit ones
    for dtype, bits, bucket_log, geometry in ((np.uint64, 48, 0, "generated"),
                                              (np.uint64, 48, 2, "stored"),
                                              (np.uint32, 32, 1, "generated")):
        keys = rng.integers(0, 2**bits, 300, dtype=np.uint64).astype(dtype)
        index = indexzoo.create("cgrx", device="cpu", bucket_log=bucket_log,
                                geometry=geometry).build(keys)
        st = index.state
        sc = st.scene
        lo = np.concatenate([keys[:40], keys[:40] + dtype(1),
                             rng.integers(0, 2**bits, 40, dtype=np.uint64).astype(dtype)])
        hi = lo + rng.integers(0, 2**(bits - 8), lo.shape[0], dtype=np.uint64).astype(dtype)
        hi = np.maximum(hi, lo)
        outs = []
        for device in ("cpu", "cuda"):
            path = np.full((lo.shape[0], PATH_WIDTH), -1, dtype=np.int8)
            first = np.full(lo.shape[0], -7, np.int64)
            count = np.full(lo.shape[0], -7, np.int64)
            lookup_kernel(st.coder, sc.gas.geometry, True)(
                device, lo.shape[0], lo, hi, st.keys, np.int64(sc.n_buckets),
                np.int64(bucket_log), *sc.gas.query_args(), sc.ids, path, first, count,
                threads_per_block=32)
            outs.append((first, count, path))
        for a, b in zip(*outs):
            assert np.array_equal(a, b), (dtype, bucket_log, geometry)
        assert (outs[0][2][:, 1] >= 0).any(), "no lookup needed a second ray"
        # the scene's two kernels
        from indexzoo.plugins.cgrx import scene as S
        skeys = np.sort(keys)
        bucket, p = 1 << bucket_log, -(-keys.shape[0] // (1 << bucket_log))
        xb, yb = np.int64(st.coder.x_bits), np.int64(st.coder.y_bits)
        made = []
        for device in ("cpu", "cuda"):
            kinds = np.full(p, -1, np.int8)
            emitted = np.full(p, -1, np.int64)
            S._SCENE_KINDS(device, p, skeys, np.int64(bucket), np.int64(p), xb, yb,
                           np.bool_(True), np.bool_(dtype is np.uint64), kinds, emitted,
                           threads_per_block=32)
            offsets = np.cumsum(emitted) - emitted
            total = int(emitted.sum())
            records = np.zeros(total, np.uint64)
            ids = np.full(total, -1, np.int64)
            flip = np.zeros(total, np.bool_)
            S._SCENE_EMIT(device, p, skeys, np.int64(bucket), np.int64(p), xb, yb, kinds,
                          offsets, records, ids, flip, threads_per_block=32)
            made.append((kinds, emitted, records, ids, flip))
        for a, b in zip(*made):
            assert np.array_equal(a, b), ("scene", dtype, bucket_log)
    print("simulator agrees")
""")


def test_the_lookup_kernel_agrees_between_njit_and_the_cuda_simulator() -> None:
    """The chained rays and the in-bucket search through ``cuda.jit`` give the CPU's runs and
    ray paths, and the scene's kernels its triangles."""
    agrees_in_the_simulator(CGRX_SIM_SCRIPT)


@pytest.mark.parametrize("bucket_log", [0, 1, 5])
def test_triangles_are_emitted_in_z_y_x_id_order(bucket_log: int) -> None:
    """The scene emits each bucket's triangles in turn, with no sort: the position codes
    (z, y, x packed as in a key) come out non-decreasing, and equal codes by increasing id
    (the order the engine's tie-break relies on), also with duplicates, equal representatives
    and markers at the ends of rows and planes."""
    rng = np.random.default_rng(9)
    corners = [key(x, y, z) for x in (0, 5, 2**23 - 1) for y in (0, 3, 2**23 - 1)
               for z in (0, 1, 7)]
    keys = np.sort(np.concatenate([
        np.array(corners * 3, dtype=np.uint64),
        np.repeat(rng.integers(0, 2**64 - 1, 200, dtype=np.uint64), 9),
        rng.integers(0, 2**40, 3000, dtype=np.uint64)]))
    index = indexzoo.create("cgrx", device="cpu", bucket_log=bucket_log).build(keys)
    sc = index.state.scene
    codes = sc.gas.data[np.argsort(sc.gas.bvh.order)]  # the build input's order
    ids = sc.ids.astype(np.int64)
    assert (codes[1:] >= codes[:-1]).all()
    tie = codes[1:] == codes[:-1]
    assert (ids[1:][tie] > ids[:-1][tie]).all()
    counts = index.scene_counts
    assert counts["end_of_row"] > 0 and counts["end_of_plane"] > 0 and counts["moved"] > 0
