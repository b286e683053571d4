"""A worker lost while a batch is in flight: the lookup raises ShardLost and returns nothing
(never a partial answer), later lookups say the same, and a build publishes a working index
again. A worker lost during a build: ShardLost, whatever Dask raised, and nothing published.
Runs on a cluster of its own, since it kills one of its workers."""

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
from indexzoo import InvalidInput
from indexzoo.plugins.sharded import ShardedIndex, ShardLost
from indexzoo.plugins.sharded.lost import losing_workers

#: Hang guards, not time limits (a worker restarted, a death noticed, a lookup seen running,
#: the lookup's answer): long enough that a busy machine gives the verdict an idle one does.
HANG_GUARD_S = 300


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
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        busy = {w: tasks for w, tasks in client.processing().items()
                if any("lookup_scattered" in str(t) for t in tasks)}
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
    caller.join(HANG_GUARD_S)
    assert not caller.is_alive(), "the lookup hung after its worker died"
    assert "result" not in got, "a lookup answered although a shard's worker died under it"
    assert isinstance(got["error"], ShardLost), repr(got.get("error"))
    assert "build (or load) the index again" in str(got["error"])
    with pytest.raises(ShardLost):  # the index stays unusable: no answer from a lost shard
        index.point(q[:10], out="count")

    doomed_client.wait_for_workers(2, timeout=HANG_GUARD_S)  # the nanny restarts the killed worker
    index.build(keys)
    assert np.array_equal(index.point(q, out="count").count, want)


class KillsOnBuild:
    """A client that SIGKILLs the worker the first shard's build goes to, ``when`` its data
    has been scattered there (``"scatter"``) or just before its build is submitted
    (``"submit"``): a worker lost in the middle of a build, at a point fixed in advance."""

    def __init__(self, client: Any, when: str) -> None:
        self._client, self._when, self.killed = client, when, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _kill(self, workers: list[str]) -> None:
        pids = self._client.run(os.getpid, workers=workers)
        os.kill(next(iter(pids.values())), signal.SIGKILL)
        self.killed = True
        deadline = time.monotonic() + HANG_GUARD_S  # until the scheduler has noticed
        while time.monotonic() < deadline and workers[0] in \
                self._client.scheduler_info()["workers"]:
            time.sleep(0.05)

    def scatter(self, data: Any, workers: list[str], **kwargs: Any) -> Any:
        got = self._client.scatter(data, workers=workers, **kwargs)
        if self._when == "scatter" and not self.killed:
            self._kill(workers)
        return got

    def submit(self, fn: Any, *args: Any, workers: list[str] | None = None,
               **kwargs: Any) -> Any:
        if (self._when == "submit" and not self.killed and workers
                and getattr(fn, "__name__", "") == "build_shard"):
            self._kill(workers)
        return self._client.submit(fn, *args, workers=workers, **kwargs)


@pytest.mark.parametrize("when", ["scatter", "submit"])
def test_a_worker_killed_during_a_build_gives_shard_lost_and_publishes_nothing(
        doomed_client: Any, when: str) -> None:
    keys = np.random.default_rng(1).integers(0, 1 << 20, 100_000).astype(np.uint32)
    killer = KillsOnBuild(doomed_client, when)
    index = ShardedIndex({"inner": "sorted-array", "shards": 2}, device="cpu", client=killer)
    with pytest.raises(ShardLost, match="the build lost a worker of the sharded index"):
        index.build(keys)
    assert killer.killed and not index.is_built

    doomed_client.wait_for_workers(2, timeout=HANG_GUARD_S)  # the nanny restarts the killed worker
    want = indexzoo.create("sorted-array", device="cpu").build(keys).point(keys[:500],
                                                                            out="count")
    got = index.build(keys).point(keys[:500], out="count")
    assert np.array_equal(got.count, want.count)


@pytest.mark.parametrize("error", [KeyError("shard-0"), TimeoutError("no answer"),
                                   ConnectionResetError("reset"), RuntimeError("Dask said so")])
def test_whatever_dask_raises_for_a_lost_worker_is_shard_lost(error: Exception) -> None:
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    for raised in (error, CommClosedError("in <TCP ...>: Stream is closed"),
                   FutureCancelledError("build_shard-1", "lost dependencies")):
        lost = pytest.raises(ShardLost, match=f"the load lost a worker .*{type(raised).__name__}")
        with lost, losing_workers("the load"):
            raise raised


class _Erred:
    """A future whose task raised ``exc`` itself."""

    status = "error"

    def __init__(self, exc: BaseException) -> None:
        self._exc = exc

    def exception(self, timeout: float | None = None) -> BaseException:
        return self._exc


def test_errors_of_the_index_or_of_a_task_itself_pass_unchanged() -> None:
    refused = pytest.raises(InvalidInput, match="a partition holds null keys")
    with refused, losing_workers("the build"):
        raise InvalidInput("a partition holds null keys")
    bug = ValueError("a bug in the inner index")
    passed = pytest.raises(ValueError, match="a bug in the inner index")
    with passed, losing_workers("the build", [_Erred(bug)]):
        raise ValueError("a bug in the inner index")
