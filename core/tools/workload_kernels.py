"""The workload generator's per-item steps (:mod:`indexzoo.tools.workloads`), as kernels of
:class:`indexzoo.native.targets.Kernel`: the same bodies run on the CPU (numba, ``prange``)
and on the GPU (numba-cuda), so the data are equal on both, and equal bit for bit to what the
array-module code of :func:`~indexzoo.tools.workloads.mix64` and friends computes.

Each body fuses what the array code did in several passes over temporaries: a counter's
random value and the use made of it (a rank, a gap, a key, a miss). Random reads (a key by its
rank, an item by its shuffled position) get passes of their own that do little else
(:func:`gather_item`, :func:`gather_hits_item`): with the hashing in the same loop the CPU
keeps fewer of them in flight, and a fused pass measured two to three times slower than the
two passes together. The one step left to the array module is the sort of a random stream
(``xp.sort``; ARCHITECTURE.md: bulk primitives are NumPy's and CuPy's), which the shuffles
need to stay what they were: the order of the stream's values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.targets import Kernel

__all__ = ["GATHER", "GATHER_HITS", "KEYS_PERMUTED", "MISSES", "PLAN_LOOKUPS", "RANGE_HITS",
           "SERIAL_BELOW", "STREAM", "STREAM_UNIFORM01", "UNSHUFFLED_INDEX", "hit_rank",
           "miss_value", "mix", "unmix"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_M1_INV = np.uint64(pow(0xBF58476D1CE4E5B9, -1, 1 << 64))
_M2_INV = np.uint64(pow(0x94D049BB133111EB, -1, 1 << 64))
_S11, _S27, _S30, _S31 = np.uint64(11), np.uint64(27), np.uint64(30), np.uint64(31)
_S54, _S60, _S62 = np.uint64(54), np.uint64(60), np.uint64(62)
_ONE = np.uint64(1)
_TWO_M53 = 2.0 ** -53


@register_jitable
def mix(x):
    """splitmix64's finaliser (:func:`~indexzoo.tools.workloads.mix64`) on one uint64."""
    x = x + _GOLDEN
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


@register_jitable
def unmix(y):
    """The inverse of :func:`mix`; each ``x ^ (x >> s)`` is undone by ``x ^ (x >> s) ^ (x >> 2s)
    ...`` up to 64 bits."""
    y = y ^ (y >> _S31) ^ (y >> _S62)
    y = y * _M2_INV
    y = y ^ (y >> _S27) ^ (y >> _S54)
    y = y * _M1_INV
    y = y ^ (y >> _S30) ^ (y >> _S60)
    return y - _GOLDEN


@register_jitable
def stream_item(i, out, base):
    """``out[i]``: the stream's ``i``-th random value, ``mix(base + i)``."""
    out[i] = mix(base + np.uint64(i))


@register_jitable
def stream_uniform01_item(i, out, base):
    """``out[i]``: the stream's ``i``-th value as a float64 in ``[0, 1)`` (its top 53 bits)."""
    out[i] = np.float64(mix(base + np.uint64(i)) >> _S11) * _TWO_M53


@register_jitable
def unshuffled_index_item(i, out, ordered, base):
    """``out[i]``: the counter whose random value is ``ordered[i]`` (``ordered``: the stream
    sorted): the argsort of the stream, without sorting the counters along."""
    out[i] = unmix(ordered[i]) - base


@register_jitable
def gather_item(i, out, src, index, div):
    """``out[i] = src[index[i] // div]`` (``div`` > 1: ``src`` repeated ``div`` times, without
    the repetition). ``out`` may be ``index`` itself."""
    c = index[i]
    if div != _ONE:
        c = c // div
    out[i] = src[np.int64(c)]


@register_jitable
def keys_permuted_item(i, out, mask, half, c0, k1, k2, k3, cluster, span):
    """``out[i]``: :func:`~indexzoo.tools.workloads.permute_bits` of ``i // cluster``, shifted
    left by ``span`` bits, plus ``i % cluster`` (uniform keys: ``cluster`` 1, ``span`` 0)."""
    x = np.uint64(i)
    low = np.uint64(0)
    if cluster != _ONE:
        low = x % cluster
        x = x // cluster
    x = (x ^ c0) & mask
    x = (x * k1) & mask
    x = x ^ (x >> half)
    x = (x * k2) & mask
    x = x ^ (x >> half)
    x = (x * k3) & mask
    x = x ^ (x >> half)
    out[i] = (x << span) + low


@register_jitable
def upper_bound(a, x):
    """The first position of sorted ``a`` whose value exceeds ``x`` (NumPy's
    ``searchsorted(a, x, side="right")``)."""
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@register_jitable
def hit_rank(j, d, rank_base, cdf, use_cdf):
    """The rank among ``d`` keys of the ``j``-th hit, drawn from stream ``rank_base``: uniform,
    or by the Zipf ``cdf`` where ``use_cdf``."""
    u = np.float64(mix(rank_base + np.uint64(j)) >> _S11) * _TWO_M53
    r = upper_bound(cdf, u) if use_cdf else np.int64(u * d)
    return min(r, d - 1)


@register_jitable
def miss_value(j, distinct, gap_at, n_gap, pick_base, width_base, out_base, lo, below,
               hi_next, modulus, use_modulus):
    """The ``j``-th miss. The first ``n_gap`` fall into gaps between keys: a gap picked from
    ``gap_at`` (the positions in sorted ``distinct`` where the next key is more than one
    above) by stream ``pick_base``, a place in it by stream ``width_base``. The others fall
    outside ``[min, max]``: a value of stream ``out_base`` reduced modulo ``modulus`` (the
    ``below`` values from ``lo`` up to the smallest key, then those from ``hi_next`` up),
    unreduced where ``use_modulus`` is false (the whole 64-bit domain is free)."""
    if j < n_gap:
        p = gap_at[np.int64(mix(pick_base + np.uint64(j)) % np.uint64(gap_at.shape[0]))]
        width = distinct[p + 1] - distinct[p] - _ONE
        return distinct[p] + _ONE + mix(width_base + np.uint64(j)) % width
    r = mix(out_base + np.uint64(j - n_gap))
    if use_modulus:
        r = r % modulus
    return lo + r if r < below else hi_next + (r - below)


@register_jitable
def plan_lookups_item(i, out, rank, ordered, base, shuffled, n_hit, d, rank_base, cdf,
                      use_cdf, distinct, gap_at, n_gap, pick_base, width_base, out_base, lo,
                      below, hi_next, modulus, use_modulus):
    """The point lookup of counter ``c`` at position ``i``: a hit for ``c < n_hit``, whose
    rank goes to ``rank[i]`` (:func:`hit_rank`; :func:`gather_hits_item` then reads the key,
    in a pass of its own, whose loads the CPU overlaps better than those of this one); else
    ``rank[i] = -1`` and the miss in ``out[i]`` (:func:`miss_value`). ``c`` is ``i``, or where
    ``shuffled``, the counter whose random value is ``ordered[i]`` (the stream ``base``
    sorted): the lookups in the order of their stream. ``out`` may be ``ordered`` itself."""
    c = np.int64(unmix(ordered[i]) - base) if shuffled else np.int64(i)
    if c < n_hit:
        rank[i] = hit_rank(c, d, rank_base, cdf, use_cdf)
    else:
        rank[i] = -1
        out[i] = miss_value(c - n_hit, distinct, gap_at, n_gap, pick_base, width_base,
                            out_base, lo, below, hi_next, modulus, use_modulus)


@register_jitable
def gather_hits_item(i, out, order, rank):
    """``out[i] = order[rank[i]]`` where the lookup at ``i`` hits (``rank[i] >= 0``)."""
    r = rank[i]
    if r >= 0:
        out[i] = order[r]


@register_jitable
def misses_item(i, out, at, distinct, gap_at, n_gap, pick_base, width_base, out_base, lo,
                below, hi_next, modulus, use_modulus):
    """``out[at + i]``: the ``i``-th miss (:func:`miss_value`)."""
    out[at + i] = miss_value(i, distinct, gap_at, n_gap, pick_base, width_base, out_base, lo,
                             below, hi_next, modulus, use_modulus)


@register_jitable
def range_hits_item(i, lo, hi, distinct, base, span, k):
    """``lo[i]``, ``hi[i]``: the ``i``-th range that hits, over ``k`` distinct keys from a
    start drawn from stream ``base`` among ``span`` (the last ones shortened at the end)."""
    d = distinct.shape[0]
    j = np.int64(mix(base + np.uint64(i)) % span)
    lo[i] = distinct[j]
    hi[i] = distinct[min(j + k - 1, d - 1)]


#: CPU calls with fewer items than this run on one core: the items cost nanoseconds, and
#: waking numba's threads costs milliseconds on a loaded machine (a workload of 2^14 keys and
#: 2^15 lookups took 5x longer with every call parallel there).
SERIAL_BELOW = 1 << 17


def _kernel(body: Callable[..., Any], name: str) -> Kernel:
    return Kernel(body, name=name, serial_below=SERIAL_BELOW)


STREAM = _kernel(stream_item, "workload_stream")
STREAM_UNIFORM01 = _kernel(stream_uniform01_item, "workload_stream_uniform01")
UNSHUFFLED_INDEX = _kernel(unshuffled_index_item, "workload_unshuffled_index")
GATHER = _kernel(gather_item, "workload_gather")
KEYS_PERMUTED = _kernel(keys_permuted_item, "workload_keys_permuted")
PLAN_LOOKUPS = _kernel(plan_lookups_item, "workload_plan_lookups")
GATHER_HITS = _kernel(gather_hits_item, "workload_gather_hits")
MISSES = _kernel(misses_item, "workload_misses")
RANGE_HITS = _kernel(range_hits_item, "workload_range_hits")
