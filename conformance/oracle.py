"""The NumPy oracle: exact answers for every ``out`` mode, and the comparison of an index's
result with them.

The oracle works on the keys as the user gave them (any orderable NumPy dtype), with a stable
sort and ``searchsorted``; it never goes through indexzoo's key map, so it also checks the map.
Sums are uint64 and wrap modulo 2^64, like the contract says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from indexzoo import LookupResult
from indexzoo.devices import to_numpy

__all__ = ["ColumnsOracle", "Expected", "Oracle", "compare", "compare_mask", "packed"]


@dataclass(frozen=True)
class Expected:
    """The exact answer to a batch: the matches of query ``i`` are
    ``oracle.rowids[start[i]:stop[i]]``."""

    start: np.ndarray
    stop: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @property
    def count(self) -> np.ndarray:
        return self.stop - self.start


#: Batches of at least this many lookups are searched in ascending order.
SORT_SEARCHES_FROM = 1 << 14


class Oracle:
    """Exact lookups over ``keys`` (rowID = position) with optional ``values``."""

    def __init__(self, keys: Any, values: Any = None, order: np.ndarray | None = None):
        """``order``: a permutation that sorts ``keys``, where the caller knows one (the scale
        checks' generator does: an argsort of 10^8 keys takes minutes); it is checked, never
        trusted: the keys it orders must ascend."""
        self.keys = np.asarray(to_numpy(keys))
        if order is None:
            order = np.argsort(self.keys, kind="stable")
        else:
            seen = np.zeros(self.keys.shape[0], dtype=bool)
            seen[order] = True
            if order.shape != self.keys.shape or not seen.all():
                raise ValueError("order is not a permutation of the keys' positions")
        self.sorted = self.keys[order]
        if self.sorted.shape[0] > 1 and (self.sorted[1:] < self.sorted[:-1]).any():
            raise ValueError("order does not sort the keys")
        self.rowids = order.astype(np.int64)
        vals = (np.arange(self.keys.shape[0], dtype=np.uint64) if values is None
                else np.asarray(to_numpy(values)).astype(np.uint64))
        self.values = vals
        self._prefix = np.zeros(self.keys.shape[0] + 1, dtype=np.uint64)
        np.cumsum(vals[order], dtype=np.uint64, out=self._prefix[1:])

    def range(self, lo: Any, hi: Any) -> Expected:
        lo, hi = np.asarray(to_numpy(lo)), np.asarray(to_numpy(hi))
        order = np.argsort(lo) if lo.shape[0] >= SORT_SEARCHES_FROM else None
        start = self._search(lo, "left", order)
        stop = np.maximum(self._search(hi, "right", order), start)
        return Expected(start, stop, lo, hi)

    def _search(self, x: np.ndarray, side: Literal["left", "right"],
                order: np.ndarray | None) -> np.ndarray:
        """``searchsorted`` of ``x`` as int64; a large batch is searched in the ``order`` of
        its lower bounds (neighbouring searches then share their first steps: several times
        faster; upper bounds lie near their lower bounds, so the same order serves them)."""
        if order is None:
            return np.searchsorted(self.sorted, x, side=side).astype(np.int64)
        out = np.empty(x.shape[0], dtype=np.int64)
        out[order] = np.searchsorted(self.sorted, x[order], side=side)
        return out

    def point(self, q: Any) -> Expected:
        return self.range(q, q)

    def sums(self, exp: Expected) -> np.ndarray:
        return self._prefix[exp.stop] - self._prefix[exp.start]

    def sets(self, exp: Expected) -> list[np.ndarray]:
        return [np.sort(self.rowids[a:b]) for a, b in zip(exp.start, exp.stop, strict=True)]

    def bitmap(self, exp: Expected) -> np.ndarray:
        """The contract's packed bits of the expected matches."""
        q, n = exp.start.shape[0], self.keys.shape[0]
        seg = np.repeat(np.arange(q, dtype=np.int64), exp.count)
        pos = np.repeat(exp.start - np.concatenate([[0], np.cumsum(exp.count)[:-1]]),
                        exp.count) + np.arange(seg.shape[0], dtype=np.int64)
        mask = np.zeros((q, n), dtype=bool)
        mask[seg, self.rowids[pos]] = True
        return packed(mask)


def packed(mask: np.ndarray) -> np.ndarray:
    """(Q, ceil(N/32)) uint32 words of a (Q, N) boolean mask: rowID r is bit r % 32 (least
    significant first) of word r // 32; the bits past N are zero. Written independently of
    indexzoo's own derivation, from NumPy's packbits."""
    q, n = mask.shape
    words = (n + 31) // 32
    padded = np.zeros((q, words * 32), dtype=bool)
    padded[:, :n] = mask
    return np.packbits(padded, axis=1, bitorder="little").view("<u4").reshape(q, words)


class ColumnsOracle:
    """Exact lookups over d key columns (rowID = row position), by brute force: a row
    matches a lookup when every constrained column lies in its bounds (points: equals)."""

    def __init__(self, columns: list[np.ndarray], values: Any = None):
        self.columns = [np.asarray(to_numpy(c)) for c in columns]
        n = self.columns[0].shape[0]
        self.n = n
        self.values = (np.arange(n, dtype=np.uint64) if values is None
                       else np.asarray(to_numpy(values)).astype(np.uint64))

    def range(self, lo: list[Any], hi: list[Any]) -> np.ndarray:
        """(Q, N) match mask; ``None`` leaves that side of a column unconstrained."""
        q = next(int(np.asarray(c).shape[0]) for c in [*lo, *hi] if c is not None)
        mask = np.ones((q, self.n), dtype=bool)
        for col, a, b in zip(self.columns, lo, hi, strict=True):
            if a is not None:
                mask &= col[None, :] >= np.asarray(a)[:, None]
            if b is not None:
                mask &= col[None, :] <= np.asarray(b)[:, None]
        return mask

    def point(self, q: list[Any]) -> np.ndarray:
        return self.range(q, q)

    def sums(self, mask: np.ndarray) -> np.ndarray:
        return np.where(mask, self.values[None, :], np.uint64(0)).sum(axis=1, dtype=np.uint64)


def _fmt(values: Any) -> str:
    return np.array2string(np.asarray(values), threshold=8, edgeitems=3)


def _wrong_kind(result: Any, mode: str, index: Any, where: str) -> list[str]:
    """A problem when ``result`` is no LookupResult of ``mode`` on the index's device."""
    if not isinstance(result, LookupResult):
        return [f"{where}: expected a LookupResult, got {type(result).__name__}"]
    if result.out != mode:
        return [f"{where}: result.out is {result.out!r}"]
    if result.device != index.device:
        return [f"{where}: result is on {result.device!r}, the index on {index.device!r}"]
    return []


def _csr_problems(h: LookupResult, q: int, index: Any, where: str) -> list[str]:
    """A problem when ``h``'s offsets and rowids are no CSR lists of ``q`` lookups."""
    off, rows = h.offsets, h.rowids
    if off is None or rows is None or off.shape != (q + 1,) or off.dtype != np.int64:
        return [f"{where}: offsets must be int64 of length {q + 1}"]
    if off[0] != 0 or (np.diff(off) < 0).any() or off[-1] != rows.shape[0]:
        return [f"{where}: offsets are not a CSR index over {rows.shape[0]} rowids"]
    if rows.dtype != index.rowid_dtype:
        return [f"{where}: rowids dtype {rows.dtype}, expected {index.rowid_dtype}"]
    return []


def _shape(h: LookupResult, mode: str, q: int, index: Any, where: str) -> list[str]:
    """A problem when an out="rowid", "count" or "sum" answer is not one value of its dtype
    per lookup (the index's rowID dtype; uint64 for sums)."""
    if mode not in ("rowid", "count", "sum"):
        return []
    a = getattr(h, mode)
    dtype = np.dtype(np.uint64) if mode == "sum" else np.dtype(index.rowid_dtype)
    if a.shape != (q,) or a.dtype != dtype:
        return [f"{where}: {mode} has shape {a.shape} dtype {a.dtype}, expected ({q},) {dtype}"]
    return []


def _on_host(result: LookupResult, mode: str, q: int, index: Any,
             where: str) -> tuple[LookupResult, list[str]]:
    """The answer on the host, and the problems with its kind and shape."""
    wrong = _wrong_kind(result, mode, index, where)
    if wrong:
        return result, wrong
    h = result.to_host()
    return h, _shape(h, mode, q, index, where)


def compare(result: LookupResult, exp: Expected, oracle: Oracle, mode: str, index: Any,
            label: str, positions: list[np.ndarray] | None = None) -> list[str]:
    """Problems with ``result`` (empty when it is exactly right); the batch positions of the
    wrong lookups are appended to ``positions`` where given."""
    q = exp.start.shape[0]
    where = f"{label}, out={mode!r}"
    h, wrong = _on_host(result, mode, q, index, where)
    if wrong:
        return wrong
    problems: list[str] = []

    def first_bad(bad: np.ndarray, got: np.ndarray, want: Any, what: str) -> None:
        idx = np.nonzero(bad)[0]
        if idx.size:
            if positions is not None:
                positions.append(idx)
            i = idx[:5]
            wanted = want[i] if isinstance(want, np.ndarray) else want
            problems.append(
                f"{where}: {what} wrong for {idx.size} of {q} lookups; first at positions "
                f"{_fmt(i)} (lo {_fmt(exp.lo[i])}, hi {_fmt(exp.hi[i])}): got {_fmt(got[i])}, "
                f"expected {_fmt(wanted)}")

    if mode == "bitmap":
        return _compare_bitmap(h, oracle.bitmap(exp), oracle.keys.shape[0], where, exp)
    if mode == "rowid":
        r = h.rowid
        miss = int(index.miss)
        empty = exp.count == 0
        first_bad(empty & (r != miss), r, np.full(q, miss), "a miss")
        n = oracle.keys.shape[0]
        if n:
            ok_pos = (r < n) & ~empty
            kr = oracle.keys[np.where(ok_pos, r, 0).astype(np.int64)]
            matches = ok_pos & (kr >= exp.lo) & (kr <= exp.hi)
            first_bad(~empty & ~matches, r, oracle.rowids[np.minimum(exp.start, n - 1)],
                      "a matching rowID")
    elif mode == "count":
        c = h.count
        first_bad(c.astype(np.int64) != exp.count, c, exp.count, "count")
    elif mode == "sum":
        s = h.sum
        first_bad(s != oracle.sums(exp), s, oracle.sums(exp), "sum")
    else:
        off, rows = h.offsets, h.rowids
        bad_csr = _csr_problems(h, q, index, where)
        if bad_csr:
            return bad_csr
        got_count = np.diff(off)
        first_bad(got_count != exp.count, got_count, exp.count, "number of rowids")
        if not problems:
            problems += _compare_sets(off, rows, exp, oracle, where, positions)
    return problems


#: Most (lookup, rowID) pairs compared at once: a batch with more is compared in parts.
PAIRS_AT_ONCE = 1 << 23


def _compare_sets(off: np.ndarray, rows: np.ndarray, exp: Expected, oracle: Oracle,
                  where: str, positions: list[np.ndarray] | None) -> list[str]:
    """Problems with the rowID sets of lookups whose counts are right, compared as ordered
    (lookup, rowID) pairs, a part of the batch at a time (PAIRS_AT_ONCE pairs or fewer)."""
    q = exp.start.shape[0]
    n = max(oracle.keys.shape[0], 1)
    bad_qs: list[np.ndarray] = []
    twice = False
    a = 0
    while a < q:  # lookups [a, b): at least one, at most PAIRS_AT_ONCE pairs unless one has more
        b = max(int(np.searchsorted(off, off[a] + PAIRS_AT_ONCE, side="right")) - 1, a + 1)
        b = min(b, q)
        count = exp.count[a:b]
        seg = np.repeat(np.arange(a, b, dtype=np.int64), count)
        got = np.sort(seg * n + rows[off[a]:off[b]].astype(np.int64))  # (lookup, rowid) pairs
        pos = np.repeat(exp.start[a:b] - (off[a:b] - off[a]), count) + np.arange(
            seg.shape[0], dtype=np.int64)
        want = np.sort(seg * n + oracle.rowids[pos])
        bad_rows = got != want
        if bad_rows.any():
            bad_qs.append(np.unique(seg[bad_rows]))
        twice = twice or bool(got.size > 1 and (np.diff(got) == 0).any())
        a = b
    problems = []
    if bad_qs:
        qs = np.concatenate(bad_qs)
        if positions is not None:
            positions.append(qs)
        problems.append(f"{where}: wrong rowid sets for {qs.size} lookups, first "
                        f"{_fmt(qs[:5])}: e.g. lookup {qs[0]} got "
                        f"{_fmt(np.sort(rows[off[qs[0]]:off[qs[0] + 1]]))}, expected "
                        f"{_fmt(np.sort(oracle.rowids[exp.start[qs[0]]:exp.stop[qs[0]]]))}")
    if twice:
        problems.append(f"{where}: a rowid is reported twice for one lookup")
    return problems


def _compare_bitmap(h: LookupResult, want: np.ndarray, n: int, where: str,
                    exp: Expected | None) -> list[str]:
    q, words = want.shape
    b = h.bitmap
    if b is None or b.shape != (q, words) or b.dtype != np.uint32:
        got = "None" if b is None else f"shape {b.shape} dtype {b.dtype}"
        return [f"{where}: bitmap has {got}, expected ({q}, {words}) uint32 (ceil({n}/32) "
                "words per lookup)"]
    if n % 32 and words and (b[:, -1] >> np.uint32(n % 32)).any():
        return [f"{where}: bits past row {n - 1} are set (padding bits must be zero)"]
    bad = np.nonzero((b != want).any(axis=1))[0]
    if not bad.size:
        return []
    i = int(bad[0])
    got_rows = np.flatnonzero(np.unpackbits(b[i].view(np.uint8), bitorder="little"))
    want_rows = np.flatnonzero(np.unpackbits(want[i].view(np.uint8), bitorder="little"))
    bounds = f" (lo {exp.lo[i]}, hi {exp.hi[i]})" if exp is not None else ""
    return [f"{where}: wrong bitmap rows for {bad.size} of {q} lookups; first lookup {i}"
            f"{bounds}: set rows {_fmt(got_rows)}, expected {_fmt(want_rows)} (bit order: "
            "row r is bit r % 32 of word r // 32, least significant bit first)"]


def compare_mask(result: LookupResult, mask: np.ndarray, oracle: ColumnsOracle, mode: str,
                 index: Any, label: str) -> list[str]:
    """Problems with ``result`` against a (Q, N) match mask (multi-column lookups)."""
    q, n = mask.shape
    where = f"{label}, out={mode!r}"
    h, wrong = _on_host(result, mode, q, index, where)
    if wrong:
        return wrong
    count = mask.sum(axis=1)

    def bad_rows(bad: np.ndarray, what: str, got: Any, want: Any) -> list[str]:
        idx = np.nonzero(bad)[0]
        if not idx.size:
            return []
        i = idx[:5]
        return [f"{where}: {what} wrong for {idx.size} of {q} lookups; first at positions "
                f"{_fmt(i)}: got {_fmt(np.asarray(got)[i])}, expected {_fmt(np.asarray(want)[i])}"]

    if mode == "bitmap":
        return _compare_bitmap(h, packed(mask), n, where, None)
    if mode == "rowid":
        r = h.rowid
        miss = int(index.miss)
        ok = np.where(count == 0, r == miss,
                      (r < n) & mask[np.arange(q), np.minimum(r, max(n - 1, 0)).astype(np.int64)]
                      if n else False)
        return bad_rows(~ok, "rowid (a match, or the miss value)", r, count)
    if mode == "count":
        c = h.count
        return bad_rows(c.astype(np.int64) != count, "count", c, count)
    if mode == "sum":
        s, want = h.sum, oracle.sums(mask)
        return bad_rows(s != want, "sum", s, want)
    off, rows = h.offsets, h.rowids
    bad_csr = _csr_problems(h, q, index, where)
    if bad_csr:
        return bad_csr
    got = np.zeros((q, n), dtype=np.int64)
    seg = np.repeat(np.arange(q, dtype=np.int64), np.diff(off))
    if (rows.astype(np.int64) >= n).any():
        return [f"{where}: rowids beyond the {n} rows"]
    np.add.at(got, (seg, rows.astype(np.int64)), 1)
    problems = bad_rows((got != mask).any(axis=1), "rowid sets (count shown)",
                        np.diff(off), count)
    if (got > 1).any():
        problems.append(f"{where}: a rowid is reported twice for one lookup")
    return problems
