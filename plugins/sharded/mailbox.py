"""GPU arrays exchanged between the Dask workers of one host through device memory that
each peer maps once.

A :class:`~.handoff.Handoff` exports every array into a fresh allocation and the receiver
opens and closes its IPC handle each time: about 4-5 ms a transfer on two H200s, nearly all
of it the handle's opening and closing, not the copy (64 MB crosses NVLink in about 0.3 ms).
A chunk of lookups answered in one task (:func:`~.dask_lookups.answer_chunk`) instead puts
its pieces for other workers' shards in a *mailbox* of its own process, and each shard's
worker puts its answers in a mailbox of its own, one per asker:

* a mailbox is one device allocation (``cupy.cuda.Memory``, outside any pool: an IPC handle
  names a whole allocation) that grows by doubling and never shrinks; a grown one gets a
  new *generation*, and the allocation it replaces is kept for the life of the process (a
  peer may still hold it mapped), at most as much again as the mailbox itself;
* a :class:`Letter` says where arrays sit in a mailbox (its process, name, generation, IPC
  handle, and each array's offset, shape and dtype): a few hundred bytes through Dask;
* a peer maps each mailbox once (per allocation, known by its IPC handle) and keeps it
  mapped, so a transfer is one copy, peer to peer (over NVLink where the GPUs have it);
* :func:`post` writes and synchronises before it returns, so the letter is read only once
  its arrays are there. A mailbox is written again only after its reader has answered (the
  pieces) or has asked again (the answers), and :func:`read` copies before that.

One mailbox name per writer and purpose: the pieces of a task thread; the answers of one
shard to one task thread of one asker (``pieces|<thread>``, ``answers|<asker>|<thread>|<shard>``).
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from .handoff import host_token

__all__ = ["Letter", "Parcel", "post", "post_first", "read", "read_first", "usable"]

_ALIGN = 256
_PARCEL = "parcel:"

_lock = threading.Lock()
# name -> [memory, generation, capacity]; retired allocations kept (peers may map them)
_boxes: dict[str, list[Any]] = {}
_retired: list[Any] = []
_parcels: weakref.WeakValueDictionary[str, Parcel] = weakref.WeakValueDictionary()
# (pid, name) -> (IPC handle, mapped base pointer): the handle names one allocation, so a
# grown mailbox, or one of a later process that got the same pid, is mapped anew
_mapped: dict[tuple[int, str], tuple[bytes, int]] = {}


@dataclass(frozen=True)
class Letter:
    """Where arrays sit in another process's mailbox, for :func:`read`."""

    token: str  # the host (:func:`~.handoff.host_token`)
    pid: int
    name: str
    generation: int
    handle: bytes
    parts: tuple[tuple[int, tuple[int, ...], str], ...]  # (offset, shape, dtype) per array

    def some(self, which: list[int]) -> Letter:
        """The letter of some of its arrays only."""
        return Letter(self.token, self.pid, self.name, self.generation, self.handle,
                      tuple(self.parts[i] for i in which))

    def items(self, start: int, stop: int) -> Letter:
        """The letter of items ``start:stop`` of each of its (1-D) arrays."""
        parts = []
        for off, shape, dtype in self.parts:
            size = np.dtype(dtype).itemsize
            lo, hi = min(start, shape[0]), min(stop, shape[0])
            parts.append((off + lo * size, (max(hi - lo, 0),), dtype))
        return Letter(self.token, self.pid, self.name, self.generation, self.handle,
                      tuple(parts))


def _box(name: str, nbytes: int) -> tuple[Any, int]:
    """This process's mailbox ``name`` with room for ``nbytes`` (grown if needed), and its
    generation."""
    import cupy

    with _lock:
        held = _boxes.get(name)
        if held is not None and held[2] >= nbytes:
            return held[0], held[1]
        size = max(nbytes, 1 << 20)
        if held is not None:
            size = max(size, 2 * held[2])
            _retired.append(held[0])
        mem = cupy.cuda.Memory(size)
        generation = 0 if held is None else held[1] + 1
        _boxes[name] = [mem, generation, size]
        return mem, generation


def post(name: str, arrays: list[Any] | tuple[Any, ...]) -> Letter:
    """``arrays`` (CuPy, on this process's GPU) copied into mailbox ``name``, one after
    another, and the letter that says where; synchronised, so a peer may read at once."""
    import cupy

    offsets, total = _layout(arrays)
    mem, generation = _box(name, total)
    _copy_in(mem, arrays, offsets)
    handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(mem.ptr))
    return Letter(host_token(), os.getpid(), name, generation, handle, _parts(arrays, offsets))


class Parcel:
    """Arrays (CuPy, or NumPy: copied from the host) copied into an allocation of their own
    on this process's GPU, for peers to read once each
    (:func:`read` opens its handle, copies and closes it): a build's keys, a batch from the
    caller. Kept alive (and so readable) while this object is; :meth:`close` frees it."""

    def __init__(self, arrays: list[Any] | tuple[Any, ...]) -> None:
        import cupy

        offsets, total = _layout(arrays)
        self._mem: Any = cupy.cuda.Memory(max(total, 1))
        _copy_in(self._mem, arrays, offsets)
        name = f"{_PARCEL}{uuid.uuid4().hex}"
        self.letter = Letter(host_token(), os.getpid(), name, 0,
                             bytes(cupy.cuda.runtime.ipcGetMemHandle(self._mem.ptr)),
                             _parts(arrays, offsets))
        with _lock:
            _parcels[name] = self

    @property
    def ptr(self) -> int:
        if self._mem is None:
            raise RuntimeError("a parcel was read after it was closed")
        return int(self._mem.ptr)

    def close(self) -> None:
        self._mem = None


def _layout(arrays: list[Any] | tuple[Any, ...]) -> tuple[list[int], int]:
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-int(a.nbytes) // _ALIGN) * _ALIGN
    return offsets, total


def _copy_in(mem: Any, arrays: list[Any] | tuple[Any, ...], offsets: list[int]) -> None:
    import cupy

    for a, off in zip(arrays, offsets, strict=True):
        if a.nbytes:
            dst = cupy.ndarray(a.shape, a.dtype, cupy.cuda.MemoryPointer(mem, off))
            if isinstance(a, np.ndarray):
                dst.set(np.ascontiguousarray(a))  # host -> GPU, straight into place
            else:
                dst[...] = a
    cupy.cuda.get_current_stream().synchronize()


def _parts(arrays: list[Any] | tuple[Any, ...], offsets: list[int]
           ) -> tuple[tuple[int, tuple[int, ...], str], ...]:
    return tuple((off, tuple(int(d) for d in a.shape), a.dtype.str)
                 for a, off in zip(arrays, offsets, strict=True))


def _base(letter: Letter) -> int:
    """The device address of the letter's mailbox here: the allocation itself in the
    process that owns it, else its mapping (opened once per allocation; the previous one
    closed)."""
    import cupy

    if letter.pid == os.getpid():
        with _lock:
            if letter.name.startswith(_PARCEL):
                return _parcels[letter.name].ptr
            held = _boxes[letter.name]
            if held[1] != letter.generation:
                raise RuntimeError(f"mailbox {letter.name!r} was grown under a letter")
            return int(held[0].ptr)
    if letter.token != host_token():
        raise RuntimeError("a sharded index's GPU arrays were sent through a mailbox to a "
                           "worker on another host; give the index a cluster on one host, "
                           "or one whose workers do not share a host")
    rt = cupy.cuda.runtime
    key = (letter.pid, letter.name)
    with _lock:
        mapped = _mapped.get(key)
        if mapped is not None and mapped[0] == letter.handle:
            return mapped[1]
        if mapped is not None:  # grown since (or a new process of that pid): remapped
            rt.ipcCloseMemHandle(mapped[1])
            del _mapped[key]
        base = int(rt.ipcOpenMemHandle(letter.handle))
        _mapped[key] = (letter.handle, base)
        return base


def read(letter: Letter) -> tuple[Any, ...]:
    """The letter's arrays, copied onto this process's current GPU (peer to peer). Queued
    on the current stream: later work on it sees them; the writer may reuse its mailbox once
    this process has synchronised (:func:`post` does)."""
    import cupy

    rt = cupy.cuda.runtime
    # a parcel of another process: opened for this read
    once = letter.name.startswith(_PARCEL) and letter.pid != os.getpid()
    if once:
        if letter.token != host_token():
            raise RuntimeError("a sharded index's GPU arrays were sent by CUDA IPC to a "
                               "process on another host")
        base = int(rt.ipcOpenMemHandle(letter.handle))
    else:
        base = _base(letter)
    stream = cupy.cuda.get_current_stream()
    out = []
    try:
        for off, shape, dtype in letter.parts:
            dst = cupy.empty(shape, dtype=dtype)
            if dst.nbytes:
                rt.memcpyAsync(dst.data.ptr, base + off, dst.nbytes, rt.memcpyDefault,
                               stream.ptr)
            out.append(dst)
    finally:
        if once:
            stream.synchronize()  # copied before the handle closes
            rt.ipcCloseMemHandle(base)
    return tuple(out)


def read_first(letter: Letter) -> Any:
    """The first array of a letter, on this process's GPU (a task: synchronised, so its
    result is there when the task is done)."""
    import cupy

    got = read(letter)[0]
    cupy.cuda.get_current_stream().synchronize()
    return got


def post_first(name: str, array: Any) -> Letter:
    """``array`` posted alone in mailbox ``name`` (a task on the worker holding it)."""
    return post(name, (array,))


def usable() -> bool:
    """Whether this process can post to a mailbox: CuPy imports and sees a GPU."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:
        return False
