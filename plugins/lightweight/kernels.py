"""Searches of the lightweight sorted-array family (Henneberg & Schuhknecht, "Is Binary Search
Really All You Need?"): the range scans and the operations an index calls.

The records the kernels read, the names of the locate modes and the one-thread searches (the
CPU, and the binary schemes on the GPU) are in ``search.py``, shared with the GPU
side (``kernels_cuda.py``); this module re-exports them.

Operations
----------
What an index calls: each takes the device, so the caller never picks a kernel per device.

* :func:`locate` ``(device, plan, lay, pins, q, out, miss, mode)``: on the CPU the scheme's
  one-thread twin (:data:`LOCATE`, one thread per lookup; pinning and the plan's GPU options
  change nothing), on the GPU the block kernel of ``kernels_cuda.drive`` configured by the
  :class:`DriverPlan` (scheduling, lookups per thread, pinning, reordering, groups of K-1
  threads for the K-ary schemes).
* :data:`RUN_SUM`, :data:`RUN_FILL` (sorted runs of AO/PB) and :data:`EO_SCAN_SUM`,
  :data:`EO_SCAN_FILL` (the EO level scan): :class:`~indexzoo.native.targets.GroupKernel`\\ s,
  ``OP(device, n_ranges, lay, ..., group=G, threads_per_block=T)``. ``group=1`` (and the CPU)
  runs one thread per range; any larger group runs §5.7's multi-threaded scan on the GPU, one
  lane per range and the warp finishing long ranges together (:data:`WARP` lanes; the launch
  covers whole warps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.targets import GroupKernel, Kernel

from .search import (
    FIRST,
    NO_PINNING,
    NO_REORDER,
    NOT_FOUND,
    POINT,
    RANK,
    REORDER_DOUBLE,
    REORDER_SINGLE,
    SCHEMES,
    SORT_IDX_DTYPE,
    SORT_RES_DTYPE,
    WARP,
    DriverPlan,
    LayoutRecord,
    PinRecord,
    SharedOffsets,
    ao_bs_locate,
    emit,
    eo_bs_locate,
    eo_child,
    eo_ks_locate,
    pb_bs_locate,
    pb_ks_locate,
)

__all__ = [
    "EO_SCAN_FILL",
    "EO_SCAN_SUM",
    "FIRST",
    "LOCATE",
    "NOT_FOUND",
    "NO_PINNING",
    "NO_REORDER",
    "POINT",
    "RANK",
    "REORDER_DOUBLE",
    "REORDER_SINGLE",
    "RUN_FILL",
    "RUN_SUM",
    "SORT_IDX_DTYPE",
    "SORT_RES_DTYPE",
    "WARP",
    "DriverPlan",
    "LayoutRecord",
    "PinRecord",
    "SharedOffsets",
    "ao_bs_locate",
    "bind_locate",
    "eo_bs_locate",
    "eo_ks_locate",
    "locate",
    "pb_bs_locate",
    "pb_ks_locate",
]


# ------------------------------------------------------------------ lookups


def _locate_body(locate_fn):
    @register_jitable
    def locate_item(i, q, out, miss, mode, lay, pin, pins):
        emit(out, i, locate_fn(q[i], 0, 0, 0, mode, lay, pin, pins), miss, mode)
    return locate_item


#: One thread per lookup: ``LOCATE[scheme](device, n, q, out, miss, mode, lay, pin, pins)``
#: (:func:`locate` runs it on the CPU).
LOCATE = {name: Kernel(_locate_body(fn), name=f"locate_{name.replace('-', '_')}")
          for name, fn in SCHEMES.items()}

_NO_PIN: dict[str, np.ndarray] = {}


def _cuda() -> Any:
    from . import kernels_cuda  # imports numba.cuda: only on the GPU path

    return kernels_cuda


def locate(device: str, plan: DriverPlan, lay: LayoutRecord, pins: PinRecord, q: Any, out: Any,
           miss: Any, mode: np.int64) -> None:
    """``out[i]`` = the scheme's locate result for ``q[i]`` in ``mode`` (NOT_FOUND stored as
    ``miss``): on the CPU one thread per lookup (the scheme's twin; ``pins`` and the plan's GPU
    options change nothing there), on ``cuda`` the driver configured by ``plan``."""
    if device == "cpu":
        dt = np.dtype(lay.keys.dtype).str
        if dt not in _NO_PIN:
            _NO_PIN[dt] = np.zeros(0, dtype=lay.keys.dtype)
        LOCATE[plan.scheme]("cpu", int(q.shape[0]), q, out, miss, mode, lay, _NO_PIN[dt],
                            NO_PINNING)
    else:
        _cuda().drive(plan, lay, pins, q, out, miss, mode)


def bind_locate(device: str, plan: DriverPlan, lay: LayoutRecord, pins: PinRecord, q: Any,
                out: Any, miss: Any, mode: np.int64) -> Callable[..., None]:
    """:func:`locate` with everything but the lookups and the answer bound (``q`` and ``out``
    are :class:`~indexzoo.native.targets.Slot` places): ``launch(n, q, out)``. On the GPU a
    bound launch of the driver (see :meth:`~indexzoo.native.targets.BlockKernel.bind`); on
    the CPU the scheme's twin as :func:`locate` runs it."""
    if device == "cpu":
        def launch(n: int, q: Any, out: Any) -> None:
            locate("cpu", plan, lay, pins, q, out, miss, mode)

        return launch
    return _cuda().bind_drive(plan, lay, pins, q, out, miss, mode)


# ------------------------------------------------------------------ scans


@register_jitable
def eo_scan(lay, lo, hi, values, use_values, out, pos, fill):
    """The paper's EO range algorithm: on every level the keys in ``[lo, hi]`` are contiguous
    and start on the lower-bound path of ``lo``; scan each level from there to the first key
    ``> hi``, then descend. Visits at most two non-qualifying keys per level. ``fill``: write
    the rowIDs to ``out[pos:]``; else return their sum (of ``values[rowid]`` if ``use_values``)."""
    keys, rowids, stride, n, k, pad = lay.keys, lay.rowids, lay.stride, lay.n, lay.k, lay.pad
    acc = np.uint64(0)
    cnt = np.int64(0)
    m = k - 1
    j = np.int64(0)
    level_start = np.int64(0)
    level_slots = m
    while level_start < n:
        base = j * m
        c = eo_child(keys, stride, pad, n, m, base, lo)
        s = base + c
        level_end = min(level_start + level_slots, n)
        while s < level_end:
            at = (s + pad) * stride
            if keys[at] > hi:
                break
            r = rowids[at]
            if fill:
                out[pos + cnt] = r
            elif use_values:
                acc += values[np.int64(r)]
            else:
                acc += np.uint64(r)
            cnt += 1
            s += 1
        j = j * k + 1 + c
        level_start += level_slots
        level_slots *= k
    return acc


@register_jitable
def eo_scan_sum_item(i, lay, lo, hi, values, use_values, out):
    out[i] = eo_scan(lay, lo[i], hi[i], values, use_values, out, 0, False)


@register_jitable
def eo_scan_fill_item(i, lay, lo, hi, offsets, out):
    if offsets[i + 1] > offsets[i]:
        eo_scan(lay, lo[i], hi[i], out, False, out, offsets[i], True)


@register_jitable
def run_sum_item(i, lay, start, stop, values, use_values, out):
    """Sum over the sorted positions ``start[i] .. stop[i] - 1`` (one thread per range)."""
    acc = np.uint64(0)
    for p in range(start[i], stop[i]):
        r = lay.rowids[p * lay.stride]
        acc += values[np.int64(r)] if use_values else np.uint64(r)
    out[i] = acc


@register_jitable
def run_fill_item(i, lay, start, offsets, out):
    """The rowIDs of sorted positions ``start[i] ..`` into ``out[offsets[i]:offsets[i+1]]``."""
    base = offsets[i]
    s = start[i]
    for j in range(offsets[i + 1] - base):
        out[base + j] = lay.rowids[(s + j) * lay.stride]


def _whole_warps(n: int, group: int) -> int:
    """Threads of a multi-threaded scan: one lane per range, whole warps (any group > 1)."""
    return -(-n // WARP) * WARP


# One thread per range on the CPU and with group=1; with a larger group the GPU runs §5.7's
# multi-threaded scan (kernels_cuda: the same arguments, the ranges counted from an array).
RUN_SUM = GroupKernel(run_sum_item, lambda: _cuda().run_sum_warp, threads=_whole_warps)
RUN_FILL = GroupKernel(run_fill_item, lambda: _cuda().run_fill_warp, threads=_whole_warps)
EO_SCAN_SUM = GroupKernel(eo_scan_sum_item, lambda: _cuda().eo_scan_sum_warp,
                          threads=_whole_warps)
EO_SCAN_FILL = GroupKernel(eo_scan_fill_item, lambda: _cuda().eo_scan_fill_warp,
                           threads=_whole_warps)
