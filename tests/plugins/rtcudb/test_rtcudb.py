"""The query engines (``rtcudb``, its presets and ``crystal``): the 13 SSB queries equal
DuckDB's answers at a tiny scale factor for every engine; random queries equal the NumPy
reference; RTCUDB's encodings reproduce the paper's worked examples; dedup, spills to device
memory, the re-check of attributes left out of Z and OrderBy elimination keep answers
exact."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from support.helpers import agrees_in_the_simulator

import indexzoo
from indexzoo import query as q
from indexzoo.plugins.rtcudb import BijectionEncoder, GroupDictionary, Packer, attribute_order
from indexzoo.query import ssb

ENGINES = ["crystal", "rtcudb", "rtcudb-sorted", "rtcudb-split", "rtcudb-per-operator"]
FLIGHTS = {f: [n for n in ssb.QUERIES if n.startswith(f"q{f}")] for f in "1234"}


# ------------------------------------------------------------------ encodings (paper §4)
def test_bijection_encoding_of_query_b_gives_the_papers_two_intervals() -> None:
    enc = BijectionEncoder(("grade", "english"), ((0, 4), (0, 100)))
    assert enc.intervals({"grade": [(1, 2)], "english": [(60, 100)]}) == (
        [(161, 201), (262, 302)], [])


def test_the_reverse_attribute_order_needs_41_intervals() -> None:
    enc = BijectionEncoder(("english", "grade"), ((0, 100), (0, 4)))
    ivs, _ = enc.intervals({"grade": [(1, 2)], "english": [(60, 100)]})
    assert len(ivs) == 41


def test_the_order_heuristic_puts_larger_predicate_ranges_later() -> None:
    order = attribute_order({"english": (0, 100), "grade": (0, 4)},
                            [{"grade": [(1, 2)], "english": [(60, 100)]}])
    assert order == ["grade", "english"]


def test_intervals_are_exactly_the_codes_of_qualifying_tuples() -> None:
    rng = np.random.default_rng(1)
    enc = BijectionEncoder(("a", "b", "c"), ((2, 6), (0, 3), (10, 17)))
    grid = np.stack(np.meshgrid(np.arange(2, 7), np.arange(0, 4), np.arange(10, 18),
                                indexing="ij"), -1).reshape(-1, 3)
    codes = enc.encode([grid[:, 0], grid[:, 1], grid[:, 2]])
    assert sorted(codes) == list(range(enc.span))
    for _ in range(50):
        f = {"a": [(3, 3), (5, 6)], "c": [(int(rng.integers(10, 14)), int(rng.integers(13, 18)))]}
        if rng.random() < 0.5:
            f["b"] = [(1, 2)]
        ivs, recheck = enc.intervals(f, max_intervals=1 << 10)
        want = {int(z) for z, t in zip(codes, grid, strict=True)
                if all(any(lo <= t[i] <= hi for lo, hi in f.get(n, [(-99, 99)]))
                       for i, n in enumerate("abc"))}
        got = {z for lo, hi in ivs for z in range(lo, hi + 1)}
        assert got == want and not recheck


def test_too_many_intervals_leave_trailing_attributes_to_a_recheck() -> None:
    enc = BijectionEncoder(("a", "b"), ((0, 99), (0, 99)))
    ivs, recheck = enc.intervals({"a": [(0, 49)], "b": [(3, 5)]}, max_intervals=10)
    assert ivs == [(0, 49 * 100 + 99)] and recheck == ["b"]


@pytest.mark.parametrize(("span", "encoded"), [((1 << 24) - 2, 2), ((1 << 24) - 1, 1),
                                               ((1 << 24) + 1, 1)])
def test_scan_codes_never_pass_float32s_exact_integers(span: int, encoded: int) -> None:
    """Z and the ray's start one below it stay exact: codes past 2^24 - 2 spill the attribute."""
    domains = {"a": (0, 1), "b": (0, span // 2 - 1 + span % 2)}
    enc = BijectionEncoder.fitting(["a", "b"], domains, (1 << 24) - 2)
    assert len(enc.names) == encoded
    assert enc.span <= (1 << 24) - 2


def test_the_group_dictionary_is_lexicographic_as_in_query_c() -> None:
    gd, y = GroupDictionary.build(["grade", "class"], [np.array([4, 1, 1, 4]),
                                                       np.array([7, 2, 3, 7])], 4)
    assert [tuple(int(t[j]) for t in gd.tuples) for j in range(3)] == [(1, 2), (1, 3), (4, 7)]
    assert list(y) == [2, 0, 1, 2]


@pytest.mark.parametrize("spans", [
    (7, 300),                            # one mixed-radix key per row
    (1 << 41, 1 << 30, 3),               # too wide for one key: sorted by every column
    (1,), (5, 1, 5),                     # constant columns
])
def test_the_group_dictionary_codes_are_np_unique_s_rows(spans: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(spans))
    n = 20_000
    cols = [rng.integers(-(s // 2), s - s // 2, n) for s in spans]
    cols[0] = cols[0].astype(np.int32) if spans[0] < 1 << 31 else cols[0]
    gd, y = GroupDictionary.build([f"c{i}" for i in range(len(cols))], cols, n)
    want, inverse = np.unique(np.stack([c.astype(np.int64) for c in cols], axis=1), axis=0,
                              return_inverse=True)
    assert len(gd.tuples) == len(cols)
    for j, t in enumerate(gd.tuples):
        np.testing.assert_array_equal(t, want[:, j])
    np.testing.assert_array_equal(y, inverse.reshape(-1))
    assert y.dtype == np.int64 and gd.size == want.shape[0]


def test_packed_values_round_trip_and_spill_past_the_coordinates_bits() -> None:
    vals = [np.array([0, 100, 37]), np.array([-5, 195, 3]), np.array([1 << 30, 0, 5])]
    pk = Packer.plan(vals, 24)
    assert pk.packed == (True, True, False)
    x = pk.pack(vals, 3)
    assert int(x.max()) < 1 << 24
    assert np.array_equal(pk.unpack(x, 0), vals[0]) and np.array_equal(pk.unpack(x, 1), vals[1])


# ------------------------------------------------------------------ SSB against DuckDB
@pytest.fixture(scope="module")
def ssb_data() -> tuple[q.Table, object]:
    duckdb = pytest.importorskip("duckdb")
    table = ssb.generate(0.01, seed=11)
    con = duckdb.connect()
    con.register(ssb.TABLE, ssb.to_arrow(table))
    return table, con


def same(got: q.QueryResult, want: q.QueryResult) -> bool:
    return list(got.columns) == list(want.columns) and all(
        got.columns[k].shape == w.shape and np.array_equal(got.columns[k].astype(w.dtype), w)
        for k, w in want.columns.items())


@pytest.mark.parametrize("engine", ENGINES)
def test_every_ssb_query_equals_duckdb(engine: str, ssb_data: tuple[q.Table, object]) -> None:
    """One view per flight (the paper's BVH per query template), reused by its queries."""
    table, con = ssb_data
    e = indexzoo.query_engine(engine, device="cpu")
    wrong = []
    for names in FLIGHTS.values():
        view = e.prepare(table, [ssb.QUERIES[n] for n in names])
        for n in names:
            got = e.run(view, ssb.QUERIES[n])
            if not same(got, ssb.duckdb_answer(table, ssb.QUERIES[n], con)):
                wrong.append(n)
    assert not wrong


def test_order_by_on_a_group_by_prefix_is_skipped(ssb_data: tuple[q.Table, object]) -> None:
    table, _ = ssb_data
    e = indexzoo.query_engine("rtcudb", device="cpu")
    assert e.run(table, ssb.QUERIES["q2.1"]).order_skipped      # d_year, p_brand1
    assert not e.run(table, ssb.QUERIES["q3.1"]).order_skipped  # d_year, revenue DESC


# ------------------------------------------------------------------ random tables
def random_table(seed: int, n: int = 3000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"a": rng.integers(0, 7, n), "b": rng.integers(-3, 40, n),
            "c": rng.choice(["x", "y", "zz", "w"], n), "v": rng.integers(-1000, 1 << 20, n),
            "w": rng.integers(0, 1 << 28, n)}


RANDOM = [
    q.Query(where=[q.col("a").isin([1, 3, 4]), q.col("b").between(0, 20), q.col("c").isin(["x", "zz"])],
            group_by=["c", "a"], select=[q.sum("v", "s"), q.min("w", "mn"), q.max("v", "mx"),
                                         q.avg(q.col("v") - q.col("b"), "av"), q.count()],
            order_by=["-s"], limit=5),
    q.Query(where=[q.col("b").gt(38)], select=[q.sum(q.col("w") * q.col("a"), "r"), q.count()]),
    q.Query(where=[q.col("b").lt(-10)], group_by=["a"], select=[q.count()]),  # no row
    q.Query(group_by=["b"], select=[q.max("w", "m")], order_by=["b"]),  # no filter
]


@pytest.mark.parametrize("engine", ENGINES)
def test_random_queries_equal_the_reference(engine: str, device: str) -> None:
    """On every device; crystal with each of its kernels (on the GPU, shared-memory slots by
    default at these sizes, and device-memory atomics into four copies of the result or one),
    another tile width, and none, one, two (the default) or all filter columns read for every
    row of a tile."""
    data = random_table(3)
    configs = [{}, {"shared_slots": 0}, {"shared_slots": 0, "items_per_thread": 3},
               {"eager_filters": 0}, {"eager_filters": 1},
               {"shared_slots": 0, "eager_filters": 9},
               {"shared_slots": 0, "result_copies": 1}] \
        if engine == "crystal" else [{}]
    for params in configs:
        e = indexzoo.query_engine(engine, device=device, **params)
        view = e.prepare(data, RANDOM)
        for spec in RANDOM:
            got, want = e.run(view, spec), q.reference(data, spec)
            assert list(got.columns) == list(want.columns)
            for k in want.columns:
                np.testing.assert_array_equal(got.columns[k], want.columns[k],
                                              err_msg=f"{params} {k}")


@pytest.mark.parametrize("params", [{"grid": 64}, {"grid": 1}, {"coordinate_bits": 8},
                                    {"max_intervals": 1}, {"bvh_order": "morton"},
                                    {"bvh_order": "cells-z", "grid": 16}])
def test_rt_answers_do_not_depend_on_grid_spills_rechecks_or_bvh_order(params: dict) -> None:
    """Dense grids hit triangles up to three times (the flag bit dedups); 8-bit coordinates
    spill scan attributes, values and group codes to device memory; one interval re-checks;
    every order of the BVH's triangles finds the same records."""
    data = random_table(4, 1500)
    e = indexzoo.query_engine("rtcudb", device="cpu", **params)
    view = e.prepare(data, RANDOM)
    for spec in RANDOM[:2]:
        want = q.reference(data, spec)
        for _ in range(2):  # the flag bits are fresh per query
            got = e.run(view, spec)
            for k in want.columns:
                np.testing.assert_array_equal(got.columns[k], want.columns[k], err_msg=k)


def test_rays_beyond_one_launch_go_in_batches_of_intervals(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A query whose intervals need more rays than one launch takes (a fine grid, many
    intervals) traces them in several launches, one interval each here, and answers the same."""
    import indexzoo.plugins.rtcudb.engine as rte

    data = random_table(4, 1500)
    for pipeline in ("fused", "per-operator"):
        e = indexzoo.query_engine("rtcudb", device="cpu", pipeline=pipeline)
        view = e.prepare(data, RANDOM)
        want = [q.reference(data, spec) for spec in RANDOM]
        monkeypatch.setattr(rte, "MAX_RAYS", 1)
        for spec, w in zip(RANDOM, want, strict=True):
            got = e.run(view, spec)
            for k in w.columns:
                np.testing.assert_array_equal(got.columns[k], w.columns[k],
                                              err_msg=f"{pipeline} {k}")
        assert e.run(view, RANDOM[0]).stats["intervals"] > 1
        monkeypatch.undo()


@pytest.mark.parametrize("params", [{}, {"coordinate_bits": 8}, {"pipeline": "per-operator"}])
def test_rows_spread_over_x_where_it_carries_no_value(monkeypatch: pytest.MonkeyPatch,
                                                      params: dict) -> None:
    """With its values spilled (or none asked) X carries none: the rows' positions then
    spread the triangles over X, so the grid's rays share the hits."""
    import indexzoo.plugins.rtcudb.engine as rte

    monkeypatch.setattr(rte, "SPREAD", 4)  # spread at this table's size
    data = random_table(5, 1200)
    counts = q.Query(where=[q.col("b").gt(5)], select=[q.count()])
    for specs in ([RANDOM[1]], [counts], RANDOM):
        e = indexzoo.query_engine("rtcudb", device="cpu", grid=8, **params)
        view = e.prepare(data, specs)
        if specs[0] is counts:
            assert len(view.points[0]) > 2
        for spec in specs:
            got, want = e.run(view, spec), q.reference(data, spec)
            for k in want.columns:
                np.testing.assert_array_equal(got.columns[k], want.columns[k],
                                              err_msg=f"{params} {k}")


def test_queries_run_again_on_a_view_answer_the_same(device: str) -> None:
    """Engines keep per-query state on a view (crystal: its plan and result buffers, and on
    the GPU, from a query's second run, its work as one CUDA graph); each run starts from
    clean buffers, whatever ran before."""
    data = random_table(6, 800)
    for engine in ENGINES:
        e = indexzoo.query_engine(engine, device=device)
        view = e.prepare(data, RANDOM)
        for spec in [*RANDOM, *reversed(RANDOM), *RANDOM]:
            got, want = e.run(view, spec), q.reference(data, spec)
            for k in want.columns:
                np.testing.assert_array_equal(got.columns[k], want.columns[k],
                                              err_msg=f"{engine} {k}")


@pytest.mark.parametrize("engine", ["crystal", "rtcudb-sorted"])
def test_groups_beyond_the_first_copy_back_come_back_too(monkeypatch: pytest.MonkeyPatch,
                                                       engine: str, device: str) -> None:
    """crystal and the sorted backend copy back the groups a query reached, a first batch at
    once and the rest in a second copy: with a first batch of two, every query still answers
    every group."""
    import indexzoo.plugins.crystal as crystal
    import indexzoo.plugins.rtcudb.engine as rte

    monkeypatch.setattr(crystal, "FIRST_COPY_SLOTS", 2)
    monkeypatch.setattr(rte, "FIRST_COPY_GROUPS", 2)
    data = random_table(7, 500)
    e = indexzoo.query_engine(engine, device=device)
    view = e.prepare(data, RANDOM)
    for spec in [*RANDOM, *RANDOM, *RANDOM]:  # (crystal on the GPU: launches, then a graph)
        got, want = e.run(view, spec), q.reference(data, spec)
        for k in want.columns:
            np.testing.assert_array_equal(got.columns[k], want.columns[k], err_msg=k)
    assert len(e.run(view, RANDOM[3])) > 2


def test_many_aggregates_and_few_groups_sum_exactly(device: str) -> None:
    """Six value expressions (more than a thread of the sorted backend sums in registers) and
    queries whose rows go to one group or a few: every engine's sums stay exact."""
    data = random_table(8, 4000)
    exprs = [q.col("v"), q.col("w"), q.col("v") * q.col("a"), q.col("w") - q.col("b"),
             q.col("b") * 3, q.col("a") + q.col("v")]
    specs = [q.Query(where=[q.col("b").between(-3, 30)],
                     select=[q.sum(e, f"s{j}") for j, e in enumerate(exprs)] + [q.count()]),
             q.Query(where=[q.col("c").isin(["x"])], group_by=["a"],
                     select=[q.sum(e, f"s{j}") for j, e in enumerate(exprs)]
                     + [q.min("v", "lo"), q.max("w", "hi")])]
    for engine in ENGINES:
        e = indexzoo.query_engine(engine, device=device)
        view = e.prepare(data, specs)
        for spec in specs:
            got, want = e.run(view, spec), q.reference(data, spec)
            for k in want.columns:
                np.testing.assert_array_equal(got.columns[k], want.columns[k],
                                              err_msg=f"{engine} {k}")


@pytest.mark.parametrize("span", [7, 2**60])  # one key fits int64; (Z, group) pairs do not
def test_the_sorted_backend_orders_records_by_scan_code_then_group(span: int) -> None:
    """Within a Z code, a group's records sit together, so a thread's run of them is summed in
    registers and added once."""
    from indexzoo.plugins.rtcudb.engine import _by_scan_then_group

    rng = np.random.default_rng(9)
    z = rng.integers(0, 7, 500) * (span // 7)
    y = rng.integers(0, 40, 500)
    perm = _by_scan_then_group(np, z, y, span, 40)
    assert sorted(perm.tolist()) == list(range(500))
    pairs = list(zip(z[perm].tolist(), y[perm].tolist(), strict=True))
    assert pairs == sorted(pairs)


def test_crystals_grid_is_the_blocks_the_gpu_holds_at_once() -> None:
    """Once the kernel is compiled, the driver's count of resident blocks (registers and shared
    memory included) bounds the grid, so no second, partly empty wave runs; before, the
    threads and shared memory alone do. Never more blocks than tiles of rows."""
    from indexzoo.native.targets import sm_count
    from indexzoo.plugins.crystal.kernels import blocks_for

    class Kernel:
        resident: int | None = None

        def resident_blocks(self, threads: int, shared: int) -> int | None:
            return self.resident

    k = Kernel()
    blocks = blocks_for(k, 256, 0, 1024)
    assert blocks(10**9) == sm_count() * 8  # not compiled yet: 2048 threads a multiprocessor
    k.resident = 5 * 132
    assert blocks(10**9) == 5 * 132
    assert blocks(3000) == 3  # three tiles
    k.resident = 1
    assert blocks(10**9) == 5 * 132  # kept from the compiled kernel's first answer


def test_a_view_reports_its_bytes() -> None:
    e = indexzoo.query_engine("rtcudb", device="cpu")
    view = e.prepare(random_table(5, 100), RANDOM)
    assert view.footprint_bytes() >= 36 * 100  # one triangle per row at least


@pytest.mark.parametrize("params", [{}, {"grid": 64}, {"coordinate_bits": 8},
                                    {"max_intervals": 1}])
def test_the_query_layers_programs_answer_as_the_engines_own_launch(
        params: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused RT stage through the query layer (how it runs on OptiX, whose CUDA twins
    mirror these programs), here on the software engine: the same answers, with dedup, spills
    and re-checks."""
    import indexzoo.plugins.rtcudb.rt as rtmod

    data = random_table(4, 1500)
    specs = RANDOM
    want = [q.reference(data, spec) for spec in specs]
    monkeypatch.setattr(rtmod, "on_layer", lambda scene: True)
    e = indexzoo.query_engine("rtcudb", device="cpu", **params)
    view = e.prepare(data, specs)
    for spec, w in zip(specs, want, strict=True):
        got = e.run(view, spec)
        for k in w.columns:
            np.testing.assert_array_equal(got.columns[k], w.columns[k], err_msg=f"{spec} {k}")


@pytest.mark.optix
@pytest.mark.gpu
def test_rtcudb_on_optix_answers_the_13_ssb_queries_as_duckdb() -> None:
    """The faithful engine on OptiX (the query layer's launch, ``programs.cu``) at a tiny
    scale factor: every query equals DuckDB's answer, one view per flight."""
    pytest.importorskip("duckdb")
    table = ssb.generate(0.01, seed=3)
    e = indexzoo.query_engine("rtcudb", device="cuda", engine="optix")
    for names in FLIGHTS.values():
        specs = [ssb.QUERIES[n] for n in names]
        view = e.prepare(table, specs)
        assert view.scene.engine.name == "optix"
        for name, spec in zip(names, specs, strict=True):
            got, want = e.run(view, spec), ssb.duckdb_answer(table, spec)
            for k in want.columns:
                np.testing.assert_array_equal(got.columns[k], want.columns[k],
                                              err_msg=f"{name} {k}")


@pytest.mark.parametrize("first", [1, 3, 8])
def test_packed_groups_come_back_sorted_in_one_or_two_copies(device: str, first: int) -> None:
    """``read_packed``: ``first`` records in the first copy (into a page-locked buffer on the
    GPU, reused), the rest in a second; the records come back sorted by group code."""
    from indexzoo.devices import array_module
    from indexzoo.native.groupagg import host_buffer, read_packed

    xp = array_module(device)
    width, m = 3, 5
    recs = np.array([[7, 1, 10], [2, 4, 20], [9, 1, 30], [0, 2, 40], [5, 3, 50]])
    packed = xp.asarray(np.concatenate([[m], recs.reshape(-1), np.full(6, -1)]).astype(np.int64))
    host = host_buffer(packed, 1 + first * width)
    assert (host is None) == (device == "cpu")
    want = recs[np.argsort(recs[:, 0])]
    for _ in range(2):  # the buffer is reused; the answer is not a view of it
        got = read_packed(packed, width, first, host)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(read_packed(packed, width, first), want)


def test_optix_is_refused_on_the_cpu_with_what_is_missing() -> None:
    e = indexzoo.query_engine("rtcudb", device="cpu", engine="optix")
    with pytest.raises(indexzoo.DeviceUnavailable, match="GPU only"):
        e.prepare(random_table(5, 100), RANDOM[:1])


#: The engines and parameters run under the simulator. crystal's kernel is generated from
#: four choices (shared-memory or global aggregation, rows a thread per tile, filter columns
#: read eagerly, copies of a device-memory result): the default tier takes every value of each
#: choice at least once, the other two combinations run in the exhaustive tier (each took about
#: 12 s of simulated threads on the 2-core machine). rtcudb's ray grid is the CPU's (4 rays a
#: side, ``grid``): the simulator runs every ray as a thread of its own, and the GPU's default
#: grid (512) casts up to 30,000 rays over these 64 rows, 31 s of simulated threads for the same
#: programs; it runs in the exhaustive tier, and on the GPU in the GPU tests.
SIMULATED_ENGINES = [("crystal", {}),
                     ("crystal", {"shared_slots": 0, "items_per_thread": 1, "eager_filters": 0}),
                     ("crystal", {"eager_filters": 1, "threads_per_block": 32,
                                  "items_per_thread": 1}),
                     ("crystal", {"shared_slots": 0, "result_copies": 3, "threads_per_block": 32,
                                  "items_per_thread": 1, "blocks": 3}),
                     ("rtcudb-sorted", {}), ("rtcudb", {"grid": 4}),
                     ("rtcudb-per-operator", {"grid": 4})]
SIMULATED_ENGINES_EXHAUSTIVE = [("crystal", {"shared_slots": 0}),
                                ("crystal", {"shared_slots": 0, "eager_filters": 0}),
                                ("rtcudb", {}), ("rtcudb-per-operator", {})]


def test_the_gpu_kernels_agree_in_numbas_cuda_simulator() -> None:
    """Every engine's CUDA path (kernels, atomics, the ray-generation and any-hit programs) on
    NumPy arrays under the simulator equals the reference."""
    agrees_in_the_simulator(textwrap.dedent(SIMULATED) % (SIMULATED_ENGINES,))


@pytest.mark.exhaustive
def test_crystals_other_kernel_shapes_agree_in_numbas_cuda_simulator() -> None:
    agrees_in_the_simulator(textwrap.dedent(SIMULATED) % (SIMULATED_ENGINES_EXHAUSTIVE,))


SIMULATED = """
import numpy as np
import indexzoo
from indexzoo import query as q
import indexzoo.plugins.crystal as crystal
import indexzoo.plugins.rtcudb.engine as rte
import indexzoo.plugins.rtcudb.rt as rtmod
import indexzoo.plugins.crystal.kernels as ck
for m in (crystal, rte, rtmod):
    m.array_module = lambda device: np   # NumPy arrays, GPU kernels: numba's simulator
# crystal's kernels run as one block unless the parameters say "blocks" (a test's setting, not
# the engine's), so that a block of 32 threads taking one row a tile strides over the 64 rows
# twice, and three blocks of 32 add into the first two of three result copies
ck.compact_kernel  # runs the lazily imported module first, so that its code does not undo this
rng = np.random.default_rng(2)
n = 64
data = {"a": rng.integers(0, 4, n), "b": rng.integers(0, 9, n), "v": rng.integers(-50, 1000, n),
        "big": rng.integers(-2**40, 2**40, n)}  # sums whose low 32 bits carry and borrow
specs = [q.Query(where=[q.col("a").isin([1, 3]), q.col("b").between(2, 7)], group_by=["a"],
                 select=[q.sum("v", "s"), q.min("v", "lo"), q.max(q.col("v") * q.col("b"), "hi"),
                         q.count()]),
         q.Query(where=[q.col("b").gt(4)], select=[q.sum(q.col("v") - q.col("a"), "s")]),
         q.Query(where=[q.col("b").gt(1)], group_by=["a"], select=[q.sum("big", "s")]),
         q.Query(select=[q.sum("big", "s"), q.count()])]
# the engines, crystal with its kernel's shapes (SIMULATED_ENGINES): shared-memory or global
# aggregation, rows a thread per tile, none, one or all filter columns read for every row (a group
# or value column that is also a filter column takes the filter's read either way)
for name, params in %r:
    params = dict(params)
    ck.blocks_for = (lambda b: lambda kernel, threads, shared, rows_per_block: lambda n: b)(
        params.pop("blocks", 1))
    e = indexzoo.query_engine(name, device="cpu", **params)
    e.device = "cuda"
    view = e.prepare(data, specs)
    for spec in specs:
        got, want = e.run(view, spec).columns, q.reference(data, spec).columns
        assert all(np.array_equal(got[k], want[k]) for k in want), (name, spec, got, want)
print("simulator agrees")
"""
