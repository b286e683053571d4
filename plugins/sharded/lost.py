"""A lost worker, whichever way Dask says it: :class:`ShardLost`.

A worker that dies or leaves while a sharded index builds, loads, saves or answers shows up
as one of several Dask errors, depending on the moment: ``FutureCancelledError`` (a task
whose input was on that worker), ``KilledWorker`` (a task whose workers kept dying),
``CommClosedError`` or another ``OSError`` (a connection cut), ``KeyError`` (data the
scheduler no longer knows), a timeout. :func:`losing_workers` turns every one of them into
:class:`ShardLost`, which names what was under way. Two kinds of errors pass unchanged: the
errors indexzoo raises on purpose (an inner index refusing its keys, say) and an exception a
task raised itself (a future in the ``error`` state holds it): neither is a lost worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from indexzoo.display import one_line
from indexzoo.errors import DeviceUnavailable, IndexZooError

__all__ = ["ShardLost", "losing_workers", "raised_by_a_task"]


class ShardLost(DeviceUnavailable):
    """A shard of a sharded index is gone (every worker holding a copy of it died or left):
    the lookup that met it returned nothing, and every later lookup raises this too until the
    index is built (or loaded) again; a build, load or save that lost a worker published or
    wrote nothing."""


def raised_by_a_task(exc: BaseException, futures: Sequence[Any]) -> bool:
    """Whether ``exc`` is an exception one of ``futures``' tasks raised itself (not Dask's
    ``KilledWorker``, which says the task's workers died)."""
    if type(exc).__name__ == "KilledWorker":
        return False
    for future in futures:
        if getattr(future, "status", None) != "error":
            continue
        try:
            raised = future.exception(timeout=1)
        except Exception:  # the client lost the future's state too: no task's own error
            continue
        if type(raised) is type(exc) and str(raised) == str(exc):
            return True
    return False


@contextmanager
def losing_workers(what: str, futures: Sequence[Any] = ()) -> Iterator[None]:
    """Run the block; ShardLost, naming ``what`` (``"the build"``), for whatever Dask raised
    because a worker died or left. ``futures``: the block's futures (a list it may fill),
    to tell an exception a task raised itself, which passes unchanged."""
    try:
        yield
    except IndexZooError:
        raise
    except Exception as exc:
        if raised_by_a_task(exc, futures):
            raise
        raise ShardLost(f"{what} lost a worker of the sharded index: it died or left the "
                        f"cluster ({type(exc).__name__}: {one_line(str(exc))[:200]}); nothing "
                        "was published or written: do it again") from exc
