"""The GPU side of the lightweight family: the cooperative K-ary searches (EO+KS, AO+PB+KS),
the lookup driver that applies the paper's optimisations, and the multi-threaded range scans.

* **K-ary search** [paper §3.4]: one lookup per group of K-1 adjacent threads; lane ``l`` loads
  pivot ``l`` of the node, the group votes (``ballot_sync``, masked to the group) on
  ``pivot < x`` and the popcount is the child. EO+KS descends to the lower bound without the
  early exit (one vote per node instead of two) and checks it. The CPU twins
  (``eo_ks_locate``, ``pb_ks_locate`` in ``lightweight.py``) give the same results one thread
  at a time.
* **Driver** (:func:`driver`): a block kernel generated per (scheme, group size G, lookups per
  thread R, reordering, pinning, key dtype):

  - *scheduling* [§4.1]: a grid-stride loop over tiles of ``(T/G)*R`` lookups; dynamic
    scheduling launches one block per tile, static scheduling one block per SM;
  - *lookup registers* R [§4.1]: each thread (group) answers R lookups of the tile;
  - *pinning* [§4.2]: the block copies the top of the search structure into shared memory
    once, before its first tile (see ``ao_key``/``front_key``);
  - *reordering* [§4.3]: the tile's keys are sorted in shared memory with their positions (a
    bitonic sort: numba has no BlockRadixSort), each group takes R consecutive sorted keys;
    *single* writes each result to its lookup's position, *double* puts results back in tile
    order in shared memory first, so the global write is coalesced.
* **Multi-threaded range scan** [§5.7]: :data:`RUNS_COOP` (sorted runs) and
  :data:`EO_SCAN_COOP` (EO level scans): each lane scans its own range up to 32 entries, then
  the warp finishes every longer range together, 32 entries per step.

This module imports ``numba.cuda``; only indexes on the ``cuda`` device import it.
"""

from __future__ import annotations

import functools
import textwrap
from typing import Any

import numpy as np
from numba import cuda
from numba.extending import register_jitable

from .coop import group_of, group_sum, vote
from .lightweight import (
    SCHEMES,
    ao_bs_finish,
    ao_key,
    eo_finish,
    eo_lb_finish,
    front_key,
    pb_finish,
)
from .targets import BlockKernel, Kernel

__all__ = ["EO_SCAN_COOP", "GROUP_LOCATE", "RUNS_COOP", "driver"]

# ------------------------------------------------------------------ cooperative K-ary searches


@register_jitable
def eo_ks_locate_group(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                       chunk, pad, step0, h, b, pin, pa, pbb, ps):
    m = k - 1
    j = np.int64(0)
    cand = np.int64(-1)
    while True:
        base = j * m
        if base >= n:
            break
        s = base + lane
        exists = s < n
        kv = front_key(keys, stride, s + pad, pin, pa) if exists else keys[0]
        c = np.int64(cuda.popc(vote(mask, shift, exists and kv < x)))
        if c < m and base + c < n:
            cand = base + c
        j = j * k + 1 + c
    if mode == 0:  # no early exit (one vote per node instead of two): check the lower bound
        if cand < 0 or keys[(cand + pad) * stride] != x:
            return np.int64(-1)
        return np.int64(rowids[(cand + pad) * stride])
    return eo_finish(cand, mode, rowids, stride, n, k, pad, h, b)


@register_jitable
def pb_ks_locate_group(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                       chunk, pad, step0, h, b, pin, pa, pbb, ps):
    m = k - 1
    node = np.int64(0)
    for lvl in range(levels):
        pv = front_key(pb, 1, pbo[lvl] + node * m + lane, pin, pa)
        node = node * k + np.int64(cuda.popc(vote(mask, shift, pv < x)))
    p = node * chunk
    end = min(p + chunk, n)
    while p < end:  # the chunk, K-1 keys per step (one coalesced load)
        s = p + lane
        ok = s < end
        kv = keys[s * stride] if ok else keys[0]
        c = np.int64(cuda.popc(vote(mask, shift, ok and kv < x)))
        if c < m:
            p += c
            break
        p += m
    return pb_finish(min(p, end), x, mode, keys, rowids, stride, n)


GROUP_LOCATE = {"eo-ks": eo_ks_locate_group, "ao-pb-ks": pb_ks_locate_group}


# ------------------------------------------------------------------ pinning: filling shared memory


@register_jitable
def fill_ao(tid, nthreads, pin, keys, stride, n, pb, pa, pbb, ps):  # type: ignore[no-untyped-def]
    for j in range(tid, pa, nthreads):
        p = n - 1 - (np.int64(j) << ps)
        if p >= 0:
            pin[j] = keys[p * stride]
    for j in range(tid, pbb, nthreads):
        p = n - 1 - ((2 * np.int64(j) + 1) << (ps - 1))
        if p >= 0:
            pin[pa + j] = keys[p * stride]


@register_jitable
def fill_front(tid, nthreads, pin, keys, stride, n, pb, pa, pbb, ps):  # type: ignore[no-untyped-def]
    for j in range(tid, pa, nthreads):
        pin[j] = keys[j * stride]


@register_jitable
def fill_pb(tid, nthreads, pin, keys, stride, n, pb, pa, pbb, ps):  # type: ignore[no-untyped-def]
    for j in range(tid, pa, nthreads):
        pin[j] = pb[j]


FILL = {"ao-bs": fill_ao, "eo-bs": fill_front, "eo-ks": fill_front,
        "ao-pb-bs": fill_pb, "ao-pb-ks": fill_pb}


@register_jitable
def emit(out, j, res, miss, mode):  # type: ignore[no-untyped-def]
    if mode != 1 and res < 0:
        out[j] = miss
    else:
        out[j] = res


# ------------------------------------------------------------------ the driver

_DRIVER = """
def lw_driver(nq, q, out, miss, mode, keys, rowids, stride, n, pb, pbo, levels, k, chunk, pad,
              step0, h, b, pa, pbb, ps, o_keys, o_idx, o_res):
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    dyn_k = cuda.shared.array(0, KDT)
    pin = dyn_k[0:pa + pbb]
    if PIN:
        fill(tid, nthreads, pin, keys, stride, n, pb, pa, pbb, ps)
        cuda.syncthreads()
    g = tid // G
    groups = nthreads // G
    lane, mask, shift = lane_of(tid)
    tile = groups * R
    base = cuda.blockIdx.x * tile
    while base < nq:
        if REORDER:
            dyn_u = cuda.shared.array(0, IDT)
            dyn_r = cuda.shared.array(0, RDT)
            skeys = dyn_k[o_keys:o_keys + tile]
            sidx = dyn_u[o_idx:o_idx + tile]
            sres = dyn_r[o_res:o_res + tile]
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
            if REORDER == 2:
                for e in range(tid, tile, nthreads):
                    j = base + e
                    if j < nq:
                        emit(out, j, sres[e], miss, mode)
                cuda.syncthreads()
        else:
{PLAIN}        base += cuda.gridDim.x * tile
"""


@register_jitable
def lane_single(tid):  # type: ignore[no-untyped-def]
    return np.int64(0), np.uint32(0), np.uint32(0)


def _lane_of(group: int) -> Any:
    if group == 1:
        return lane_single

    @register_jitable
    def lane_of(tid):  # type: ignore[no-untyped-def]
        _, lane, mask, shift = group_of(np.int64(tid), group)
        return np.int64(lane), mask, shift
    return lane_of


_ONE_BY_ONE_SORTED = """            for r in range(R):
                e = g * R + r
                li = np.int64(sidx[e])
                j = base + li
                if j < nq:
                    res = locate(skeys[e], lane, mask, shift, mode, keys, rowids, stride, n, pb,
                                 pbo, levels, KARY, chunk, pad, step0, h, b, pin, pa, pbb, ps)
                    if lane == 0:
                        if REORDER == 2:
                            sres[li] = res
                        else:
                            emit(out, j, res, miss, mode)
"""
_ONE_BY_ONE_PLAIN = """            for r in range(R):
                j = base + r * groups + g
                if j < nq:
                    res = locate(q[j], lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo,
                                 levels, KARY, chunk, pad, step0, h, b, pin, pa, pbb, ps)
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
                    if REORDER == 2:
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
                    if t{r} < n:
                        kv = front_key(keys, stride, t{r} + pad, pin, pa)
                        if kv >= x{r}:
                            c{r} = t{r}
                        t{r} = 2 * t{r} + (1 if kv >= x{r} else 2)
                        more = True
                    if not more:
                        break
                res{r} = eo_lb_finish(c{r}, x{r}, mode, keys, rowids, stride, n, pad, h, b)
""",
    "ao-pb-bs": """
                t{r} = np.int64(0)
                for lvl in range(levels):
                    t{r} = 2 * t{r} + (1 if front_key(pb, 1, pbo[lvl] + t{r}, pin, pa) < x{r} else 0)
                lo{r} = t{r} * chunk
                hi{r} = min(lo{r} + chunk, n)
                while True:
                    more = False
                    if lo{r} < hi{r}:
                        mid = (lo{r} + hi{r}) >> 1
                        if keys[mid * stride] < x{r}:
                            lo{r} = mid + 1
                        else:
                            hi{r} = mid
                        more = True
                    if not more:
                        break
                res{r} = pb_finish(lo{r}, x{r}, mode, keys, rowids, stride, n)
""",
}


INTERLEAVED_HELPERS = {"ao_key": ao_key, "front_key": front_key, "ao_bs_finish": ao_bs_finish,
                       "eo_lb_finish": eo_lb_finish, "pb_finish": pb_finish}


def _repeat(block: str, per_thread: int) -> str:
    return "".join(block.replace("{r}", str(r)) for r in range(per_thread))


def _interleaved(scheme: str, per_thread: int, sorted_tile: bool) -> str:
    """The driver's per-tile part for R interleaved binary searches of one thread."""
    if scheme == "ao-bs":  # one loop over the steps, every lookup inside it
        body = (_repeat("\n                o{r} = n - 1", per_thread) + "\n                step = step0"
                "\n                while step > 0:"
                + _repeat("""
                    if step <= o{r}:
                        if ao_key(keys, stride, n, o{r} - step, pin, pa, pbb, ps) >= x{r}:
                            o{r} -= step""", per_thread)
                + "\n                    step >>= 1"
                + _repeat("\n                res{r} = ao_bs_finish(o{r}, x{r}, mode, keys, rowids, "
                          "stride, n)", per_thread) + "\n")
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
        if line.strip().startswith("for lvl in range(levels):"):
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

        (nq, q, out, miss, mode, keys, rowids, stride, n, pb, pbo, levels, k, chunk, pad,
         step0, h, b, pa, pbb, ps, o_keys, o_idx, o_res)

    ``o_keys``/``o_idx``/``o_res``: element offsets of the reordering buffers in the dynamic
    shared memory (key dtype, uint32, int64), after the ``pa + pbb`` pinned keys.
    """
    from numba import types

    kdt = np.dtype(key_dtype)
    locate = GROUP_LOCATE[scheme] if group > 1 else SCHEMES[scheme]
    namespace = {
        "np": np, "KDT": types.uint64 if kdt == np.uint64 else types.uint32,
        "IDT": types.uint32, "RDT": types.int64, "KMAX": kdt.type(np.iinfo(kdt).max),
        "G": group, "KARY": group + 1 if group > 1 else 2,  # K as a compile-time constant
        "R": per_thread, "REORDER": reorder, "PIN": pin, "locate": locate,
        "fill": FILL[scheme], "lane_of": _lane_of(group), "emit": emit,
    }
    if group == 1 and per_thread > 1:  # R searches interleaved, in registers
        source = _DRIVER.replace("{SORTED}", _interleaved(scheme, per_thread, True)).replace(
            "{PLAIN}", _interleaved(scheme, per_thread, False))
        namespace.update(INTERLEAVED_HELPERS)
    else:
        source = _DRIVER.replace("{SORTED}", _ONE_BY_ONE_SORTED).replace("{PLAIN}",
                                                                         _ONE_BY_ONE_PLAIN)
    return BlockKernel("lw_driver", source, namespace)


# ------------------------------------------------------------------ multi-threaded range scans


@register_jitable
def _take(rowids, stride, p, values, use_values):  # type: ignore[no-untyped-def]
    r = rowids[p * stride]
    return values[np.int64(r)] if use_values else np.uint64(r)


@register_jitable
def runs_coop_item(t, nq, rowids, stride, start, stop, values, use_values, fill, offsets, out):  # type: ignore[no-untyped-def]
    """One lane per range (a warp = 32 ranges): each lane handles up to 32 entries of its run
    alone; the warp then finishes every longer run together, 32 entries per step [§5.7].
    ``fill``: rowIDs to ``out[offsets[i]:]``; else sums to ``out[i]``. Launch with ``nq``
    rounded up to a multiple of 32 items."""
    full = np.uint32(0xFFFFFFFF)
    lane = t % 32
    active = t < nq
    s = start[t] if active else np.int64(0)
    e = stop[t] if active else np.int64(0)
    own = min(e, s + 32)
    acc = np.uint64(0)
    pos = offsets[t] if (active and fill) else np.int64(0)
    for p in range(s, own):
        if fill:
            out[pos + p - s] = rowids[p * stride]
        else:
            acc += _take(rowids, stride, p, values, use_values)
    todo = np.int64(cuda.ballot_sync(full, own < e)) & 0xFFFFFFFF
    for leader in range(32):  # every lane runs the same iterations (todo is the warp's)
        if (todo >> leader) & 1 == 0:
            continue
        ls = cuda.shfl_sync(full, own, leader)
        le = cuda.shfl_sync(full, e, leader)
        lbase = cuda.shfl_sync(full, pos - s, leader)
        part = np.uint64(0)
        for p in range(ls + lane, le, 32):
            if fill:
                out[lbase + p] = rowids[p * stride]
            else:
                part += _take(rowids, stride, p, values, use_values)
        if not fill:
            part = group_sum(part, full, 32)
            if lane == leader:
                acc += part
    if active and not fill:
        out[t] = acc


@register_jitable
def eo_scan_coop_item(t, nq, keys, rowids, stride, n, k, pad, lo, hi, values, use_values, fill,  # type: ignore[no-untyped-def]
                      offsets, out):
    """The EO level scan with the multi-threaded switch [§5.7]: a lane scans its own range
    level by level until one level holds more than 32 matches; from there on, the warp scans
    that range's remaining levels together, 32 slots per step. Launch with ``nq`` rounded up
    to a multiple of 32 items."""
    full = np.uint32(0xFFFFFFFF)
    lane = t % 32
    active = t < nq
    x_lo = lo[t] if active else keys[0]
    x_hi = hi[t] if active else keys[0]
    m = k - 1
    acc = np.uint64(0)
    cnt = np.int64(0)
    pos = offsets[t] if (active and fill) else np.int64(0)
    j = np.int64(0)
    level_start = np.int64(0)
    level_slots = m
    handover = False
    hs = np.int64(0)  # where the warp takes over: slot, level start, level size, node
    while active and level_start < n:
        base = j * m
        c = np.int64(0)
        while c < m and base + c < n and keys[(base + c + pad) * stride] < x_lo:
            c += 1
        s = base + c
        level_end = min(level_start + level_slots, n)
        seen = 0
        while s < level_end:
            at = (s + pad) * stride
            if keys[at] > x_hi:
                break
            if seen == 32:
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
    todo = np.int64(cuda.ballot_sync(full, handover)) & 0xFFFFFFFF
    for leader in range(32):  # every lane runs the same iterations (todo is the warp's)
        if (todo >> leader) & 1 == 0:
            continue
        wlo = lo[t - lane + leader]  # the leader's range, read again (no shuffles of keys)
        whi = hi[t - lane + leader]
        ws = cuda.shfl_sync(full, hs, leader)
        wj = cuda.shfl_sync(full, j, leader)
        wstart = cuda.shfl_sync(full, level_start, leader)
        wslots = cuda.shfl_sync(full, level_slots, leader)
        wpos = cuda.shfl_sync(full, pos + cnt, leader)
        part = np.uint64(0)
        done = np.int64(0)
        while wstart < n:
            wend = min(wstart + wslots, n)
            while ws < wend:  # 32 slots of this level per step
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
                hits = cuda.ballot_sync(full, ok)
                ones = np.int64(cuda.popc(hits))
                done += ones
                if ones < 32:
                    break
                ws += 32
            # next level: the path node of lo (every lane walks it, the same way)
            base = wj * m
            c = np.int64(0)
            while c < m and base + c < n and keys[(base + c + pad) * stride] < wlo:
                c += 1
            wj = wj * k + 1 + c
            wstart += wslots
            wslots *= k
            ws = wj * m
            c2 = np.int64(0)
            while c2 < m and ws + c2 < n and keys[(ws + c2 + pad) * stride] < wlo:
                c2 += 1
            ws += c2
        if not fill:
            part = group_sum(part, full, 32)
            if lane == leader:
                acc += part
    if active and not fill:
        out[t] = acc


RUNS_COOP = Kernel(runs_coop_item)
EO_SCAN_COOP = Kernel(eo_scan_coop_item)

