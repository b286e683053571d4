"""cgRX's scene (the thesis's §3.2, as the public artifact builds it): one slanted triangle per
bucket representative, row and plane markers, array operations only (NumPy or CuPy).

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

The build is two one-source kernels over the buckets (which triangles each contributes, then
writing them at offsets from a prefix sum), with no sort: emitted bucket by bucket
(representative, end-of-row, end-of-plane), the triangles already come out in (z, y, x, id)
order. Representatives ascend; a representative is followed in its row only by its own
end-of-row triangle (at the row's last slot, made only when it is not there itself and not
moved) and in its plane only by its end-of-plane one (at the plane's last row), and the next
bucket's triangles lie in a later row or plane or further along the same row; the one tie, a
moved representative equal to the one before it, sitting at the row's end, comes out in id
order. A test checks the order on adversarial key sets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.native.rt import TRIANGLES, Engine, Scene, engine_named
from indexzoo.native.targets import Kernel

from .coords import EX, EY, EZ, Y_SCALE, Z_SCALE, CgCoder

__all__ = ["CgScene", "SceneParts", "build_scene", "moved_flipped", "rep_of", "scene_parts",
           "stored_triangles", "triangle_function"]

_U64 = np.uint64


@dataclass(frozen=True)
class CgScene:
    """The GAS (on its engine, ``gas.engine``) and the cgRX id of each of its primitives."""

    gas: Scene
    ids: Any        # int32 (int64 from 2^31 ids on) per primitive: h
    n_buckets: int  # P
    counts: dict[str, int]  # representatives, moved, flipped, end-of-row, end-of-plane

    def nbytes(self) -> dict[str, int]:
        return {**self.gas.footprint().breakdown, "triangle_ids": int(self.ids.nbytes)}


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


#: Bits of a bucket's kind (:func:`_scene_kinds_item`).
_GENERATED, _MOVED, _FLIPPED, _END_OF_ROW, _END_OF_PLANE = 1, 2, 4, 8, 16


@register_jitable
def rep_of(keys, b, bucket):
    """The representative (largest key) of bucket ``b`` (uint64); for kernels."""
    n = np.int64(keys.shape[0])
    return np.uint64(keys[min((b + np.int64(1)) * bucket, n) - np.int64(1)])


@register_jitable
def moved_flipped(keys, b, p, bucket, ux):
    """Whether representative ``b`` of ``p`` is moved (the next bucket starts in another row;
    ``ux``: the x bits) and flipped (moved, and the only representative of its row); for the
    scene's kernels and the lookup kernel alike."""
    n = np.int64(keys.shape[0])
    row = rep_of(keys, b, bucket) >> ux
    moved = b < p - 1 and (np.uint64(keys[min((b + 1) * bucket, n - 1)]) >> ux) != row
    flipped = moved and not (b > 0 and (rep_of(keys, b - 1, bucket) >> ux) == row)
    return moved, flipped


@register_jitable
def _scene_kinds_item(b, keys, bucket, p, xb, yb, multi_row, multi_plane, kinds, emitted):
    """Which triangles bucket ``b`` contributes (its representative, moved or flipped, an
    end-of-row and an end-of-plane triangle; module docstring) and how many."""
    ux, uz = np.uint64(xb), np.uint64(xb + yb)
    xmax = (np.uint64(1) << ux) - np.uint64(1)
    ymax = (np.uint64(1) << np.uint64(yb)) - np.uint64(1)
    rep = rep_of(keys, b, bucket)
    row = rep >> ux
    plane = rep >> uz
    has_next = b < p - 1
    moved, flipped = moved_flipped(keys, b, p, bucket, ux)
    generated = b == 0 or rep_of(keys, b - 1, bucket) != rep or moved
    nxt = rep_of(keys, b + 1, bucket) if has_next else rep
    end_of_row = ((not has_next or (nxt >> ux) != row) and (rep & xmax) != xmax
                  and not moved and multi_row)
    end_of_plane = ((not has_next or (nxt >> uz) != plane) and (row & ymax) != ymax
                    and multi_plane)
    kinds[b] = np.int8((_GENERATED if generated else 0) | (_MOVED if moved else 0)
                       | (_FLIPPED if flipped else 0) | (_END_OF_ROW if end_of_row else 0)
                       | (_END_OF_PLANE if end_of_plane else 0))
    emitted[b] = (1 if generated else 0) + (1 if end_of_row else 0) + (1 if end_of_plane else 0)


@register_jitable
def _scene_emit_item(b, keys, bucket, p, xb, yb, kinds, offsets, records, ids, flip):
    """Bucket ``b``'s triangles at ``offsets[b]``: position codes (the x, y and z fields
    packed as in a key), cgRX ids and flips. Emitted bucket by bucket (representative,
    end-of-row, end-of-plane), the triangles come out in (z, y, x, id) order (module
    docstring): no sort."""
    ux, uz = np.uint64(xb), np.uint64(xb + yb)
    xmax = (np.uint64(1) << ux) - np.uint64(1)
    ymax = (np.uint64(1) << np.uint64(yb)) - np.uint64(1)
    rep = rep_of(keys, b, bucket)
    row = rep >> ux
    k = kinds[b]
    o = offsets[b]
    if k & _GENERATED:
        records[o] = (row << ux) | (xmax if k & _MOVED else rep & xmax)
        ids[o] = b
        flip[o] = (k & _FLIPPED) != 0
        o += 1
    if k & _END_OF_ROW:
        records[o] = (row << ux) | xmax
        ids[o] = p + b
        flip[o] = False
        o += 1
    if k & _END_OF_PLANE:
        records[o] = ((rep >> uz) << uz) | (ymax << ux) | xmax
        ids[o] = 2 * p + b
        flip[o] = False


_SCENE_KINDS = Kernel(_scene_kinds_item, name="cgrx_scene_kinds")
_SCENE_EMIT = Kernel(_scene_emit_item, name="cgrx_scene_emit")


@dataclass(frozen=True)
class SceneParts:
    """What a scene is built from, before its BVH: per triangle (in build order) its record
    (position code), cgRX id and flip; per bucket its kinds; and the counts they make."""

    records: Any
    ids: Any
    flip: Any
    n_buckets: int
    counts: dict[str, int]


def scene_parts(coder: CgCoder, keys: Any, bucket: int) -> SceneParts:
    """The triangles of the sorted ``keys`` (at least one) with buckets of ``bucket`` keys:
    two kernels over the buckets, no sort (see the module docstring)."""
    xp = xp_of(keys)
    n = int(keys.shape[0])
    p = -(-n // bucket)
    dev = "cpu" if xp is np else "cuda"
    xb = np.int64(coder.x_bits)
    ends = keys[xp.asarray([min(bucket, n) - 1, n - 1])].astype(_U64)  # representatives 0, P-1
    ends = ends.tolist() if xp is np else ends.get().tolist()
    multi_row = (ends[0] >> coder.x_bits) != (ends[1] >> coder.x_bits)
    multi_plane = (ends[0] >> (coder.x_bits + coder.y_bits)) != (
        ends[1] >> (coder.x_bits + coder.y_bits))
    kinds = xp.empty(p, dtype=np.int8)
    emitted = xp.empty(p, dtype=np.int64)
    _SCENE_KINDS(dev, p, keys, np.int64(bucket), np.int64(p), xb, np.int64(coder.y_bits),
                 np.bool_(multi_row), np.bool_(multi_plane), kinds, emitted)
    offsets = xp.empty(p, dtype=np.int64)
    xp.cumsum(emitted, out=offsets)
    total = int(offsets[-1])
    offsets -= emitted
    records = xp.empty(total, dtype=_U64)
    ids = xp.empty(total, dtype=np.int64)
    flip = xp.empty(total, dtype=np.bool_)
    _SCENE_EMIT(dev, p, keys, np.int64(bucket), np.int64(p), xb, np.int64(coder.y_bits), kinds,
                offsets, records, ids, flip)
    sums = ((kinds[:, None] >> xp.arange(5, dtype=np.int8)) & np.int8(1)).sum(axis=0)
    sums = sums.tolist() if xp is np else sums.get().tolist()  # one transfer
    counts = dict(zip(("representatives", "moved", "flipped", "end_of_row", "end_of_plane"),
                      (int(c) for c in sums), strict=True))
    id_dtype = np.int32 if 3 * p < (1 << 31) else np.int64
    return SceneParts(records, ids.astype(id_dtype), flip, p, counts)


def stored_triangles(coder: CgCoder, records: Any, flip: Any) -> Any:
    """The vertex rows (float32 (N, 9)) of the triangles at ``records``, ``flip`` swapping
    their second and third vertices (stored geometry, as OptiX's GAS holds them)."""
    xp = xp_of(records)
    xs, ys, zs = coder.fields(records)
    cx, cy, cz = coder.x_coord(xs), coder.y_coord(ys), coder.z_coord(zs)
    ex, ey, ez = np.float32(EX), np.float32(EY), np.float32(EZ)
    v0 = [cx + ex, cy - ey, cz]
    v1 = [cx, cy + ey, cz - ez]
    v2 = [cx - ex, cy, cz + ez]
    f = flip[:, None]
    second = xp.where(f, xp.stack(v2, 1), xp.stack(v1, 1))  # flipped: v1 and v2 swap
    third = xp.where(f, xp.stack(v1, 1), xp.stack(v2, 1))
    return xp.ascontiguousarray(xp.concatenate([xp.stack(v0, 1), second, third], axis=1))


def build_scene(coder: CgCoder, keys: Any, bucket: int, leaf_size: int, compact: bool,
                geometry: str = "generated", engine: Engine | None = None) -> CgScene:
    """The scene of the sorted ``keys`` (at least one) with buckets of ``bucket`` keys on
    ``engine`` (default: the software engine); ``geometry``: ``generated`` (records, the
    default) or ``stored`` (vertex rows, as OptiX's GAS holds them; an engine without
    generated geometry always stores them)."""
    engine = engine or engine_named("software")
    parts = scene_parts(coder, keys, bucket)
    if geometry == "generated" and engine.generated_geometry:
        gas = engine.build_gas(TRIANGLES, parts.records, leaf_size=leaf_size, compact=compact,
                               geometry=triangle_function(coder))
    else:
        gas = engine.build_gas(TRIANGLES, stored_triangles(coder, parts.records, parts.flip),
                               leaf_size=leaf_size, compact=compact)
    return CgScene(gas, parts.ids, parts.n_buckets, parts.counts)
