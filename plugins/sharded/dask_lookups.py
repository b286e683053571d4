"""Lookups given as a Dask array, answered where the data lives, and the combining of shard
answers that every lookup shares.

Data flow of ``index.point(queries)`` for a Dask array ``queries`` of ``C`` chunks over ``S``
shards (``range(lo, hi)`` alike, ``hi`` rechunked like ``lo``), all of it futures; the client
submits tasks and holds references, no lookup and no answer passes through it:

1. ``route`` (one task per chunk, on the worker holding the chunk): the chunk's keys are
   encoded with the index's key map, on the index's device (a CuPy chunk stays on its GPU),
   and routed as the client routes a batch (each shard's key bounds, its heavy keys): for
   each shard, the positions in the chunk it must answer (kept on this worker) and its
   piece, the encoded lookups at those positions (a :class:`~.handoff.Handoff`).
2. ``part`` (one task per chunk and shard, on the chunk's worker): that shard's piece of the
   routed chunk, so that only the piece moves.
3. ``ask`` (one task per chunk and shard, pinned to the shard's worker): the piece moves
   there worker to worker (GPU to GPU by CUDA IPC when the workers share a host); the shard
   answers it with global rowIDs, on its device. With several copies of each shard,
   ``ask_copies`` instead (one task per chunk and shard, where the piece is): it asks one
   live copy through the worker's own client (a task pinned to the copy's worker, the piece
   moving there worker to worker), and if that worker is lost under it, the next copy, so a
   lost worker costs the answer nothing while its shard has a copy left.
4. ``assemble`` (one task per chunk, where the routed chunk is: the scheduler puts it with
   its largest input): the shards' answers come back and are put in the chunk's order
   (:func:`combine`, as for a batch from the client), on the index's device.
5. The answer is a Dask array whose chunk ``i`` is the future of chunk ``i``'s ``assemble``:
   the same chunks as the lookups, left on the workers until the caller computes them.

When every shard asked is on one worker (one GPU, one shard, or all shards on one worker)
each chunk is answered by one task pinned there, ``answer_here`` (steps 1-4 in one: three
scheduler hops fewer; a chunk held elsewhere moves there first). With one copy of each shard
on several workers, ``answer_chunk`` does steps 1-4 in one task where the chunk is, sending
each piece for another worker's shard to that worker's :class:`ShardServer` (a Dask actor:
worker to worker, no scheduler; on GPUs of one host the piece and the answer cross through
mailboxes each peer maps once, :mod:`.mailbox`). The steps above as separate tasks remain
for shards with several copies.

A call's tasks go to the scheduler in one message, the chunks of a persisted array are used
as the futures they are, and the answer's chunks are the tasks' own keys (:func:`from_futures`).

Only ``rowid``, ``count`` and ``sum`` answer a Dask array (one value per lookup, so chunks
line up); ``rowids`` and ``bitmap`` want a batch in memory.
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.devices import array_module, to_device, xp_of
from indexzoo.errors import IndexZooError, InvalidInput
from indexzoo.keys import KeyMap
from indexzoo.results import Out

from . import mailbox, partition, route_kernels, worker
from .handoff import Handoff, weigh
from .lanes import hand_over, lanes
from .lost import ShardLost, raised_by_a_task
from .replicas import Copy, alive_workers, wait_pinned

__all__ = ["DASK_OUTS", "CopyKeys", "Routed", "Routing", "ask_copies", "combine", "lookup"]

#: The out modes a Dask array of lookups is answered in.
DASK_OUTS = ("rowid", "count", "sum")


@dataclass(frozen=True)
class Routing:
    """What routing a chunk needs, sent with each ``route`` task (the key map and a few
    arrays of ``S`` values; no keys)."""

    keymap: KeyMap
    scheme: str
    lo: np.ndarray  # per shard: smallest native key (an empty shard: lo > hi)
    hi: np.ndarray
    heavy: np.ndarray  # heavy keys (hash scheme)
    live: list[bool]  # per shard: whether it holds any row
    device: str = "cpu"  # where the chunk is routed and answered: the index's device
    ipc: bool = False  # pieces and answers cross between GPUs by CUDA IPC (handoff)
    workers: tuple[str, ...] = ()  # per shard: the worker asked (empty: any of its copies)
    encoded: bool = False  # the lookups are native keys already (a batch the base class read)

    def local(self) -> Routing:
        """The same routing with no piece exported for CUDA IPC (a task that sends its
        pieces itself, or keeps them)."""
        return dataclasses.replace(self, ipc=False)


@dataclass
class Routed:
    """A chunk cut into one piece per shard, on the chunk's worker: the positions in the
    chunk each shard answers (None: every position, in order) and the piece itself, the
    encoded lookups at those positions, ready to cross to the shard's worker. The positions
    never leave this worker: the answers come back here to be put in place."""

    size: int
    positions: list[Any]
    pieces: list[Handoff | None]  # None: the shard answers none of the chunk

    def __post_init__(self) -> None:
        weigh(Routed)

    @property
    def nbytes(self) -> int:
        held = sum(int(getattr(p, "nbytes", 0)) for p in self.positions)
        return held + sum(p.nbytes for p in self.pieces if p is not None)


def route(routing: Routing, kind: str, *chunks: Any) -> Routed:
    """Chunk ``chunks`` (the lookups, or the lower and upper bounds) cut into one piece per
    shard, on the index's device (a CuPy chunk stays on the GPU; a NumPy one goes there for
    a GPU index)."""
    arrays = [to_device(c, routing.device) for c in chunks]
    for name, a in zip(("lo", "hi") if kind == "range" else ("queries",), arrays, strict=True):
        if a.ndim != 1:
            raise InvalidInput(f"argument {name!r}: a Dask array of lookups is 1-D, got "
                               f"{a.ndim} dimensions")
    shards = len(routing.live)
    km = routing.keymap
    size = int(arrays[0].shape[0])
    if kind == "point":
        enc, outside = (arrays[0], None) if routing.encoded else \
            km.encode_points(arrays[0], name="queries")
        alone = _only_live(routing)
        split = _split(routing, enc, shards, outside) if alone is None else None
        if split is not None:  # the positions and the pieces from the GPU in two passes
            routes = [idx for idx, _ in split]
        elif alone is not None:  # one shard holds every key: it answers every lookup
            routes = [_every(enc) if s == alone else _none(enc) for s in range(shards)]
        else:
            routes = partition.route_points(routing.scheme, enc, shards, routing.lo,
                                            routing.hi, routing.heavy)
        if outside is not None and split is None:  # lookups no key can equal: every
            inside = ~outside  # shard leaves them out
            routes = [idx[inside[idx]] for idx in routes]
        encoded: tuple[Any, ...] = (enc,)
    else:
        elo, ehi = (arrays[0], arrays[1]) if routing.encoded else \
            km.encode_ranges(arrays[0], arrays[1])
        alone = _only_live(routing)
        if alone is not None and routing.scheme != "range":
            routes = [_every(elo) if s == alone else _none(elo) for s in range(shards)]
        else:  # (range partitioning leaves out the inverted ranges: routed as usual)
            routes = partition.route_ranges(routing.scheme, elo, ehi, shards, routing.lo,
                                            routing.hi)
        encoded = (elo, ehi)
        split = None
    here = _here()
    positions: list[Any] = []
    pieces: list[Handoff | None] = []
    for s, (idx, live) in enumerate(zip(routes, routing.live, strict=True)):
        # exported for IPC only when it leaves this worker (or may: any copy of the shard)
        ipc = routing.ipc and (not routing.workers or routing.workers[s] != here)
        if not live or idx.shape[0] == 0:
            positions.append(None)
            pieces.append(None)
        elif idx.shape[0] == size:  # the whole chunk, in order: no gather, no scatter
            positions.append(None)
            pieces.append(Handoff(encoded, ipc=ipc))
        elif split is not None:
            positions.append(idx)
            pieces.append(Handoff((split[s][1],), ipc=ipc))
        else:
            positions.append(idx)
            pieces.append(Handoff(tuple(a[idx] for a in encoded), ipc=ipc))
    return Routed(size, positions, pieces)


def _split(routing: Routing, enc: Any, shards: int, outside: Any) -> list[tuple[Any, Any]] | None:
    """Each shard's (positions, lookups) of a CuPy chunk of point lookups, cut on the GPU in
    two passes (:func:`.route_kernels.split`); None where that does not apply (NumPy, other
    dtypes, one shard or more than eight, heavy keys, the rows scheme)."""
    if not route_kernels.takes(enc, shards) or \
            (outside is not None and type(outside) is not type(enc)):
        return None
    if routing.scheme == "range":
        return route_kernels.split(enc, shards, routing.lo, routing.hi, outside)
    if routing.scheme == "hash" and routing.heavy.shape[0] == 0:
        return route_kernels.split(enc, shards, None, None, outside)
    return None


def _only_live(routing: Routing) -> int | None:
    """The one shard that holds keys, when only one does (its routing would send it every
    lookup: skipped); else None."""
    live = [s for s, held in enumerate(routing.live) if held]
    return live[0] if len(live) == 1 and routing.scheme != "rows" else None


def _every(a: Any) -> Any:
    return xp_of(a).arange(a.shape[0], dtype=np.int64)


def _none(a: Any) -> Any:
    return xp_of(a).zeros(0, dtype=np.int64)


def _here() -> str | None:
    """The address of the worker running this task (None outside a worker)."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return None


def part(routed: Routed, s: int) -> Handoff | None:
    """Shard ``s``'s piece of a routed chunk (so that only the piece moves)."""
    return routed.pieces[s]


def ask(shard: worker.Shard, kind: str, out: Out, rowid_dtype: str, ipc: bool,
        piece: Handoff | None) -> Handoff | None:
    """The shard's answers to its piece of a chunk (on its device), ready to cross back
    (exported for CUDA IPC when ``ipc``)."""
    if piece is None:
        return None
    got = worker.lookup_shard(shard, kind, out, rowid_dtype, *piece.local())
    return Handoff((got,), ipc=ipc)


@dataclass(frozen=True)
class CopyKeys:
    """A shard's live copies as an ``ask_copies`` task takes them: the Dask key and the
    worker of each, in the order to ask them (keys, not futures: Dask would move a future's
    data to the task)."""

    shard: int
    copies: tuple[tuple[Any, str], ...]


def ask_copies(copies: CopyKeys, kind: str, out: Out, rowid_dtype: str, ipc: bool,
               piece: Handoff | None) -> Handoff | None:
    """:func:`ask`, of the first of the shard's copies whose worker is alive and stays so
    until it has answered; ShardLost when none does.

    The piece is put in this worker's memory (a scatter from a task stays on its worker)
    and moves to the copy's worker as the input of a task pinned there; that task is waited
    for with :func:`~.replicas.wait_pinned`, which gives up on it once its worker has left
    (a task pinned to a lost worker would wait for it forever)."""
    if piece is None:
        return None
    from distributed import Future, worker_client

    tried: list[str] = []
    with worker_client() as client:
        for key, where in copies.copies:
            if where not in alive_workers(client):
                tried.append(f"{where}: gone")
                continue
            shard: Any = Future(key, client)
            sent: Any = None
            asked: Any = None
            try:
                sent = client.scatter([piece], hash=False)[0]
                asked = client.submit(ask, shard, kind, out, rowid_dtype, ipc, sent,
                                      workers=[where], pure=False)
                wait_pinned(client, [(asked, (where,))])
                if asked.status in ("finished", "error"):
                    got: Handoff | None = asked.result()
                    return got
                tried.append(f"{where}: {asked.status}")
            except IndexZooError:
                raise
            except Exception as exc:
                if asked is not None and raised_by_a_task(exc, [asked]):
                    raise
                tried.append(f"{where}: {type(exc).__name__}: {exc}"[:200])
            finally:  # a copy lost under it (or before): the next copy
                for f in (asked, sent, shard):
                    if f is not None:
                        f.release()
    raise ShardLost(f"sharded index lost every copy of shard {copies.shard} while answering "
                    f"a Dask array of lookups ({'; '.join(tried)})")


def assemble(out: str, rowid_dtype: str, device: str, routed: Routed,
             *answers: Handoff | None) -> Any:
    """One chunk's answer in its lookups' order, on ``device`` (run where ``routed`` is: the
    chunk's worker)."""
    asked: list[tuple[int, Any]] = []
    parts: list[Any] = []
    for s, got in enumerate(answers):
        if got is not None:
            idx = routed.positions[s]
            asked.append((s, idx))
            parts.append(to_device(got.local()[0], device))
    xp = array_module(device)
    return combine(out, routed.size, asked, parts, np.dtype(rowid_dtype), xp=xp)


def lookup(client: Any, copies: list[list[Copy]], failover: bool, routing: Routing, kind: str,
           out: Out, rowid_dtype: np.dtype, device: str, arrays: list[Any]) -> Any:
    """The Dask array answering ``arrays`` (Dask arrays: the lookups, or ``lo`` and ``hi``),
    chunked like them; see the module's docstring for where each step runs. ``copies``: each
    shard's live copies; ``failover``: ask them with ``ask_copies`` (else the first copy,
    pinned, with ``ask``)."""
    import dask.array as da

    if kind == "range":
        arrays = [arrays[0], arrays[1].rechunk(arrays[0].chunks)]
    chunk_futures = [held_chunks(client, a) for a in arrays]
    sizes = arrays[0].chunks[0]
    answer_dtype = np.dtype(np.uint64) if out == "sum" else np.dtype(rowid_dtype)
    dt = str(np.dtype(rowid_dtype))
    # the workers holding the shards asked: when that is one worker, each chunk is answered
    # there in one task (moved there first if it is elsewhere)
    asked_at = {c[0].worker for c, live in zip(copies, routing.live, strict=True) if live}
    one = next(iter(asked_at)) if not failover and len(asked_at) == 1 else None
    firsts = [c[0].future if live else None for c, live in zip(copies, routing.live, strict=True)]
    keys = [c[0].future.key if live else None
            for c, live in zip(copies, routing.live, strict=True)]
    # one copy of each shard on several workers: worker to worker through actors (GPU
    # arrays through mailboxes mapped once, :mod:`.mailbox`)
    actors = one is None and not failover
    servers = shard_servers(client, sorted(asked_at)) if actors else {}
    beside = beside_inputs(client) if one is None else {}
    n = len(sizes)
    name = answer_name("answer_here" if one is not None else
                       "answer_chunk" if servers else "assemble")
    at = [(name, i) for i in range(n)]
    # one task a chunk, all submitted in one message (Dask's client sends a message at most
    # every 10 ms: a second submit would wait for the next)
    if n and one is not None:
        done = client.map(answer_here, *_each(n, routing, kind, out, dt, device, firsts),
                          *chunk_futures, key=at, workers=[one], pure=False)
    elif n and servers:
        done = client.map(answer_chunk, *_each(n, routing, kind, out, dt, device, keys,
                                               servers), *chunk_futures, key=at, pure=False,
                          **beside)
    else:
        done = [_asked_around(client, copies, failover, routing, kind, out, dt, device,
                              [c[i] for c in chunk_futures], beside, at[i]) for i in range(n)]
    if not done:
        return da.zeros((0,), dtype=answer_dtype, chunks=((0,),))
    return from_futures(done, sizes, answer_dtype, meta(device, answer_dtype))


def _each(n: int, *args: Any) -> list[list[Any]]:
    """Each argument repeated ``n`` times (the same for every task of a ``client.map``)."""
    return [[a] * n for a in args]


def held_chunks(client: Any, a: Any) -> list[Any]:
    """The futures of a 1-D Dask array's chunks, in order: the array's own where it is
    persisted on ``client``'s cluster (its graph maps each chunk to a future: nothing to
    submit), else computed now (a task per chunk, left on the workers)."""
    from dask.core import flatten
    from distributed import Future

    keys = list(flatten(a.__dask_keys__()))
    graph = a.__dask_graph__()
    held = [graph.get(k) for k in keys]
    if all(isinstance(f, Future) and f.client is client for f in held):
        return held
    return list(client.compute(list(np.ravel(a.to_delayed()))))


def answer_name(task: str = "sharded") -> str:
    """A new name for the chunks of an array made by :func:`from_futures`: the tasks
    submitted with keys ``(name, i)`` are its chunks themselves (``task``: what Dask shows
    of the name, the function the tasks run)."""
    import uuid

    return f"{task}-{uuid.uuid4().hex}"


def from_futures(futures: list[Any], sizes: tuple[int, ...] | list[int], dtype: np.dtype,
                 meta: Any) -> Any:
    """A 1-D Dask array whose chunk ``i`` (``sizes[i]`` long) is the result of
    ``futures[i]``, as a persisted array is. Where the futures' keys are ``(name, 0)``,
    ``(name, 1)``, ... (tasks submitted so, :func:`answer_name`), computing it submits
    nothing more; else each chunk is an alias of its future (one more task each)."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    keys = [f.key for f in futures]
    name = keys[0][0] if keys and isinstance(keys[0], tuple) else ""
    if not (name and keys == [(name, i) for i in range(len(keys))]):
        name = answer_name()
    graph: dict[Any, Any] = {(name, i): f for i, f in enumerate(futures)}
    return da.Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name,
                    (tuple(int(q) for q in sizes),), dtype=dtype, meta=meta)


def synced(device: str, answer: Any) -> Any:
    """``answer`` once its GPU work is done (a task's result is ready when it returns)."""
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    return answer


class ShardServer:
    """One per worker (a Dask actor): answers pieces for the shards held on its worker,
    asked by another worker's task directly, worker to worker, with no scheduler between
    them (a task per shard and chunk would cost each piece three hops of the scheduler).

    GPU answers go back through a mailbox (:meth:`ask_mailed`), not as a handoff: Dask drops
    an actor's result once it is sent, so the memory behind a handoff's handle could be
    freed before the asker opens it; a mailbox stays."""

    def __init__(self) -> None:
        from distributed import get_worker

        self._worker = get_worker()

    def ask(self, key: Any, kind: str, out: Out, rowid_dtype: str, ipc: bool,
            piece: Handoff | None) -> Handoff | None:
        """:func:`ask` of the shard whose Dask key is ``key`` (held on this worker)."""
        shard = typing.cast(worker.Shard, self._worker.data[key])
        return ask(shard, kind, out, rowid_dtype, ipc, piece)

    def ask_mailed(self, key: Any, kind: str, out: Out, rowid_dtype: str,
                   piece: mailbox.Letter, reply: str) -> mailbox.Letter:
        """The shard's answers to a piece read from the asker's mailbox (GPU to GPU), put
        in this worker's mailbox ``reply``: where they are."""
        shard = typing.cast(worker.Shard, self._worker.data[key])
        lane = lanes("cuda")  # the copies on a fast stream, the search on a slow one
        with lane.fast:
            arrays = mailbox.read(piece)
        hand_over(lane.fast, lane.slow)
        with lane.slow:
            got = worker.lookup_shard(shard, kind, out, rowid_dtype, *arrays)
        hand_over(lane.slow, lane.fast)
        with lane.fast:
            return mailbox.post(reply, (got,))


# (client, worker) -> the future of its server and the actor (kept, so that a call costs no
# round trip for it)
_servers: dict[tuple[int, str], tuple[Any, Any]] = {}
_servers_lock = threading.Lock()


def shard_servers(client: Any, workers: list[str]) -> dict[str, Any]:
    """A :class:`ShardServer` on each of ``workers`` (the actors, made on first use and kept
    for the client; made again where the one kept is gone, e.g. its worker restarted)."""
    got = {}
    with _servers_lock:
        for w in workers:
            held = _servers.get((id(client), w))
            if held is None or held[0].status != "finished":
                future = client.submit(ShardServer, workers=[w], actor=True, pure=False)
                held = (future, future.result())
                _servers[(id(client), w)] = held
            got[w] = held[1]
    return got


def answer_chunk(routing: Routing, kind: str, out: Out, rowid_dtype: str, device: str,
                 keys: list[Any], servers: dict[str, Any], *chunks: Any) -> Any:
    """A chunk answered in one task where it is (shards on several workers, one copy each):
    :func:`route`; each piece for another worker's shard sent to that worker's
    :class:`ShardServer` (all at once, worker to worker; GPU pieces and answers through
    mailboxes, :mod:`.mailbox`); the shards on this worker asked meanwhile; :func:`assemble`
    once every answer is back. The actors are inputs of the task (a lost one fails it); the
    chunk, far larger, keeps it on the chunk's worker."""
    from distributed import get_worker

    me = get_worker()
    mailed = routing.ipc and device == "cuda"
    lane = lanes(device)  # routing and the copies on a fast stream, the searches on a slow one
    with lane.fast:
        routed = route(routing.local(), kind, *chunks)
    answers: list[Any] = [None] * len(routed.pieces)
    away = [s for s, piece in enumerate(routed.pieces)
            if piece is not None and routing.workers[s] != me.address]
    sent = {}
    if mailed and away:
        thread = threading.get_ident()
        arrays: list[Any] = []
        which: dict[int, list[int]] = {}
        for s in away:
            got = typing.cast(Handoff, routed.pieces[s]).arrays
            which[s] = list(range(len(arrays), len(arrays) + len(got)))
            arrays.extend(got)
        with lane.fast:  # (synchronised: every piece is written)
            letter = mailbox.post(f"pieces|{thread}", arrays)
        for s in away:
            sent[s] = servers[routing.workers[s]].ask_mailed(
                keys[s], kind, out, rowid_dtype, letter.some(which[s]),
                f"answers|{me.address}|{thread}|{s}")
    else:
        lane.written()  # the pieces, before Dask sends them or a search reads them
        for s in away:
            sent[s] = servers[routing.workers[s]].ask(keys[s], kind, out, rowid_dtype, False,
                                                      routed.pieces[s])
    with lane.slow:
        for s, piece in enumerate(routed.pieces):
            if piece is not None and s not in sent:
                answers[s] = ask(typing.cast(worker.Shard, me.data[keys[s]]), kind, out,
                                 rowid_dtype, False, piece)
    hand_over(lane.slow, lane.fast)
    with lane.fast:
        for s, pending in sent.items():
            got = pending.result()
            answers[s] = Handoff(mailbox.read(got)) if mailed else got
        if not mailed:
            lane.after_default()  # answers Dask copied in on the default stream
        return synced(device, assemble(out, rowid_dtype, device, routed, *answers))


def _asked_around(client: Any, copies: list[list[Copy]], failover: bool, routing: Routing,
                  kind: str, out: Out, dt: str, device: str, chunk: list[Any],
                  beside: dict[str, Any], key: tuple[str, int]) -> Any:
    """The future of one chunk's answer when its shards are on several workers: ``route``
    and ``assemble`` run where the chunk is (Dask puts a task with its largest input),
    ``part`` beside ``route``, ``ask`` on each shard's worker (``beside``:
    :func:`beside_inputs`)."""
    routed = client.submit(route, routing, kind, *chunk, pure=False, **beside)
    answers: list[Any] = []
    for s, held in enumerate(copies):
        if not routing.live[s]:
            answers.append(None)
            continue
        piece = client.submit(part, routed, s, pure=False, **beside)
        if failover:
            keys = CopyKeys(s, tuple((c.future.key, c.worker) for c in held))
            answers.append(client.submit(ask_copies, keys, kind, out, dt, routing.ipc, piece,
                                         pure=False, **beside))
        else:
            answers.append(client.submit(ask, held[0].future, kind, out, dt, routing.ipc,
                                         piece, workers=[held[0].worker], pure=False))
    return client.submit(assemble, out, dt, device, routed, *answers, key=key, **beside)


_cluster_seen: dict[int, tuple[float, list[str]]] = {}

#: How long :func:`beside_inputs`'s list of a client's workers is reused.
WORKERS_KEPT_S = 5.0


def beside_inputs(client: Any, workers: list[str] | None = None) -> dict[str, Any]:
    """``submit`` options that keep a task beside its inputs. Dask runs a task of a large
    group with few dependencies (a "root-ish" task: ``route`` after a few calls) on whichever
    worker has a thread free, wherever its inputs are: on two GPUs both chunks of a call
    crossed to the other worker that way (171 ms for 128 MB each, the search 4 ms). Any
    worker restriction turns that heuristic off, so every worker is named, loosely: the
    scheduler then picks among the workers holding the inputs (``workers``: the cluster's,
    where the caller has them already; else asked of the scheduler, at most every
    :data:`WORKERS_KEPT_S` seconds: for that long a worker that joined since is not named,
    and a chunk it holds may be moved to a named worker to be answered)."""
    if workers is None:
        import time

        now = time.monotonic()
        with _servers_lock:
            seen = _cluster_seen.get(id(client))
        if seen is not None and now - seen[0] < WORKERS_KEPT_S:
            workers = seen[1]
        else:
            workers = sorted(client.scheduler_info(n_workers=-1).get("workers", {}))
            with _servers_lock:
                _cluster_seen[id(client)] = (now, workers)
    return {"workers": workers, "allow_other_workers": True} if workers else {}


def answer_here(routing: Routing, kind: str, out: Out, rowid_dtype: str, device: str,
                shards: list[Any], *chunks: Any) -> Any:
    """A chunk answered in one task on the worker that holds every shard it asks:
    :func:`route`, :func:`ask` of each shard, :func:`assemble` (three hops of the scheduler
    fewer, and nothing exported for another worker)."""
    routed = route(routing.local(), kind, *chunks)
    answers = [None if shard is None else ask(shard, kind, out, rowid_dtype, False,
                                              routed.pieces[s])
               for s, shard in enumerate(shards)]
    return synced(device, assemble(out, rowid_dtype, device, routed, *answers))


def meta(device: str, dtype: np.dtype) -> Any:
    """An empty array of ``dtype`` on ``device``: what a Dask chunk there looks like."""
    if device == "cuda":
        import cupy

        return cupy.empty(0, dtype=dtype)
    return np.empty(0, dtype=dtype)


def combine(out: str, q: int, asked: list[tuple[int, Any]], parts: list[Any],
            rowid_dtype: np.dtype, xp: Any = np) -> Any:
    """The shards' answers, each for the lookups at its positions (None: every lookup, in
    order), as one answer in the caller's order (``xp``: NumPy, or CuPy for answers on the
    GPU; ``rowids`` on NumPy only)."""
    if len(parts) == 1 and asked[0][1] is None and out in ("rowid", "count", "sum"):
        # one shard answered every lookup, in order: its answer is the answer
        return parts[0].astype(np.uint64 if out == "sum" else rowid_dtype, copy=False)
    if out == "rowid":
        miss = np.iinfo(rowid_dtype).max
        got = xp.full(q, miss, dtype=rowid_dtype)
        for (_, idx), answer in zip(asked, parts, strict=True):
            at = slice(None) if idx is None else idx
            cur = got[at]
            got[at] = xp.where(cur == miss, answer, cur)
        return got
    if out in ("count", "sum"):
        dtype = np.dtype(np.uint64 if out == "sum" else rowid_dtype)
        if xp is not np and route_kernels.adds(dtype) and \
                not any(isinstance(idx, np.ndarray) for _, idx in asked):
            # on the GPU: atomic adds into the answer's own dtype, one pass a shard
            got = xp.zeros(q, dtype=dtype)
            for (_, idx), answer in zip(asked, parts, strict=True):
                if idx is None:
                    got += answer.astype(dtype, copy=False)
                else:
                    route_kernels.place(got, idx, answer)
            return got
        acc = xp.zeros(q, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for (_, idx), answer in zip(asked, parts, strict=True):
                if idx is None:
                    acc += answer
                else:
                    acc[idx] += answer  # a shard is asked each lookup at most once
        return acc.astype(rowid_dtype) if out == "count" else acc
    asked = [(s, np.arange(q, dtype=np.int64) if idx is None else idx) for s, idx in asked]
    counts = np.zeros(q, dtype=np.int64)
    for (_, idx), (off, _) in zip(asked, parts, strict=True):
        counts[idx] += np.diff(off)
    offsets = np.zeros(q + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    rowids = np.empty(int(offsets[-1]), dtype=rowid_dtype)
    fill = offsets[:-1].copy()
    for (_, idx), (off, rid) in zip(asked, parts, strict=True):
        c = np.diff(off)
        start = fill[idx]
        rowids[np.repeat(start - off[:-1], c) + np.arange(rid.shape[0])] = rid
        fill[idx] += c
    return offsets, rowids
