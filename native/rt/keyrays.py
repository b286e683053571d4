"""Lookups as rays over keys as primitives (RX, paper §3.3, Table 2; §3.2 for ranges across rows),
shared by the RT indexes of the RX family. Array operations only (NumPy or CuPy).

Rays (t is measured along the unit direction; a hit needs tmin < t < tmax):

==================  =====================  ==========  ============  =====================
ray                 origin                 direction   tmin          tmax
==================  =====================  ==========  ============  =====================
perpendicular       (X(x), y, z - 0.5)     (0, 0, 1)   0             1
offset (Q5)         (gap below x0, y, z)   (1, 0, 0)   0             gap above x1 - origin
zero (Q6)           (0, y, z)              (1, 0, 0)   gap below x0  gap above x1
==================  =====================  ==========  ============  =====================

A row is the line of one high part ``h`` (``y(h)``, ``z(h)``); a ray along it over the x parts
``x0 .. x1`` meets exactly the keys of that row whose x part lies in ``[x0, x1]``. The
perpendicular ray of key ``k`` meets exactly the primitives of ``k``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import xp_of

from .keymap import KeyCoder
from .query import Rays

__all__ = ["occupied_row_rays", "occupied_rows", "perpendicular_rays", "row_rays"]


def perpendicular_rays(coder: KeyCoder, keys: Any) -> Rays:
    """One perpendicular ray per key (keys the mode holds)."""
    xp = xp_of(keys)
    x, y, z = coder.points(keys)
    r = int(keys.shape[0])
    o = xp.stack([x, y, z - np.float32(0.5)], axis=1)
    d = xp.zeros((r, 3), dtype=np.float32)
    d[:, 2] = 1
    return Rays(o, d, xp.zeros(r, np.float32), xp.ones(r, np.float32))


def row_rays(coder: KeyCoder, high: Any, x0: Any, x1: Any, zero: bool) -> Rays:
    """One ray along x per row ``high`` over the x parts ``x0 .. x1`` (uint64 arrays): from
    x = 0 with tmin at ``x0``'s gap (``zero``, Q6) or from ``x0``'s gap (Q5)."""
    xp = xp_of(high)
    r = int(high.shape[0])
    start, _ = coder.x_gaps(x0)
    _, end = coder.x_gaps(x1)
    y, z = coder.yz(high)
    d = xp.zeros((r, 3), dtype=np.float32)
    d[:, 0] = 1
    if zero:
        o = xp.stack([xp.zeros(r, np.float32), y, z], axis=1)
        return Rays(o, d, start, end)
    o = xp.stack([start, y, z], axis=1)
    # end - start is exact: both are multiples of 0.5 below 2^23 (offset rays are ruled out in
    # extended mode, where it would not be)
    return Rays(o, d, xp.zeros(r, np.float32), end - start)


def occupied_rows(coder: KeyCoder, lo: Any, hi: Any, highs: Any) -> tuple[Any, Any]:
    """RX's rays of the ranges ``[lo, hi]`` over the sorted distinct high parts ``highs`` of the
    keys [§3.2]: one ray per occupied row from ``lo``'s to ``hi``'s (none for ``lo > hi``).
    Returns ``(casts, first)``: the rays of each range and the index in ``highs`` of its first
    row."""
    xp = xp_of(lo)
    _, hlo = coder.parts(lo)
    _, hhi = coder.parts(hi)
    first = xp.searchsorted(highs, hlo, side="left").astype(np.int64)
    stop = xp.searchsorted(highs, hhi, side="right").astype(np.int64)
    casts = xp.where(lo <= hi, xp.maximum(stop - first, 0), 0).astype(np.int64)
    return casts, first


def occupied_row_rays(coder: KeyCoder, lo: Any, hi: Any, highs: Any, first: Any, starts: Any,
                      owner: Any, s: int, zero: bool) -> Rays:
    """Rays ``s .. s + len(owner) - 1`` of :func:`occupied_rows`'s flat list (``starts``: its
    CSR offsets, ``owner``: the range of each ray): on each row from ``lo``'s x part (or 0) to
    ``hi``'s (or the last), as the RX artifact's loop does."""
    xp = xp_of(owner)
    j = first[owner] + (xp.arange(s, s + owner.shape[0], dtype=np.int64) - starts[owner])
    h = highs[j]
    xlo, hlo = coder.parts(lo[owner])
    xhi, hhi = coder.parts(hi[owner])
    x0 = xp.where(h == hlo, xlo, np.uint64(0))
    x1 = xp.where(h == hhi, xhi, np.uint64(coder.x_max))
    return row_rays(coder, h, x0, x1, zero)
