"""Which cluster a sharded index runs on when the caller says nothing (the script's own default
client, else a local cluster a plain script can start), how a batch from the caller reaches
the shards (scattered, never inside the task graph), and lookups given as a Dask array
(answered on the workers, with a Dask array)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexzoo

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


@pytest.fixture(autouse=True)
def _sharded_on_the_test_cluster() -> None:
    """Not the folder's shared cluster set with use_client: these tests are about the client
    a sharded index finds by itself."""


@pytest.fixture(scope="module")
def default_client() -> Iterator[Any]:
    """What a script does: a Client of its own, made the default one (threads: cheap here)."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=":0")
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _counts(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The oracle: matches of each inclusive range [lo, hi] among ``keys``."""
    s = np.sort(keys)
    return np.searchsorted(s, hi, side="right") - np.searchsorted(s, lo, side="left")


def test_a_scripts_default_client_is_used_and_no_cluster_is_started(
        default_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_cluster(*args: object, **kwargs: object) -> None:
        raise AssertionError("a local cluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    index = indexzoo.create("sharded", inner="btree", shards=3, device="cpu")
    assert index.client is default_client


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_dask_array_of_lookups_is_answered_with_a_dask_array_of_its_chunks(
        default_client: Any, replicas: int) -> None:
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 50_000, 200_000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="btree", shards=3, replicas=replicas,
                            device="cpu").build(keys)
    q = rng.integers(0, 60_000, 100_000).astype(np.uint32)
    queries = da.from_array(q, chunks=30_000)

    count = index.point(queries, out="count").count
    assert isinstance(count, da.Array) and count.chunks == queries.chunks
    assert np.array_equal(count.compute(), _counts(keys, q, q))

    rowid = index.point(queries, out="rowid").rowid.compute()
    hit = rowid != index.miss
    assert np.array_equal(hit, _counts(keys, q, q) > 0)
    assert np.array_equal(keys[rowid[hit].astype(np.int64)], q[hit])
    assert np.array_equal(index.point(queries, out="sum").to_host().sum,
                          index.point(q, out="sum").to_host().sum)

    lo = rng.integers(0, 60_000, 100_000).astype(np.uint32)
    hi = lo + rng.integers(0, 100, lo.shape[0]).astype(np.uint32)
    lo[:10] = hi[:10] + 1  # inverted ranges are empty
    got = index.range(da.from_array(lo, chunks=25_000), da.from_array(hi, chunks=40_000),
                      out="count").count
    assert got.chunks == ((25_000,) * 4,)
    assert np.array_equal(got.compute(), np.maximum(_counts(keys, lo, hi), 0))


def test_a_persisted_dask_array_is_answered_by_one_task_a_chunk_and_nothing_more(
        default_client: Any) -> None:
    """Its chunks are used as the futures they are, the chunks' tasks are the answer's
    chunks: a call and the answer's computation run those four tasks and Dask's final
    concatenation."""
    from dask.utils import key_split

    rng = np.random.default_rng(11)
    keys = rng.integers(0, 50_000, 100_000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="sorted-array", shards=2,
                            device="cpu").build(keys)
    q = rng.integers(0, 60_000, 100_000).astype(np.uint32)
    queries = default_client.persist(da.from_array(q, chunks=25_000))
    distributed.wait(queries)
    # The first call puts a ShardServer on each worker. A call submits its tasks at once, so
    # its answer is computed here: a task of it still running would enter the stream below.
    index.point(queries, out="count").count.compute()
    with distributed.get_task_stream(default_client) as stream:
        got = index.point(queries, out="count").count.compute()
    assert np.array_equal(got, _counts(keys, q, q))
    ran = sorted(key_split(t["key"]) for t in stream.data)
    assert [t for t in ran if not t.startswith("finalize")] == ["answer_chunk"] * 4, ran
    assert len(ran) == 5, ran


def test_dask_lookups_on_a_hash_sharded_index_meet_heavy_keys_and_impossible_keys(
        default_client: Any) -> None:
    rng = np.random.default_rng(3)
    keys = np.concatenate([rng.integers(0, 1 << 32, 30_000, dtype=np.uint64),
                           np.full(30_000, 12345, dtype=np.uint64)]).astype(np.uint32)
    index = indexzoo.create("sharded", inner="warpcore-hash", shards=3, device="cpu")
    index.build(keys)
    assert index.state.heavy.shape[0] == 1  # 12345 is dealt out over every shard
    q = np.concatenate([keys[:1000].astype(np.int64), [12345, -1, 1 << 40, 7]])
    got = index.point(da.from_array(q, chunks=300), out="count").count.compute()
    want = _counts(keys.astype(np.int64), q, q)
    assert np.array_equal(got, want) and got[-4] == 30_000 and got[-3] == got[-2] == 0


def test_a_dask_array_asks_rowids_and_bitmaps_to_be_computed_first(
        default_client: Any) -> None:
    index = indexzoo.create("sharded", shards=2, device="cpu").build(
        np.arange(100, dtype=np.uint32))
    with pytest.raises(indexzoo.InvalidInput, match="compute them first"):
        index.point(da.arange(10, dtype=np.uint32, chunks=5), out="rowids")


def test_a_batch_from_the_client_is_scattered_not_embedded_in_the_task_graph(
        default_client: Any) -> None:
    import dask

    rng = np.random.default_rng(5)
    keys = rng.integers(0, 1 << 30, 100_000).astype(np.uint32)
    index = indexzoo.create("sharded", inner="sorted-array", shards=2, device="cpu")
    index.build(keys)
    q = rng.integers(0, 1 << 30, 1 << 20).astype(np.uint32)  # 4 MiB of lookups
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "64kB"}), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = index.point(q, out="count").to_host().count
    assert not [w for w in caught if "large graph" in str(w.message)]
    assert np.array_equal(got, _counts(keys, q, q))


# ---------------------------------------------------------------------- scripts
_SCRIPT = """
import numpy as np
import indexzoo

{guard}
    keys = np.arange(0, 2000, 2, dtype=np.uint32)
    index = indexzoo.create("sharded", inner="btree", shards=2, device="cpu",
                            cluster={{"n_workers": 2}}).build(keys)
    print("answers", index.point(np.array([0, 1, 1998], dtype=np.uint32), out="count")
          .to_host().count.tolist(), "processes" if "tcp" in index.client.scheduler.address
          else "threads")
"""


def _run_script(tmp_path: Path, guard: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(_SCRIPT.format(guard=guard)))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def test_a_plain_script_without_the_main_guard_works_on_threads_and_says_so(
        tmp_path: Path) -> None:
    done = _run_script(tmp_path, "if True:")
    assert done.returncode == 0, done.stderr
    assert "answers [1, 0, 1] threads" in done.stdout
    notes = [line for line in done.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(notes) == 1 and 'if __name__ == "__main__":' in notes[0], done.stderr
    assert "bootstrapping" not in done.stderr


def test_a_guarded_script_gets_worker_processes_and_exits_quietly(tmp_path: Path) -> None:
    done = _run_script(tmp_path, 'if __name__ == "__main__":')
    assert done.returncode == 0, done.stderr
    assert "answers [1, 0, 1] processes" in done.stdout
    assert "lose already computed" not in done.stderr, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and " INFO " not in done.stderr, done.stderr
