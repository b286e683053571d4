"""The Dask client a sharded index runs on: given, set for the process, or a local cluster.

Dask is optional: nothing here imports it until a sharded index needs a client, and then a
missing Dask is :class:`~indexzoo.errors.MissingDependency` naming the ``dask`` extra.

Which client an index uses, first match wins:

1. ``client=`` given to the index's constructor (a ``distributed.Client``);
2. the ``address`` parameter (a scheduler address: one client per address per process);
3. the client set with :func:`use_client` (a client or an address);
4. a local cluster started on first use and shared by every sharded index of the process:
   ``distributed.LocalCluster`` of worker processes on the CPU, dask-cuda's
   ``LocalCUDACluster`` (one worker per GPU) on ``cuda``; closed when the process exits, or
   earlier by :func:`close_local` (the next sharded index without a client starts a new one).
"""

from __future__ import annotations

import atexit
import os
import threading
from types import TracebackType
from typing import Any

from indexzoo.envvars import SHARDED_WORKERS
from indexzoo.errors import MissingDependency

__all__ = ["client_for", "close_local", "default_cluster_workers", "require_dask",
           "use_client"]

_lock = threading.RLock()
_current: list[Any] = [None]  # the client (or address) set by use_client
_by_address: dict[str, Any] = {}
_local: dict[str, Any] = {}  # device -> (cluster, client)


def require_dask() -> Any:
    """``distributed``, or MissingDependency naming the extra that installs it."""
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError:
        raise MissingDependency("dask", "dask", "the sharded index") from None
    return distributed


def default_cluster_workers() -> int:
    """Workers of the local CPU cluster: ``INDEXZOO_SHARDED_WORKERS`` if set, else the CPU
    count, at most 4."""
    given = SHARDED_WORKERS.value()
    if given is not None:
        return given
    return max(1, min(4, os.cpu_count() or 1))


class use_client:
    """Make ``client`` (a ``distributed.Client`` or a scheduler address) the one that sharded
    indexes built from now on use, unless one is given to the index itself. ``None`` goes
    back to the shared local cluster. As a context manager it restores the previous one on
    exit::

        with use_client(Client(cluster)):
            index = indexzoo.create("sharded", inner="btree", shards=4).build(keys)
    """

    def __init__(self, client: Any) -> None:
        with _lock:
            self._previous = _current[0]
            _current[0] = client

    def __enter__(self) -> Any:
        return _current[0]

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with _lock:
            _current[0] = self._previous


def _connect(address: str) -> Any:
    distributed = require_dask()
    with _lock:
        client = _by_address.get(address)
        if client is None or client.status in ("closing", "closed"):
            client = distributed.Client(address, set_as_default=False)
            _by_address[address] = client
        return client


def _local_client(device: str) -> Any:
    distributed = require_dask()
    with _lock:
        got = _local.get(device)
        if got is not None and got[1].status not in ("closing", "closed"):
            return got[1]
        if device == "cuda":
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                raise MissingDependency("dask-cuda", "dask",
                                        "the sharded index on GPUs (a LocalCUDACluster)") from None
            cluster = LocalCUDACluster()
        else:
            cluster = distributed.LocalCluster(n_workers=default_cluster_workers(),
                                               threads_per_worker=1, processes=True,
                                               dashboard_address=":0")
        client = distributed.Client(cluster, set_as_default=False)
        _local[device] = (cluster, client)
        return client


def client_for(given: Any, address: str | None, device: str) -> Any:
    """The client an index with constructor client ``given`` and parameter ``address`` uses."""
    if given is not None:
        require_dask()
        return given
    if address is not None:
        return _connect(address)
    with _lock:
        current = _current[0]
    if isinstance(current, str):
        return _connect(current)
    if current is not None:
        return current
    return _local_client(device)


def close_local() -> bool:
    """Close the local clusters (and their clients) that sharded indexes started for this
    process; a sharded index built later without a client starts a new one. Indexes built on
    a closed cluster have lost their shards. Even idle, a cluster costs CPU (the scheduler's
    and the workers' periodic tasks), so a program done with sharded indexes may close it
    rather than wait for the process to end. True if one was open."""
    with _lock:
        found = list(_local.values())
        _local.clear()
    for cluster, client in found:
        try:
            client.close()
            cluster.close()
        except Exception:  # a cluster already gone (e.g. its loop stopped) has nothing left
            pass
    return bool(found)


@atexit.register
def _close_local() -> None:
    import logging

    # the process is ending: the shards' loss is expected, not worth a warning per worker
    for name in ("distributed.scheduler", "distributed.nanny", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)
    close_local()
