"""Closest hit + scan (thesis Alg. 3 + 4) as query launches, for engines whose rays cannot be
cast from inside a numba kernel (OptiX: ``engine.in_kernel_queries`` is False).

The rays and the answers are those of :mod:`.search`'s one-launch kernel:

* a point lookup casts its perpendicular ray (none for a key the mode cannot hold);
* a range casts ray 1 along the first occupied row at or after lo's (if it is not past hi's)
  and, when that row is lo's own, ray 2 along the next occupied row from x = 0 (if it is not
  past hi's). The kernel casts ray 2 only when ray 1 misses; here both go into one launch of
  the query layer's ``CLOSEST``, which answers with the closest match of the first ray (in ray
  order) that hits one: the same position.

Then the scan: with compressed duplicates a hit names a distinct key, whose first sorted
position ``first_of`` gives; without, on an engine whose closest-hit ties are unordered
(``engine.ordered_ties`` False: OptiX), a hit may name any duplicate of its key, so it moves to
the start of its key's run (a binary search) before :data:`indexzoo.native.runs.RUN_BOUNDS`
delimits the run of keys in ``[lo, hi]`` (galloping from there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.csr import offsets_from_counts
from indexzoo.native.rt import KeyCoder, Rays, query, row_rays
from indexzoo.native.runs import RUN_BOUNDS

__all__ = ["range_batch", "runs_from_hits"]

_U64 = np.uint64


def range_batch(coder: KeyCoder, lo: Any, hi: Any, highs: Any, zero: bool,
                record: Callable[[int, int, Any], Any], xp: Any) -> query.FunctionBatch:
    """The closest-hit rays of ranges ``[lo, hi]`` (uint64) over the sorted distinct high parts
    ``highs``: at most two per range (see the module docstring); ``record``: the launch record
    maker of :meth:`.index.RxOptIndex._record`."""
    n_q, n_rows = int(lo.shape[0]), int(highs.shape[0])
    xb, xm = _U64(coder.x_bits), _U64(coder.x_max)
    hlo, hhi = lo >> xb, hi >> xb
    if n_rows == 0:
        casts = xp.zeros(n_q, dtype=np.int64)
        row1 = row2 = xp.zeros(n_q, dtype=_U64)
    else:
        j = xp.searchsorted(highs, hlo, side="left").astype(np.int64)
        row1 = highs[xp.minimum(j, n_rows - 1)]
        row2 = highs[xp.minimum(j + 1, n_rows - 1)]
        one = (j < n_rows) & (lo <= hi) & (row1 <= hhi)
        two = one & (row1 == hlo) & (j + 1 < n_rows) & (row2 <= hhi)
        casts = one.astype(np.int64) + two.astype(np.int64)
    starts = offsets_from_counts(casts)

    def rays(s: int, e: int, owner: Any) -> Rays:
        k = xp.arange(s, e, dtype=np.int64) - starts[owner]  # 0: ray 1, 1: ray 2
        row = xp.where(k == 0, row1[owner], row2[owner])
        x0 = xp.where((k == 0) & (row == hlo[owner]), lo[owner] & xm, _U64(0))
        x1 = xp.where(row == hhi[owner], hi[owner] & xm, xm)
        return row_rays(coder, row, x0, x1, zero)

    return query.FunctionBatch(n_q, starts, False, rays, record)


def runs_from_hits(device: str, pos: Any, point: bool, lo: Any, hi: Any, keys: Any,
                   first_of: Any, ordered_ties: bool) -> tuple[Any, Any]:
    """``(first, count)`` per lookup from the position ``pos`` its closest hit names (int64,
    -1: none): the run of sorted ``keys`` in ``[lo, hi]``. ``first_of``: the first sorted
    position of every distinct key, then n (compressed duplicates), or None."""
    xp = xp_of(pos)
    q = int(pos.shape[0])
    first = xp.zeros(q, dtype=np.int64)
    count = xp.zeros(q, dtype=np.int64)
    if q == 0:
        return first, count
    hit = pos >= 0
    at = xp.maximum(pos, 0)
    if first_of is not None:
        start = xp.where(hit, first_of[at], np.int64(-1))
        if point:  # the hit is the key's one primitive (exact): its run, without a search
            first[:] = xp.where(hit, start, 0)
            count[:] = xp.where(hit, first_of[at + 1] - first_of[at], 0)
            return first, count
    elif ordered_ties:
        start = pos
    else:  # any duplicate of the key may be the closest: go to its run's start
        start = xp.where(hit, xp.searchsorted(keys, keys[at], side="left").astype(np.int64),
                         np.int64(-1))
    RUN_BOUNDS(device, q, keys, xp.ascontiguousarray(start), lo, hi, first, count)
    return first, count
