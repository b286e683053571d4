"""A batch in the caller's memory handed to the workers of its own host through shared memory.

Dask sends a scattered array and a gathered answer over its comms: over TCP on one host a
2^26-lookup batch (256 MB of uint32 keys) and its answer cross the loopback at 1-2 GB/s,
several times what copying them to a GPU and back costs one process. When the caller and
every worker share this host's memory (:func:`same_memory`), the caller instead writes the
batch into a POSIX shared-memory segment (:class:`HostBuffer`), each worker copies its slice
out of it (:func:`read_slice`), and each worker writes its chunk of the answer into a
second segment (:func:`write_slice`), which the caller reads: one memory copy each way,
nothing through a socket but the tasks themselves.

* The caller makes, owns and removes (unlinks) the segments; a worker maps one by name and
  unmaps it when its copy is done, out of sight of Python's resource tracker (which would
  remove the segment when that worker exits).
* Which processes share this host's memory is found by trying it (a segment the caller
  makes, read back by every worker: a worker in another container or on another host cannot
  see it), at most once every :data:`CHECK_KEPT_S` seconds per client.
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import sys
import threading
import time
import typing
import uuid
import weakref
from multiprocessing import shared_memory
from typing import Any

import numpy as np

__all__ = ["HostBuffer", "copy_into", "give_back", "lease", "read_slice", "same_memory", "write_slice"]

#: How long :func:`same_memory`'s answer for a client is reused.
CHECK_KEPT_S = 5.0

_lock = threading.Lock()
_seen: weakref.WeakKeyDictionary[Any, tuple[float, bool]] = weakref.WeakKeyDictionary()


class _Attached:
    """The segment ``name``, made by another process, mapped here without Python's resource
    tracker: the tracker would remove it when this process ends, and spawned worker processes
    share their parent's tracker, where detaching would forget the caller's own record of it."""

    def __init__(self, name: str) -> None:
        self._shm: shared_memory.SharedMemory | None = None
        self._map: mmap.mmap | None = None
        if os.name == "nt":  # (no tracker on Windows)
            self._shm = shared_memory.SharedMemory(name=name)
            self.buf = typing.cast(memoryview, self._shm.buf)
        elif sys.version_info >= (3, 13):
            self._shm = shared_memory.SharedMemory(name=name, track=False)
            self.buf = typing.cast(memoryview, self._shm.buf)
        else:
            import _posixshmem

            fd = _posixshmem.shm_open("/" + name.lstrip("/"), os.O_RDWR, mode=0o600)
            try:
                self._map = mmap.mmap(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
            self.buf = memoryview(self._map)

    def close(self) -> None:
        self.buf.release()
        if self._map is not None:
            self._map.close()
        if self._shm is not None:
            self._shm.close()


class HostBuffer:
    """A shared-memory segment of at least ``nbytes`` bytes, made by the caller, removed by
    :meth:`close`."""

    def __init__(self, nbytes: int) -> None:
        self._shm = shared_memory.SharedMemory(create=True, size=max(int(nbytes), 1))
        self.name = self._shm.name
        self.size = self._shm.size

    def array(self, dtype: Any, count: int) -> np.ndarray:
        """The segment's first ``count`` items of ``dtype``, as a NumPy view (valid until
        :meth:`close`)."""
        return np.ndarray((int(count),), dtype=np.dtype(dtype), buffer=self._shm.buf)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._shm.close()
        with contextlib.suppress(FileNotFoundError):
            self._shm.unlink()

    def __enter__(self) -> HostBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Segments kept for the next batch once one is done with them, at most this many: the
#: first write into a new segment's pages costs the kernel a page fault each (zeroed pages:
#: about 1 GB/s on a small machine), a write into pages used before runs at memory speed.
KEPT = 3
#: The smallest segment made (bytes); larger ones are made a power of two long.
SMALLEST = 1 << 20

_free: list[HostBuffer] = []


def lease(nbytes: int) -> HostBuffer:
    """A segment of at least ``nbytes`` bytes: a kept one that is large enough (and at most
    four times too large), else a new one; give it back with :func:`give_back`."""
    nbytes = max(int(nbytes), 1)
    with _lock:
        fits = [b for b in _free if nbytes <= b.size <= 4 * max(nbytes, SMALLEST)]
        if fits:
            best = min(fits, key=lambda b: b.size)
            _free.remove(best)
            return best
    return HostBuffer(max(SMALLEST, 1 << (nbytes - 1).bit_length()))


def give_back(buf: HostBuffer) -> None:
    """Keep ``buf`` for a later batch (the largest :data:`KEPT`); remove the rest."""
    with _lock:
        _free.append(buf)
        _free.sort(key=lambda b: -b.size)
        dropped = _free[KEPT:]
        del _free[KEPT:]
    for b in dropped:
        b.close()


@atexit.register
def _remove_kept() -> None:
    with _lock:
        kept = list(_free)
        _free.clear()
    for b in kept:
        b.close()


def read_slice(name: str, dtype: str, count: int, start: int, stop: int,
               device: str = "cpu") -> Any:
    """Items ``start:stop`` of the segment ``name`` (``count`` items of ``dtype``), copied
    onto ``device`` of this process (a task on a worker: on ``cuda`` straight from the
    segment to the GPU)."""
    shm = _Attached(name)
    try:
        view = np.ndarray((int(count),), dtype=np.dtype(dtype), buffer=shm.buf)
        part = view[int(start):int(stop)]
        if device == "cuda":
            import cupy

            got = cupy.empty(part.shape, dtype=part.dtype)
            got.set(part)
            cupy.cuda.get_current_stream().synchronize()  # (the segment goes next)
        else:
            got = np.array(part, copy=True)
        del view, part
    finally:
        shm.close()
    return got


def copy_into(target: np.ndarray, a: Any) -> None:
    """``a`` (NumPy, or CuPy: straight from the GPU, no host copy between) copied into the
    host array ``target``."""
    if type(a).__module__.startswith("cupy"):
        a.get(out=target)
    else:
        target[...] = a


def write_slice(name: str, dtype: str, count: int, start: int, answer: Any) -> int:
    """``answer`` (NumPy or CuPy) written at item ``start`` of the segment ``name`` (a task on
    the worker holding the answer); the number of items written."""
    shm = _Attached(name)
    try:
        view = np.ndarray((int(count),), dtype=np.dtype(dtype), buffer=shm.buf)
        n = int(answer.shape[0])
        target = view[int(start):int(start) + n]
        copy_into(target, answer)
        del view, target
    finally:
        shm.close()
    return n


def _holds(name: str, token: bytes) -> bool:
    """Whether this process sees the segment ``name`` holding ``token`` (run on each worker)."""
    try:
        shm = _Attached(name)
    except (FileNotFoundError, OSError, ValueError):
        return False
    try:
        return bytes(np.ndarray((len(token),), dtype=np.uint8, buffer=shm.buf)) == token
    finally:
        shm.close()


def same_memory(client: Any) -> bool:
    """Whether the caller and every worker of ``client``'s cluster share this host's memory:
    a segment made here, read back by every worker (once every :data:`CHECK_KEPT_S` s)."""
    now = time.monotonic()
    seen = None
    with _lock, contextlib.suppress(TypeError):
        seen = _seen.get(client)
    if seen is not None and now - seen[0] < CHECK_KEPT_S:
        return seen[1]
    token = uuid.uuid4().bytes
    ok = False
    try:
        with HostBuffer(len(token)) as probe:
            probe.array(np.uint8, len(token))[:] = np.frombuffer(token, np.uint8)
            answers = client.run(_holds, probe.name, token)
            ok = bool(answers) and all(answers.values())
    except Exception:  # no shared memory here, a worker gone: Dask's comms, as before
        ok = False
    with _lock, contextlib.suppress(TypeError):  # (a client taking no weak reference)
        _seen[client] = (now, ok)
    return ok
