"""What a lookup returns: :class:`LookupResult`, and the derivations the base class uses.

A plugin implements at least the ``"rowids"`` mode of a lookup (CSR ``offsets`` and
``rowids``) or the ``"bitmap"`` mode (one row of packed bits per lookup); the base class
derives the other modes from it when the plugin has no fused version. The helpers here are
written against the array API that NumPy and CuPy share, so they run on either device
unchanged.

A result leaves indexzoo through ``to_host`` (NumPy arrays), ``to_pandas``, ``to_arrow`` and
DLPack (``np.from_dlpack(result)``, ``torch.from_dlpack(result)``), with a choice of how a
miss reads (``miss=``); the conversions are :mod:`indexzoo.result_export`
(``docs/results.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

import numpy as np

from .devices import xp_of as _xp
from .probes import scatter
from .result_export import (
    Miss,
    arrow_array,
    arrow_lists,
    check_miss,
    import_pandas,
    import_pyarrow,
    pandas_pairs,
    pandas_series,
    with_misses,
)
from .state import rowid_dtype_for

__all__ = [
    "OUT_MODES",
    "LookupResult",
    "Miss",
    "Out",
    "bitmap_from_csr",
    "bitmap_words",
    "concat_results",
    "count_from_bitmap",
    "count_from_csr",
    "csr_from_bitmap",
    "empty_result",
    "rowid_from_csr",
    "scatter_result",
    "sum_from_csr",
    "unpermute_result",
]

Out = Literal["rowid", "count", "sum", "rowids", "bitmap"]
OUT_MODES: tuple[Out, ...] = get_args(Out)

SUM_DTYPE = np.dtype(np.uint64)
OFFSET_DTYPE = np.dtype(np.int64)
WORD_DTYPE = np.dtype(np.uint32)
WORD_BITS = 32


def bitmap_words(n: int) -> int:
    """Words per bitmap row of an index of ``n`` rows: ``ceil(n / 32)``."""
    return (int(n) + WORD_BITS - 1) // WORD_BITS


@dataclass(frozen=True)
class LookupResult:
    """The answer to one batch of lookups, in query order, on the index's device.

    Only the attributes of the chosen ``out`` mode are set; the others are ``None``.

    * ``rowid``: one matching rowID per query, or ``index.miss`` (dtype ``index.rowid_dtype``).
    * ``count``: number of matches per query (dtype ``index.rowid_dtype``).
    * ``sum``: sum of the values of all matches per query, uint64, wrapping modulo 2^64.
    * ``offsets``/``rowids``: every match, as CSR: the matches of query ``i`` are
      ``rowids[offsets[i]:offsets[i+1]]`` in any order; ``offsets`` is int64 of length Q+1.
    * ``bitmap``: every match, as packed bits: a (Q, ceil(N/32)) uint32 array, row ``i`` for
      query ``i``; rowID ``r`` is bit ``r % 32`` (least significant first) of word ``r // 32``,
      so on a little-endian machine ``bitmap[i].view(np.uint8)`` equals
      ``np.packbits(mask, bitorder="little")`` of the query's boolean row mask; the bits past
      row N-1 are zero.

    ``to_host()``, ``to_pandas()``, ``to_arrow()`` and DLPack (one-array modes) hand the result
    on, ``miss=`` choosing how a miss reads (``docs/results.md``).
    """

    out: Out
    rowid: Any = None
    count: Any = None
    sum: Any = None
    offsets: Any = None
    rowids: Any = None
    bitmap: Any = None

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
        arr = getattr(arr, "_meta", arr)  # a Dask array: the kind of its chunks
        return "cpu" if isinstance(arr, np.ndarray) else "cuda"

    def to_host(self, *, miss: Miss = "sentinel") -> LookupResult:
        """A copy whose arrays are NumPy arrays (a GPU result is copied to the host, an answer
        left on a Dask cluster is computed).

        ``miss`` says how a lookup without a match reads in ``out="rowid"``: ``"sentinel"``
        (the default) keeps ``index.miss``, the rowID dtype's maximum; ``-1`` gives int64
        rowIDs with -1 for a miss; ``"mask"`` gives a ``numpy.ma.MaskedArray`` of the rowID
        dtype masked at the misses. The other modes have no miss value and are unchanged.
        Anything else is InvalidInput (a ValueError)."""
        policy = check_miss(miss)

        def host(a: Any) -> Any:
            if a is None:
                return None
            if hasattr(a, "__dask_graph__"):  # an answer left on a cluster (sharded index)
                a = a.compute()
                return a if isinstance(a, np.ndarray) else a.get()
            return a.copy() if isinstance(a, np.ndarray) else a.get()

        res = replace(self, **{f.name: host(getattr(self, f.name)) for f in fields(self)
                               if f.name != "out"})
        if self.out == "rowid" and policy != "sentinel":
            res = replace(res, rowid=with_misses(res.rowid, policy))
        return res

    def to_pandas(self, *, miss: Miss = "sentinel") -> Any:
        """The result as pandas, on the host (a GPU result is copied; needs pandas, the
        ``pandas`` extra).

        * ``rowid``, ``count``, ``sum``: a ``pandas.Series`` named after the mode, one value
          per lookup, indexed by the lookup's position (a RangeIndex named ``query``); under
          ``miss`` a rowID Series is of the rowID dtype with ``index.miss`` (``"sentinel"``),
          int64 with -1 (``-1``), or nullable ``UInt32``/``UInt64`` with ``<NA>`` (``"mask"``);
        * ``rowids``, ``bitmap``: a ``pandas.DataFrame`` of one row per match, columns
          ``query`` (int64) and ``rowid`` (the rowID dtype), by lookup, a lookup without a
          match having no row (within a lookup, ``rowids`` come in any order, a bitmap's
          ascending)."""
        policy = check_miss(miss)
        what = "LookupResult.to_pandas()"
        import_pandas(what)  # before a GPU result is copied
        if self.out in ("rowids", "bitmap"):
            return pandas_pairs(*self._host_csr(), what)
        return pandas_series(self._host_array(), self.out, policy, what)

    def to_arrow(self, *, miss: Miss = "sentinel") -> Any:
        """The result as Arrow, on the host (a GPU result is copied; needs pyarrow, the
        ``arrow`` extra).

        * ``rowid``, ``count``, ``sum``: a ``pyarrow.Array`` of one value per lookup; under
          ``miss`` rowIDs are of the rowID dtype with ``index.miss`` (``"sentinel"``), int64
          with -1 (``-1``), or of the rowID dtype with a null for a miss (``"mask"``);
        * ``rowids``, ``bitmap``: a ``pyarrow.ListArray`` with one list of rowIDs per lookup
          (empty for a lookup without a match), built on the CSR offsets; a
          ``LargeListArray`` (64-bit offsets) from 2^31 matches on."""
        policy = check_miss(miss)
        what = "LookupResult.to_arrow()"
        import_pyarrow(what)
        if self.out in ("rowids", "bitmap"):
            return arrow_lists(*self._host_csr(), what)
        return arrow_array(self._host_array(), self.out, policy, what)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """The DLPack capsule of the result's one array (``out`` ``rowid``, ``count`` or
        ``sum``), as it is and where it is: the device array itself for a GPU result, no copy
        to the host, misses as ``index.miss``. The arguments go to that array's own
        ``__dlpack__`` (those left None are not passed). ``rowids`` and ``bitmap`` results
        raise BufferError naming what to take instead."""
        asked = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                   ("dl_device", dl_device), ("copy", copy)) if v is not None}
        return self._one_array("__dlpack__").__dlpack__(**asked)

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device of the result's one array (``(1, 0)``: the CPU; ``(2, i)``:
        CUDA device ``i``); BufferError as for ``__dlpack__``."""
        kind, number = self._one_array("__dlpack_device__").__dlpack_device__()
        return int(kind), int(number)

    def _one_array(self, what: str) -> Any:
        """The array a one-array result hands over through DLPack, else BufferError saying
        what to take instead."""
        if self.out == "rowids":
            raise BufferError(
                f"{what}: a result of out='rowids' is two arrays (CSR offsets and rowids), not "
                "one; take result.offsets and result.rowids (each supports DLPack), or "
                "result.to_arrow() for one list of rowIDs per lookup")
        if self.out == "bitmap":
            raise BufferError(
                f"{what}: a result of out='bitmap' is packed bits, not one value per lookup; "
                "take result.bitmap (a (Q, ceil(N/32)) uint32 array that supports DLPack), or "
                "result.to_arrow() for one list of rowIDs per lookup")
        arr = getattr(self, self.out)
        if hasattr(arr, "__dask_graph__"):
            raise BufferError(
                f"{what}: this result is a Dask array (an answer left on the cluster), which "
                f"has no DLPack form; call result.to_host() for NumPy arrays, or compute "
                f"result.{self.out}")
        return arr

    def _host_array(self) -> np.ndarray:
        """The one array of a one-array result, on the host (copied from a GPU)."""
        arr: np.ndarray = getattr(self.to_host(), self.out)
        return arr

    def _host_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(offsets, rowids)`` of a listing result on the host; a bitmap's rowIDs
        ascending within each lookup, of the rowID dtype of an index of as many rows as the
        bitmap has bits."""
        host = self.to_host()
        if self.out == "bitmap":
            words = host.bitmap
            return csr_from_bitmap(words, rowid_dtype_for(32 * int(words.shape[1])))
        return host.offsets, host.rowids

    def matches(self, i: int) -> np.ndarray:
        """The rowIDs matching query ``i`` (``"rowids"`` or ``"bitmap"`` mode), as a NumPy
        array (ascending for a bitmap)."""
        if self.out == "bitmap":
            row = self.bitmap[i]
            row = row if isinstance(row, np.ndarray) else row.get()
            bits = np.unpackbits(np.ascontiguousarray(row).astype("<u4").view(np.uint8),
                                 bitorder="little")
            return np.flatnonzero(bits).astype(np.int64)
        if self.out != "rowids":
            raise ValueError(f"matches() needs out='rowids' or 'bitmap', this result has "
                             f"out={self.out!r}")
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        part = self.rowids[a:b]
        return part.copy() if isinstance(part, np.ndarray) else part.get()


# ---------------------------------------------------------------------- derivations
def count_from_csr(offsets: Any, dtype: Any) -> Any:
    """Matches per query from CSR offsets."""
    return (offsets[1:] - offsets[:-1]).astype(dtype)


def _result_maker(out: Out) -> Callable[[Any], LookupResult]:
    """``arr -> LookupResult(out, **{out: arr})`` at a third of a frozen dataclass's
    construction cost (the prepared lookup paths call it once per batch)."""
    blank = dict.fromkeys(f.name for f in fields(LookupResult))
    blank["out"] = out
    new = object.__new__

    def make(arr: Any) -> LookupResult:
        res = new(LookupResult)
        d = res.__dict__
        d.update(blank)
        d[out] = arr
        return res

    return make


def fast_result(out: Out, fn: Callable[[Any], Any]) -> Callable[[Any], LookupResult]:
    """``lambda q: LookupResult(out, **{out: fn(q)})`` for one of the one-array modes
    (``rowid``, ``count``, ``sum``), cheaply: the prepared point path calls it once per
    batch."""
    if out not in ("rowid", "count", "sum"):
        raise ValueError(f"fast_result takes a one-array out mode, not {out!r}")
    make = _result_maker(out)
    return lambda q: make(fn(q))


def fast_range_result(out: Out, fn: Callable[[Any, Any], Any],
                      ) -> Callable[[Any, Any], LookupResult]:
    """:func:`fast_result` for range lookups, ``(lo, hi) -> LookupResult``, in the one-array
    modes and ``bitmap``."""
    if out not in ("rowid", "count", "sum", "bitmap"):
        raise ValueError(f"fast_range_result takes a one-array out mode, not {out!r}")
    make = _result_maker(out)
    return lambda lo, hi: make(fn(lo, hi))


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


def bitmap_from_csr(offsets: Any, rowids: Any, n: int) -> Any:
    """Packed bits (see :class:`LookupResult`) from CSR matches over ``n`` rows.

    The rowIDs of one query are distinct (the contract), so the bits that land in one word
    are distinct powers of two and adding them is OR-ing them."""
    xp = _xp(offsets)
    q, words = int(offsets.shape[0]) - 1, bitmap_words(n)
    out = xp.zeros((q, words), dtype=WORD_DTYPE)
    total = int(rowids.shape[0])
    if total == 0 or words == 0:
        return out
    seg = xp.repeat(xp.arange(q, dtype=OFFSET_DTYPE), offsets[1:] - offsets[:-1])
    r = rowids.astype(OFFSET_DTYPE)
    flat = seg * words + (r >> 5)
    bits = xp.left_shift(xp.ones(total, dtype=WORD_DTYPE), (r & 31).astype(WORD_DTYPE))
    if xp is np:
        np.bitwise_or.at(out.reshape(-1), flat, bits)
    else:  # CuPy has no bitwise_or.at; distinct bits add up to their OR
        xp.add.at(out.reshape(-1), flat, bits)
    return out


def _bits_of(words: Any) -> Any:
    """(Q, 32 * W) uint8 0/1 matrix of a bitmap (row-major, LSB-first within each word)."""
    xp = _xp(words)
    as_bytes = xp.ascontiguousarray(words).astype("<u4", copy=False).view(xp.uint8)
    # CuPy's unpackbits has no axis: unpack flat, then one row per query
    return xp.unpackbits(as_bytes.reshape(-1), bitorder="little").reshape(words.shape[0], -1)


def csr_from_bitmap(words: Any, rowid_dtype: Any) -> tuple[Any, Any]:
    """CSR ``(offsets, rowids)`` of a bitmap, rowIDs ascending within each query."""
    xp = _xp(words)
    q = int(words.shape[0])
    if q == 0 or int(words.shape[1]) == 0:
        return xp.zeros(q + 1, dtype=OFFSET_DTYPE), xp.zeros(0, dtype=rowid_dtype)
    qi, r = xp.nonzero(_bits_of(words))  # row-major: by query, then by rowID
    counts = xp.bincount(qi, minlength=q).astype(OFFSET_DTYPE)
    offsets = xp.zeros(q + 1, dtype=OFFSET_DTYPE)
    xp.cumsum(counts, out=offsets[1:])
    return offsets, r.astype(rowid_dtype)


def count_from_bitmap(words: Any, dtype: Any) -> Any:
    """Set bits per row of a bitmap."""
    xp = _xp(words)
    if int(words.shape[1]) == 0:
        return xp.zeros(int(words.shape[0]), dtype=dtype)
    popcount = getattr(xp, "bitwise_count", None)  # NumPy >= 2.0
    if popcount is not None:
        return popcount(words).sum(axis=1, dtype=np.int64).astype(dtype)
    return _bits_of(words).sum(axis=1, dtype=np.int64).astype(dtype)


# ---------------------------------------------------------------------- assembly
def empty_result(out: Out, q: int, xp: Any, rowid_dtype: Any, miss: Any,
                 n: int = 0) -> LookupResult:
    """The result of ``q`` lookups that all miss (``n``: rows of the index, for bitmaps)."""
    if out == "bitmap":
        return LookupResult(out, bitmap=xp.zeros((q, bitmap_words(n)), dtype=WORD_DTYPE))
    if out == "rowid":
        return LookupResult(out, rowid=xp.full(q, miss, dtype=rowid_dtype))
    if out == "count":
        return LookupResult(out, count=xp.zeros(q, dtype=rowid_dtype))
    if out == "sum":
        return LookupResult(out, sum=xp.zeros(q, dtype=SUM_DTYPE))
    return LookupResult(out, offsets=xp.zeros(q + 1, dtype=OFFSET_DTYPE),
                        rowids=xp.zeros(0, dtype=rowid_dtype))


def scatter_result(part: LookupResult, inside: Any, q: int, xp: Any, rowid_dtype: Any,
                   miss: Any, n: int = 0) -> LookupResult:
    """Spread the result of the lookups at positions ``inside`` (increasing) over ``q``
    lookups; the others miss."""
    full = empty_result(part.out, q, xp, rowid_dtype, miss, n)
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
        return LookupResult(res.out, **{res.out: scatter(getattr(res, res.out), order, xp)})
    counts_sorted = res.offsets[1:] - res.offsets[:-1]
    inverse = scatter(xp.arange(q, dtype=OFFSET_DTYPE), order, xp)
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


def rows_result(res: LookupResult, rows: Any, n_rows: int, xp: Any, rowid_dtype: Any,
                miss: Any) -> LookupResult:
    """A result over the rows an index holds (``rows[i]``: the build's position of the
    index's row ``i``, increasing) as one over all ``n_rows`` rows of the build (rows left out,
    e.g. nulls under ``nulls="skip"``, are never matched)."""
    if res.out == "rowid":
        hit = res.rowid != res.rowid.dtype.type(np.iinfo(res.rowid.dtype).max)
        picked = rows[xp.where(hit, res.rowid, 0).astype(np.int64)].astype(rowid_dtype)
        return LookupResult("rowid", rowid=xp.where(hit, picked, rowid_dtype.type(miss)))
    if res.out == "count":
        return LookupResult("count", count=res.count.astype(rowid_dtype))
    if res.out == "rowids":
        return LookupResult("rowids", offsets=res.offsets,
                            rowids=rows[res.rowids.astype(np.int64)].astype(rowid_dtype))
    if res.out == "bitmap":
        host = np.ascontiguousarray(res.bitmap if xp is np else res.bitmap.get())
        at = rows if xp is np else rows.get()
        q, held = int(host.shape[0]), int(at.shape[0])
        bits = np.unpackbits(host.view(np.uint8).reshape(q, -1), axis=1,
                             bitorder="little")[:, :held]
        full = np.zeros((q, bitmap_words(n_rows) * 32), dtype=np.uint8)
        full[:, at] = bits
        words = np.packbits(full, axis=1, bitorder="little").reshape(q, -1)
        return LookupResult("bitmap", bitmap=xp.asarray(words.view(WORD_DTYPE)))
    return res  # sum: the values are the held rows' own (see GpuIndex.build)
