"""A worker lost while a batch is in flight: with one copy of each shard the lookup raises
ShardLost and returns nothing (never a partial answer), later lookups say the same, and a
build publishes a working index again; with two copies the lookup answers in full from the
surviving copies, the lost ones are made again in the background so that a second loss is
survived too, and losing every copy of a shard is ShardLost. A worker lost during a build:
ShardLost, whatever Dask raised, and nothing published. Runs on a cluster of its own, since
it kills its workers."""

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


def _kill_a_worker_once_lookups_run(client: Any) -> str:
    """SIGKILL the process of a worker as soon as it is answering a shard's lookup; its
    address."""
    from dask.utils import key_split

    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        busy = {w: tasks for w, tasks in client.processing().items()
                if any(key_split(t) in ("lookup_scattered", "ask", "answer_chunk")
                       for t in tasks)}
        if busy:
            pids = client.run(os.getpid, workers=list(busy)[:1])
            address, pid = next(iter(pids.items()))
            os.kill(pid, signal.SIGKILL)
            return address
    raise AssertionError("no shard lookup was seen running")


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_worker_killed_mid_batch_never_gives_a_partial_answer(
        doomed_client: Any, replicas: int) -> None:
    """One copy: ShardLost, then and later. Two copies: the whole answer, from the copies
    left, and the lost copies made again on the worker the nanny restarts."""
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 1 << 20, 400_000).astype(np.uint32)
    q = rng.integers(0, 1 << 20, 4_000_000).astype(np.uint32)
    index = ShardedIndex({"inner": "sorted-array", "shards": 2, "replicas": replicas},
                         device="cpu", client=doomed_client).build(keys)
    want = _count(keys, q, q)
    assert np.array_equal(index.point(q[:1000], out="count").count, want[:1000])

    got: dict[str, Any] = {}

    def lookup() -> None:
        try:
            got["result"] = index.point(q, out="count")
        except BaseException as exc:
            got["error"] = exc

    caller = threading.Thread(target=lookup)
    caller.start()
    killed = _kill_a_worker_once_lookups_run(doomed_client)
    caller.join(HANG_GUARD_S)
    assert not caller.is_alive(), "the lookup hung after its worker died"
    if replicas > 1:
        assert "error" not in got, f"a lookup with a copy left failed: {got.get('error')!r}"
        assert np.array_equal(got["result"].count, want)
        _wait_until_every_shard_has_its_copies(index, doomed_client)
        assert all(killed not in w for w in index.shard_copies()), index.shard_copies()
        _answers_right(index, keys, rng)
        return
    assert "result" not in got, "a lookup answered although a shard's worker died under it"
    assert isinstance(got["error"], ShardLost), repr(got.get("error"))
    assert "build (or load) the index again" in str(got["error"])
    with pytest.raises(ShardLost):  # the index stays unusable: no answer from a lost shard
        index.point(q[:10], out="count")

    doomed_client.wait_for_workers(2, timeout=HANG_GUARD_S)  # the nanny restarts the killed worker
    index.build(keys)
    assert np.array_equal(index.point(q, out="count").count, want)


def _count(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The NumPy oracle: matches of each inclusive range [lo, hi] among ``keys``."""
    s = np.sort(keys)
    return np.maximum(np.searchsorted(s, hi, side="right") - np.searchsorted(s, lo, side="left"),
                      0)


def _answers_right(index: Any, keys: np.ndarray, rng: np.random.Generator) -> None:
    """Point and range lookups in every out mode, and a Dask array of lookups, agree with
    NumPy over ``keys`` (whose values are the rowIDs)."""
    import dask.array as da

    q = np.concatenate([rng.choice(keys, 3000), rng.integers(0, 1 << 21, 1000)]).astype(
        keys.dtype)
    lo = rng.integers(0, 1 << 20, 2000).astype(keys.dtype)
    hi = (lo + rng.integers(0, 2000, lo.shape[0])).astype(keys.dtype)
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    for kind, args in (("point", (q,)), ("range", (lo, hi))):
        a, b = (q, q) if kind == "point" else (lo, hi)
        first, last = np.searchsorted(s, a, side="left"), np.searchsorted(s, b, side="right")
        n = np.maximum(last - first, 0)
        ask = index.point if kind == "point" else index.range
        assert np.array_equal(ask(*args, out="count").to_host().count, n), kind
        sums = [int(order[f:t].astype(np.uint64).sum()) for f, t in zip(first, last, strict=True)]
        assert np.array_equal(ask(*args, out="sum").to_host().sum,
                              np.array(sums, dtype=np.uint64)), kind
        rowid = ask(*args, out="rowid").to_host().rowid
        hit = rowid != index.miss
        assert np.array_equal(hit, n > 0), kind
        got = keys[rowid[hit].astype(np.int64)]
        assert np.all((got >= a[hit]) & (got <= b[hit])), kind
        res = ask(*args, out="rowids").to_host()
        for i in range(0, len(a), 97):
            assert np.array_equal(np.sort(res.matches(i)),
                                  np.sort(order[first[i]:max(first[i], last[i])])), (kind, i)
    dq = da.from_array(q, chunks=1000)
    got_dask = index.point(dq, out="count").count.compute(scheduler=index.client)
    assert np.array_equal(got_dask, _count(keys, q, q))


def _kill(client: Any, workers: list[str]) -> None:
    """SIGKILL the processes of ``workers``; return once the scheduler has seen them go."""
    pids = client.run(os.getpid, workers=workers)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + HANG_GUARD_S
    while set(workers) & set(client.scheduler_info()["workers"]):
        assert time.monotonic() < deadline, "the scheduler never saw the workers go"
        time.sleep(0.05)


def _wait_until_every_shard_has_its_copies(index: Any, client: Any) -> None:
    """Wait (a hang guard, not a time limit) for the nanny to restart the killed workers and
    for re-replication to give every shard its copies again, on distinct live workers."""
    client.wait_for_workers(2, timeout=HANG_GUARD_S)
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        alive = set(client.scheduler_info()["workers"])
        held = index.shard_copies()
        if all(len(set(w)) == index.params.replicas and set(w) <= alive for w in held):
            return
        assert time.monotonic() < deadline, f"the copies were never made again: {held}"
        time.sleep(0.1)


def test_two_copies_survive_a_second_loss_after_re_replication_and_losing_both_is_shard_lost(
        doomed_client: Any) -> None:
    import dask.array as da

    rng = np.random.default_rng(4)
    keys = rng.integers(0, 1 << 20, 60_000).astype(np.uint32)
    index = ShardedIndex({"inner": "btree", "shards": 3, "replicas": 2}, device="cpu",
                         client=doomed_client).build(keys)
    held = index.shard_copies()
    assert all(len(set(w)) == 2 for w in held), held

    for _ in range(2):  # a loss; re-replication; then a second loss, answered by the new copies
        _kill(doomed_client, [index.shard_copies()[0][0]])
        _answers_right(index, keys, rng)
        _wait_until_every_shard_has_its_copies(index, doomed_client)
    fp = index.memory_footprint()
    assert {k.split(".")[1] for k in fp.breakdown if k != "routing"} == {"copy0", "copy1"}

    _kill(doomed_client, sorted(doomed_client.scheduler_info()["workers"]))  # every copy
    with pytest.raises(ShardLost, match=r"build \(or load\) the index again"):
        index.point(keys[:100], out="count")
    with pytest.raises(ShardLost):  # and so it stays, on every path
        index.range(keys[:10], keys[:10], out="rowids")
    with pytest.raises(ShardLost):
        index.point(da.from_array(keys[:10], chunks=5), out="count")


def _computed_while_a_worker_is_killed(client: Any, answer: Any) -> dict[str, Any]:
    """Compute the Dask ``answer`` in a thread while a worker answering it is SIGKILLed:
    ``{"result": ...}`` or ``{"error": ...}``; fails if the computation hangs."""
    got: dict[str, Any] = {}

    def compute() -> None:
        try:
            got["result"] = answer.compute(scheduler=client)
        except BaseException as exc:
            got["error"] = exc

    caller = threading.Thread(target=compute)
    caller.start()
    _kill_a_worker_once_lookups_run(client)
    caller.join(HANG_GUARD_S)
    assert not caller.is_alive(), "the Dask answer hung after a worker died"
    return got


def _dask_counts_while_a_worker_is_killed(client: Any, seed: int, replicas: int) -> tuple[
        np.ndarray, np.ndarray, ShardedIndex, dict[str, Any]]:
    """Keys, lookups, a two-shard index of ``replicas`` copies, and the counts of the lookups
    as a Dask array computed while a worker is killed
    (:func:`_computed_while_a_worker_is_killed`)."""
    import dask.array as da

    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 1 << 20, 400_000).astype(np.uint32)
    q = rng.integers(0, 1 << 20, 4_000_000).astype(np.uint32)
    index = ShardedIndex({"inner": "sorted-array", "shards": 2, "replicas": replicas},
                         device="cpu", client=client).build(keys)
    got = _computed_while_a_worker_is_killed(
        client, index.point(da.from_array(q, chunks=1_000_000), out="count").count)
    return keys, q, index, got


@pytest.mark.filterwarnings("ignore:Sending large graph")  # the lookups, made here in memory
def test_two_copies_answer_a_dask_array_whose_worker_is_killed_while_it_is_computed(
        doomed_client: Any) -> None:
    keys, q, _, got = _dask_counts_while_a_worker_is_killed(doomed_client, 5, replicas=2)
    assert "error" not in got, f"a Dask answer with a copy left failed: {got.get('error')!r}"
    assert np.array_equal(got["result"], _count(keys, q, q))


@pytest.mark.filterwarnings("ignore:Sending large graph")  # the lookups, made here in memory
def test_one_copy_a_dask_array_whose_worker_is_killed_fails_whole_and_then_shard_lost(
        doomed_client: Any) -> None:
    # the chunks are answered worker to worker (ShardServer actors): a worker lost under them
    # fails the answer, never gives part of one, and the loss is ShardLost from then on
    keys, q, index, got = _dask_counts_while_a_worker_is_killed(doomed_client, 6, replicas=1)
    if "result" in got:  # every chunk was answered before the worker died: then all of it
        assert np.array_equal(got["result"], _count(keys, q, q))
    with pytest.raises(ShardLost):
        index.point(q[:10], out="count")


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


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("when", ["scatter", "submit"])
def test_a_worker_killed_during_a_build_gives_shard_lost_and_publishes_nothing(
        doomed_client: Any, when: str, replicas: int) -> None:
    keys = np.random.default_rng(1).integers(0, 1 << 20, 100_000).astype(np.uint32)
    killer = KillsOnBuild(doomed_client, when)
    index = ShardedIndex({"inner": "sorted-array", "shards": 2, "replicas": replicas},
                         device="cpu", client=killer)
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
