"""Packed bitmaps in the contract's layout: row ``r`` is bit ``r % 32`` (least significant
first) of uint32 word ``r // 32``; the bits past the last row are zero."""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.devices import xp_of

__all__ = ["full_rows", "pack_rows", "words_for"]


def words_for(n: int) -> int:
    """Words of a bitmap over ``n`` rows: ``ceil(n / 32)``."""
    return (int(n) + 31) // 32


def pack_rows(mask: Any) -> Any:
    """(Q, N) bool -> (Q, ceil(N/32)) uint32, LSB-first, padding bits zero."""
    xp = xp_of(mask)
    q, n = int(mask.shape[0]), int(mask.shape[1])
    words = words_for(n)
    padded = xp.zeros((q, words * 32), dtype=bool)
    padded[:, :n] = mask
    packed = xp.packbits(padded.reshape(-1), bitorder="little")  # flat: CuPy has no axis
    return packed.view(np.uint32).reshape(q, words)


def full_rows(xp: Any, q: int, n: int) -> Any:
    """(Q, ceil(N/32)) uint32 bitmaps with every row's bit set (padding bits zero)."""
    words = words_for(n)
    out = xp.full((q, words), 0xFFFFFFFF, dtype=np.uint32)
    if n % 32 and words:
        out[:, -1] = np.uint32((1 << (n % 32)) - 1)
    return out
