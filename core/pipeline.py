"""The stages of a lookup, in the order ``GpuIndex._lookup`` runs them:

1. **encode** (:func:`encode`): check the lookup arrays and map them onto the index's native
   key dtype, on its device; lookups that no key can equal (outside the key dtype's range)
   are marked, not sent to the plugin;
2. **order** (:func:`order`): sorted probes (``sort_probes=True``) put the batch in the order
   of :func:`~indexzoo.probes.probe_order`;
3. **chunk** (:func:`chunks`): batches larger than ``params.max_batch`` are cut;
4. **dispatch** (:func:`answer`): each chunk goes to the hook that answers the operation
   (:mod:`indexzoo.hooks`), and the base derives the out mode where the hook answers another;
5. **assemble** (:func:`assemble`): the chunks are joined, put back in the caller's order,
   and the marked lookups filled in as misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import columns, results
from .devices import device_of, to_device
from .errors import InvalidInput
from .hooks import Route
from .operations import Operation
from .probes import gather, probe_order
from .results import LookupResult
from .state import BuildState
from .validation import null_error, read_1d, same_length

__all__ = ["BITMAP_CHUNK_BYTES", "Batch", "answer", "assemble", "chunks", "count_matches",
           "encode", "from_csr", "inside", "order", "passes_unchanged"]

#: Bytes of bitmaps one chunk of lookups may produce when the base derives another out mode
#: from a plugin's bitmaps.
BITMAP_CHUNK_BYTES = 1 << 26


@dataclass(frozen=True)
class Batch:
    """A batch after the encode stage: the arrays the hooks take (native keys on the index's
    device: ``(q,)`` or ``(lo, hi)``, 1-D or (Q, d)) and the mask of lookups that cannot
    match (None when all can)."""

    arrays: tuple[Any, ...]
    outside: Any = None

    @property
    def q(self) -> int:
        return int(self.arrays[0].shape[0])


# ---------------------------------------------------------------------- 1. encode
def passes_unchanged(st: BuildState, device: str) -> bool:
    """Whether every stage before dispatch hands lookups of build ``st`` to the plugin as the
    caller gave them, once they are arrays of the device's type and the native key dtype: the
    key maps are the identity (unsigned keys of the native width; each column unsigned on a
    multi-column build), the build holds keys and left no row out, and it lives on the
    index's ``device``. The prepared paths (:mod:`indexzoo.lookup`) skip the pipeline exactly
    when this holds and the batch itself needs no work (see ``PreparedPoint.takes``)."""
    native = st.native_dtype
    return (all(m.source == native and m.target == native for m in st.keymaps)
            and (st.dims == 1 or all(m.kind == "unsigned" for m in st.keymaps))
            and st.n > 0 and st.rows is None and st.device == device)


def encode(st: BuildState, op: Operation, raw: tuple[Any, ...], device: str,
           multi_column: bool) -> Batch:
    """Validate the caller's lookup arrays and encode them (the errors name the argument)."""
    if op.kind == "point":
        if multi_column:
            return _point_columns(st, raw[0], device)
        q, null = _one_column(st, raw[0], "queries")
        enc, outside = st.keymap.encode_points(q, name="queries")
        outside = _or(outside, null)
        return Batch((to_device(enc, device),),
                     None if outside is None else to_device(outside, device))
    if multi_column:
        return Batch(_range_columns(st, raw[0], raw[1], device))
    (a, null_a), (b, null_b) = _one_column(st, raw[0], "lo"), _one_column(st, raw[1], "hi")
    same_length(a, b, "lo", "hi")
    elo, ehi = st.keymap.encode_ranges(a, b)
    empty = _or(null_a, null_b)
    if empty is not None:  # a null bound (nulls="skip"): the range is empty
        elo = np.where(empty, st.keymap.target.type(1), to_device(elo, "cpu"))
        ehi = np.where(empty, st.keymap.target.type(0), to_device(ehi, "cpu"))
    return Batch((to_device(elo, device), to_device(ehi, device)))


def _or(a: Any, b: Any) -> Any:
    """The OR of two masks, either of which may be None (no position set)."""
    if a is None or b is None:
        return b if a is None else a
    return a | to_device(b, "cuda") if device_of(a) == "cuda" else a | to_device(b, "cpu")


def _nulls_allowed(st: BuildState, null: Any, name: str, column: str | None = None) -> Any:
    """``null`` (the lookups that must miss) under ``nulls="skip"``; InvalidInput for a null
    lookup under ``nulls="refuse"``."""
    if null is not None and st.nulls != "skip":
        raise null_error(name, null, column)
    return null


def _one_column(st: BuildState, obj: Any, name: str) -> tuple[Any, Any]:
    """The lookups of a one-column index and their nulls (a table is read by the index's
    column name)."""
    if st.names is not None and columns.table_columns(obj) is not None:
        got = columns.read_columns(obj, name, select=st.names)
        arr, null = got.arrays[0], got.nulls[0]
    else:
        arr, null = read_1d(obj, name)
    return arr, _nulls_allowed(st, null, name)


def _lookup_columns(st: BuildState, obj: Any, name: str, allow_none: bool = False,
                    ) -> columns.Columns:
    """Lookup columns of a multi-column index (a table or dict with the index's column names
    is read by them), their nulls checked against the build's policy."""
    select = None
    if st.names is not None and columns.table_columns(obj) is not None:
        names = columns.table_names(obj)
        if names is not None and set(st.names) <= set(names):
            select = st.names
    got = columns.read_columns(obj, name, allow_none=allow_none, select=select)
    for j, null in enumerate(got.nulls):
        label = name if len(got.arrays) == 1 else f"{name}[{j}]"
        _nulls_allowed(st, null, label, None if got.names is None else got.names[j])
    return got


def _point_columns(st: BuildState, queries: Any, device: str) -> Batch:
    """(Q, d) encoded point lookups of a multi-column index and the mask of lookups that
    cannot match (None when all can)."""
    got = _lookup_columns(st, queries, "queries")
    cols = got.arrays
    columns.column_count(cols, "queries", st.dims, "the index")
    enc, outside = [], None
    for j, (c, m) in enumerate(zip(cols, st.keymaps, strict=True)):
        e, out = m.encode_points(c, name="queries" if st.dims == 1 else f"queries[{j}]")
        enc.append(to_device(e, device))
        out = _or(out, got.nulls[j])
        if out is not None:
            out = to_device(out, device)
            outside = out if outside is None else outside | out
    return Batch((st.xp.stack(enc, axis=1),), outside)


def _native_bounds(st: BuildState, lo: Any, hi: Any, device: str) -> tuple[Any, Any] | None:
    """``(lo, hi)`` on the device, C-contiguous, when both are (Q, d) arrays of the native
    dtype over columns whose key maps are the identity (unsigned keys of that width): then no
    bound needs the key map, and the columns need no assembly (the general path costs a
    split, six encodings and per-column copies a call). None otherwise."""
    target = st.native_dtype
    for b in (lo, hi):
        if (getattr(b, "ndim", 0) != 2 or b.dtype != target or b.shape[1] != st.dims
                or not (isinstance(b, np.ndarray) or device_of(b) == "cuda")):
            return None
    if lo.shape != hi.shape or type(lo) is not type(hi):
        return None
    for m in st.keymaps:
        if m.kind != "unsigned" or m.source != target or m.target != target:
            return None
    xp = st.xp
    return (xp.ascontiguousarray(to_device(lo, device)),
            xp.ascontiguousarray(to_device(hi, device)))


def _range_columns(st: BuildState, lo: Any, hi: Any, device: str) -> tuple[Any, Any]:
    """(Q, d) encoded inclusive bounds of a multi-column index; a None column is
    unconstrained on that side, and a side that leaves no key makes the range empty."""
    native = _native_bounds(st, lo, hi, device)
    if native is not None:
        return native
    lo_got = _lookup_columns(st, lo, "lo", allow_none=True)
    hi_got = _lookup_columns(st, hi, "hi", allow_none=True)
    lo_cols, hi_cols = lo_got.arrays, hi_got.arrays
    columns.column_count(lo_cols, "lo", st.dims, "the index")
    columns.column_count(hi_cols, "hi", st.dims, "the index")
    q_lo = {int(c.shape[0]) for c in lo_cols if c is not None}
    q_hi = {int(c.shape[0]) for c in hi_cols if c is not None}
    if q_lo != q_hi:
        raise InvalidInput(f"arguments 'lo' and 'hi' must have the same length, got "
                           f"{q_lo.pop()} and {q_hi.pop()}")
    q, target = q_lo.pop(), st.native_dtype
    lo_enc: list[Any] = []
    hi_enc: list[Any] = []
    for j, m in enumerate(st.keymaps):
        sfx = "" if st.dims == 1 else f"[{j}]"
        a, b, empty = lo_cols[j], hi_cols[j], None
        ea = eb = None
        if a is not None:
            ea, empty = m.encode_bound(a, "lo", name=f"lo{sfx}")
        if b is not None:
            eb, out_b = m.encode_bound(b, "hi", name=f"hi{sfx}")
            if out_b is not None:
                empty = out_b if empty is None else empty | out_b
        empty = _or(_or(empty, lo_got.nulls[j]), hi_got.nulls[j])
        lo_enc.append((ea, empty))
        hi_enc.append((eb, empty))
    # assembled where the bounds are (host bounds: one copy to the device per side, not
    # one per column and side)
    made = [x for pair in lo_enc + hi_enc for x in pair if x is not None]
    on_host = all(isinstance(x, np.ndarray) for x in made)
    mod = np if on_host else st.xp
    where = "cpu" if on_host else device

    def side(enc: list[tuple[Any, Any]], absent: Any, if_empty: Any) -> Any:
        cols = []
        for e, empty in enc:
            c = (mod.full(q, absent, dtype=target) if e is None
                 else mod.asarray(to_device(e, where)).astype(target, copy=False))
            if empty is not None:
                c = mod.where(to_device(empty, where), target.type(if_empty), c)
            cols.append(c)
        if on_host:
            both = np.stack(cols, axis=1) if cols else np.empty((q, 0), dtype=target)
            return to_device(both, device)
        both = mod.empty((q, len(cols)), dtype=target)
        for j, c in enumerate(cols):  # CuPy's stack costs more host time than the copies
            both[:, j] = c
        return both

    return side(lo_enc, 0, 1), side(hi_enc, np.iinfo(target).max, 0)


def inside(batch: Batch, xp: Any) -> tuple[tuple[Any, ...], Any]:
    """The lookups that can match, and their positions in the batch (None: all of them)."""
    if batch.outside is None:
        return batch.arrays, None
    keep = xp.nonzero(~batch.outside)[0]
    return tuple(a[keep] for a in batch.arrays), keep


# ---------------------------------------------------------------------- 2. order
def order(arrays: tuple[Any, ...], bits: int, xp: Any) -> tuple[tuple[Any, ...], Any]:
    """The batch in sorted-probe order (by the first array; a multi-column batch by its first
    column) and that order, to undo in :func:`assemble`."""
    first = arrays[0] if arrays[0].ndim == 1 else arrays[0][:, 0]
    perm = probe_order(first, xp, bits)
    return tuple(gather(a, perm, xp) if a.ndim == 1 else a[perm] for a in arrays), perm


# ---------------------------------------------------------------------- 3. chunk
def chunks(arrays: tuple[Any, ...], step: int) -> list[tuple[Any, ...]]:
    """The batch cut into chunks of at most ``step`` lookups (one chunk: no slices, each of
    which costs host time)."""
    q = int(arrays[0].shape[0])
    if q <= step:
        return [arrays]
    return [tuple(a[s:s + step] for a in arrays) for s in range(0, q, step)]


# ---------------------------------------------------------------------- 4. dispatch
def answer(route: Route, index: Any, st: BuildState, arrays: tuple[Any, ...]) -> LookupResult:
    """One chunk answered by its route: the hook's answer as it is, or the out mode derived
    from the hook's ``rowids`` or ``bitmap`` answer."""
    op, src = route.op, route.source
    if not route.derived:
        got = src(index, st, arrays)
        if op.out == "rowids":
            return LookupResult("rowids", offsets=got[0], rowids=got[1])
        return LookupResult(op.out, **{op.out: got})
    if src.op.out == "bitmap":
        # derive from chunks of lookups whose bitmaps stay within BITMAP_CHUNK_BYTES
        step = max(1, BITMAP_CHUNK_BYTES // max(4 * results.bitmap_words(st.n), 1))
        if int(arrays[0].shape[0]) > step:
            return results.concat_results(
                [answer(route, index, st, part) for part in chunks(arrays, step)], st.xp)
        words = src(index, st, arrays)
        if op.out == "count":
            return LookupResult("count", count=results.count_from_bitmap(words, st.rowid_dtype))
        offsets, rowids = results.csr_from_bitmap(words, st.rowid_dtype)
    else:
        offsets, rowids = src(index, st, arrays)
    return from_csr(op, offsets, rowids, st)


def count_matches(route: Route | None, index: Any, st: BuildState, arrays: tuple[Any, ...],
                  step: int) -> int | None:
    """The matches of the encoded lookups ``arrays`` in all, answered by the count ``route``
    chunk by chunk (``step`` lookups at most); None where there is no count route or it lists
    the matches to count them (derived from ``rowids``: the very result to be checked)."""
    if route is None or route.source.op.out == "rowids":
        return None
    return sum(int(answer(route, index, st, chunk).count.sum(dtype=np.int64))
               for chunk in chunks(arrays, step))


def from_csr(op: Operation, offsets: Any, rowids: Any, st: BuildState) -> LookupResult:
    """``op.out`` derived from every match in CSR form."""
    if op.out == "rowids":
        return LookupResult("rowids", offsets=offsets, rowids=rowids)
    if op.out == "rowid":
        return LookupResult("rowid", rowid=results.rowid_from_csr(offsets, rowids, st.miss,
                                                                  st.rowid_dtype))
    if op.out == "count":
        return LookupResult("count", count=results.count_from_csr(offsets, st.rowid_dtype))
    if op.out == "bitmap":
        return LookupResult("bitmap", bitmap=results.bitmap_from_csr(offsets, rowids, st.n))
    return LookupResult("sum", sum=results.sum_from_csr(offsets, rowids, st.values))


# ---------------------------------------------------------------------- 5. assemble
def assemble(parts: Sequence[LookupResult], perm: Any, keep: Any, q: int, op: Operation,
             st: BuildState) -> LookupResult:
    """The chunks' answers joined, put back in the caller's order (``perm``: the sorted-probe
    order, or None), and spread over all ``q`` lookups when only those at ``keep`` were
    answered (the others miss)."""
    xp = st.xp
    res = results.concat_results(list(parts), xp)
    if perm is not None:
        res = results.unpermute_result(res, perm, xp)
    if keep is not None:
        res = results.scatter_result(res, keep, q, xp, st.rowid_dtype, st.miss, st.n)
    return res
