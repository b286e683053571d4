"""Scans of sorted (key, rowID) pairs from a start position: what follows a closest-hit lookup
in the RT family (optimized RX, Alg. 3 + 4; cgRX's in-bucket search and scan).

A closest-hit ray finds a position ``start`` near the first key ``>= lo`` (exactly there for
optimized RX; up to a bucket before it for cgRX, whose scan skips keys ``< lo``), or none
(``start < 0``). From there the answer of the range ``[lo, hi]`` is the run of keys
``lo <= key <= hi``: its first position and length (:data:`RUN_BOUNDS`, galloping, so long
runs cost O(log m)), the sum of its values (:data:`RUN_SUM`), its rowIDs
(:func:`indexzoo.native.csr.gather_runs`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba.extending import register_jitable

from .csr import gather_runs
from .search import lower_bound_from, upper_bound_from
from .targets import GroupKernel, Kernel, Slot, values_arg

__all__ = ["RUN_BOUNDS", "RUN_ROWID", "RUN_SUM", "answer_runs", "prepared_run_rowids",
           "run_from"]


@register_jitable
def run_from(keys, s, lo, hi):
    """``(first, count)``: the run of keys in ``[lo, hi]`` at or after position ``s`` (``(0,
    0)`` when ``s < 0`` or no key there qualifies); for kernels that find ``s`` themselves."""
    if s < 0 or lo > hi:
        return np.int64(0), np.int64(0)
    p = lower_bound_from(keys, s, lo)
    if p < keys.shape[0] and keys[p] <= hi:
        return np.int64(p), np.int64(upper_bound_from(keys, p, hi) - p)
    return np.int64(0), np.int64(0)


@register_jitable
def run_bounds_item(i, keys, start, lo, hi, first, count):
    """``first[i]``/``count[i]``: the run of keys in ``[lo[i], hi[i]]`` at or after
    ``start[i]`` (count 0 when ``start[i] < 0`` or no key there qualifies)."""
    first[i], count[i] = run_from(keys, start[i], lo[i], hi[i])


@register_jitable
def run_sum_item(i, rowids, first, count, values, use_values, out, group):
    """Sum over the run: of ``values[rowid]``, or of the rowIDs, uint64 wrapping (``group``:
    the threads per run of the collaborative GPU scan; one here)."""
    acc = np.uint64(0)
    s = first[i]
    for p in range(s, s + count[i]):
        r = rowids[p]
        acc += values[np.int64(r)] if use_values else np.uint64(r)
    out[i] = acc


@register_jitable
def run_rowid_item(i, rowids, first, count, miss, out):
    """``out[i]``: the rowID at the start of run ``i``, ``miss`` for an empty run (the
    ``rowid`` answer of :func:`answer_runs`, in one pass)."""
    out[i] = rowids[first[i]] if count[i] > 0 else miss


def _cooperative() -> Any:
    from . import runs_cuda  # imports numba.cuda: only on the GPU path

    return runs_cuda


RUN_BOUNDS = Kernel(run_bounds_item)
RUN_ROWID = Kernel(run_rowid_item)
#: ``RUN_SUM(device, n, rowids, first, count, values, use_values, out, G, group=G)``: one
#: thread per run on the CPU, G threads per run on the GPU (the collaborative scan).
RUN_SUM = GroupKernel(run_sum_item, lambda: _cooperative().run_sum_group)


def answer_runs(device: str, out: str, rowids: Any, first: Any, count: Any, values: Any,
                rowid_dtype: Any, miss: Any, *, group: int = 1,
                threads_per_block: int = 256) -> Any:
    """The ``out``-mode answer (``rowid``, ``count``, ``sum`` or ``rowids`` as CSR) of runs
    ``rowids[first[i]:first[i] + count[i]]`` of sorted pairs, one run per lookup; sums with
    ``group`` threads per run on the GPU."""
    xp = np if device == "cpu" else __import__("cupy")
    if out == "count":
        return count.astype(rowid_dtype)
    if out == "rowid":
        has = count > 0
        return xp.where(has, rowids[xp.where(has, first, 0)], miss).astype(rowid_dtype)
    if out == "sum":
        res = xp.empty(int(first.shape[0]), dtype=np.uint64)
        vals, use_values = values_arg(values, xp)
        RUN_SUM(device, int(first.shape[0]), rowids, first, count, vals, use_values, res,
                np.int64(group), group=group, threads_per_block=threads_per_block)
        return res
    return gather_runs(device, rowids, first, count, threads_per_block=threads_per_block)


def prepared_run_rowids(device: str, runs: Callable[..., None], rowids: Any, rowid_dtype: Any,
                        miss: Any, xp: Any, *,
                        threads_per_block: int = 256) -> Callable[[Any], Any]:
    """Point lookups answered with ``rowid`` from runs, prepared for repeated small calls:
    ``q -> answer``. ``runs``: a bound launch ``runs(n, q, q, first, count)`` (see
    :meth:`~indexzoo.native.targets.Kernel.bind`) that writes each lookup's run of sorted
    pairs, as a range ``[q, q]``; a call allocates the runs and the answer and makes two
    bound launches, the second :data:`RUN_ROWID` (the same answers as :func:`answer_runs`)."""
    dtype = np.dtype(rowid_dtype)
    rowid_of = RUN_ROWID.bind(device, rowids, Slot(np.dtype(np.int64)),
                              Slot(np.dtype(np.int64)), dtype.type(miss), Slot(dtype),
                              threads_per_block=threads_per_block)
    empty = xp.empty

    def answer(q: Any) -> Any:
        n = q.shape[0]
        first = empty(n, np.int64)
        count = empty(n, np.int64)
        runs(n, q, q, first, count)
        res = empty(n, dtype)
        rowid_of(n, first, count, res)
        return res

    return answer
