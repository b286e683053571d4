"""Where the bytes of a saved array go while it is read: a host array, or a GPU array filled
through pinned staging buffers.

``persist.read`` reads each array in chunks and checksums chunk i on a thread while chunk i + 1
is read. A :class:`HostSink` hands out views of the NumPy array itself, so the file is read
straight into it. A :class:`DeviceSink` (loading onto ``cuda``) hands out one of a few pinned
host buffers instead and, once a chunk is in, copies it to the CuPy array asynchronously on
its own stream: reading the file, checksumming and the copy to the device overlap, and no
host copy of the whole array is made (a pageable ``cupy.asarray`` of a host array copies at a
few GB/s and only after the whole read).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .devices import import_cupy

__all__ = ["DeviceSink", "HostSink", "Sink", "sink_for"]


class Sink:
    """One array being filled: ``buffer`` gives where the next bytes are read to, ``commit``
    says how many arrived, ``result`` gives the array once every byte has been committed."""

    def start(self, count: int, dtype: np.dtype) -> None:
        raise NotImplementedError

    def buffer(self, offset: int, size: int) -> memoryview:
        raise NotImplementedError

    def commit(self, offset: int, size: int) -> None:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Wait for outstanding copies (every ``result`` is then complete)."""


class HostSink(Sink):
    """Reads straight into a NumPy array."""

    def start(self, count: int, dtype: np.dtype) -> None:
        self._flat = np.empty(count, dtype=dtype)
        self._view = self._flat.view(np.uint8).reshape(-1).data

    def buffer(self, offset: int, size: int) -> memoryview:
        return self._view[offset:offset + size]

    def commit(self, offset: int, size: int) -> None:
        pass

    def result(self) -> np.ndarray:
        return self._flat


class DeviceSink(Sink):
    """Reads into ``depth`` pinned buffers of ``chunk`` bytes in turn; each filled buffer is
    copied to the CuPy array on one stream, and is reused once that copy has finished."""

    def __init__(self, chunk: int, depth: int = 4) -> None:
        self._cp = cp = import_cupy("loading a saved index onto the GPU")
        import cupyx

        self._stream = cp.cuda.Stream(non_blocking=True)
        self._buffers = [cupyx.empty_pinned((chunk,), dtype=np.uint8) for _ in range(depth)]
        self._done: list[Any] = [None] * depth  # the event after each buffer's last copy
        self._turn = 0

    def start(self, count: int, dtype: np.dtype) -> None:
        self._flat = self._cp.empty(count, dtype=dtype)

    def buffer(self, offset: int, size: int) -> memoryview:
        slot = self._turn % len(self._buffers)
        if self._done[slot] is not None:
            self._done[slot].synchronize()
        return self._buffers[slot].data[:size]

    def commit(self, offset: int, size: int) -> None:
        slot = self._turn % len(self._buffers)
        runtime = self._cp.cuda.runtime
        runtime.memcpyAsync(self._flat.data.ptr + offset, self._buffers[slot].ctypes.data,
                            size, runtime.memcpyHostToDevice, self._stream.ptr)
        self._done[slot] = self._stream.record()
        self._turn += 1

    def result(self) -> Any:
        return self._flat

    def close(self) -> None:
        self._stream.synchronize()


def sink_for(device: str, chunk: int) -> Sink:
    """A DeviceSink for ``cuda``, else a HostSink."""
    return DeviceSink(chunk) if device == "cuda" else HostSink()
