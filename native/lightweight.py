"""Searches of the lightweight sorted-array family (Henneberg & Schuhknecht, "Is Binary Search
Really All You Need?"): one thread per lookup, one numba source for the CPU and the GPU.

Every scheme stores the (key, rowID) pairs sorted by key (AO), permuted into Eytzinger order
(EO), or sorted with a pivot buffer on top (AO+PB). Arrays are addressed as ``keys[p * stride]``
and ``rowids[p * stride]``: ``stride`` 1 for two separate arrays (SoA), 2 for one interleaved
array whose odd words are the rowIDs (AoS; ``rowids`` is then ``table[1:]``).

Each scheme has a *locate* function with one signature (so the GPU driver in
``lightweight_cuda.py`` can be generated for any of them)::

    locate(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k, chunk,
           pad, step0, h, b, pin, pa, pbb, ps) -> int64

``mode`` 0 (point): the rowID of a match, or -1. ``mode`` 1 (rank): the sorted position of the
first key ``>= x`` (``n`` if none), which makes a range ``[lo, hi]`` the sorted positions
``rank(lo) .. rank(hi + 1) - 1``. ``mode`` 2: the rowID of the first key ``>= x``, or -1.
``lane/mask/shift`` are unused here (one thread per lookup); the cooperative K-ary versions
in ``lightweight_cuda.py`` take them. ``pin`` with ``pa``/``pbb``/``ps`` describes the keys
pinned to shared memory (none on the CPU: ``pa = pbb = 0``).

Scheme arguments (unused ones are passed anyway): ``pb``/``pbo``/``levels``/``chunk`` the pivot
buffer, its level offsets (top first), its level count and the chunk size; ``k`` the arity;
``pad`` the empty slot in front of EO+BS; ``step0`` the largest power of two <= n (AO+BS's
first step); ``h``/``b`` the EO shape (:func:`indexzoo.native.eytzinger.eo_shape`).
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from .eytzinger import eo_source
from .targets import Kernel

__all__ = [
    "EO_SCAN_FILL", "EO_SCAN_SUM", "LOCATE_CPU", "RUN_FILL", "RUN_SUM",
    "ao_bs_locate", "eo_bs_locate", "eo_ks_locate", "pb_bs_locate", "pb_ks_locate",
]

# ------------------------------------------------------------------ reading keys (pinning)


@register_jitable
def ao_key(keys, stride, n, p, pin, pa, pbb, ps):  # type: ignore[no-untyped-def]
    """``keys[p]`` of a sorted array, from shared memory when pinned.

    AO+BS pinning keeps the keys its first steps visit: those at ``n-1 - j*g`` (g = 2^ps) for
    ``j < pa`` ("steps"), and for full pinning also ``pbb`` keys of the next step, at the odd
    multiples ``n-1 - (2j+1)*g/2``, stored after them.
    """
    if pa > 0:
        d = n - 1 - p
        g = np.int64(1) << ps
        if (d & (g - 1)) == 0:
            j = d >> ps
            if j < pa:
                return pin[j]
        elif pbb > 0 and ps > 0 and (d & ((g >> 1) - 1)) == 0:
            j = (d >> (ps - 1)) >> 1
            if j < pbb:
                return pin[pa + j]
    return keys[p * stride]


@register_jitable
def front_key(keys, stride, p, pin, pa):  # type: ignore[no-untyped-def]
    """``keys[p]`` of an EO array or a pivot buffer, whose first ``pa`` slots may be pinned."""
    if p < pa:
        return pin[p]
    return keys[p * stride]


# ------------------------------------------------------------------ AO + BS


@register_jitable
def ao_bs_search(keys, stride, n, x, step0, pin, pa, pbb, ps):  # type: ignore[no-untyped-def]
    """The paper's offset-based back-to-front binary search (Listing 1), with the halving of
    ``step`` on every iteration (as printed, n = 2^k loops forever). Returns
    ``min(lower_bound(x), n - 1)``."""
    offset = n - 1
    step = step0
    while step > 0:
        if step <= offset:
            p = offset - step
            if ao_key(keys, stride, n, p, pin, pa, pbb, ps) >= x:
                offset = p
        step >>= 1
    return offset


@register_jitable
def ao_bs_locate(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                 chunk, pad, step0, h, b, pin, pa, pbb, ps):
    p = ao_bs_search(keys, stride, n, x, step0, pin, pa, pbb, ps)
    return ao_bs_finish(p, x, mode, keys, rowids, stride, n)


@register_jitable
def ao_bs_finish(p, x, mode, keys, rowids, stride, n):  # type: ignore[no-untyped-def]
    """``p = min(lower_bound(x), n - 1)`` as the locate functions' result."""
    kv = keys[p * stride]
    if mode == 0:
        if kv == x:
            return np.int64(rowids[p * stride])
        return np.int64(-1)
    if kv < x:
        return n if mode == 1 else np.int64(-1)
    return p if mode == 1 else np.int64(rowids[p * stride])


# ------------------------------------------------------------------ EO + BS / EO + KS


@register_jitable
def eo_bs_search(keys, stride, n, x, pad, mode, pin, pa):  # type: ignore[no-untyped-def]
    """Binary Eytzinger descent: node j (0-based) at slot ``j + pad``, children 2j+1, 2j+2.

    mode 0: the slot of a match (early exit), or -1; mode 1: the slot of the first key >= x
    (the last node on the path whose key is >= x), or -1.
    """
    j = np.int64(0)
    cand = np.int64(-1)
    while j < n:
        kv = front_key(keys, stride, j + pad, pin, pa)
        if mode == 0 and kv == x:
            return j
        if kv >= x:
            cand = j
            j = 2 * j + 1
        else:
            j = 2 * j + 2
    return np.int64(-1) if mode == 0 else cand


@register_jitable
def eo_ks_search(keys, stride, n, k, x, pad, mode, pin, pa):  # type: ignore[no-untyped-def]
    """K-ary Eytzinger descent, one thread (the CPU twin of the cooperative GPU search): node j
    holds slots j(K-1) .. j(K-1)+K-2, children jK+1 .. jK+K. Same results as eo_bs_search."""
    j = np.int64(0)
    cand = np.int64(-1)
    m = k - 1
    while True:
        base = j * m
        if base >= n:
            break
        c = np.int64(0)
        while c < m and base + c < n:
            kv = front_key(keys, stride, base + c + pad, pin, pa)
            if kv >= x:
                if mode == 0 and kv == x:
                    return base + c
                break
            c += 1
        if c < m and base + c < n:
            cand = base + c
        j = j * k + 1 + c
    return np.int64(-1) if mode == 0 else cand


@register_jitable
def eo_finish(slot, mode, rowids, stride, n, k, pad, h, b):  # type: ignore[no-untyped-def]
    """A located EO slot as the locate functions' result."""
    if mode != 1:
        if slot < 0:
            return np.int64(-1)
        return np.int64(rowids[(slot + pad) * stride])
    if slot < 0:
        return n
    return eo_source(slot, n, k, h, b)


@register_jitable
def eo_lb_finish(cand, x, mode, keys, rowids, stride, n, pad, h, b):  # type: ignore[no-untyped-def]
    """The binary-EO slot of the first key >= x (-1: none) as the locate functions' result."""
    if mode == 0:
        if cand >= 0 and keys[(cand + pad) * stride] == x:
            return np.int64(rowids[(cand + pad) * stride])
        return np.int64(-1)
    return eo_finish(cand, mode, rowids, stride, n, 2, pad, h, b)


@register_jitable
def eo_bs_locate(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                 chunk, pad, step0, h, b, pin, pa, pbb, ps):
    slot = eo_bs_search(keys, stride, n, x, pad, mode, pin, pa)
    return eo_finish(slot, mode, rowids, stride, n, 2, pad, h, b)


@register_jitable
def eo_ks_locate(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                 chunk, pad, step0, h, b, pin, pa, pbb, ps):
    slot = eo_ks_search(keys, stride, n, k, x, pad, 1, pin, pa)  # the lower bound, like the GPU
    if mode == 0:
        if slot < 0 or keys[(slot + pad) * stride] != x:
            return np.int64(-1)
        return np.int64(rowids[(slot + pad) * stride])
    return eo_finish(slot, mode, rowids, stride, n, k, pad, h, b)


# ------------------------------------------------------------------ AO + PB (+ BS / KS)


@register_jitable
def pb_descend(pb, pbo, levels, k, x, pin, pa):  # type: ignore[no-untyped-def]
    """Walk the pivot buffer from the root: the index of the chunk that holds the lower bound
    (c = number of the node's pivots < x; node = node*K + c). Pivots of a node ascend and the
    padding is the key maximum, so counting stops at the first pivot >= x."""
    node = np.int64(0)
    m = k - 1
    for lvl in range(levels):
        base = pbo[lvl] + node * m
        c = np.int64(0)
        while c < m and front_key(pb, 1, base + c, pin, pa) < x:
            c += 1
        node = node * k + c
    return node


@register_jitable
def pb_finish(p, x, mode, keys, rowids, stride, n):  # type: ignore[no-untyped-def]
    """The lower bound ``p`` of x in the sorted array as the locate functions' result."""
    if mode == 0:
        if p < n and keys[p * stride] == x:
            return np.int64(rowids[p * stride])
        return np.int64(-1)
    if mode == 2:
        return np.int64(rowids[p * stride]) if p < n else np.int64(-1)
    return p


@register_jitable
def pb_bs_locate(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                 chunk, pad, step0, h, b, pin, pa, pbb, ps):
    node = pb_descend(pb, pbo, levels, k, x, pin, pa)
    lo = node * chunk
    hi = min(lo + chunk, n)
    while lo < hi:  # binary search inside the chunk
        mid = (lo + hi) >> 1
        if keys[mid * stride] < x:
            lo = mid + 1
        else:
            hi = mid
    return pb_finish(lo, x, mode, keys, rowids, stride, n)


@register_jitable
def pb_ks_locate(x, lane, mask, shift, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                 chunk, pad, step0, h, b, pin, pa, pbb, ps):
    """AO+PB+KS, one thread (the CPU twin of the cooperative GPU search): K-ary pivot buffer,
    then the chunk scanned in order (the GPU group reads it K-1 keys at a time)."""
    node = pb_descend(pb, pbo, levels, k, x, pin, pa)
    p = node * chunk
    end = min(p + chunk, n)
    while p < end and keys[p * stride] < x:
        p += 1
    return pb_finish(p, x, mode, keys, rowids, stride, n)


# ------------------------------------------------------------------ CPU lookups


def _locate_body(locate):  # type: ignore[no-untyped-def]
    @register_jitable
    def locate_item(i, q, out, miss, mode, keys, rowids, stride, n, pb, pbo, levels, k,  # type: ignore[no-untyped-def]
                    chunk, pad, step0, h, b, pin, pa, pbb, ps):
        r = locate(q[i], 0, 0, 0, mode, keys, rowids, stride, n, pb, pbo, levels, k, chunk, pad,
                   step0, h, b, pin, pa, pbb, ps)
        if mode != 1 and r < 0:
            out[i] = miss
        else:
            out[i] = r
    return locate_item


SCHEMES = {
    "ao-bs": ao_bs_locate,
    "eo-bs": eo_bs_locate,
    "eo-ks": eo_ks_locate,
    "ao-pb-bs": pb_bs_locate,
    "ao-pb-ks": pb_ks_locate,
}

#: One thread per lookup: ``LOCATE_CPU[scheme](device, q, q, out, miss, mode, *layout)``. On the
#: GPU these serve as the plain (dynamic, unpinned) kernels of the BS schemes.
LOCATE_CPU = {name: Kernel(_locate_body(fn), name=f"locate_{name.replace('-', '_')}")
              for name, fn in SCHEMES.items()}


# ------------------------------------------------------------------ scans


@register_jitable
def eo_scan(keys, rowids, stride, n, k, pad, lo, hi, values, use_values, out, pos, fill):  # type: ignore[no-untyped-def]
    """The paper's EO range algorithm: on every level the keys in ``[lo, hi]`` are contiguous
    and start on the lower-bound path of ``lo``; scan each level from there to the first key
    ``> hi``, then descend. Visits at most two non-qualifying keys per level. ``fill``: write
    the rowIDs to ``out[pos:]``; else return their sum (of ``values[rowid]`` if ``use_values``)."""
    acc = np.uint64(0)
    cnt = np.int64(0)
    m = k - 1
    j = np.int64(0)
    level_start = np.int64(0)
    level_slots = m
    while level_start < n:
        base = j * m
        c = np.int64(0)
        while c < m and base + c < n and keys[(base + c + pad) * stride] < lo:
            c += 1
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
def eo_scan_sum_item(i, keys, rowids, stride, n, k, pad, lo, hi, values, use_values, out):  # type: ignore[no-untyped-def]
    out[i] = eo_scan(keys, rowids, stride, n, k, pad, lo[i], hi[i], values, use_values, out, 0,
                     False)


@register_jitable
def eo_scan_fill_item(i, keys, rowids, stride, n, k, pad, lo, hi, offsets, out):  # type: ignore[no-untyped-def]
    if offsets[i + 1] > offsets[i]:
        eo_scan(keys, rowids, stride, n, k, pad, lo[i], hi[i], out, False, out, offsets[i], True)


@register_jitable
def run_sum_item(i, rowids, stride, start, stop, values, use_values, out):  # type: ignore[no-untyped-def]
    """Sum over the sorted positions ``start[i] .. stop[i] - 1`` (one thread per range)."""
    acc = np.uint64(0)
    for p in range(start[i], stop[i]):
        r = rowids[p * stride]
        acc += values[np.int64(r)] if use_values else np.uint64(r)
    out[i] = acc


@register_jitable
def run_fill_item(i, rowids, stride, start, offsets, out):  # type: ignore[no-untyped-def]
    """The rowIDs of sorted positions ``start[i] ..`` into ``out[offsets[i]:offsets[i+1]]``."""
    base = offsets[i]
    s = start[i]
    for j in range(offsets[i + 1] - base):
        out[base + j] = rowids[(s + j) * stride]


EO_SCAN_SUM = Kernel(eo_scan_sum_item)
EO_SCAN_FILL = Kernel(eo_scan_fill_item)
RUN_SUM = Kernel(run_sum_item)
RUN_FILL = Kernel(run_fill_item)
