"""The Dask client a sharded index runs on: given, set for the process, the user's default
client, or a local cluster the index starts.

Dask is optional: nothing here imports it until a sharded index needs a client, and then a
missing Dask is :class:`~indexzoo.errors.MissingDependency` naming the ``dask`` extra.

Which client an index uses, first match wins:

1. ``client=`` given to the index's constructor (a ``distributed.Client``);
2. the ``address`` parameter (a scheduler address: one client per address per process);
3. the client set with :func:`use_client` (a client or an address);
4. the process's default client (``distributed.default_client()``): the ``Client`` a script
   made last, unless it was made with ``set_as_default=False``;
5. a local cluster started on first use and shared by every sharded index of the process
   with the same ``cluster`` parameters: ``distributed.LocalCluster`` on the CPU, dask-cuda's
   ``LocalCUDACluster`` on ``cuda``; closed, quietly, when the process exits, or earlier by
   :func:`close_local` (the next sharded index without a client starts a new one).

Worker processes are started by *spawning* a Python that imports the main script again, so
a script that starts them at its top level without ``if __name__ == "__main__":`` would start
them again in every worker and die ("An attempt has been made to start a new process before
the current process has finished its bootstrapping phase"). ``cluster.processes`` left at
``None`` therefore looks at where the call came from: under that guard, in an interactive
session or from a test runner the CPU cluster gets worker processes; from a script's
unguarded top level it gets worker threads and says so in one warning line. Asking for
processes (or a GPU cluster, whose workers are always processes) from unguarded code is a
:class:`~indexzoo.errors.ConfigError` saying what to do.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import os
import sys
import threading
import warnings
from types import FrameType, TracebackType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from indexzoo.envvars import SHARDED_WORKERS
from indexzoo.errors import ConfigError, MissingDependency

__all__ = ["ClusterParams", "client_for", "close_local", "default_cluster_workers",
           "main_guard_missing", "require_dask", "use_client"]

_lock = threading.RLock()
_current: list[Any] = [None]  # the client (or address) set by use_client
_by_address: dict[str, Any] = {}
_local: dict[str, Any] = {}  # (device, options) -> (cluster, client)
_exit_hook: list[bool] = []  # whether close_local runs at exit (registered once)


class ClusterParams(BaseModel):
    """How the local cluster a sharded index starts is made (used only when the index found
    no client: none given, no ``address``, none set with ``use_client``, no default one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_workers: int | None = Field(
        default=None, ge=1, le=4096,
        description=("Workers. None: INDEXZOO_SHARDED_WORKERS, else the CPU count (at most 4) "
                     "on the CPU; one per GPU on cuda."))
    threads_per_worker: int = Field(default=1, ge=1, le=1024,
                                    description="Threads per worker.")
    processes: bool | None = Field(
        default=None,
        description=("Workers as processes (true) or threads of this process (false). None: "
                     "processes unless the cluster is started from a script's top-level code "
                     "outside `if __name__ == \"__main__\":`. On cuda always processes."))
    protocol: str | None = Field(
        default=None, min_length=1, max_length=32,
        description="Dask comm protocol (tcp, inproc, ucx, ...). None: Dask's default.")
    rmm_pool_size: str | None = Field(
        default=None, min_length=1, max_length=32,
        description=("RMM memory pool per GPU worker (e.g. '24GB'), passed to dask-cuda's "
                     "LocalCUDACluster; cuda only."))


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
    back to the default client, else the shared local cluster. As a context manager it
    restores the previous one on exit::

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


def _is_main_guard(node: ast.stmt) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    texts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and texts == ["__main__"]


def main_guard_missing(frame: FrameType | None = None) -> str | None:
    """Where the main script's unguarded top-level code led to this call (``path:line``),
    or None when a spawned worker process would not run that code again: the call comes
    from under ``if __name__ == "__main__":``, from an interactive session, from ``-c``, or
    from somewhere the main script's top-level frame is not on the stack (another thread)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return None
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    while f is not None and not (f.f_globals is main.__dict__ and f.f_code.co_name == "<module>"):
        f = f.f_back
    if f is None:
        return None
    line = f.f_lineno
    try:
        with open(f.f_code.co_filename, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return f"{path}:{line}"  # its source unread: assume the worst, spawn nothing
    for node in tree.body:
        if _is_main_guard(node) and node.lineno <= line <= (node.end_lineno or node.lineno):
            return None
    return f"{path}:{line}"


def _outside_indexzoo() -> int:
    """The ``stacklevel`` of a warning that points at the first caller outside indexzoo."""
    level = 1
    f: FrameType | None = sys._getframe(1)
    while f is not None and str(f.f_globals.get("__name__", "")).startswith("indexzoo"):
        level, f = level + 1, f.f_back
    return level


_GUARD_HINT = ('put the script\'s code under `if __name__ == "__main__":` (worker processes '
               "import the script again)")


def _local_client(device: str, options: ClusterParams) -> Any:
    distributed = require_dask()
    key = f"{device}:{options.model_dump_json()}"
    with _lock:
        got = _local.get(key)
        if got is not None and got[1].status not in ("closing", "closed"):
            return got[1]
        unguarded = main_guard_missing()
        extra: dict[str, Any] = {} if options.protocol is None else \
            {"protocol": options.protocol}
        if device == "cuda":
            if unguarded is not None:
                raise ConfigError(f"the sharded index's GPU cluster starts worker processes, "
                                  f"but it is started from {unguarded}: {_GUARD_HINT}, or pass "
                                  "a Client")
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                raise MissingDependency("dask-cuda", "dask",
                                        "the sharded index on GPUs (a LocalCUDACluster)") from None
            if options.n_workers is not None:
                extra["n_workers"] = options.n_workers
            if options.rmm_pool_size is not None:
                extra["rmm_pool_size"] = options.rmm_pool_size
            cluster = LocalCUDACluster(threads_per_worker=options.threads_per_worker,
                                       dashboard_address=":0", **extra)
        else:
            processes = options.processes
            if processes is None:
                processes = unguarded is None
                if not processes:
                    warnings.warn(f"indexzoo: the sharded index's local Dask cluster runs its "
                                  f"workers as threads, since it is started from {unguarded}; "
                                  f"for worker processes {_GUARD_HINT}",
                                  RuntimeWarning, stacklevel=_outside_indexzoo())
            elif processes and unguarded is not None:
                raise ConfigError(f"params.cluster.processes = True, but the cluster is "
                                  f"started from {unguarded}: {_GUARD_HINT}, or set "
                                  "cluster.processes: false")
            n = options.n_workers if options.n_workers is not None else \
                default_cluster_workers()
            cluster = distributed.LocalCluster(n_workers=n,
                                               threads_per_worker=options.threads_per_worker,
                                               processes=processes, dashboard_address=":0",
                                               **extra)
        client = distributed.Client(cluster, set_as_default=False)
        _local[key] = (cluster, client)
        if not _exit_hook:
            # registered after distributed's own exit hooks, so it runs before them (atexit
            # runs last-in first-out): the cluster is closed in order, not torn down
            atexit.register(_close_local)
            _exit_hook.append(True)
        return client


def _default_client() -> Any:
    """The process's default ``distributed.Client`` if there is one that is not closed."""
    from distributed import default_client

    try:
        client = default_client()
    except ValueError:  # no default client
        return None
    return None if client.status in ("closing", "closed") else client


def client_for(given: Any, address: str | None, device: str,
               options: ClusterParams | None = None) -> Any:
    """The client an index with constructor client ``given``, parameter ``address`` and
    cluster parameters ``options`` uses."""
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
    require_dask()
    default = _default_client()
    if default is not None:
        return default
    return _local_client(device, options or ClusterParams())


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


def _quiet(level: int) -> None:
    """Dask's loggers of this process at ``level`` and above only."""
    import logging

    names = [n for n in logging.root.manager.loggerDict if n.startswith("distributed.")]
    for name in ("distributed", *names):
        logging.getLogger(name).setLevel(level)


def _close_local() -> None:
    import logging

    # the process is ending: the shards' loss and the closing of each worker's connections
    # (logged at INFO, some with a CommClosedError traceback) are expected, not worth a line
    _quiet(logging.ERROR)
    # nor is a worker process's heartbeat that meets the scheduler already closing (logged
    # there at ERROR with a traceback, seen on a loaded machine): the workers and their
    # nannies go quiet first
    with _lock:
        clients = [client for _, client in _local.values()]
    for client in clients:
        for nanny in (False, True):
            with contextlib.suppress(Exception):  # a worker already gone
                client.run(_quiet, logging.CRITICAL, nanny=nanny)
    close_local()
