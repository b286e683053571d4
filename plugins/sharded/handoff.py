"""GPU arrays handed from one Dask worker to another without leaving the GPUs.

Dask moves a task's result to the worker that needs it by serialising it: over TCP a CuPy
array goes device -> host -> socket -> host -> device, about 1-3 GB/s on one host, which
would cost a 2-GPU sharded lookup more than its GPUs' work. A :class:`Handoff` holding
CuPy arrays made with ``ipc=True`` instead pickles to a CUDA IPC handle of each array (64
bytes): the receiving process, on the same host, opens the handle and copies the array
onto its own GPU (peer to peer: NVLink where the GPUs have it), then closes the handle.
The sender keeps the memory alive for as long as Dask holds the result, which is until
every task that needs it has run, so after the receiver's copy.

* Each exported array gets an allocation of its own (``cupy.cuda.Memory``, outside any
  pool): an IPC handle names a whole allocation, and a pool's blocks share one.
* Unpickled in the process that made it (Dask spilling it, say), a handoff is the same
  object again; unpickled on another host it is a clear error: the client sends handoffs
  by IPC only when every worker of the cluster is on one host (:func:`one_host`).
* Workers that are threads of one process never pickle: :meth:`Handoff.local` copies an
  array that sits on another GPU onto the current one.
* ``ipc=False`` (or host arrays) pickles the arrays as they are, Dask's usual way (UCX
  included, where the cluster uses it).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
import weakref
from typing import Any

__all__ = ["Handoff", "host_token", "one_host", "weigh"]

_live: weakref.WeakValueDictionary[str, Handoff] = weakref.WeakValueDictionary()
_lock = threading.Lock()
_token: list[str] = []
_sized: list[type] = []
_hosts_seen: dict[int, tuple[float, bool]] = {}

#: How long :func:`one_host`'s answer for a client is reused.
HOSTS_KEPT_S = 5.0


def host_token() -> str:
    """This host, as processes on it see it (its name and its boot's id)."""
    if not _token:
        boot = ""
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
                boot = fh.read().strip()
        except OSError:
            pass
        _token.append(f"{socket.gethostname()}/{boot}")
    return _token[0]


def one_host(client: Any) -> bool:
    """Whether every worker of ``client``'s cluster runs on one host (so CUDA IPC can reach
    every worker's GPU from every other); asked of the scheduler at most once every
    :data:`HOSTS_KEPT_S` seconds per client (a round trip each call would cost a lookup
    about a millisecond)."""
    now = time.monotonic()
    with _lock:
        seen = _hosts_seen.get(id(client))
    if seen is not None and now - seen[0] < HOSTS_KEPT_S:
        return seen[1]
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    hosts = {w.get("host") for w in workers.values()}
    with _lock:
        _hosts_seen[id(client)] = (now, len(hosts) <= 1)
    return len(hosts) <= 1


def _is_cupy(a: Any) -> bool:
    return type(a).__module__.startswith("cupy")


class Handoff:
    """A tuple of arrays (``arrays``) that crosses to another worker of the host by CUDA
    IPC when ``ipc`` is true and they are CuPy arrays; else as Dask moves any array."""

    __slots__ = ("__weakref__", "_exported", "_key", "arrays")

    def __init__(self, arrays: tuple[Any, ...] | list[Any], ipc: bool = False) -> None:
        weigh(Handoff)
        self.arrays = tuple(arrays)
        self._exported: list[Any] | None = None
        self._key = ""
        if ipc and any(_is_cupy(a) and a.nbytes for a in self.arrays):
            self._export()

    @property
    def nbytes(self) -> int:
        return int(sum(getattr(a, "nbytes", 0) for a in self.arrays))

    def _export(self) -> None:
        import cupy

        owned: list[Any] = []
        exported: list[Any] = []
        for a in self.arrays:
            if not (_is_cupy(a) and a.nbytes):
                owned.append(a)
                exported.append(None)
                continue
            mem = cupy.cuda.Memory(a.nbytes)  # an allocation of its own, for its handle
            own = cupy.ndarray(a.shape, a.dtype, cupy.cuda.MemoryPointer(mem, 0))
            own[...] = a
            owned.append(own)
            exported.append((cupy.cuda.runtime.ipcGetMemHandle(mem.ptr), a.shape, a.dtype.str,
                             int(a.nbytes)))
        cupy.cuda.get_current_stream().synchronize()  # written before any peer reads it
        self.arrays = tuple(owned)
        self._exported = exported
        self._key = uuid.uuid4().hex
        with _lock:
            _live[self._key] = self

    def local(self) -> tuple[Any, ...]:
        """The arrays, each CuPy one on the current GPU (copied there if it sits on
        another: workers that are threads of one process hand over the object itself)."""
        out = []
        for a in self.arrays:
            if _is_cupy(a):
                import cupy

                if a.device.id != cupy.cuda.Device().id:
                    a = a.copy()  # CuPy copies onto the current device (peer to peer)
            out.append(a)
        return tuple(out)

    def __reduce__(self) -> Any:
        if self._exported is None:
            return (Handoff, (self.arrays,))
        plain = tuple(None if e is not None else a
                      for a, e in zip(self.arrays, self._exported, strict=True))
        return (_opened, (host_token(), os.getpid(), self._key, self._exported, plain))


def _opened(token: str, pid: int, key: str, exported: list[Any], plain: tuple[Any, ...]
            ) -> Handoff:
    """The receiving side of :meth:`Handoff.__reduce__`: each array copied from the
    sender's GPU memory onto this process's current GPU."""
    if pid == os.getpid():
        with _lock:
            same = _live.get(key)
        if same is not None:
            return same
    if token != host_token():
        raise RuntimeError("a sharded index's GPU arrays were sent by CUDA IPC to a worker on "
                           "another host; give the index a cluster on one host, or one whose "
                           "workers do not share a host")
    import cupy

    rt = cupy.cuda.runtime
    arrays = []
    for a, e in zip(plain, exported, strict=True):
        if e is None:
            arrays.append(a)
            continue
        handle, shape, dtype, nbytes = e
        dst = cupy.empty(shape, dtype=dtype)
        base = rt.ipcOpenMemHandle(handle)
        try:
            rt.memcpy(dst.data.ptr, base, nbytes, rt.memcpyDefault)
            rt.deviceSynchronize()  # done before the handle closes
        finally:
            rt.ipcCloseMemHandle(base)
        arrays.append(dst)
    return Handoff(arrays)


def weigh(cls: type) -> None:
    """Tell Dask what objects of ``cls`` weigh (their ``nbytes``), so that the scheduler
    runs the tasks that need one where it is (Dask would take any object it does not know
    for a few dozen bytes). Done by the first object made: importing this module imports
    no Dask."""
    if cls in _sized:
        return
    _sized.append(cls)
    try:
        from dask.sizeof import sizeof
    except ImportError:  # Dask is optional; these objects are made by a sharded index's tasks
        return
    sizeof.register(cls)(lambda obj: int(obj.nbytes) + 64)
