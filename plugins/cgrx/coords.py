"""cgRX's key-to-coordinate map (the public artifact's; different from RX's): a key's bits split
into x, y and z fields, each placed at its field value plus 0.5, y scaled by 2^15 and z by 2^25,
so the slanted triangles of neighbouring rows and planes never overlap.

==========  ======  ======  ======
key width   x bits  y bits  z bits
==========  ======  ======  ======
32          19      13      0
64          23      23      18
==========  ======  ======  ======

A *row* is a (y, z) pair (the key's high part ``key >> x_bits``), a *plane* a z value. The
last x slot of every row (``row_marker_x``) and the last y of every plane (``plane_marker_y``)
hold the markers of the successor search. Every coordinate is a float32 exactly: fields below
2^23 plus 0.5, times a power of two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = ["EX", "EY", "EZ", "PATH_WIDTH", "Y_SCALE", "Z_SCALE", "CgCoder", "KernelConstants"]

#: What :func:`.search.lookup_kernel` records of each ray when asked to: ``axis * 4 + 2 * hit
#: + flipped`` (axis 0, 1, 2 for +x, +y, +z), -1 after the last ray (here, not in the numba
#: module, for the saved state's schema).
PATH_WIDTH = 5

Y_SCALE = float(1 << 15)
Z_SCALE = float(1 << 25)
#: Half-extents of a triangle along each axis.
EX, EY, EZ = 0.5, 0.5 * Y_SCALE, 0.5 * Z_SCALE

_U64 = np.uint64


class KernelConstants(NamedTuple):
    """The coordinate constants a kernel of one key width closes over, typed as numba wants
    them (see :meth:`CgCoder.kernel_constants`)."""

    xb: np.uint64              # x bits: the high part of a key is ``key >> xb``
    zb_shift: np.uint64        # x bits + y bits: the z field is ``key >> zb_shift``
    xm: np.uint64              # largest x field
    ym: np.uint64              # largest y field
    half: np.float32
    ys: np.float32             # Y_SCALE
    zs: np.float32             # Z_SCALE
    ex: np.float32             # EX, EY, EZ: a triangle's half-extents
    ey: np.float32
    ez: np.float32
    row_marker_x: np.float32
    plane_marker_y: np.float32


@dataclass(frozen=True)
class CgCoder:
    """The field split of one key width."""

    x_bits: int
    y_bits: int
    z_bits: int

    @classmethod
    def for_dtype(cls, dtype: Any) -> CgCoder:
        return cls(19, 13, 0) if np.dtype(dtype).itemsize == 4 else cls(23, 23, 18)

    @property
    def x_max(self) -> int:
        return (1 << self.x_bits) - 1

    @property
    def y_max(self) -> int:
        return (1 << self.y_bits) - 1

    def fields(self, keys: Any) -> tuple[Any, Any, Any]:
        """(x, y, z) fields of every key, uint64."""
        k = keys.astype(_U64, copy=False)
        x = k & _U64(self.x_max)
        y = (k >> _U64(self.x_bits)) & _U64(self.y_max)
        z = k >> _U64(self.x_bits + self.y_bits)
        return x, y, z

    @staticmethod
    def x_coord(x: Any) -> Any:
        return x.astype(np.float32) + np.float32(0.5)

    @staticmethod
    def y_coord(y: Any) -> Any:
        return (y.astype(np.float32) + np.float32(0.5)) * np.float32(Y_SCALE)

    @staticmethod
    def z_coord(z: Any) -> Any:
        return (z.astype(np.float32) + np.float32(0.5)) * np.float32(Z_SCALE)

    def kernel_constants(self) -> KernelConstants:
        """The constants the search kernels close over (:class:`KernelConstants`)."""
        return KernelConstants(
            _U64(self.x_bits), _U64(self.x_bits + self.y_bits), _U64(self.x_max),
            _U64(self.y_max), np.float32(0.5), np.float32(Y_SCALE), np.float32(Z_SCALE),
            np.float32(EX), np.float32(EY), np.float32(EZ), np.float32(self.row_marker_x),
            np.float32(self.plane_marker_y))

    @property
    def row_marker_x(self) -> np.float32:
        return np.float32(self.x_max + 0.5)

    @property
    def plane_marker_y(self) -> np.float32:
        return np.float32((self.y_max + 0.5) * Y_SCALE)
