"""cgRX's scene (digest 001 §2.2): one slanted triangle per bucket representative, row and plane
markers, array operations only (NumPy or CuPy).

The sorted keys are cut into buckets of B keys; bucket b holds sorted positions ``b*B ..
min((b+1)*B, n) - 1`` and its representative is its last (largest) key. Triangles, each with
its cgRX id ``h``:

* ``h = b`` (b < P): representative b, at its key's point; generated for b = 0, for a key
  other than the previous representative's, and when *moved*: when bucket b+1 starts in
  another row, the triangle sits at the end of its row (``row_marker_x``), with its winding
  flipped when no earlier representative shares the row (a front face then says "the only
  representative of this row");
* ``h = P + b``: an end-of-row triangle standing for bucket b+1, at the end of representative
  b's row, when b is the last representative of its row, not in the row's last slot, not moved,
  and the representatives span more than one row;
* ``h = 2P + b``: an end-of-plane triangle standing for bucket b+1, at (``row_marker_x``,
  ``plane_marker_y``) of b's plane, when b is the last representative of its plane, not in the
  plane's last row, and the representatives span more than one plane.

A hit maps back to a bucket: ``h - 2P + 1``, ``h - P + 1`` or ``h``; the row and plane a
triangle sits on follow from ``h`` and the representative keys (no per-triangle copy), and so
does whether it is flipped (the lookup kernel's ``flipped``, :mod:`.search`): the successor
search asks the keys instead of the winding, which lets generated triangles be 8-byte position
codes. Stored triangles are flipped as the artifact's are, and their front faces agree with the
kernel's answer (tested).

Triangles are slanted, ``(x+ex, y-ey, z), (x, y+ey, z-ez), (x-ex, y, z+ez)`` around their
point, so rays along x, y
and z through the point all hit them. They are stored in (z, y, x) order, so that among
triangles a ray along an axis reaches at the same computed distance the nearer one has the
smaller primitive index (the engine's tie-break), as it has the smaller coordinates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.native.rt.geometry import TRIANGLES
from indexzoo.native.rt.trace import Gas, build_gas

from .coords import EX, EY, EZ, Y_SCALE, Z_SCALE, CgCoder

__all__ = ["CgScene", "build_scene", "triangle_function"]

_U64 = np.uint64


@dataclass(frozen=True)
class CgScene:
    """The GAS and the cgRX id of each of its primitives."""

    gas: Gas
    ids: Any        # int32 (int64 from 2^31 ids on) per primitive: h
    n_buckets: int  # P
    counts: dict[str, int]  # representatives, moved, flipped, end-of-row, end-of-plane

    def nbytes(self) -> dict[str, int]:
        return {**self.gas.footprint().breakdown, "triangle_ids": int(self.ids.nbytes)}


def _shift(xp: Any, a: Any, first: Any) -> Any:
    """``a`` moved one place right, ``first`` in front (the previous element of each)."""
    return xp.concatenate([xp.asarray([first], dtype=a.dtype), a[:-1]])


@functools.cache
def triangle_function(coder: CgCoder) -> Any:
    """``f(records, i)``: the slanted triangle at the position code ``records[i]`` (x, y and z
    fields packed as in a key): the engine's generated geometry, 8 bytes a triangle instead
    of 36, the same float32 vertices (unflipped: the front-face test is answered from the keys,
    see the module docstring)."""
    xb, yb = np.uint64(coder.x_bits), np.uint64(coder.y_bits)
    xm, ym = np.uint64(coder.x_max), np.uint64(coder.y_max)
    ex, ey, ez = np.float32(EX), np.float32(EY), np.float32(EZ)
    half = np.float32(0.5)
    ys, zs = np.float32(Y_SCALE), np.float32(Z_SCALE)

    @register_jitable
    def triangle(records, i):
        c = np.uint64(records[i])
        cx = np.float32(c & xm) + half
        cy = (np.float32((c >> xb) & ym) + half) * ys
        cz = (np.float32(c >> (xb + yb)) + half) * zs
        return (cx + ex, cy - ey, cz, cx, cy + ey, cz - ez, cx - ex, cy, cz + ez)

    return triangle


def build_scene(coder: CgCoder, keys: Any, bucket: int, leaf_size: int, compact: bool,
                geometry: str = "generated") -> CgScene:
    """The scene of the sorted ``keys`` (at least one) with buckets of ``bucket`` keys;
    ``geometry``: ``generated`` (records, the default) or ``stored`` (vertex rows, as OptiX's
    GAS holds them)."""
    xp = xp_of(keys)
    n = int(keys.shape[0])
    p = -(-n // bucket)
    b = xp.arange(p, dtype=np.int64)
    last = xp.minimum((b + 1) * bucket, n) - 1
    rep = keys[last].astype(_U64)
    xr, yr, zr = coder.fields(rep)
    row = rep >> _U64(coder.x_bits)
    plane = zr
    first_next = keys[xp.minimum((b + 1) * bucket, n - 1)].astype(_U64)
    has_next = b < p - 1
    moved = has_next & ((first_next >> _U64(coder.x_bits)) != row)
    prev_row_same = _shift(xp, row, row[0] + _U64(1)) == row  # b = 0: no previous
    prev_rep_same = (_shift(xp, rep, rep[0]) == rep) & (b > 0)
    generated = (b == 0) | ~prev_rep_same | moved
    flipped = moved & ~prev_row_same
    nxt_row = xp.concatenate([row[1:], row[-1:] + _U64(1)])
    nxt_plane = xp.concatenate([plane[1:], plane[-1:] + _U64(1)])
    multi_row = bool(row[0] != row[-1])
    multi_plane = bool(plane[0] != plane[-1])
    end_of_row = (nxt_row != row) & (xr != _U64(coder.x_max)) & ~moved & multi_row
    end_of_plane = (nxt_plane != plane) & (yr != _U64(coder.y_max)) & multi_plane
    xmax, ymax = _U64(coder.x_max), _U64(coder.y_max)
    g = xp.nonzero(generated)[0]
    r = xp.nonzero(end_of_row)[0]
    e = xp.nonzero(end_of_plane)[0]
    xs = xp.concatenate([xp.where(moved[g], xmax, xr[g]), xp.full(r.shape[0], xmax, _U64),
                         xp.full(e.shape[0], xmax, _U64)])
    ys = xp.concatenate([yr[g], yr[r], xp.full(e.shape[0], ymax, _U64)])
    zs = xp.concatenate([zr[g], zr[r], zr[e]])
    ids = xp.concatenate([g, r + p, e + 2 * p]).astype(np.int64)
    flip = xp.concatenate([flipped[g], xp.zeros(r.shape[0] + e.shape[0], dtype=bool)])
    order = xp.lexsort(xp.stack([ids, xs, ys, zs]))  # z, then y, then x, then id
    xs, ys, zs, ids, flip = xs[order], ys[order], zs[order], ids[order], flip[order]
    if geometry == "generated":
        records = (zs << _U64(coder.x_bits + coder.y_bits)) | (ys << _U64(coder.x_bits)) | xs
        gas = build_gas(TRIANGLES, records, leaf_size=leaf_size, compact=compact,
                        geometry=triangle_function(coder))
    else:
        cx, cy, cz = coder.x_coord(xs), coder.y_coord(ys), coder.z_coord(zs)
        ex, ey, ez = np.float32(EX), np.float32(EY), np.float32(EZ)
        v0 = [cx + ex, cy - ey, cz]
        v1 = [cx, cy + ey, cz - ez]
        v2 = [cx - ex, cy, cz + ez]
        f = flip[:, None]
        second = xp.where(f, xp.stack(v2, 1), xp.stack(v1, 1))  # flipped: v1 and v2 swap
        third = xp.where(f, xp.stack(v1, 1), xp.stack(v2, 1))
        tris = xp.ascontiguousarray(xp.concatenate([xp.stack(v0, 1), second, third], axis=1))
        gas = build_gas(TRIANGLES, tris, leaf_size=leaf_size, compact=compact)
    counts = {"representatives": int(g.shape[0]), "moved": int(moved.sum()),
              "flipped": int(flipped.sum()), "end_of_row": int(r.shape[0]),
              "end_of_plane": int(e.shape[0])}
    id_dtype = np.int32 if 3 * p < (1 << 31) else np.int64
    return CgScene(gas, ids.astype(id_dtype), p, counts)
