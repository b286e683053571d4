"""The sharded index's own promises, beyond the conformance suite: how rows are spread over
shards (skewed keys included), which shards a lookup reaches, global rowIDs, builds from
distributed columns, multi-column inner indexes, joins, footprints per shard, saving, and
Dask as an optional dependency."""

from __future__ import annotations

import pickle
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo import ConfigError, InvalidInput
from indexzoo.plugins.sharded import ShardedIndex, partition


def _same(a: Any, b: Any) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(_arrays(a), _arrays(b), strict=True))


def _arrays(res: Any) -> list[np.ndarray]:
    host = res.to_host()
    if host.out == "rowids":  # any order within a lookup: compare sorted per lookup
        return [host.offsets] + [np.sort(host.matches(i)) for i in range(len(host))]
    return [getattr(host, host.out)]


def _agree(sharded: Any, plain: Any, q: np.ndarray, lo: np.ndarray | None = None,
           hi: np.ndarray | None = None) -> None:
    for out in ("count", "sum", "rowids", "bitmap"):
        assert _same(sharded.point(q, out=out), plain.point(q, out=out)), out
        if lo is not None:
            assert _same(sharded.range(lo, hi, out=out), plain.range(lo, hi, out=out)), out
    hit = sharded.point(q, out="rowid").to_host().rowid != sharded.miss
    assert np.array_equal(hit, plain.point(q, out="count").to_host().count > 0)


# ---------------------------------------------------------------------- configuration
def test_a_spec_selects_the_sharded_index_like_any_other() -> None:
    index = indexzoo.create({"index": "sharded",
                             "params": {"inner": {"index": "btree"}, "shards": 3},
                             "device": "cpu"})
    assert isinstance(index, ShardedIndex)
    assert index.params.inner.index == "btree" and index.params.shards == 3
    assert index.scheme == "range"


def test_the_capabilities_are_those_of_the_inner_index() -> None:
    hashed = indexzoo.create("sharded", inner="warpcore-hash", device="cpu")
    assert not hashed.capabilities.range and hashed.scheme == "hash"
    with pytest.raises(indexzoo.Unsupported):
        hashed.build(np.arange(10, dtype=np.uint32)).range([1], [3])
    multi = indexzoo.create("sharded", inner="rtscan", device="cpu")
    assert multi.capabilities.dims > 1 and multi.scheme == "rows"


def test_the_suite_run_by_name_over_an_inner_index_certifies_what_those_params_make() -> None:
    """``indexzoo check sharded --set inner=warpcore-hash`` checks the index those parameters
    make (the hash table's capabilities: no ranges), not the registered class's: its range
    checks are skipped with the reason, not run to raise Unsupported."""
    from indexzoo.conformance import make_context, run_checks

    ctx = make_context("sharded", params={"inner": "warpcore-hash"}, seed=1)
    assert ctx.cls._class_for({}) is ctx.cls
    assert not ctx.caps.range and ctx.caps == type(ctx.factory()).capabilities
    results = run_checks(ctx, groups=["ranges"])
    assert results and all(r.status == "skipped" and "range=False" in r.message
                           for r in results)
    assert make_context("sharded", seed=1).caps.range  # the default inner: sorted-array
    assert ShardedIndex._class_for({"inner": "btree"}).capabilities.range


def test_bad_parameters_are_config_errors_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="shards"):
        indexzoo.create("sharded", shards=0)
    with pytest.raises(ConfigError, match="no-such-index"):
        indexzoo.create("sharded", inner="no-such-index")
    with pytest.raises(ConfigError, match="partitioning"):
        indexzoo.create("sharded", inner="rtscan", partitioning="range")


# ---------------------------------------------------------------------- partitioning
def test_range_shards_hold_disjoint_key_runs_in_order() -> None:
    keys = np.random.default_rng(1).integers(0, 1 << 30, 20_000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="sorted-array", shards=4, device="cpu").build(keys)
    st = index.state
    assert sum(index.shard_sizes()) == keys.shape[0]
    assert all(st.hi[s] <= st.lo[s + 1] for s in range(3))
    assert max(index.shard_sizes()) < 1.2 * keys.shape[0] / 4


def test_a_range_reaches_only_the_shards_it_overlaps() -> None:
    keys = np.arange(40_000, dtype=np.uint32)
    index = indexzoo.create("sharded", inner="sorted-array", shards=4, device="cpu").build(keys)
    st = index.state
    lo = np.array([5, 15_000, 0], dtype=np.uint32)
    hi = np.array([10, 25_000, 39_999], dtype=np.uint32)
    routes = partition.route_ranges("range", lo, hi, 4, st.lo, st.hi)
    reached = [[s for s in range(4) if i in routes[s]] for i in range(3)]
    assert reached == [[0], [1, 2], [0, 1, 2, 3]]
    assert index.range(lo, hi, out="count").to_host().count.tolist() == [6, 10_001, 40_000]


@pytest.mark.parametrize("inner", ["sorted-array", "warpcore-hash"])
def test_a_key_repeated_a_million_times_is_spread_over_the_shards(inner: str) -> None:
    rng = np.random.default_rng(2)
    keys = np.concatenate([np.full(1_000_000, 777, dtype=np.uint32),
                           rng.integers(0, 1 << 20, 100_000).astype(np.uint32)])
    rng.shuffle(keys)
    index = indexzoo.create("sharded", inner=inner, shards=4, device="cpu").build(keys)
    sizes = index.shard_sizes()
    assert min(sizes) > 0.5 * keys.shape[0] / 4, sizes
    assert max(sizes) < 1.5 * keys.shape[0] / 4, sizes
    got = index.point(np.array([777, 5], dtype=np.uint32), out="count").to_host().count
    assert got.tolist() == [int((keys == 777).sum()), int((keys == 5).sum())]
    rows = index.point(np.array([777], dtype=np.uint32), out="rowids").to_host().rowids
    assert np.array_equal(np.sort(rows), np.flatnonzero(keys == 777))


def test_zipf_keys_are_balanced_over_range_shards() -> None:
    keys = np.random.default_rng(3).zipf(1.3, 200_000).astype(np.uint64)
    index = indexzoo.create("sharded", inner="sorted-array", shards=4, device="cpu").build(keys)
    sizes = index.shard_sizes()
    assert max(sizes) < 1.2 * keys.shape[0] / 4, sizes
    plain = indexzoo.create("sorted-array", device="cpu").build(keys)
    q = np.array([1, 2, 3, 10, 1000, 1 << 40], dtype=np.uint64)
    _agree(index, plain, q, q, q * np.uint64(3))


def test_splitters_on_duplicates_deal_a_heavy_key_over_the_shards_it_spans() -> None:
    sample = np.array([1, 5, 5, 5, 5, 5, 5, 9], dtype=np.uint32)
    assert partition.splitters(sample, 4).tolist() == [5, 5, 5]
    keys = np.full(6000, 5, dtype=np.uint32)
    where = partition.range_shard(keys, np.arange(6000), sample, 4)
    # key 5 fills sample positions 1-6 of the shards' [0, 2) [2, 4) [4, 6) [6, 8)
    assert np.bincount(where, minlength=4).tolist() == pytest.approx([1000, 2000, 2000, 1000],
                                                                     abs=20)
    assert partition.range_shard(np.array([0, 1, 9, 10], dtype=np.uint32), np.arange(4),
                                 sample, 4).tolist() == [0, 0, 3, 3]


# ---------------------------------------------------------------------- answers
def test_answers_carry_global_rowids_and_values_in_the_callers_order() -> None:
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 5000, 30_000).astype(np.int64)
    values = rng.integers(0, 1 << 40, 30_000).astype(np.uint64)
    index = indexzoo.create("sharded", inner="sorted-array", shards=3,
                            device="cpu").build(keys, values)
    plain = indexzoo.create("sorted-array", device="cpu").build(keys, values)
    q = rng.integers(-10, 5100, 2000)
    _agree(index, plain, q, q, q + 7)
    rid = index.point(q, out="rowid").to_host().rowid
    hit = rid != index.miss
    assert np.array_equal(keys[rid[hit].astype(np.int64)], q[hit])


def test_multi_column_inner_indexes_are_sharded_by_rows() -> None:
    rng = np.random.default_rng(5)
    cols = [rng.integers(0, 50, 6000).astype(np.uint32), rng.normal(size=6000)]
    index = indexzoo.create("sharded", inner="fused-scan", shards=3, device="cpu").build(cols)
    plain = indexzoo.create("fused-scan", device="cpu").build(cols)
    assert index.shard_sizes() == [2000, 2000, 2000]
    lo = [np.array([3, 10, 49]), np.array([-1.0, 0.0, -9.0])]
    hi = [np.array([20, 10, 60]), np.array([0.5, 9.0, 9.0])]
    for out in ("count", "rowids", "bitmap", "sum"):
        assert _same(index.range(lo, hi, out=out), plain.range(lo, hi, out=out)), out


def test_join_on_a_sharded_index_equals_join_on_its_inner_index() -> None:
    rng = np.random.default_rng(6)
    left = rng.integers(0, 300, 4000)
    right = rng.integers(0, 300, 900)
    spec = {"index": "sharded", "params": {"inner": "sorted-array", "shards": 3}}
    got = indexzoo.join(left, right, index=spec, device="cpu").to_host()
    want = indexzoo.join(left, right, index="sorted-array", device="cpu").to_host()
    assert got.built_on == want.built_on
    assert sorted(zip(got.left.tolist(), got.right.tolist(), strict=True)) == \
        sorted(zip(want.left.tolist(), want.right.tolist(), strict=True))


@pytest.mark.parametrize("inner", ["sorted-array", "warpcore-hash"])
def test_text_keys_that_differ_only_in_nuls_are_distinct_keys(inner: str) -> None:
    keys = ["", "\x00", "a", "a\x00", "a\x00b", "a\x00\x00", "é", "\U0001F600", "a"]
    queries = [*keys, "a\x00\x00\x00", "\x00\x00", "b"]
    index = indexzoo.create("sharded", inner=inner, shards=3, device="cpu").build(keys)
    got = index.point(queries, out="count").to_host().count.tolist()
    assert got == [sum(k == q for k in keys) for q in queries]
    pairs = indexzoo.join(keys, ["a\x00", "a"], index={"index": "sharded",
                                                      "params": {"inner": inner}},
                          device="cpu").to_host()
    assert sorted(zip(pairs.left.tolist(), pairs.right.tolist(), strict=True)) == \
        [(2, 1), (3, 0), (8, 1)]


def test_the_footprint_is_broken_down_per_shard_and_adds_up() -> None:
    keys = np.arange(9000, dtype=np.uint32)
    index = indexzoo.create("sharded", inner="sorted-array", shards=3, device="cpu").build(keys)
    fp = index.memory_footprint()
    per = index.shard_footprints()
    assert len(per) == 3 and all(p.resident_bytes > 0 for p in per)
    assert fp.resident_bytes == sum(p.resident_bytes for p in per) + fp.breakdown["routing"]
    assert {k.split(".")[0] for k in fp.breakdown} == {"shard0", "shard1", "shard2", "routing"}


# ---------------------------------------------------------------------- replicas
def test_replicas_are_at_least_one_and_at_most_the_clusters_workers() -> None:
    with pytest.raises(ConfigError, match="replicas"):
        indexzoo.create("sharded", replicas=0)
    index = indexzoo.create("sharded", shards=2, replicas=3, device="cpu")
    with pytest.raises(ConfigError, match=r"params.replicas = 3: .* the cluster has 2"):
        index.build(np.arange(100, dtype=np.uint32))
    assert not index.is_built


def test_two_copies_answer_as_one_does_and_the_footprint_counts_every_copy() -> None:
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 5000, 20_000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="btree", shards=3, replicas=2,
                            device="cpu").build(keys)
    held = index.shard_copies()
    assert len(held) == 3 and all(len(set(w)) == 2 for w in held), held
    plain = indexzoo.create("btree", device="cpu").build(keys)
    q = rng.integers(0, 5100, 3000).astype(np.uint32)
    lo = rng.integers(0, 5100, 500).astype(np.uint32)
    _agree(index, plain, q, lo, lo + rng.integers(0, 300, 500).astype(np.uint32))

    fp, per = index.memory_footprint(), index.shard_footprints()
    assert fp.resident_bytes == 2 * sum(p.resident_bytes for p in per) + fp.breakdown["routing"]
    assert {k.rsplit(".", 1)[0] for k in fp.breakdown if k != "routing"} == {
        f"shard{s}.copy{r}" for s in range(3) for r in range(2)}


def test_an_index_with_two_copies_saves_one_and_loads_or_unpickles_with_two(tmp_path: Any
                                                                           ) -> None:
    keys = np.random.default_rng(8).integers(0, 1000, 5000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="btree", shards=2, replicas=2,
                            device="cpu").build(keys)
    assert len(index.to_saved().meta["state"]["shards"]) == 2  # one saved form per shard
    q = np.arange(0, 1010, dtype=np.uint32)
    for copy in (indexzoo.load(index.save(tmp_path / "s.izx")),
                 pickle.loads(pickle.dumps(index))):
        assert copy.params.replicas == 2
        assert all(len(set(w)) == 2 for w in copy.shard_copies()), copy.shard_copies()
        for out in ("rowid", "count", "rowids"):
            assert _same(copy.point(q, out=out), index.point(q, out=out))


def test_a_saved_sharded_index_loads_onto_the_cluster_with_the_same_answers(tmp_path: Any
                                                                            ) -> None:
    keys = np.random.default_rng(7).integers(0, 1000, 5000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="btree", shards=2, device="cpu").build(keys)
    q = np.arange(0, 1010, dtype=np.uint32)
    for copy in (indexzoo.load(index.save(tmp_path / "s.izx")),
                 pickle.loads(pickle.dumps(index))):
        assert copy.params == index.params
        for out in ("rowid", "count", "rowids"):
            assert _same(copy.point(q, out=out), index.point(q, out=out))


@pytest.mark.parametrize("bounds,says", [
    ("missing", "bounds: is missing"), ([5], "not two native keys"), ([9, 3], "lo <= hi"),
    ([0, 1 << 40], "not two native keys")])
def test_a_saved_shard_whose_key_bounds_lie_is_refused_before_a_worker_sees_it(
        tmp_path: Any, bounds: Any, says: str) -> None:
    """Found by the exhaustive fuzzing: a file without a shard's bounds made the load raise
    ShardLost (a KeyError read as a lost worker); bounds of the wrong form reached the
    worker."""
    from support.file_fuzz import Saved, pack

    keys = np.arange(40, dtype=np.uint32)
    path = indexzoo.create("sharded", shards=2, device="cpu").build(keys).save(
        tmp_path / "s.izo")
    s = Saved.parse(path.read_bytes())
    held = _shard_nodes(s.meta)
    assert len(held) == 2 and dict(held[1])["bounds"] == [20, 39]
    held[1][:] = [(k, v) for k, v in held[1] if k != "bounds"]
    if bounds != "missing":
        held[1].append(["bounds", bounds])
    (tmp_path / "lie.izo").write_bytes(pack(s.members()))
    with pytest.raises(indexzoo.IndexFileError, match=says):
        indexzoo.load(tmp_path / "lie.izo")


def _shard_nodes(meta: dict[str, Any]) -> list[list[Any]]:
    """The saved shards' mappings as the saved state holds them (``{"$dict": [[key, value],
    ...]}``; each with ``meta``, ``arrays``, ``rows`` and ``bounds``), in order."""
    found: list[list[Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            pairs = node.get("$dict")
            if isinstance(pairs, list) and "bounds" in [p[0] for p in pairs]:
                found.append(pairs)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(meta["state"])
    return found


# ---------------------------------------------------------------------- distributed builds
@pytest.fixture
def column() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    keys = np.concatenate([rng.integers(0, 1 << 24, 20_000), np.full(5000, 99)]).astype(np.int64)
    rng.shuffle(keys)
    return keys, rng.integers(0, 1 << 50, keys.shape[0]).astype(np.uint64)


def _check_against_memory(index: Any, keys: np.ndarray, values: np.ndarray) -> None:
    plain = indexzoo.create("sorted-array", device="cpu").build(keys, values)
    q = np.concatenate([keys[:500], [99, -1, 1 << 25]])
    _agree(index, plain, q, q, q + 1000)
    assert len(index) == keys.shape[0]


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_dask_array_builds_on_the_workers_with_global_rowids(column: Any,
                                                               replicas: int) -> None:
    da = pytest.importorskip("dask.array")
    keys, values = column
    index = indexzoo.create("sharded", inner="sorted-array", shards=3, replicas=replicas,
                            device="cpu")
    index.build(da.from_array(keys, chunks=4000), da.from_array(values, chunks=7000))
    assert all(len(set(w)) == replicas for w in index.shard_copies())
    _check_against_memory(index, keys, values)


@pytest.mark.parametrize(("inner", "values"), [("sorted-array", True), ("warpcore-hash", False)])
def test_a_build_from_memory_can_be_cut_into_shards_on_the_workers(
        column: Any, inner: str, values: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # what a GPU index does with keys in memory (a slice scattered to each worker, sampled,
    # cut and built there), made to run here on the CPU
    from indexzoo.plugins.sharded import ShardedIndex

    monkeypatch.setattr(ShardedIndex, "_builds_on_workers", lambda self, keys: True)
    keys, vals = column
    index = indexzoo.create("sharded", inner=inner, shards=3, device="cpu")
    index.build(keys, vals if values else None)
    assert sorted(index.shard_sizes()) != [0, 0, keys.shape[0]]  # cut, not all in one
    plain = indexzoo.create(inner, device="cpu").build(keys, vals if values else None)
    q = np.concatenate([keys[:500], [99, -1, 1 << 25]])
    _agree(index, plain, q)
    assert len(index) == keys.shape[0]


@pytest.mark.parametrize("inner", ["sorted-array", "warpcore-hash"])
@pytest.mark.parametrize("through", ["shared memory", "comms"])
def test_a_batch_can_be_routed_and_answered_on_the_workers(
        column: Any, inner: str, through: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # what a GPU index does with a batch in memory (a slice sent to each worker, routed and
    # answered there, brought back once), made to run here on the CPU: through shared memory
    # where the workers share this host's (as here), else scattered and gathered by Dask
    from indexzoo.plugins.sharded import ShardedIndex, hostshm

    found: list[bool] = []
    same_memory = hostshm.same_memory
    monkeypatch.setattr(hostshm, "same_memory", lambda client: found.append(
        same_memory(client) if through == "shared memory" else False) or found[-1])
    keys, vals = column
    index = indexzoo.create("sharded", inner=inner, shards=3, device="cpu").build(keys, vals)
    plain = indexzoo.create(inner, device="cpu").build(keys, vals)
    monkeypatch.setattr(ShardedIndex, "_batches_on_workers", lambda self: True)
    q = np.concatenate([keys[:700], [99, -1, 1 << 25]])
    for out in ("count", "sum"):
        assert _same(index.point(q, out=out), plain.point(q, out=out)), out
    rowid = index.point(q, out="rowid").to_host().rowid  # any row of the key (99 has 5,000)
    hit = rowid != index.miss
    assert np.array_equal(hit, plain.point(q, out="count").to_host().count > 0)
    assert np.array_equal(keys[rowid[hit].astype(np.int64)], q[hit])
    if index.capabilities.range:
        for out in ("count", "sum"):
            assert _same(index.range(q, q + 1000, out=out), plain.range(q, q + 1000, out=out))
    assert found and set(found) == {through == "shared memory"}
    assert _same(index.point(q[:0], out="count"), plain.point(q[:0], out="count"))  # empty


def test_shared_memory_is_used_only_where_every_worker_sees_the_callers() -> None:
    from indexzoo.plugins.sharded import hostshm

    class Cluster:  # what client.run gives: each worker's answer
        def __init__(self, sees: list[bool]) -> None:
            self.sees = sees

        def run(self, fn: Any, *args: Any) -> dict[str, bool]:
            here = fn(*args)  # this process sees its own segment
            return {f"w{i}": here and s for i, s in enumerate(self.sees)}

    assert hostshm.same_memory(Cluster([True, True]))
    assert not hostshm.same_memory(Cluster([True, False]))  # one in another container
    assert not hostshm._holds("indexzoo-no-such-segment", b"token")


def test_a_dask_dataframe_column_and_parquet_files_build_alike(column: Any,
                                                               tmp_path: Any) -> None:
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    keys, values = column
    frame = dd.from_pandas(pd.DataFrame({"key": keys, "v": values}), npartitions=5)
    index = indexzoo.create("sharded", inner="sorted-array", shards=2, device="cpu")
    index.build(frame, frame["v"], columns=["key"])
    _check_against_memory(index, keys, values)
    paths = []
    for i, part in enumerate(np.array_split(keys, 4)):
        path = tmp_path / f"part{i}.parquet"
        pd.DataFrame({"key": part}).to_parquet(path)
        paths.append(str(path))
    from_files = indexzoo.create("sharded", inner="sorted-array", shards=2, device="cpu")
    from_files.build(paths, columns=["key"])
    _check_against_memory(from_files, keys, np.arange(keys.shape[0], dtype=np.uint64))


def test_a_distributed_build_refuses_a_missing_column_name(column: Any) -> None:
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = dd.from_pandas(pd.DataFrame({"key": column[0]}), npartitions=2)
    with pytest.raises(InvalidInput, match="columns"):
        indexzoo.create("sharded", device="cpu").build(frame)


# ---------------------------------------------------------------------- dask is optional
def test_importing_indexzoo_and_listing_indexes_does_not_import_dask() -> None:
    code = ("import sys, indexzoo; indexzoo.available(); "
            "assert 'dask' not in sys.modules and 'distributed' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_dask_making_a_sharded_index_names_the_extra_to_install() -> None:
    code = ("import sys; sys.modules['distributed'] = None; import indexzoo\n"
            "try:\n    indexzoo.create('sharded', device='cpu')\n"
            "except indexzoo.IndexZooError as exc:\n    print(type(exc).__name__, exc)\n")
    got = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert "MissingDependency" in got
    assert "pip install 'dask>=2024.1' 'distributed>=2024.1'" in got  # both are needed


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int64])
def test_routing_on_the_gpu_sends_each_lookup_where_numpy_does(dtype: Any) -> None:
    """The GPU's routing kernels against the NumPy routing, at both ends of the dtype."""
    import cupy

    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    q = rng.integers(info.min, info.max, 200_000, dtype=dtype, endpoint=True)
    q[:4] = [info.min, info.max, 0, 1]
    for shards in (1, 2, 3, 7):
        lo = np.sort(rng.choice(q, shards))
        hi = np.concatenate([lo[1:], [info.max]]).astype(dtype)
        lo[0] = info.min
        for scheme in ("hash", "range"):
            want = partition.route_points(scheme, q, shards, lo, hi, q[:0])
            got = partition.route_points(scheme, cupy.asarray(q), shards, lo, hi, q[:0])
            for s in range(shards):
                assert np.array_equal(cupy.asnumpy(got[s]), want[s]), (scheme, shards, s)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_the_two_pass_split_gives_numpys_positions_and_pieces(dtype: Any, monkeypatch) -> None:
    """route_kernels.split: for every shard the positions NumPy's routing gives, in order,
    and the lookups at them; boundaries held by two shards, empty shards, lookups marked
    outside, chunks that end inside a tile and chunks of no lookup; blocks that walk one
    tile or several (the cap on blocks lowered), and a chunk that starts off a 16-byte
    boundary (a slice: the count pass's plain loads instead of its 16-byte ones)."""
    import cupy

    from indexzoo.plugins.sharded import route_kernels

    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    for n in (0, 1, 2047, 2049, 4095, 4097, 300_001):  # tiles of 4,096 lookups
        q = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        q[:min(n, 4)] = [info.min, info.max, 0, 1][:min(n, 4)]
        outside = rng.random(n) < 0.05
        on_gpu = cupy.asarray(q)
        off_boundary = cupy.asarray(np.concatenate([q[:1], q]))[1:]
        for shards in range(2, 9):  # (the kernels are compiled for each count)
            cuts = np.sort(rng.choice(q, shards) if n else np.zeros(shards, dtype))
            lo = cuts.copy()
            lo[0] = info.min
            hi = np.concatenate([cuts[1:], [info.max]]).astype(dtype)  # a cut in two shards
            lo[-1], hi[-1] = (info.max, info.min) if shards == 8 else (lo[-1], hi[-1])  # empty
            for scheme, bounds in (("range", (lo, hi)), ("hash", (None, None))):
                for out in (None, outside):
                    want = partition.route_points(scheme, q, shards, lo, hi, q[:0])
                    if out is not None:
                        want = [idx[~out[idx]] for idx in want]
                    for most, chunk in ((None, on_gpu), (3, on_gpu), (3, off_boundary)):
                        monkeypatch.setattr(route_kernels, "_MOST_BLOCKS", most)
                        got = route_kernels.split(chunk, shards, *bounds,
                                                  None if out is None else cupy.asarray(out))
                        assert len(got) == shards
                        for s, (idx, piece) in enumerate(got):
                            assert idx.dtype == np.int32  # positions of a chunk under 2^31
                            assert np.array_equal(cupy.asnumpy(idx), want[s]), (n, shards, s)
                            assert np.array_equal(cupy.asnumpy(piece), q[want[s]])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.uint32, np.int64, np.uint64])
def test_placing_answers_adds_them_as_numpy_does_wrapping_included(dtype: Any) -> None:
    """route_kernels.place, and combine on the GPU for counts and sums: shards asked the same
    lookup add up; sums wrap at 2^64."""
    import cupy

    from indexzoo.plugins.sharded import route_kernels
    from indexzoo.plugins.sharded.dask_lookups import combine

    rng = np.random.default_rng(3)
    q = 100_003
    asked = [(0, np.sort(rng.choice(q, 60_000, replace=False))),
             (1, np.sort(rng.choice(q, 70_000, replace=False))), (2, None)]
    top = np.iinfo(dtype).max
    parts = [rng.integers(0, top, 60_000, dtype=dtype, endpoint=True),
             rng.integers(0, top, 70_000, dtype=dtype, endpoint=True),
             rng.integers(0, top, q, dtype=dtype, endpoint=True)]
    want = np.zeros(q, dtype=dtype)
    with np.errstate(over="ignore"):
        for (_, idx), part in zip(asked, parts, strict=True):
            want[slice(None) if idx is None else idx] += part
    for positions in (np.int32, np.int64):  # split's positions, and any others
        got = cupy.zeros(q, dtype=dtype)
        for (_, idx), part in zip(asked, parts, strict=True):
            if idx is not None:
                route_kernels.place(got, cupy.asarray(idx, dtype=positions), cupy.asarray(part))
            else:
                got += cupy.asarray(part)
        assert np.array_equal(cupy.asnumpy(got), want)
    on_gpu = [(s, None if idx is None else cupy.asarray(idx)) for s, idx in asked]
    sums = combine("sum", q, on_gpu, [cupy.asarray(p.astype(np.uint64)) for p in parts],
                   np.dtype(np.uint64), xp=cupy)
    assert np.array_equal(cupy.asnumpy(sums),
                          combine("sum", q, asked, [p.astype(np.uint64) for p in parts],
                                  np.dtype(np.uint64)))
    counts = [rng.integers(0, 3, p.shape[0], dtype=np.uint32) for p in parts]
    assert np.array_equal(
        cupy.asnumpy(combine("count", q, on_gpu, [cupy.asarray(c) for c in counts],
                             np.dtype(dtype), xp=cupy)),
        combine("count", q, asked, counts, np.dtype(dtype)))


def test_a_letter_names_some_arrays_and_some_items_of_a_mailbox() -> None:
    """The bookkeeping of a mailbox letter (the copies themselves need GPUs: the sharded
    conformance run on two GPUs covers them)."""
    from indexzoo.plugins.sharded.mailbox import Letter

    letter = Letter("host", 1, "pieces|1", 3, b"h", ((0, (10,), "<u4"), (256, (10,), "<u8")))
    assert letter.some([1]).parts == ((256, (10,), "<u8"),)
    assert letter.items(2, 5).parts == ((8, (3,), "<u4"), (256 + 16, (3,), "<u8"))
    assert letter.items(8, 20).parts == ((32, (2,), "<u4"), (256 + 64, (2,), "<u8"))
    assert letter.items(12, 20).parts[0][1] == (0,)
    assert (letter.items(2, 5).generation, letter.items(2, 5).name) == (3, "pieces|1")
