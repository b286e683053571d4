"""How ``GpuIndex.point`` and ``GpuIndex.range`` reach a plugin's hooks.

Every call takes one of two ways:

* the **prepared path**: a batch that every stage of the pipeline would pass unchanged goes
  straight to the plugin's answer, prepared once per build and out mode and kept in the build
  state (:class:`PreparedPoint`, :class:`PreparedRange`). When a build can take it is decided
  in one place, :func:`_fast_route` (with :func:`indexzoo.pipeline.passes_unchanged`); which
  batches it takes, by ``takes``;
* the **pipeline** (:func:`run`, through ``GpuIndex._lookup``): validation, key maps, sorted
  probes, chunking and derived out modes, stage by stage (:mod:`indexzoo.pipeline`).

The functions take the index (a :class:`~indexzoo.GpuIndex`) as their first argument; the
contract module keeps the public methods and calls them.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import pipeline, result_memory, results
from .config import IndexParams
from .display import shown
from .errors import InvalidInput, Unsupported
from .hooks import Route
from .operations import Operation, operation
from .results import LookupResult
from .state import BuildState, rowid_dtype_for
from .validation import check_out

__all__ = ["BITMAP_CHECK_FROM", "PREPARED_UNSORTED_UP_TO", "PreparedPoint", "PreparedRange",
           "bounds_by_column", "operation_for", "point", "prepare_point", "prepare_range",
           "range_lookup", "run"]

#: out="bitmap" results from this many bytes are checked against the free memory before any
#: work (a ResourceError that says what to ask for instead); smaller ones are not checked.
BITMAP_CHECK_FROM = 1 << 28

#: With ``sort_probes``, batches of at most this many lookups that the prepared path takes
#: are answered in the caller's order: ordering them costs several array operations and
#: launches a call, more than the locality it brings to so few lookups. Larger batches, and
#: every batch the pipeline handles, are sorted.
PREPARED_UNSORTED_UP_TO = 1 << 12

#: The out modes each kind's prepared path answers (the others come in two arrays).
_PREPARED_MODES = {"point": ("rowid", "count", "sum"),
                   "range": ("rowid", "count", "sum", "bitmap")}

#: The keys of the prepared range lookups in a build state's cache, per out mode (the prepared
#: point lookups are kept under the out mode itself).
_RANGE_KEYS = {out: f"range {out}" for out in _PREPARED_MODES["range"]}

_UNPREPARED: Any = object()


def _c_contiguous(a: Any) -> bool:
    """Whether array ``a`` (NumPy or CuPy) is C-contiguous; CuPy keeps the flag as an attribute
    (its ``flags`` builds an object)."""
    flag = getattr(a, "_c_contiguous", None)
    return bool(a.flags.c_contiguous) if flag is None else bool(flag)


class PreparedPoint(typing.NamedTuple):
    """Point lookups of one build and out mode, prepared: the batches it takes
    (``array_type``, ``dtype``, at most ``max_batch``, under ``params``) and the function that
    answers one with a :class:`LookupResult`."""

    array_type: Any  # the device's array class (Any: a type check must not narrow the batch)
    dtype: np.dtype
    max_batch: int
    params: IndexParams
    answer: Callable[[Any], LookupResult]

    def takes(self, q: Any, params: IndexParams) -> bool:
        """Whether batch ``q`` under the index's current ``params`` needs no pipeline stage."""
        return (type(q) is self.array_type and q.ndim == 1 and q.dtype is self.dtype
                and 0 < q.shape[0] <= self.max_batch and params is self.params)


class PreparedRange(typing.NamedTuple):
    """Range lookups of one build and out mode, prepared: the bounds it takes (two
    C-contiguous arrays of ``array_type`` and ``dtype``, of shape (Q,) on a one-column build
    or (Q, ``dims``), with ``0 < Q <= max_batch``, under ``params``) and the function that
    answers them with a :class:`LookupResult`."""

    array_type: Any  # the device's array class (Any: a type check must not narrow the batch)
    dtype: np.dtype
    ndim: int
    dims: int
    max_batch: int
    params: IndexParams
    answer: Callable[[Any, Any], LookupResult]

    def takes(self, lo: Any, hi: Any, params: IndexParams) -> bool:
        """Whether bounds ``lo``, ``hi`` under the index's current ``params`` need no pipeline
        stage. (A lone GPU query waits for this before its launch: the shape is read once,
        CuPy building a tuple each time.)"""
        if type(lo) is not self.array_type or type(hi) is not self.array_type \
                or params is not self.params:
            return False
        shape = lo.shape
        return (lo.dtype is self.dtype and hi.dtype is self.dtype and len(shape) == self.ndim
                and shape == hi.shape and 0 < shape[0] <= self.max_batch
                and (self.ndim == 1 or shape[1] == self.dims)
                and _c_contiguous(lo) and _c_contiguous(hi))


# ---------------------------------------------------------------------- the two calls
def point(index: Any, queries: Any, out: Any) -> LookupResult:
    """``index.point(queries, out=out)``."""
    st = index._state
    if st is not None and type(out) is str:
        prep = st._prepared.get(out, _UNPREPARED)
        if prep is _UNPREPARED:
            prep = prepare_point(index, st, out)
        if prep is not None and prep.takes(queries, index.params):
            return typing.cast(LookupResult, prep.answer(queries))
    return typing.cast(LookupResult, index._lookup("point", out, (queries,)))


def range_lookup(index: Any, lo: Any, hi: Any, out: Any) -> LookupResult:
    """``index.range(lo, hi, out=out)``, bounds by column included. Bounds the prepared path
    takes (arrays of the index's device, never a mapping) are tried first: a lone GPU query
    waits for everything before its launch."""
    st = index._state
    key = _RANGE_KEYS.get(out) if type(out) is str else None
    if st is not None and key is not None and hi is not None:
        prep = st._prepared.get(key, _UNPREPARED)
        if prep is _UNPREPARED:
            prep = prepare_range(index, st, out)
        if prep is not None and prep.takes(lo, hi, index.params):
            return typing.cast(LookupResult, prep.answer(lo, hi))
    if isinstance(lo, Mapping):
        if hi is not None:
            raise InvalidInput("argument 'hi': bounds given by column ({column: (lo, hi)}) "
                               "take no separate hi")
        lo, hi = bounds_by_column(index.state, lo)
    elif hi is None:
        raise InvalidInput("argument 'hi': missing; give range(lo, hi) or "
                           "range({column: (lo, hi)})")
    return typing.cast(LookupResult, index._lookup("range", out, (lo, hi)))


def bounds_by_column(st: BuildState, spec: Mapping[Any, Any]) -> tuple[Any, Any]:
    """``{column: (lo, hi)}`` as lists of lower and upper bound columns."""
    lo: list[Any] = [None] * st.dims
    hi: list[Any] = [None] * st.dims
    pairs = {}
    for key, pair in spec.items():
        if isinstance(key, str):
            if st.names is None or key not in st.names:
                known = "the index has no column names (build it from a table)" \
                    if st.names is None else f"its columns are {shown(list(st.names), 200)}"
                raise InvalidInput(f"argument 'lo': no column named {shown(key)}; {known}")
            j = st.names.index(key)
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool) \
                and 0 <= int(key) < st.dims:
            j = int(key)
        else:
            raise InvalidInput(f"argument 'lo': {shown(key)} is not a column of the index "
                               f"(a name or a position below {st.dims})")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidInput(f"argument 'lo': column {shown(key)} needs a pair "
                               f"(lo, hi), got {shown(pair)}")
        pairs[j] = pair
    sizes = {len(b) for p in pairs.values() for b in p
             if b is not None and np.ndim(b) > 0}
    if len(sizes) > 1:
        raise InvalidInput(f"argument 'lo': the bounds differ in length ({sorted(sizes)})")
    q = sizes.pop() if sizes else 1
    for j, (a, b) in pairs.items():
        lo[j] = None if a is None else ([a] * q if np.ndim(a) == 0 else a)
        hi[j] = None if b is None else ([b] * q if np.ndim(b) == 0 else b)
    if st.dims == 1:
        if lo[0] is None or hi[0] is None:
            raise InvalidInput("argument 'lo': a one-column index takes both bounds")
        return lo[0], hi[0]
    return lo, hi


# ---------------------------------------------------------------------- the pipeline
def run(index: Any, kind: str, out: Any, raw: tuple[Any, ...]) -> LookupResult:
    """One lookup call, stage by stage (:mod:`indexzoo.pipeline`)."""
    st = index.state
    op = operation_for(index, kind, out)
    params = index.params
    batch = pipeline.encode(st, op, raw, index.device, index.capabilities.dims > 1)
    q, xp = batch.q, st.xp
    if op.out == "bitmap":
        result_memory.check_bitmaps(q, st.n, index.device, BITMAP_CHECK_FROM)
    arrays, keep = pipeline.inside(batch, xp)
    if st.n == 0 or int(arrays[0].shape[0]) == 0:
        full = rowid_dtype_for(st.n_rows)
        return results.empty_result(op.out, q, xp, full, full.type(np.iinfo(full).max),
                                    st.n_rows)
    routes = index._resolution.routes
    if op.out == "rowids":  # counted first where its worst case would not fit
        count = routes.get(operation(op.kind, "count"))
        result_memory.check_rowids(
            q, int(arrays[0].shape[0]), st.n, st.rowid_dtype.itemsize, op.kind, index.device,
            lambda: pipeline.count_matches(count, index, st, arrays, params.max_batch))
    perm = None
    if (params.sort_probes and int(arrays[0].shape[0]) > 1
            and op.kind in index.sorted_probe_kinds):
        arrays, perm = pipeline.order(arrays, params.probe_sort_bits, xp)
    route = routes[op]
    parts = [pipeline.answer(route, index, st, chunk)
             for chunk in pipeline.chunks(arrays, params.max_batch)]
    res = pipeline.assemble(parts, perm, keep, q, op, st)
    if st.rows is None:
        return res
    full = rowid_dtype_for(st.n_rows)
    return results.rows_result(res, st.rows, st.n_rows, xp, full, full.type(np.iinfo(full).max))


def operation_for(index: Any, kind: str, out: Any) -> Operation:
    """The operation a call asks for, or the error saying why the index cannot answer it."""
    caps = index.capabilities
    if not getattr(caps, kind):
        hint = "; an ordered index such as 'sorted-array' does" if kind == "range" else ""
        raise Unsupported(f"index {index.name!r} does not support {kind} lookups{hint}")
    return operation(kind, check_out(out, caps.out_modes, index.name))


# ---------------------------------------------------------------------- the prepared paths
def _fast_route(index: Any, st: BuildState, kind: str, out: str) -> tuple[Route, int] | None:
    """The route of ``kind``/``out`` on build ``st`` and the largest batch the prepared path
    takes, or None where the pipeline has work to do for every call: a mode the plugin derives
    or answers in two arrays, a build whose lookups the encode stage changes
    (:func:`~indexzoo.pipeline.passes_unchanged`), point lookups of a multi-column index.
    With sorted probes it takes batches of at most :data:`PREPARED_UNSORTED_UP_TO` lookups;
    bitmaps only as long as they need no memory check (:data:`BITMAP_CHECK_FROM`)."""
    caps, params = index.capabilities, index.params
    if out not in _PREPARED_MODES[kind] or not getattr(caps, kind) or out not in caps.out_modes:
        return None
    route = index._resolution.routes.get(operation(kind, out))
    if route is None or route.derived or not pipeline.passes_unchanged(st, index.device):
        return None
    if kind == "point" and (caps.dims > 1 or st.dims > 1):
        return None
    most = params.max_batch
    if params.sort_probes and kind in index.sorted_probe_kinds:
        most = min(most, PREPARED_UNSORTED_UP_TO)  # a small batch goes unsorted
    if out == "bitmap":
        most = min(most, (BITMAP_CHECK_FROM - 1) // (4 * results.bitmap_words(st.n)))
    return route, most


def _bound(index: Any, st: BuildState, route: Route, prepared: Any) -> Any:
    """The call that answers ``route`` for build ``st``: the plugin's prepared hook
    (``_prepared_point`` or ``_prepared_range``, given as ``prepared``) where it declares one
    for the operation, else the operation's own hook bound to the build (a subclass that
    overrode the hook and not the prepared one is answered by its hook)."""
    fn = prepared(st, route.op) if route.op in index._resolution.prepared else None
    return fn or route.source.bind(index, st)


def prepare_point(index: Any, st: BuildState, out: str) -> PreparedPoint | None:
    """The prepared point lookups of build ``st`` and mode ``out`` (cached in the state), or
    None where :func:`_fast_route` says the pipeline has work to do."""
    prep = None
    fast = _fast_route(index, st, "point", out)
    if fast is not None:
        route, most = fast
        fn = _bound(index, st, route, index._prepared_point)
        prep = PreparedPoint(st.xp.ndarray, np.dtype(st.native_dtype), most, index.params,
                             results.fast_result(route.op.out, fn))
    st._prepared[out] = prep
    return prep


def prepare_range(index: Any, st: BuildState, out: str) -> PreparedRange | None:
    """The prepared range lookups of build ``st`` and mode ``out`` (cached in the state), or
    None where :func:`_fast_route` says the pipeline has work to do."""
    prep = None
    fast = _fast_route(index, st, "range", out)
    if fast is not None:
        route, most = fast
        fn = _bound(index, st, route, index._prepared_range)
        prep = PreparedRange(st.xp.ndarray, np.dtype(st.native_dtype),
                             1 if index.capabilities.dims == 1 else 2, st.dims, most,
                             index.params, results.fast_range_result(route.op.out, fn))
    st._prepared[_RANGE_KEYS[out]] = prep
    return prep
