"""The GPU side of the lightweight family: the cooperative K-ary searches (EO+KS, AO+PB+KS),
the lookup driver that applies the paper's optimisations, and the multi-threaded range scans.
Indexes reach all of it through ``kernels.py``'s operations (:func:`~.kernels.locate`
and the scan :class:`~indexzoo.native.targets.GroupKernel`\\ s), never directly.

* **K-ary search** [paper §3.4]: one lookup per group of K-1 adjacent threads; lane ``l`` loads
  pivot ``l`` of the node, the group votes (``ballot_sync``, masked to the group) on
  ``pivot < x`` and the popcount is the child. EO+KS descends to the lower bound without the
  early exit (one vote per node instead of two) and checks it. The CPU twins
  (``eo_ks_locate``, ``pb_ks_locate`` in ``search.py``) give the same results one
  thread at a time.
* **Driver** (:func:`drive`, :func:`driver`): a block kernel generated per (scheme, group size
  G, lookups per thread R, reordering, pinning, key dtype), taking the build as its
  :class:`~.search.LayoutRecord` and :class:`~.search.PinRecord` (the
  arity K replaced by the compile-time constant G+1, so index arithmetic folds):

  - *scheduling* [§4.1]: a grid-stride loop over tiles of ``(T/G)*R`` lookups; dynamic
    scheduling launches one block per tile, static scheduling one block per SM;
  - *lookup registers* R [§4.1]: each thread (group) answers R lookups of the tile;
  - *pinning* [§4.2]: the block copies the top of the search structure into shared memory
    once, before its first tile (see ``ao_key``/``front_key``);
  - *reordering* [§4.3]: the tile's keys are sorted in shared memory with their positions (a
    bitonic sort: numba has no BlockRadixSort), each group takes R consecutive sorted keys;
    *single* writes each result to its lookup's position, *double* puts results back in tile
    order in shared memory first, so the global write is coalesced.
* **Multi-threaded range scans** [§5.7]: the cooperative bodies of ``RUN_SUM``/``RUN_FILL``
  (sorted runs) and ``EO_SCAN_SUM``/``EO_SCAN_FILL`` (EO level scans), with the scalar bodies'
  arguments (the number of ranges is the length of ``start``/``lo``): each lane scans its own
  range up to :data:`~.search.WARP` entries, then the warp finishes every longer
  range together, 32 entries per step. Launched on whole warps.

This module imports ``numba.cuda``; only indexes on the ``cuda`` device import it.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from indexzoo.native.coop import group_of, group_sum, vote
from indexzoo.native.targets import BlockKernel

from .search import (
    NO_REORDER,
    REORDER_DOUBLE,
    SCHEMES,
    SORT_IDX_DTYPE,
    SORT_RES_DTYPE,
    WARP,
    DriverPlan,
    LayoutRecord,
    PinRecord,
    ao_bs_finish,
    ao_key,
    emit,
    eo_child,
    eo_lb_finish,
    front_key,
    pb_finish,
    pb_key,
)

__all__ = ["GROUP_LOCATE", "drive", "driver", "eo_scan_fill_warp", "eo_scan_sum_warp",
           "run_fill_warp", "run_sum_warp"]

#: All lanes of a warp.
FULL_MASK = np.uint32(0xFFFFFFFF)

# ------------------------------------------------------------------ cooperative K-ary searches


@register_jitable
def eo_ks_locate_group(x, lane, mask, shift, mode, lay, pin, pins):
    k = lay.k
    m = k - 1
    n = lay.n
    j = np.int64(0)
    cand = np.int64(-1)
    while True:
        base = j * m
        if base >= n:
            break
        s = base + lane
        exists = s < n
        kv = front_key(lay.keys, lay.stride, s + lay.pad, pin, pins.pa) if exists else lay.keys[0]
        c = np.int64(cuda.popc(vote(mask, shift, exists and kv < x)))
        if c < m and base + c < n:
            cand = base + c
        j = j * k + 1 + c
    # no early exit (one vote per node instead of two): POINT checks the lower bound
    return eo_lb_finish(cand, x, mode, lay, k)


@register_jitable
def pb_ks_locate_group(x, lane, mask, shift, mode, lay, pin, pins):
    k = lay.k
    m = k - 1
    node = np.int64(0)
    for lvl in range(lay.levels):
        pv = pb_key(lay, lay.pbo[lvl] + node * m + lane, pin, pins)
        node = node * k + np.int64(cuda.popc(vote(mask, shift, pv < x)))
    p = node * lay.chunk
    end = min(p + lay.chunk, lay.n)
    while p < end:  # the chunk, K-1 keys per step (one coalesced load)
        s = p + lane
        ok = s < end
        kv = lay.keys[s * lay.stride] if ok else lay.keys[0]
        c = np.int64(cuda.popc(vote(mask, shift, ok and kv < x)))
        if c < m:
            p += c
            break
        p += m
    return pb_finish(min(p, end), x, mode, lay)


#: The cooperative locate function of each K-ary scheme (same signature as the one-thread ones).
GROUP_LOCATE = {"eo-ks": eo_ks_locate_group, "ao-pb-ks": pb_ks_locate_group}


@register_jitable
def with_arity(lay, k):
    """``lay`` with the arity ``k`` (the driver's compile-time constant)."""
    return LayoutRecord(lay.keys, lay.rowids, lay.stride, lay.n, lay.pb, lay.pbo, lay.levels, k,
                        lay.chunk, lay.pad, lay.step0, lay.h, lay.b)


# ------------------------------------------------------------------ pinning: filling shared memory


@register_jitable
def fill_ao(tid, nthreads, pin, lay, pins):
    """AO+BS: the keys of the first steps, then (full) the next step's (see ``ao_key``)."""
    for j in range(tid, pins.pa, nthreads):
        p = lay.n - 1 - (np.int64(j) << pins.ps)
        if p >= 0:
            pin[j] = lay.keys[p * lay.stride]
    for j in range(tid, pins.pbb, nthreads):
        p = lay.n - 1 - ((2 * np.int64(j) + 1) << (pins.ps - 1))
        if p >= 0:
            pin[pins.pa + j] = lay.keys[p * lay.stride]


@register_jitable
def fill_front(tid, nthreads, pin, lay, pins):
    """EO: the first ``pa`` slots."""
    for j in range(tid, pins.pa, nthreads):
        pin[j] = lay.keys[j * lay.stride]


@register_jitable
def fill_pb(tid, nthreads, pin, lay, pins):
    """AO+PB: the first ``pa`` pivots (the top levels)."""
    for j in range(tid, pins.pa, nthreads):
        pin[j] = lay.pb[j]


FILL = {"ao-bs": fill_ao, "eo-bs": fill_front, "eo-ks": fill_front,
        "ao-pb-bs": fill_pb, "ao-pb-ks": fill_pb}


# ------------------------------------------------------------------ the driver

_DRIVER = """
def lw_driver(nq, q, out, miss, mode, lay_arg, pins, shm):
    lay = with_arity(lay_arg, KARY)
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    dyn_k = cuda.shared.array(0, KDT)
    pin = dyn_k[0:pins.pa + pins.pbb]
    if PIN:
        fill(tid, nthreads, pin, lay, pins)
        cuda.syncthreads()
    g = tid // G
    groups = nthreads // G
    lane, mask, shift = lane_of(tid)
    tile = groups * R
    base = cuda.blockIdx.x * tile
    while base < nq:
        if REORDER != NO_REORDER:
            dyn_u = cuda.shared.array(0, IDT)
            dyn_r = cuda.shared.array(0, RDT)
            skeys = dyn_k[shm.keys:shm.keys + tile]
            sidx = dyn_u[shm.idx:shm.idx + tile]
            sres = dyn_r[shm.res:shm.res + tile]
            for e in range(tid, tile, nthreads):
                j = base + e
                skeys[e] = q[j] if j < nq else KMAX
                sidx[e] = e
            cuda.syncthreads()
            width = 2  # bitonic sort of (key, position) in shared memory, by the whole block
            while width <= tile:
                half = width >> 1
                while half > 0:
                    for e in range(tid, tile >> 1, nthreads):
                        a_at = 2 * e - (e & (half - 1))
                        c_at = a_at + half
                        a = skeys[a_at]
                        c = skeys[c_at]
                        if (a > c) == ((a_at & width) == 0):
                            skeys[a_at] = c
                            skeys[c_at] = a
                            t = sidx[a_at]
                            sidx[a_at] = sidx[c_at]
                            sidx[c_at] = t
                    cuda.syncthreads()
                    half >>= 1
                width <<= 1
{SORTED}            cuda.syncthreads()
            if REORDER == REORDER_DOUBLE:
                for e in range(tid, tile, nthreads):
                    j = base + e
                    if j < nq:
                        emit(out, j, sres[e], miss, mode)
                cuda.syncthreads()
        else:
{PLAIN}        base += cuda.gridDim.x * tile
"""


@register_jitable
def lane_single(tid):
    return np.int64(0), np.uint32(0), np.uint32(0)


def _lane_of(group: int) -> Any:
    if group == 1:
        return lane_single

    @register_jitable
    def lane_of(tid):
        _, lane, mask, shift = group_of(np.int64(tid), group)
        return np.int64(lane), mask, shift
    return lane_of


_ONE_BY_ONE_SORTED = """            for r in range(R):
                e = g * R + r
                li = np.int64(sidx[e])
                j = base + li
                if j < nq:
                    res = locate(skeys[e], lane, mask, shift, mode, lay, pin, pins)
                    if lane == 0:
                        if REORDER == REORDER_DOUBLE:
                            sres[li] = res
                        else:
                            emit(out, j, res, miss, mode)
"""
_ONE_BY_ONE_PLAIN = """            for r in range(R):
                j = base + r * groups + g
                if j < nq:
                    res = locate(q[j], lane, mask, shift, mode, lay, pin, pins)
                    if lane == 0:
                        emit(out, j, res, miss, mode)
"""

# Interleaved searches: R lookups of one thread advance step by step together, so R loads are in
# flight at once (the point of the paper's "lookup registers"). Lines holding {r} are repeated
# for r = 0 .. R-1 (explicit variables, so they live in registers).
_LOAD_SORTED = """
                e{r} = g * R + {r}
                li{r} = np.int64(sidx[e{r}])
                j{r} = base + li{r}
                x{r} = skeys[e{r}]
"""
_LOAD_PLAIN = """
                j{r} = base + {r} * groups + g
                x{r} = q[j{r}] if j{r} < nq else KMAX
"""
_STORE_SORTED = """
                if j{r} < nq:
                    if REORDER == REORDER_DOUBLE:
                        sres[li{r}] = res{r}
                    else:
                        emit(out, j{r}, res{r}, miss, mode)
"""
_STORE_PLAIN = """
                if j{r} < nq:
                    emit(out, j{r}, res{r}, miss, mode)
"""
_SEARCH = {  # ao-bs: one loop over the steps, generated in _interleaved
    "eo-bs": """
                c{r} = np.int64(-1)
                t{r} = np.int64(0)
                while True:
                    more = False
                    if t{r} < lay.n:
                        kv = front_key(lay.keys, lay.stride, t{r} + lay.pad, pin, pins.pa)
                        if kv >= x{r}:
                            c{r} = t{r}
                        t{r} = 2 * t{r} + (1 if kv >= x{r} else 2)
                        more = True
                    if not more:
                        break
                res{r} = eo_lb_finish(c{r}, x{r}, mode, lay, 2)
""",
    "ao-pb-bs": """
                t{r} = np.int64(0)
                for lvl in range(lay.levels):
                    t{r} = 2 * t{r} + (1 if pb_key(lay, lay.pbo[lvl] + t{r}, pin, pins) < x{r} else 0)
                lo{r} = t{r} * lay.chunk
                hi{r} = min(lo{r} + lay.chunk, lay.n)
                while True:
                    more = False
                    if lo{r} < hi{r}:
                        mid = (lo{r} + hi{r}) >> 1
                        if lay.keys[mid * lay.stride] < x{r}:
                            lo{r} = mid + 1
                        else:
                            hi{r} = mid
                        more = True
                    if not more:
                        break
                res{r} = pb_finish(lo{r}, x{r}, mode, lay)
""",
}


INTERLEAVED_HELPERS = {"ao_key": ao_key, "front_key": front_key, "ao_bs_finish": ao_bs_finish,
                       "eo_lb_finish": eo_lb_finish, "pb_finish": pb_finish, "pb_key": pb_key}


def _repeat(block: str, per_thread: int) -> str:
    return "".join(block.replace("{r}", str(r)) for r in range(per_thread))


def _interleaved(scheme: str, per_thread: int, sorted_tile: bool) -> str:
    """The driver's per-tile part for R interleaved binary searches of one thread."""
    if scheme == "ao-bs":  # one loop over the steps, every lookup inside it
        body = (_repeat("\n                o{r} = lay.n - 1", per_thread)
                + "\n                step = lay.step0"
                "\n                while step > 0:"
                + _repeat("""
                    if step <= o{r}:
                        if ao_key(lay, o{r} - step, pin, pins) >= x{r}:
                            o{r} -= step""", per_thread)
                + "\n                    step >>= 1"
                + _repeat("\n                res{r} = ao_bs_finish(o{r}, x{r}, mode, lay)",
                          per_thread) + "\n")
    else:
        body = _interleave_loops(_SEARCH[scheme], per_thread)
    load = _LOAD_SORTED if sorted_tile else _LOAD_PLAIN
    store = _STORE_SORTED if sorted_tile else _STORE_PLAIN
    code = _repeat(load, per_thread) + body + _repeat(store, per_thread)
    return textwrap.indent(textwrap.dedent(code).strip("\n"), " " * 12) + "\n"


def _interleave_loops(search: str, per_thread: int) -> str:
    """EO and PB searches: per-lookup statements repeated; a ``while True`` loop runs every
    lookup's step in one iteration and stops when none moved."""
    out: list[str] = []
    lines = search.strip("\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "while True:":
            block = []
            i += 1
            while i < len(lines) and (lines[i].startswith(" " * 20) or not lines[i].strip()):
                block.append(lines[i])
                i += 1
            first, rest = block[0], block[1:]
            brk = [b for b in rest if b.strip() in ("if not more:", "break")]
            step = [b for b in rest if b not in brk]
            out.append(line)
            out.append(first)
            for r in range(per_thread):
                out += [b.replace("{r}", str(r)) for b in step]
            out += brk
            continue
        if line.strip().startswith("for lvl in range(lay.levels):"):
            out.append(line)
            body = lines[i + 1]
            for r in range(per_thread):
                out.append(body.replace("{r}", str(r)))
            i += 2
            continue
        for r in range(per_thread):
            out.append(line.replace("{r}", str(r)))
        i += 1
    return "\n" + "\n".join(out) + "\n"


@functools.cache
def driver(scheme: str, group: int, per_thread: int, reorder: int, pin: bool,
           key_dtype: str) -> BlockKernel:
    """The lookup driver for one configuration (compiled on first launch). Arguments::

        (nq, q, out, miss, mode, lay, pins, shm)

    ``lay`` a :class:`~.search.LayoutRecord`, ``pins`` a
    :class:`~.search.PinRecord`, ``shm`` the
    :class:`~.search.SharedOffsets` of the reordering buffers in the dynamic shared
    memory (key dtype, uint32, int64), after the ``pa + pbb`` pinned keys.
    """
    from numba import types
    from numba.np.numpy_support import from_dtype

    kdt = np.dtype(key_dtype)
    locate = GROUP_LOCATE[scheme] if group > 1 else SCHEMES[scheme]
    namespace = {
        "np": np, "KDT": types.uint64 if kdt == np.uint64 else types.uint32,
        "IDT": from_dtype(SORT_IDX_DTYPE), "RDT": from_dtype(SORT_RES_DTYPE),
        "KMAX": kdt.type(np.iinfo(kdt).max),
        "G": group, "KARY": np.int64(group + 1 if group > 1 else 2),  # K, a compile-time constant
        "R": per_thread, "REORDER": reorder, "PIN": pin, "locate": locate,
        "NO_REORDER": NO_REORDER, "REORDER_DOUBLE": REORDER_DOUBLE,
        "fill": FILL[scheme], "lane_of": _lane_of(group), "emit": emit,
        "with_arity": with_arity,
    }
    if group == 1 and per_thread > 1:  # R searches interleaved, in registers
        source = _DRIVER.replace("{SORTED}", _interleaved(scheme, per_thread, True)).replace(
            "{PLAIN}", _interleaved(scheme, per_thread, False))
        namespace.update(INTERLEAVED_HELPERS)
    else:
        source = _DRIVER.replace("{SORTED}", _ONE_BY_ONE_SORTED).replace("{PLAIN}",
                                                                         _ONE_BY_ONE_PLAIN)
    return BlockKernel("lw_driver", source, namespace)


def bind_drive(plan: DriverPlan, lay: LayoutRecord, pins: PinRecord, q: Any, out: Any,
               miss: Any, mode: np.int64) -> Callable[..., None]:
    """:func:`drive` with everything but the lookups and the answer bound (``q`` and ``out``
    are :class:`~indexzoo.native.targets.Slot` places): ``launch(nq, q, out)``, at the host
    cost of the two open arrays (the small-batch path of prepared point lookups)."""
    shm, shared = plan.shared(pins)
    tile, cap = plan.tile, plan.max_blocks

    def blocks(nq: int) -> int:
        b = -(-nq // tile)
        return min(b, cap) if cap else b

    kernel = driver(plan.scheme, plan.group, plan.per_thread, plan.reorder,
                    bool(pins.pa + pins.pbb), plan.pin_dtype)
    return kernel.bind("cuda", q, out, miss, mode, lay, pins, shm,
                       threads_per_block=plan.threads_per_block, blocks=blocks,
                       shared_mem=shared)


def drive(plan: DriverPlan, lay: LayoutRecord, pins: PinRecord, q: Any, out: Any, miss: Any,
          mode: np.int64) -> None:
    """``lightweight.locate`` on the GPU: launch ``plan``'s driver over the lookups ``q``."""
    nq = int(q.shape[0])
    if nq == 0:
        return
    shm, shared = plan.shared(pins)
    blocks = -(-nq // plan.tile)
    if plan.max_blocks:
        blocks = min(blocks, plan.max_blocks)
    kernel = driver(plan.scheme, plan.group, plan.per_thread, plan.reorder,
                    bool(pins.pa + pins.pbb), plan.pin_dtype)
    kernel(blocks, plan.threads_per_block, nq, q, out, miss, mode, lay, pins, shm,
           shared_mem=shared)


# ------------------------------------------------------------------ multi-threaded range scans


@register_jitable
def _take(rowids, stride, p, values, use_values):
    r = rowids[p * stride]
    return values[np.int64(r)] if use_values else np.uint64(r)


@register_jitable
def _leader_adds(part, acc, lane, leader):
    """``acc`` plus the warp's sum of ``part`` on lane ``leader``, ``acc`` on the others;
    every lane of the warp must call it (the sum is a warp collective)."""
    total = group_sum(part, FULL_MASK, WARP)
    if lane == leader:
        return acc + total
    return acc


@register_jitable
def runs_warp(t, active, lay, s, e, values, use_values, fill, pos, out):
    """One lane per range (a warp = 32 ranges), this lane's run ``s .. e-1``: each lane handles
    up to WARP entries of its run alone; the warp then finishes every longer run together,
    WARP entries per step [§5.7]. ``fill``: rowIDs to ``out[pos:]``; else sums to ``out[t]``.
    Every lane of the warp calls it (``active``: the lane has a range)."""
    rowids, stride = lay.rowids, lay.stride
    lane = t % WARP
    own = min(e, s + WARP)
    acc = np.uint64(0)
    for p in range(s, own):
        if fill:
            out[pos + p - s] = rowids[p * stride]
        else:
            acc += _take(rowids, stride, p, values, use_values)
    todo = np.int64(cuda.ballot_sync(FULL_MASK, own < e)) & 0xFFFFFFFF
    for leader in range(WARP):  # every lane runs the same iterations (todo is the warp's)
        if (todo >> leader) & 1 == 0:
            continue
        ls = cuda.shfl_sync(FULL_MASK, own, leader)
        le = cuda.shfl_sync(FULL_MASK, e, leader)
        lbase = cuda.shfl_sync(FULL_MASK, pos - s, leader)
        part = np.uint64(0)
        for p in range(ls + lane, le, WARP):
            if fill:
                out[lbase + p] = rowids[p * stride]
            else:
                part += _take(rowids, stride, p, values, use_values)
        if not fill:
            acc = _leader_adds(part, acc, lane, leader)
    if active and not fill:
        out[t] = acc


@register_jitable
def run_sum_warp(t, lay, start, stop, values, use_values, out):
    """``RUN_SUM``'s cooperative body (see :func:`runs_warp`)."""
    active = t < start.shape[0]
    s = start[t] if active else np.int64(0)
    e = stop[t] if active else np.int64(0)
    runs_warp(t, active, lay, s, e, values, use_values, False, np.int64(0), out)


@register_jitable
def run_fill_warp(t, lay, start, offsets, out):
    """``RUN_FILL``'s cooperative body: the run of range ``t`` is ``offsets[t+1] - offsets[t]``
    entries from ``start[t]``."""
    active = t < start.shape[0]
    s = start[t] if active else np.int64(0)
    pos = offsets[t] if active else np.int64(0)
    e = s + (offsets[t + 1] - pos) if active else np.int64(0)
    runs_warp(t, active, lay, s, e, out, False, True, pos, out)


@register_jitable
def eo_scan_warp(t, active, lay, lo, hi, values, use_values, fill, pos, out):
    """The EO level scan with the multi-threaded switch [§5.7]: a lane scans its own range
    level by level until one level holds more than WARP matches; from there on, the warp scans
    that range's remaining levels together, WARP slots per step. ``fill``: rowIDs to
    ``out[pos:]``; else sums to ``out[t]``. Every lane of the warp calls it."""
    keys, rowids, stride, n, k, pad = lay.keys, lay.rowids, lay.stride, lay.n, lay.k, lay.pad
    lane = t % WARP
    x_lo = lo[t] if active else keys[0]
    x_hi = hi[t] if active else keys[0]
    m = k - 1
    acc = np.uint64(0)
    cnt = np.int64(0)
    j = np.int64(0)
    level_start = np.int64(0)
    level_slots = m
    handover = False
    hs = np.int64(0)  # where the warp takes over: slot, level start, level size, node
    while active and level_start < n:
        base = j * m
        c = eo_child(keys, stride, pad, n, m, base, x_lo)
        s = base + c
        level_end = min(level_start + level_slots, n)
        seen = 0
        while s < level_end:
            at = (s + pad) * stride
            if keys[at] > x_hi:
                break
            if seen == WARP:
                handover = True
                break
            if fill:
                out[pos + cnt] = rowids[at]
            else:
                acc += _take(rowids, stride, s + pad, values, use_values)
            cnt += 1
            seen += 1
            s += 1
        if handover:
            hs = s
            break
        j = j * k + 1 + c
        level_start += level_slots
        level_slots *= k
    todo = np.int64(cuda.ballot_sync(FULL_MASK, handover)) & 0xFFFFFFFF
    for leader in range(WARP):  # every lane runs the same iterations (todo is the warp's)
        if (todo >> leader) & 1 == 0:
            continue
        wlo = lo[t - lane + leader]  # the leader's range, read again (no shuffles of keys)
        whi = hi[t - lane + leader]
        ws = cuda.shfl_sync(FULL_MASK, hs, leader)
        wj = cuda.shfl_sync(FULL_MASK, j, leader)
        wstart = cuda.shfl_sync(FULL_MASK, level_start, leader)
        wslots = cuda.shfl_sync(FULL_MASK, level_slots, leader)
        wpos = cuda.shfl_sync(FULL_MASK, pos + cnt, leader)
        part = np.uint64(0)
        done = np.int64(0)
        while wstart < n:
            wend = min(wstart + wslots, n)
            while ws < wend:  # WARP slots of this level per step
                s = ws + lane
                ok = False
                if s < wend:
                    at = (s + pad) * stride
                    ok = keys[at] <= whi
                    if ok:
                        if fill:
                            out[wpos + done + lane] = rowids[at]
                        else:
                            part += _take(rowids, stride, s + pad, values, use_values)
                hits = cuda.ballot_sync(FULL_MASK, ok)
                ones = np.int64(cuda.popc(hits))
                done += ones
                if ones < WARP:
                    break
                ws += WARP
            # next level: the path node of lo (every lane walks it, the same way)
            wj = wj * k + 1 + eo_child(keys, stride, pad, n, m, wj * m, wlo)
            wstart += wslots
            wslots *= k
            ws = wj * m
            ws += eo_child(keys, stride, pad, n, m, ws, wlo)
        if not fill:
            acc = _leader_adds(part, acc, lane, leader)
    if active and not fill:
        out[t] = acc


@register_jitable
def eo_scan_sum_warp(t, lay, lo, hi, values, use_values, out):
    """``EO_SCAN_SUM``'s cooperative body (see :func:`eo_scan_warp`)."""
    eo_scan_warp(t, t < lo.shape[0], lay, lo, hi, values, use_values, False, np.int64(0), out)


@register_jitable
def eo_scan_fill_warp(t, lay, lo, hi, offsets, out):
    """``EO_SCAN_FILL``'s cooperative body (see :func:`eo_scan_warp`)."""
    active = t < lo.shape[0]
    pos = offsets[t] if active else np.int64(0)
    eo_scan_warp(t, active, lay, lo, hi, out, False, True, pos, out)

