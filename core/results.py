"""What a lookup returns: :class:`LookupResult`, and the derivations the base class uses.

A plugin implements at least the ``"rowids"`` mode of a lookup (CSR ``offsets`` and
``rowids``); the base class derives ``"rowid"``, ``"count"`` and ``"sum"`` from it when the
plugin has no fused version. The helpers here are written against the array API that NumPy
and CuPy share, so they run on either device unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

import numpy as np

from .devices import xp_of as _xp

__all__ = [
    "OUT_MODES",
    "LookupResult",
    "Out",
    "concat_results",
    "count_from_csr",
    "empty_result",
    "rowid_from_csr",
    "scatter_result",
    "sum_from_csr",
    "unpermute_result",
]

Out = Literal["rowid", "count", "sum", "rowids"]
OUT_MODES: tuple[Out, ...] = get_args(Out)

SUM_DTYPE = np.dtype(np.uint64)
OFFSET_DTYPE = np.dtype(np.int64)



@dataclass(frozen=True)
class LookupResult:
    """The answer to one batch of lookups, in query order, on the index's device.

    Only the attributes of the chosen ``out`` mode are set; the others are ``None``.

    * ``rowid``: one matching rowID per query, or ``index.miss`` (dtype ``index.rowid_dtype``).
    * ``count``: number of matches per query (dtype ``index.rowid_dtype``).
    * ``sum``: sum of the values of all matches per query, uint64, wrapping modulo 2^64.
    * ``offsets``/``rowids``: every match, as CSR: the matches of query ``i`` are
      ``rowids[offsets[i]:offsets[i+1]]`` in any order; ``offsets`` is int64 of length Q+1.
    """

    out: Out
    rowid: Any = None
    count: Any = None
    sum: Any = None
    offsets: Any = None
    rowids: Any = None

    def __repr__(self) -> str:
        shown = ("offsets", "rowids") if self.out == "rowids" else (self.out,)
        return f"LookupResult(out={self.out!r}, " + ", ".join(
            f"{f}={getattr(self, f)!r}" for f in shown) + ")"

    def __len__(self) -> int:
        if self.out == "rowids":
            return int(self.offsets.shape[0]) - 1
        return int(getattr(self, self.out).shape[0])

    @property
    def device(self) -> str:
        arr = self.offsets if self.out == "rowids" else getattr(self, self.out)
        return "cpu" if isinstance(arr, np.ndarray) else "cuda"

    def to_host(self) -> LookupResult:
        """A copy whose arrays are NumPy arrays."""
        def host(a: Any) -> Any:
            if a is None:
                return None
            return a.copy() if isinstance(a, np.ndarray) else a.get()

        return replace(self, **{f.name: host(getattr(self, f.name)) for f in fields(self)
                                if f.name != "out"})

    def matches(self, i: int) -> np.ndarray:
        """The rowIDs matching query ``i`` (``"rowids"`` mode), as a NumPy array."""
        if self.out != "rowids":
            raise ValueError(f"matches() needs out='rowids', this result has out={self.out!r}")
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        part = self.rowids[a:b]
        return part.copy() if isinstance(part, np.ndarray) else part.get()


# ---------------------------------------------------------------------- derivations
def count_from_csr(offsets: Any, dtype: Any) -> Any:
    """Matches per query from CSR offsets."""
    return (offsets[1:] - offsets[:-1]).astype(dtype)


def rowid_from_csr(offsets: Any, rowids: Any, miss: Any, dtype: Any) -> Any:
    """One rowID per query (the first listed), or ``miss`` for a query without matches."""
    xp = _xp(offsets)
    q = offsets.shape[0] - 1
    out = xp.full(q, miss, dtype=dtype)
    hit = offsets[1:] > offsets[:-1]
    out[hit] = rowids[offsets[:-1][hit]].astype(dtype)
    return out


def sum_from_csr(offsets: Any, rowids: Any, values: Any | None) -> Any:
    """Per-query sums of ``values[rowid]`` (of the rowIDs themselves when ``values`` is None),
    uint64 wrapping: differences of a wrapping prefix sum are exact modulo 2^64."""
    xp = _xp(offsets)
    picked = rowids.astype(SUM_DTYPE) if values is None else values[rowids]
    prefix = xp.zeros(picked.shape[0] + 1, dtype=SUM_DTYPE)
    if picked.shape[0]:
        xp.cumsum(picked, dtype=SUM_DTYPE, out=prefix[1:])
    return prefix[offsets[1:]] - prefix[offsets[:-1]]


# ---------------------------------------------------------------------- assembly
def empty_result(out: Out, q: int, xp: Any, rowid_dtype: Any, miss: Any) -> LookupResult:
    """The result of ``q`` lookups that all miss."""
    if out == "rowid":
        return LookupResult(out, rowid=xp.full(q, miss, dtype=rowid_dtype))
    if out == "count":
        return LookupResult(out, count=xp.zeros(q, dtype=rowid_dtype))
    if out == "sum":
        return LookupResult(out, sum=xp.zeros(q, dtype=SUM_DTYPE))
    return LookupResult(out, offsets=xp.zeros(q + 1, dtype=OFFSET_DTYPE),
                        rowids=xp.zeros(0, dtype=rowid_dtype))


def scatter_result(part: LookupResult, inside: Any, q: int, xp: Any, rowid_dtype: Any,
                   miss: Any) -> LookupResult:
    """Spread the result of the lookups at positions ``inside`` (increasing) over ``q``
    lookups; the others miss."""
    full = empty_result(part.out, q, xp, rowid_dtype, miss)
    if part.out == "rowids":
        counts = xp.zeros(q, dtype=OFFSET_DTYPE)
        counts[inside] = part.offsets[1:] - part.offsets[:-1]
        xp.cumsum(counts, out=full.offsets[1:])
        return replace(full, rowids=part.rowids)
    getattr(full, part.out)[inside] = getattr(part, part.out)
    return full


def unpermute_result(res: LookupResult, order: Any, xp: Any) -> LookupResult:
    """The result of lookups answered in the order ``order`` (lookup ``order[j]`` answered
    ``j``-th), put back in the original order."""
    q = int(order.shape[0])
    if res.out != "rowids":
        sorted_part = getattr(res, res.out)
        back = xp.empty_like(sorted_part)
        back[order] = sorted_part
        return LookupResult(res.out, **{res.out: back})
    counts_sorted = res.offsets[1:] - res.offsets[:-1]
    inverse = xp.empty(q, dtype=OFFSET_DTYPE)
    inverse[order] = xp.arange(q, dtype=OFFSET_DTYPE)
    counts = counts_sorted[inverse]
    offsets = xp.zeros(q + 1, dtype=OFFSET_DTYPE)
    xp.cumsum(counts, out=offsets[1:])
    skip = xp.repeat(res.offsets[:-1][inverse] - offsets[:-1], counts)
    rowids = res.rowids[xp.arange(int(offsets[-1]), dtype=OFFSET_DTYPE) + skip]
    return LookupResult("rowids", offsets=offsets, rowids=rowids)


def concat_results(parts: list[LookupResult], xp: Any) -> LookupResult:
    """Join the results of consecutive chunks of one batch."""
    if len(parts) == 1:
        return parts[0]
    out = parts[0].out
    if out != "rowids":
        return LookupResult(out, **{out: xp.concatenate([getattr(p, out) for p in parts])})
    offsets, base = [parts[0].offsets[:1]], 0
    for p in parts:
        offsets.append(p.offsets[1:] + base)
        base += int(p.offsets[-1])
    return LookupResult(out, offsets=xp.concatenate(offsets),
                        rowids=xp.concatenate([p.rowids for p in parts]))
