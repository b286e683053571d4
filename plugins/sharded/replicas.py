"""The copies of each shard: where they live, which are alive, and putting lost ones back.

With ``replicas = R`` each shard's inner index lives on ``R`` distinct workers, each copy its
own Dask future (its own key) pinned to its worker. :class:`Copies` is the table the client
keeps of them: per shard, its live copies in the order lookups prefer them. Shard ``s``'s
copies go to workers ``s, s + 1, ..., s + R - 1`` (modulo the ``W`` workers, in their sorted
order), so its first copy is where a one-copy index keeps the shard.

A copy is lost when its worker has left the cluster (a worker the nanny restarts comes back
under another address) or its future is no longer held. Lookups :meth:`~Copies.drop_lost`
when Dask fails them, then answer from the copies left; a shard with no copy left is lost for
good (:class:`~.lost.ShardLost`, as with one copy: nothing on the client can rebuild it).

Re-replication (:meth:`Copies.repair`) runs on a thread of its own: each shard short of
copies gets new ones on live workers that hold none of it (the least loaded first), each made
by packing a surviving copy into bytes on its worker and unpacking them on the new worker
(:func:`copy_shard_to`), so Dask moves the shard worker to worker, never through the client.
Lookups never wait for it; they use the copies that are live when they start, and a new
copy joins the table once it is made.

A task pinned to a worker that dies before it runs would wait for that worker forever (Dask
keeps it as ``no-worker``), unless its input was scattered to that worker alone, which dies
with it and cancels the task (what lookups do). :func:`wait_pinned` waits for copies being
made and gives up on those whose worker is gone.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import worker

__all__ = ["Copies", "Copy", "WorkerGone", "alive_workers", "copy_shard_to", "placement",
           "wait_pinned"]

#: How long re-replication waits for a worker to put a missing copy on (a cluster with fewer
#: live workers than ``replicas``) before it stops; a lookup, or the next loss, starts it again.
REPAIR_PATIENCE_S = 600.0

#: How often a wait on pinned tasks looks at their statuses.
TICK_S = 0.02

#: How often a wait on pinned tasks asks the scheduler whether their workers are still there.
POLL_S = 0.5


@dataclass(frozen=True)
class Copy:
    """One copy of a shard: the worker it lives on and its future there."""

    worker: str
    future: Any


class WorkerGone(Exception):
    """A task was pinned to a worker that left the cluster before the task finished."""


def placement(shards: int, replicas: int, workers: Sequence[str]) -> list[list[str]]:
    """The workers of each shard's copies: shard ``s`` on ``workers[(s + r) % W]`` for
    ``r < replicas`` (distinct, since ``replicas <= W``)."""
    w = len(workers)
    return [[workers[(s + r) % w] for r in range(replicas)] for s in range(shards)]


def alive_workers(client: Any) -> set[str]:
    """The addresses of the workers the scheduler knows now (one short round trip)."""
    return set(client.nthreads())


def copy_shard_to(client: Any, source: Copy, target: str) -> tuple[Any, Any]:
    """A new copy of ``source``'s shard on ``target``: the future of the new copy, and that of
    the packed shard it is made from (hold it until the copy is made). A task pinned to the
    source's worker packs the shard into bytes; a task pinned to ``target`` takes them as
    input (Dask moves them worker to worker) and unpacks them. The source's own key never
    leaves its worker, so no worker holds a replica of another's copy."""
    packed = client.submit(worker.pack_shard, source.future, workers=[source.worker],
                           pure=False)
    return client.submit(worker.unpack_shard, packed, workers=[target], pure=False), packed


def wait_pinned(client: Any, pinned: Sequence[tuple[Any, Sequence[str]]]) -> None:
    """Wait until every ``(future, workers)`` task has finished (or failed: its error is
    raised by whoever gathers it); :class:`WorkerGone` once one of the workers a task that has
    not finished is pinned to (or needs, for its inputs) has left the cluster (it would wait
    for that worker forever)."""
    last = time.monotonic()
    while any(f.status == "pending" for f, _ in pinned):
        time.sleep(TICK_S)  # statuses come from the scheduler without asking
        if time.monotonic() - last < POLL_S:
            continue
        last = time.monotonic()
        alive = alive_workers(client)
        for future, workers in pinned:
            gone = [w for w in workers if w not in alive]
            if gone and future.status == "pending":
                raise WorkerGone(f"worker {gone[0]} left the cluster before the task "
                                 f"{future.key} finished")


class Copies:
    """Per shard, its live copies (the first is the one lookups use); thread-safe.

    ``replicas``: how many copies each shard should have. Copies are dropped once found lost
    and, with ``replicas > 1``, made again in the background by :meth:`repair`."""

    def __init__(self, copies: list[list[Copy]], replicas: int) -> None:
        self._lock = threading.Lock()
        self._copies = [list(c) for c in copies]
        self.replicas = int(replicas)
        self._lost: list[str] = []  # lost shards (or a loss no shard could be named for)
        self._repairer: threading.Thread | None = None

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._copies)

    def pick(self, s: int) -> Copy | None:
        """The copy of shard ``s`` a lookup uses (None: the shard is lost)."""
        with self._lock:
            got = self._copies[s]
            return got[0] if got else None

    def of(self, s: int) -> list[Copy]:
        """Shard ``s``'s live copies, in the order lookups prefer them."""
        with self._lock:
            return list(self._copies[s])

    def workers(self) -> list[list[str]]:
        """Per shard, the workers holding its live copies."""
        with self._lock:
            return [[c.worker for c in copies] for copies in self._copies]

    def lost(self) -> list[str]:
        """What is lost for good: shards without a copy (named with their last worker), or a
        loss that no shard could be named for. Empty while every shard has a copy."""
        with self._lock:
            return list(self._lost)

    # ------------------------------------------------------------------ losing copies
    def lose_unnamed(self, what: str) -> None:
        """Note a loss Dask reported without one copy to blame: lookups raise from now on."""
        with self._lock:
            self._lost.append(what)

    def drop_lost(self, client: Any) -> list[tuple[int, str]]:
        """Drop every copy whose worker has left the cluster or whose future is no longer
        held; the ``(shard, worker)`` of each one dropped. Starts re-replication when a shard
        is short of copies and still has one."""
        dropped = self._drop(alive_workers(client))
        self.repair(client)
        return dropped

    def _drop(self, alive: set[str]) -> list[tuple[int, str]]:
        dropped: list[tuple[int, str]] = []
        with self._lock:
            for s, copies in enumerate(self._copies):
                keep = [c for c in copies if c.worker in alive
                        and c.future.status not in ("lost", "cancelled", "error")]
                gone = [c for c in copies if c not in keep]
                dropped += [(s, c.worker) for c in gone]
                if gone and not keep:
                    self._lost.append(f"shard {s} (on {gone[-1].worker})")
                self._copies[s] = keep
        return dropped

    # ------------------------------------------------------------------ re-replication
    def _short(self) -> bool:
        """Whether a shard has fewer copies than it should, and one to copy from (the lock
        held)."""
        return any(0 < len(c) < self.replicas for c in self._copies)

    def repair(self, client: Any) -> None:
        """Make the missing copies again, on a background thread (one at a time; it runs
        while a shard is short of copies, waiting up to :data:`REPAIR_PATIENCE_S` for a worker
        to put them on, and stops once the index's state is dropped)."""
        with self._lock:
            if self._repairer is not None or not self._short():
                return
            self._repairer = threading.Thread(target=_repair, args=(weakref.ref(self), client),
                                              name="indexzoo-sharded-replicas", daemon=True)
            self._repairer.start()

    def repairing(self) -> bool:
        """Whether re-replication is under way."""
        with self._lock:
            return self._repairer is not None

    def _stop_repairing_unless_short(self, patience_left: bool) -> bool:
        """Whether the repairer goes on (a shard short of copies, patience left); if not, it
        is marked stopped, in the same step, so a loss right after starts another."""
        with self._lock:
            if patience_left and self._short():
                return True
            self._repairer = None
            return False

    def _repair_once(self, client: Any) -> bool:
        """One round: the lost copies dropped, then a new copy on a fitting worker for each
        copy missing, all in flight at once; each joins the table once made. Whether one
        was made."""
        now = alive_workers(client)
        self._drop(now)
        alive = sorted(now)
        with self._lock:
            table = [list(c) for c in self._copies]
        load = Counter(c.worker for copies in table for c in copies)
        made: list[tuple[int, Any, Any, str, str]] = []
        for s, copies in enumerate(table):
            if not copies:
                continue
            holders = {c.worker for c in copies}
            for _ in range(self.replicas - len(copies)):
                free = [w for w in alive if w not in holders]
                if not free:  # fewer live workers than replicas: short until more join
                    break
                target = min(free, key=lambda w: (load[w], w))
                new, packed = copy_shard_to(client, copies[0], target)
                made.append((s, new, packed, copies[0].worker, target))
                holders.add(target)
                load[target] += 1
        added = False
        for s, future, packed, source, target in made:
            try:
                wait_pinned(client, [(future, (source, target))])
            except WorkerGone:
                future.cancel()
            packed.release()
            if future.status != "finished":  # its target or its source left: look again
                continue
            with self._lock:
                if self._copies[s] and len(self._copies[s]) < self.replicas:
                    self._copies[s].append(Copy(target, future))
                    added = True
        return added


def _repair(ref: weakref.ref[Copies], client: Any) -> None:
    """The re-replication thread: rounds of :meth:`Copies._repair_once` while a shard is short
    of copies; between rounds that made none (no worker to put them on yet), a pause. Holds
    the table only during a round, so a dropped index's copies are released."""
    since = time.monotonic()  # the last round that made a copy
    while True:
        copies = ref()
        if copies is None:
            return
        if not copies._stop_repairing_unless_short(
                time.monotonic() - since < REPAIR_PATIENCE_S):
            return
        try:
            made = copies._repair_once(client)
        except Exception:  # a client closed or a cluster gone: the next loss starts again
            copies._stop_repairing_unless_short(False)
            return
        del copies
        if made:
            since = time.monotonic()
        else:
            time.sleep(POLL_S)
