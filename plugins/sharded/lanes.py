"""Two CUDA streams per worker thread for a sharded call's GPU work, so that its short steps do
not queue behind searches.

A worker runs several calls' tasks at once (its threads) and serves other workers' pieces (its
:class:`~.dask_lookups.ShardServer`). On one stream, a task's routing waits for its pieces'
sizes behind every search queued before it, and a mailbox post waits for them too: with 16
calls in flight on two H200s the routing step held its thread 5.8-6.6 ms for 0.5 ms of its
own work. So a task's GPU work goes on two non-blocking streams of its thread:

* ``fast`` (the device's highest priority): routing, the mailbox copies and the placing of
  the answers, the steps a thread or a peer waits on; the GPU schedules their blocks ahead
  of a search's;
* ``slow`` (default priority): the searches.

Ordering between them is by events (:func:`hand_over`). ``fast`` first waits for the legacy
default stream, where the chunk's own task may still be writing it.

With them, 2^26 resident lookups over 2^28 keys (`btree`), four threads a worker, 16 calls in
flight: two H200s answered a call every 8.0 ms against 13.2 ms for one (1.64x; 10.1 against
13.5 ms on one stream; 8.2 ms measured again). In one A/B call the two GPUs took 8.0-8.2 ms
with the priority and 8.3 ms with the fast stream at default priority: within the spread
between repeats, so the gain is the separate streams; the priority is kept for the latency of
the short steps, not for a measured figure.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

__all__ = ["Lanes", "hand_over", "lanes"]

_local = threading.local()


class Lanes:
    """``fast`` and ``slow``: CuPy streams (null contexts off the GPU), used as context
    managers."""

    def __init__(self, fast: Any, slow: Any) -> None:
        self.fast: Any = fast if fast is not None else contextlib.nullcontext()
        self.slow: Any = slow if slow is not None else contextlib.nullcontext()
        self.gpu = fast is not None

    def written(self) -> None:
        """Wait until the work queued on ``fast`` is done."""
        if self.gpu:
            self.fast.synchronize()

    def after_default(self) -> None:
        """Work queued on ``fast`` from now on waits for the legacy default stream's so far."""
        if self.gpu:
            import cupy

            self.fast.wait_event(cupy.cuda.Stream.null.record())


def lanes(device: str) -> Lanes:
    """This thread's two streams on its current GPU (made on first use), the fast one made to
    wait for the legacy default stream's work so far; two null contexts off the GPU."""
    if device != "cuda":
        return Lanes(None, None)
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    held = getattr(_local, "streams", None)
    if held is None or held[0] != dev:
        # (a priority beyond the device's range is clamped to its highest: CUDA's rule)
        held = _local.streams = (dev, cupy.cuda.Stream(non_blocking=True, priority=-1000),
                                 cupy.cuda.Stream(non_blocking=True))
    got = Lanes(held[1], held[2])
    got.after_default()
    return got


def hand_over(frm: Any, to: Any) -> None:
    """Work queued on ``to`` from now on waits for the work queued on ``frm`` so far (CuPy
    streams; nothing off the GPU)."""
    if hasattr(frm, "record") and hasattr(to, "wait_event"):
        to.wait_event(frm.record())
