"""How a key becomes coordinates in a ray-tracing scene (RX, paper §3.2, Table 1) and which keys
a mode holds: the key-to-coordinate map every RT index of the RX family shares.

Every mode is described the same way: a key ``k`` (uint64; uint32 keys are zero-padded) splits
into an **x part** (its low ``x_bits``) and a **high part** ``h = k >> x_bits``, which splits into
``y = h & (2^y_bits - 1)`` and ``z = h >> y_bits``. The key's point is ``(X(x), y, z)``:

==========  ======  ======  ======  ===========================================  ==========
mode        x_bits  y_bits  z_bits  X(x)                                         keys held
==========  ======  ======  ======  ===========================================  ==========
naive       23      41      0       float(x)                                     k < 2^23
extended    29      35      0       bit_cast<float32>(2x + 0x3F000000)           k < 2^29
3d          23      23      18      float(x) (split configurable)                all 64-bit
==========  ======  ======  ======  ===========================================  ==========

In naive and extended mode the high part of every key held is 0, so ``y = z = 0`` (Table 1).
Gaps (where rays start and end): ``X(x) -+ 0.5`` for ``float(x)``, which is exact because every
part is below 2^23 [§3.2]; the neighbouring floats (``nextafter``: bit patterns ``2x + C -+ 1``)
in extended mode. ``y`` and ``z`` always use ``-+ 0.5``.

A 3D split with ``y_bits`` or ``z_bits`` above 23 is allowed (e.g. the 2-bit toy split of the
paper's Fig. 4), but then only keys whose y and z parts are below 2^23 are held. All array
functions here run on NumPy or CuPy arrays alike; the device functions at the end (numba
``register_jitable``) decode coordinates back to key parts inside programs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.extending import register_jitable

from indexzoo.devices import xp_of
from indexzoo.errors import InvalidInput

__all__ = ["EXTENDED_OFFSET", "PART_LIMIT", "X_BITCAST", "X_LINEAR", "KeyCoder", "bits_float",
           "float_bits", "gaps_of_x", "point_of_x", "x_of_gap_above", "x_of_gap_below",
           "x_of_point"]

#: A coordinate part must be below 2^23 so that part +- 0.5 is exact in float32 [§3.2].
PART_LIMIT = 1 << 23
#: C = bit_cast<uint32>(0.5f), the offset of extended mode [§3.2].
EXTENDED_OFFSET = 0x3F000000
#: How X(x) is computed (a launch parameter of the AABB intersection program).
X_LINEAR, X_BITCAST = 0, 1

_U64 = np.uint64


@dataclass(frozen=True)
class KeyCoder:
    """The key -> point map of one key mode (see the module docstring)."""

    mode: str
    x_bits: int
    y_bits: int
    z_bits: int

    @classmethod
    def for_params(cls, key_mode: str, x_bits: int, y_bits: int, z_bits: int) -> KeyCoder:
        if key_mode == "naive":
            return cls("naive", 23, 41, 0)
        if key_mode == "extended":
            return cls("extended", 29, 35, 0)
        return cls("3d", x_bits, y_bits, z_bits)

    # ------------------------------------------------------------------ description
    @property
    def x_kind(self) -> int:
        return X_BITCAST if self.mode == "extended" else X_LINEAR

    @property
    def x_max(self) -> int:
        """The largest x part (x lines run from X(0) to X(x_max))."""
        return (1 << self.x_bits) - 1

    @property
    def split(self) -> str:
        return f"{self.x_bits}/{self.y_bits}/{self.z_bits}"

    @property
    def holds_every_key(self) -> bool:
        return self.mode == "3d" and self.y_bits <= 23 and self.z_bits <= 23

    def limit_text(self) -> str:
        """Which keys the mode holds, in words."""
        if self.mode == "naive":
            return ("key_mode='naive' holds keys below 2^23 = 8388608 (float32 keeps k +- 0.5 "
                    "exact only there)")
        if self.mode == "extended":
            return ("key_mode='extended' holds keys below 2^29 = 536870912 (bit-cast floats stay "
                    "finite and exact only there)")
        if self.holds_every_key:
            return f"key_mode='3d' with split {self.split} holds every 64-bit key"
        return (f"key_mode='3d' with split {self.split} holds keys whose y part (bits "
                f"{self.x_bits}..{self.x_bits + self.y_bits - 1}) and z part (bits "
                f"{self.x_bits + self.y_bits}..63) are below 2^23 (each coordinate +- 0.5 must be "
                f"exact in float32)")

    def alternatives(self, key: int) -> str:
        """The modes that would hold ``key``."""
        if self.mode == "naive" and key < (1 << 29):
            return ("key_mode='extended' (keys below 2^29, with range_ray='zero') or '3d' (the "
                    "default, every 64-bit key) holds it")
        return "key_mode='3d' with the default split 23/23/18 holds every 64-bit key"

    # ------------------------------------------------------------------ parts
    def parts(self, keys: Any) -> tuple[Any, Any]:
        """``(x part, high part)`` of every key, both uint64."""
        k = keys.astype(_U64, copy=False)
        return k & _U64(self.x_max), k >> _U64(self.x_bits)

    def legal(self, keys: Any) -> Any:
        """Boolean mask: which keys (or lookups) the mode can hold."""
        _, high = self.parts(keys)
        if self.mode != "3d":
            return high == _U64(0)
        ok = xp_of(high).ones(high.shape[0], dtype=bool)
        if self.y_bits > 23:
            ok &= (high & _U64((1 << self.y_bits) - 1)) < _U64(PART_LIMIT)
        if self.z_bits > 23:
            ok &= (high >> _U64(self.y_bits)) < _U64(PART_LIMIT)
        return ok

    def check_keys(self, keys: Any, show: Callable[[int], str]) -> None:
        """InvalidInput naming the first key the mode cannot hold, the limit and the modes that
        would hold it; ``show(i)`` renders the key at position ``i`` as the user gave it."""
        if self.holds_every_key or keys.shape[0] == 0:
            return
        bad = ~self.legal(keys)
        if not bool(bad.any()):
            return
        xp = xp_of(bad)
        i = int(xp.argmax(bad))
        raise InvalidInput(f"{self.limit_text()}; {show(i)} is not: "
                           f"{self.alternatives(int(keys[i]))}")

    # ------------------------------------------------------------------ coordinates
    def x_coord(self, x: Any) -> Any:
        """X(x): float32, exact."""
        if self.mode == "extended":
            return self._bitcast(x * _U64(2) + _U64(EXTENDED_OFFSET))
        return x.astype(np.float32)

    def x_gaps(self, x: Any) -> tuple[Any, Any]:
        """The gap below and the gap above X(x): float32 (no key sits there)."""
        if self.mode == "extended":
            bits = x * _U64(2) + _U64(EXTENDED_OFFSET)
            return self._bitcast(bits - _U64(1)), self._bitcast(bits + _U64(1))
        xf = x.astype(np.float32)
        return xf - np.float32(0.5), xf + np.float32(0.5)

    def yz(self, high: Any) -> tuple[Any, Any]:
        """y and z of high parts: float32, exact for held keys."""
        y = high & _U64((1 << self.y_bits) - 1)  # y_bits <= 63: x_bits >= 1
        z = high >> _U64(self.y_bits)
        return y.astype(np.float32), z.astype(np.float32)

    def points(self, keys: Any) -> tuple[Any, Any, Any]:
        """The key points ``(X, y, z)`` of held keys, float32 arrays."""
        x, high = self.parts(keys)
        y, z = self.yz(high)
        return self.x_coord(x), y, z

    @staticmethod
    def _bitcast(bits: Any) -> Any:
        return bits.astype(np.uint32).view(np.float32)


# ------------------------------------------------------------------ device functions
@register_jitable
def float_bits(f):
    """The IEEE bit pattern of a positive, normal float32 ``f`` (uint64)."""
    m, e = math.frexp(np.float64(f))  # f = m 2^e, 0.5 <= m < 1: m has 24 significant bits
    return np.uint64(e + 126) * np.uint64(1 << 23) + np.uint64(m * 16777216.0) - np.uint64(1 << 23)


@register_jitable
def bits_float(bits):
    """The float32 with the (positive, normal) bit pattern ``bits``."""
    b = np.uint64(bits)
    mant = b & np.uint64((1 << 23) - 1)
    exp = np.int64(b >> np.uint64(23))
    return np.float32(math.ldexp(np.float64(mant + np.uint64(1 << 23)), np.int32(exp - 150)))


@register_jitable
def x_of_gap_above(g, x_kind):
    """The x part whose gap below is ``g`` (the first x a ray starting at ``g`` can meet)."""
    if x_kind == 1:
        return (float_bits(g) + np.uint64(1) - np.uint64(EXTENDED_OFFSET)) >> np.uint64(1)
    return np.uint64(g + np.float32(0.5))


@register_jitable
def x_of_gap_below(g, x_kind):
    """The x part whose gap above is ``g`` (the last x a ray ending at ``g`` can meet)."""
    if x_kind == 1:
        return (float_bits(g) - np.uint64(1) - np.uint64(EXTENDED_OFFSET)) >> np.uint64(1)
    return np.uint64(g - np.float32(0.5))


@register_jitable
def x_of_point(f, x_kind):
    if x_kind == 1:
        return (float_bits(f) - np.uint64(EXTENDED_OFFSET)) >> np.uint64(1)
    return np.uint64(f)


@register_jitable
def point_of_x(x, x_kind):
    if x_kind == 1:
        return bits_float(x * np.uint64(2) + np.uint64(EXTENDED_OFFSET))
    return np.float32(x)


@register_jitable
def gaps_of_x(x, x_kind):
    """The gap below and the gap above X(x) (float32; :meth:`KeyCoder.x_gaps` for one x)."""
    if x_kind == 1:
        bits = np.uint64(x) * np.uint64(2) + np.uint64(EXTENDED_OFFSET)
        return bits_float(bits - np.uint64(1)), bits_float(bits + np.uint64(1))
    xf = np.float32(x)
    return xf - np.float32(0.5), xf + np.float32(0.5)
