"""A worker lost while a batch is in flight: the lookup raises ShardLost and returns nothing
(never a partial answer), later lookups say the same, and a build publishes a working index
again. Runs on a cluster of its own, since it kills one of its workers."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo.plugins.sharded import ShardedIndex, ShardLost


@pytest.fixture
def doomed_client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def _kill_a_worker_once_lookups_run(client: Any) -> None:
    """SIGKILL the process of a worker as soon as it is answering a shard's lookup."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        busy = {w: tasks for w, tasks in client.processing().items()
                if any("lookup_shard" in str(t) for t in tasks)}
        if busy:
            pids = client.run(os.getpid, workers=list(busy))
            os.kill(next(iter(pids.values())), signal.SIGKILL)
            return
        time.sleep(0.005)
    raise AssertionError("no shard lookup was seen running")


def test_a_worker_killed_mid_batch_gives_shard_lost_never_a_partial_answer(
        doomed_client: Any) -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 1 << 20, 400_000).astype(np.uint32)
    q = rng.integers(0, 1 << 20, 4_000_000).astype(np.uint32)
    index = ShardedIndex({"inner": "sorted-array", "shards": 2}, device="cpu",
                         client=doomed_client).build(keys)
    want = indexzoo.create("sorted-array", device="cpu").build(keys).point(q, out="count").count
    assert np.array_equal(index.point(q[:1000], out="count").count, want[:1000])

    got: dict[str, Any] = {}

    def lookup() -> None:
        try:
            got["result"] = index.point(q, out="count")
        except BaseException as exc:
            got["error"] = exc

    caller = threading.Thread(target=lookup)
    caller.start()
    _kill_a_worker_once_lookups_run(doomed_client)
    caller.join(120)
    assert not caller.is_alive(), "the lookup hung after its worker died"
    assert "result" not in got, "a lookup answered although a shard's worker died under it"
    assert isinstance(got["error"], ShardLost), repr(got.get("error"))
    assert "build (or load) the index again" in str(got["error"])
    with pytest.raises(ShardLost):  # the index stays unusable: no answer from a lost shard
        index.point(q[:10], out="count")

    doomed_client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker
    index.build(keys)
    assert np.array_equal(index.point(q, out="count").count, want)
