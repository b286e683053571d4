"""The contract every index fulfils: :class:`GpuIndex`, :class:`Capabilities`,
:class:`Footprint`.

A plugin subclasses :class:`GpuIndex`, sets ``name``, ``Params`` and ``capabilities``, and
implements a few hooks on clean arrays; the base class does everything that must behave the
same for every index:

* validation of keys, values, lookups and ``out`` (the specific error, nothing changed);
* the order-preserving key map (plugins only see uint32 or uint64 keys);
* lookups outside the key dtype's range, and lookups on an empty index;
* chunking of batches larger than ``params.max_batch``;
* the out modes a plugin has no fused version of, derived from ``"rowids"`` (or from
  ``"bitmap"`` for a plugin whose lookups produce bitmaps);
* multi-column input (``capabilities.dims > 1``): columns through one key map each, bounds
  left unconstrained, shapes checked (see :mod:`indexzoo.columns`);
* a build that fails leaves the previous build in place.

Hooks (``Q`` lookups of the index's key dtype, on the index's device)::

    _build(st, keys)             keys: uint32/uint64 array (the index's own copy), rowID = position
    _point_rowids(st, q)  -> (offsets, rowids)      required if capabilities.point
    _range_rowids(st, lo, hi) -> (offsets, rowids)  required if capabilities.range ...
    _range_bitmap(st, lo, hi) -> words              ... or this one
    _point_<mode>(st, q), _range_<mode>(st, lo, hi) optional, fused (mode: rowid, count, sum,
                                                    bitmap)
    _footprint(st) -> Footprint

A multi-column plugin (``dims > 1``) gets ``keys`` of shape (N, d) in Fortran order (each
column contiguous), ``q``, ``lo`` and ``hi`` of shape (Q, d), all of one native dtype; an
unconstrained column has ``lo = 0`` and ``hi`` = the native maximum.
"""

from __future__ import annotations

import abc
import functools
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from . import columns, results
from .config import IndexParams, validate_params
from .devices import array_module, device_of, resolve_device, to_device
from .errors import InvalidInput, NotBuilt, ResourceError, Unsupported
from .keys import KeyMap
from .probes import probe_order
from .resources import available_memory
from .results import OUT_MODES, LookupResult, Out
from .state import BuildState, describe_columns, rowid_dtype_for
from .validation import as_1d, check_out, prepare_values, same_length

__all__ = ["BuildState", "Capabilities", "Footprint", "GpuIndex"]

S = TypeVar("S", bound=BuildState)

KeyDtypeName = Literal["uint32", "uint64"]

#: Bytes of bitmaps one chunk of lookups may produce when the base derives another out mode
#: from a plugin's bitmaps.
BITMAP_CHUNK_BYTES = 1 << 26
#: out="bitmap" results from this many bytes are checked against the free memory before any
#: work (a ResourceError that says what to ask for instead); smaller ones are not checked.
BITMAP_CHECK_FROM = 1 << 28
DeviceName = Literal["cpu", "cuda"]


class PreparedPoint(typing.NamedTuple):
    """Point lookups of one build and out mode, prepared (see ``GpuIndex.point``): the batches
    it takes (``array_type``, ``dtype``, at most ``max_batch``, under ``params``) and the
    function that answers one with a :class:`LookupResult`."""

    array_type: type
    dtype: np.dtype
    max_batch: int
    params: IndexParams
    answer: Callable[[Any], LookupResult]


_UNPREPARED: Any = object()


class Capabilities(BaseModel):
    """What an index can do; the conformance suite and ``indexzoo list`` read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point: bool = True
    range: bool = False
    duplicates: bool = True
    updates: bool = False
    key_dtypes: tuple[KeyDtypeName, ...] = ("uint32", "uint64")
    #: the most key columns one build may have (1: a one-column index, whose keys and lookups
    #: are 1-D); an index with dims > 1 takes 1 to dims columns, answers being the AND over
    #: the columns' predicates
    dims: int = Field(default=1, ge=1)
    devices: tuple[DeviceName, ...] = ("cpu", "cuda")
    out_modes: tuple[Out, ...] = OUT_MODES

    def summary(self) -> str:
        """One line, e.g. ``point range dup | uint32 uint64 | cpu cuda``."""
        flags = [n for n, on in (("point", self.point), ("range", self.range),
                                 ("dup", self.duplicates), ("update", self.updates)) if on]
        dims = f" | {self.dims}-d" if self.dims > 1 else ""
        return (f"{' '.join(flags)} | {' '.join(self.key_dtypes)} | "
                f"{' '.join(self.devices)}{dims}")


class Footprint(BaseModel):
    """Device memory an index holds, accounted buffer by buffer (not read off an allocator).

    ``breakdown`` names each buffer held after build (keys, rowids, nodes, ...);
    ``resident_bytes`` is their sum; ``peak_build_bytes`` the most held at once during build
    (inputs the caller owns excluded, temporaries included).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    breakdown: dict[str, int] = Field(default_factory=dict)
    peak_build_bytes: int = Field(default=0, ge=0)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def resident_bytes(self) -> int:
        return int(sum(self.breakdown.values()))

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {_mb(v)}" for k, v in self.breakdown.items())
        return (f"resident {_mb(self.resident_bytes)} ({parts}); "
                f"peak during build {_mb(self.peak_build_bytes)}")


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 10_000 else f"{n} B"


class GpuIndex(abc.ABC, Generic[S]):
    """A secondary index over a key column: build once, then batches of lookups.

    ``rowID`` = position in the build array. ``values`` (optional) default to the rowIDs and
    are what ``out="sum"`` adds up.

    Thread safety: lookups, ``memory_footprint()``, ``build()`` and ``update()`` may be called
    from several threads at once. Each build or update is published as a new
    :class:`~indexzoo.state.BuildState` with one reference assignment, and each lookup answers
    from the one state it read when it started: from the previous build or from the new one,
    never from a mixture. Concurrent builds do not wait for each other; the last one to finish
    is the one that stays.
    """

    name: ClassVar[str]
    Params: ClassVar[type[IndexParams]] = IndexParams
    capabilities: ClassVar[Capabilities]
    #: The plugin's state class (a BuildState subclass); taken from ``GpuIndex[StateClass]``.
    State: ClassVar[type[BuildState]] = BuildState
    #: The lookup kinds (``"point"``, ``"range"``) that ``sort_probes=True`` orders before the
    #: index answers them; an index whose measurements show the grouping costing more than it
    #: saves for one kind leaves that kind out (and says so in its docs).
    sorted_probe_kinds: ClassVar[frozenset[str]] = frozenset({"point", "range"})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "State" in cls.__dict__:
            return
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is GpuIndex:
                arg = typing.get_args(base)[0]
                if isinstance(arg, type) and issubclass(arg, BuildState):
                    cls.State = arg

    def __init__(self, params: IndexParams | Mapping[str, Any] | None = None, *,
                 device: str = "auto"):
        self.params = validate_params(type(self).Params, params, self.name)
        dev = resolve_device(device)
        if dev not in self.capabilities.devices:
            raise Unsupported(
                f"index {self.name!r} runs on {', '.join(self.capabilities.devices)}, "
                f"not on {dev!r}"
            )
        self.device: str = dev
        self._state: S | None = None

    # ------------------------------------------------------------------ state
    @property
    def xp(self) -> Any:
        """The array module of the index's device (numpy or cupy)."""
        return array_module(self.device)

    def _live(self) -> S:
        """The published build state (read once per operation), or NotBuilt."""
        st = self._state
        if st is None:
            raise NotBuilt(f"index {self.name!r} is not built yet; call build(keys) first")
        return st

    @property
    def state(self) -> S:
        """The current build's state (read-only); NotBuilt before the first build."""
        return self._live()

    @property
    def is_built(self) -> bool:
        return self._state is not None

    def __len__(self) -> int:
        st = self._state
        return 0 if st is None else st.n

    @property
    def key_dtype(self) -> np.dtype:
        """The dtype of the keys the index was built on (before the key map; of the first
        column for a multi-column index)."""
        return self._live().keymap.source

    @property
    def key_dtypes(self) -> tuple[np.dtype, ...]:
        """The dtype of each key column the index was built on."""
        return tuple(k.source for k in self._live().keymaps)

    @property
    def native_key_dtype(self) -> np.dtype:
        """uint32 or uint64: what the plugin's kernels see."""
        return self._live().keymap.target

    @property
    def rowid_dtype(self) -> np.dtype:
        """uint32, or uint64 once the index holds 2^32 - 1 keys or more."""
        return rowid_dtype_for(len(self))

    @property
    def miss(self) -> np.integer:
        """The rowID that ``out="rowid"`` reports for a lookup without a match."""
        dt = self.rowid_dtype
        return dt.type(np.iinfo(dt).max)

    def __repr__(self) -> str:
        st = self._state
        what = "not built" if st is None else f"{st.n} {describe_columns(st.keymaps)}"
        return f"<{type(self).__name__} {self.name!r} on {self.device}: {what}>"

    # ------------------------------------------------------------------ build
    def build(self, keys: Any, values: Any = None) -> GpuIndex[S]:
        """Index ``keys`` (rowID = position); ``values`` of the same length are optional.

        The index keeps its own copies of both: changing the caller's arrays afterwards
        changes no answer. On any error the index keeps its previous build (or stays
        unbuilt); lookups running meanwhile on other threads answer from the previous build.
        """
        if self.capabilities.dims > 1:
            return self._build_columns(keys, values)
        arr = as_1d(keys, "keys")
        keymap = KeyMap.for_dtype(arr.dtype, name="keys")
        keymap = keymap.with_target(self._native_dtype(keymap))
        vals = None if values is None else prepare_values(values, arr, self.device)
        moved = device_of(arr) != self.device  # moving makes the index's own copy anyway
        ukeys = to_device(keymap.encode(arr, name="keys", copy=not moved), self.device)
        if (not self.capabilities.duplicates and ukeys.shape[0] > 1
                and int(self.xp.unique(ukeys).shape[0]) != int(ukeys.shape[0])):
            raise Unsupported(f"index {self.name!r} does not support duplicate keys")
        st = self._new_state(keymap, int(ukeys.shape[0]), vals)
        self._build(st, ukeys)
        self._publish(st)
        return self

    def _build_columns(self, keys: Any, values: Any) -> GpuIndex[S]:
        """``build`` of a multi-column index: the plugin gets an (N, d) Fortran-order array."""
        cols = columns.as_columns(keys, "keys")
        d = len(cols)
        if d > self.capabilities.dims:
            raise InvalidInput(f"argument 'keys': {d} columns; index {self.name!r} takes at "
                               f"most {self.capabilities.dims}")
        names = ["keys" if d == 1 else f"keys[{j}]" for j in range(d)]
        maps = [KeyMap.for_dtype(c.dtype, name=nm) for c, nm in zip(cols, names, strict=True)]
        # one native dtype for all columns: that of the widest column's map
        target = self._native_dtype(max(maps, key=lambda m: m.target.itemsize))
        keymaps = tuple(m.with_target(target) for m in maps)
        vals = None if values is None else prepare_values(values, cols[0], self.device)
        n = int(cols[0].shape[0])
        ukeys = self.xp.empty((n, d), dtype=target, order="F")
        for j, (c, m, nm) in enumerate(zip(cols, keymaps, names, strict=True)):
            ukeys[:, j] = to_device(m.encode(c, name=nm, copy=False), self.device)
        if not self.capabilities.duplicates and n > 1:
            host = np.asarray(to_device(ukeys, "cpu"))
            if np.unique(host, axis=0).shape[0] != n:
                raise Unsupported(f"index {self.name!r} does not support duplicate rows")
        st = self._new_state(keymaps[0], n, vals, keymaps)
        self._build(st, ukeys)
        self._publish(st)
        return self

    def _new_state(self, keymap: KeyMap, n: int, values: Any,
                   keymaps: tuple[KeyMap, ...] | None = None) -> S:
        """A fresh state of the plugin's class with the base's fields set."""
        return typing.cast(S, self.State(keymap=keymap, n=n, values=values, device=self.device,
                                         keymaps=keymaps))

    def _publish(self, st: S) -> None:
        st.seal()
        self._state = st  # one reference assignment: lookups see the old or the new state

    def _native_dtype(self, keymap: KeyMap) -> np.dtype:
        offered = self.capabilities.key_dtypes
        if str(keymap.target) in offered:
            return keymap.target
        if keymap.target == np.uint32 and "uint64" in offered:
            return np.dtype(np.uint64)
        raise Unsupported(
            f"index {self.name!r} handles {' and '.join(offered)} keys; keys of dtype "
            f"{keymap.source} need {keymap.target}"
        )

    # ------------------------------------------------------------------ lookups
    def point(self, queries: Any, *, out: Out = "rowid") -> LookupResult:
        """Look up each key in ``queries``; results in query order on the index's device."""
        st = self._state
        if st is not None and type(out) is str:
            # the prepared path: a batch that every check below would pass unchanged (the
            # device's array type, 1-D, keys of the index's native dtype, one chunk) goes
            # straight to the plugin's answer, prepared once per build and out mode
            prep = st._prepared.get(out, _UNPREPARED)
            if prep is _UNPREPARED:
                prep = self._prepare_point(st, out)
            if (prep is not None and type(queries) is prep.array_type and queries.ndim == 1
                    and queries.dtype is prep.dtype and 0 < queries.shape[0] <= prep.max_batch
                    and self.params is prep.params):
                return prep.answer(queries)
        st = self._live()
        self._require("point", "point lookups")
        mode = check_out(out, self.capabilities.out_modes, self.name)
        if self.capabilities.dims > 1:
            enc, outside = self._point_columns(st, queries)
            return self._run(st, "point", mode, (enc,), outside)
        q = as_1d(queries, "queries")
        enc, outside = st.keymap.encode_points(q, name="queries")
        enc = to_device(enc, self.device)
        if outside is not None:
            outside = to_device(outside, self.device)
        return self._run(st, "point", mode, (enc,), outside)

    def _prepare_point(self, st: S, out: str) -> PreparedPoint | None:
        """The prepared point lookups of build ``st`` and mode ``out`` (cached in the state),
        or None where the general path has work to do for every batch: a multi-column or
        remapped key type, sorted probes, an empty build, a mode without a fused hook."""
        prep: PreparedPoint | None = None
        caps, keymap, params = self.capabilities, st.keymap, self.params
        hook = self._hook("point", out) if out in ("rowid", "count", "sum") else None
        if (caps.point and out in caps.out_modes and caps.dims == 1 and st.dims == 1
                and st.n > 0 and keymap.source == keymap.target and hook is not None
                and not (params.sort_probes and "point" in self.sorted_probe_kinds)
                and st.device == self.device):
            fn = self._prepared_point(st, out) or functools.partial(hook, st)
            array_type = st.xp.ndarray
            prep = PreparedPoint(array_type, np.dtype(keymap.source), params.max_batch, params,
                                 results.fast_result(out, fn))
        st._prepared[out] = prep
        return prep

    def range(self, lo: Any, hi: Any, *, out: Out = "count") -> LookupResult:
        """Inclusive ranges ``[lo[i], hi[i]]``; ``lo > hi`` is an empty range, not an error."""
        st = self._live()
        self._require("range", "range lookups")
        mode = check_out(out, self.capabilities.out_modes, self.name)
        if self.capabilities.dims > 1:
            return self._run(st, "range", mode, self._range_columns(st, lo, hi), None)
        a, b = as_1d(lo, "lo"), as_1d(hi, "hi")
        same_length(a, b, "lo", "hi")
        elo, ehi = st.keymap.encode_ranges(a, b)
        return self._run(st, "range", mode, (to_device(elo, self.device),
                                              to_device(ehi, self.device)), None)

    def _point_columns(self, st: S, queries: Any) -> tuple[Any, Any]:
        """(Q, d) encoded point lookups of a multi-column index and the mask of lookups that
        cannot match (None when all can)."""
        cols = columns.as_columns(queries, "queries")
        columns.column_count(cols, "queries", st.dims, "the index")
        xp = st.xp
        enc, outside = [], None
        for j, (c, m) in enumerate(zip(cols, st.keymaps, strict=True)):
            e, out = m.encode_points(c, name="queries" if st.dims == 1 else f"queries[{j}]")
            enc.append(to_device(e, self.device))
            if out is not None:
                out = to_device(out, self.device)
                outside = out if outside is None else outside | out
        return xp.stack(enc, axis=1), outside

    def _native_bounds(self, st: S, lo: Any, hi: Any) -> tuple[Any, Any] | None:
        """``(lo, hi)`` on the index's device, C-contiguous, when both are (Q, d) arrays of
        the native dtype over columns whose key maps are the identity (unsigned keys of that
        width): then no bound needs the key map, and the columns need no assembly (the
        general path costs a split, six encodings and per-column copies a call). None
        otherwise: the general path checks and encodes."""
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
        return (xp.ascontiguousarray(to_device(lo, self.device)),
                xp.ascontiguousarray(to_device(hi, self.device)))

    def _range_columns(self, st: S, lo: Any, hi: Any) -> tuple[Any, Any]:
        """(Q, d) encoded inclusive bounds of a multi-column index; a None column is
        unconstrained on that side, and a side that leaves no key makes the range empty."""
        native = self._native_bounds(st, lo, hi)
        if native is not None:
            return native
        lo_cols = columns.as_columns(lo, "lo", allow_none=True)
        hi_cols = columns.as_columns(hi, "hi", allow_none=True)
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
            lo_enc.append((ea, empty))
            hi_enc.append((eb, empty))
        # assembled where the bounds are (host bounds: one copy to the device per side, not
        # one per column and side)
        made = [x for pair in lo_enc + hi_enc for x in pair if x is not None]
        on_host = all(isinstance(x, np.ndarray) for x in made)
        mod = np if on_host else st.xp

        def side(enc: list[tuple[Any, Any]], absent: Any, if_empty: Any) -> Any:
            cols = []
            for e, empty in enc:
                c = (mod.full(q, absent, dtype=target) if e is None
                     else mod.asarray(to_device(e, "cpu" if on_host else self.device)
                                      ).astype(target, copy=False))
                if empty is not None:
                    c = mod.where(to_device(empty, "cpu" if on_host else self.device),
                                  target.type(if_empty), c)
                cols.append(c)
            if on_host:
                both = np.stack(cols, axis=1) if cols else np.empty((q, 0), dtype=target)
                return to_device(both, self.device)
            both = mod.empty((q, len(cols)), dtype=target)
            for j, c in enumerate(cols):  # CuPy's stack costs more host time than the copies
                both[:, j] = c
            return both

        elo = side(lo_enc, 0, 1)
        ehi = side(hi_enc, np.iinfo(target).max, 0)
        return elo, ehi

    def _require(self, capability: str, what: str) -> None:
        if not getattr(self.capabilities, capability):
            hint = "; an ordered index such as 'sorted-array' does" if capability == "range" else ""
            raise Unsupported(f"index {self.name!r} does not support {what}{hint}")

    def _run(self, st: S, kind: str, out: Out, arrays: tuple[Any, ...],
             outside: Any) -> LookupResult:
        xp, q = st.xp, int(arrays[0].shape[0])
        if out == "bitmap":
            self._check_bitmap_size(st, q)
        if st.n == 0 or q == 0:
            return results.empty_result(out, q, xp, st.rowid_dtype, st.miss, st.n)
        if outside is not None:
            inside = xp.nonzero(~outside)[0]
            part = self._run(st, kind, out, tuple(a[inside] for a in arrays), None)
            return results.scatter_result(part, inside, q, xp, st.rowid_dtype, st.miss, st.n)
        if self.params.sort_probes and q > 1 and kind in self.sorted_probe_kinds:
            # sorted probes: lookups grouped by the top bits of their keys (ranges by lo; the
            # first column's for a multi-column index; see core/probes.py), answered, put back
            # in the caller's order; the grouping and the un-permute are part of the call
            from indexzoo.native import permute  # numba: imported on first use

            first = arrays[0] if arrays[0].ndim == 1 else arrays[0][:, 0]
            order = probe_order(first, xp, self.params.probe_sort_bits)
            res = self._chunked(st, kind, out, tuple(
                permute.gather(a, order, xp) if a.ndim == 1 else a[order] for a in arrays))
            return results.unpermute_result(res, order, xp)
        return self._chunked(st, kind, out, arrays)

    def _chunked(self, st: S, kind: str, out: Out, arrays: tuple[Any, ...]) -> LookupResult:
        step = self.params.max_batch
        if int(arrays[0].shape[0]) <= step:  # one chunk: no slices (each costs host time)
            return self._dispatch(st, kind, out, arrays)
        parts = [self._dispatch(st, kind, out, tuple(a[s:s + step] for a in arrays))
                 for s in range(0, int(arrays[0].shape[0]), step)]
        return results.concat_results(parts, st.xp)

    def _dispatch(self, st: S, kind: str, out: Out, arrays: tuple[Any, ...]) -> LookupResult:
        fused: Callable[..., Any] | None = self._hook(kind, out)
        if fused is not None:
            if out == "rowids":
                offsets, rowids = fused(st, *arrays)
                return LookupResult(out, offsets=offsets, rowids=rowids)
            return LookupResult(out, **{out: fused(st, *arrays)})
        bitmap_hook = self._hook(kind, "bitmap")
        if self._hook(kind, "rowids") is None and bitmap_hook is not None:
            # the plugin's lookups produce bitmaps: derive from chunks of lookups whose bitmaps
            # stay within BITMAP_CHUNK_BYTES
            step = max(1, BITMAP_CHUNK_BYTES // max(4 * results.bitmap_words(st.n), 1))
            q = int(arrays[0].shape[0])
            if q > step:
                return results.concat_results(
                    [self._dispatch(st, kind, out, tuple(a[s:s + step] for a in arrays))
                     for s in range(0, q, step)], st.xp)
            words = bitmap_hook(st, *arrays)
            if out == "count":
                return LookupResult(out, count=results.count_from_bitmap(words, st.rowid_dtype))
            offsets, rowids = results.csr_from_bitmap(words, st.rowid_dtype)
        else:
            offsets, rowids = getattr(self, f"_{kind}_rowids")(st, *arrays)
        if out == "rowids":
            return LookupResult(out, offsets=offsets, rowids=rowids)
        if out == "rowid":
            return LookupResult(out, rowid=results.rowid_from_csr(
                offsets, rowids, st.miss, st.rowid_dtype))
        if out == "count":
            return LookupResult(out, count=results.count_from_csr(offsets, st.rowid_dtype))
        if out == "bitmap":
            return LookupResult(out, bitmap=results.bitmap_from_csr(offsets, rowids, st.n))
        return LookupResult(out, sum=results.sum_from_csr(offsets, rowids, st.values))

    def _check_bitmap_size(self, st: S, q: int) -> None:
        """ResourceError before answering ``q`` lookups as bitmaps that cannot fit."""
        need = 4 * q * results.bitmap_words(st.n)
        if need < BITMAP_CHECK_FROM:  # reading the free memory costs a file read or a driver
            return  # call per lookup call; a bitmap this small fails, if ever, as it allocates
        avail = available_memory(self.device)
        if avail is not None and need > avail[0]:
            raise ResourceError(
                f"out='bitmap' for {q:,} lookups over {st.n:,} rows needs {need / 1e9:.1f} GB "
                f"(one row of ceil(N/32) words per lookup), but only {avail[0] / 1e9:.1f} GB "
                f"is available ({avail[1]}); ask for fewer lookups at once, or for "
                "out='count'/'rowids'")

    def _hook(self, kind: str, out: str) -> Callable[..., Any] | None:
        """The plugin's ``_{kind}_{out}`` hook, or None where it has none (the base's
        ``_point_rowids``/``_range_rowids`` placeholders count as none)."""
        fn = getattr(self, f"_{kind}_{out}", None)
        if fn is None:
            return None
        if out == "rowids" and getattr(type(self), f"_{kind}_rowids") is getattr(
                GpuIndex, f"_{kind}_rowids"):
            return None
        return typing.cast("Callable[..., Any]", fn)

    # ------------------------------------------------------------------ memory
    def memory_footprint(self) -> Footprint:
        """Device bytes held after build, their breakdown, and the peak during build."""
        st = self._live()
        fp = self._footprint(st)
        if st.values is None:
            return fp
        extra = int(st.values.nbytes)
        return Footprint(breakdown={**fp.breakdown, "values": extra},
                         peak_build_bytes=fp.peak_build_bytes + extra)

    # ------------------------------------------------------------------ updates
    def update(self, positions: Any, new_keys: Any) -> GpuIndex[S]:
        """Set the keys at ``positions`` (rowIDs) to ``new_keys`` (capability ``updates``).

        RowIDs and values stay; a position given twice takes its last new key. Answers
        afterwards equal those of a fresh build over the updated key column. Bad input raises
        before anything changes; the update is published like a build (lookups running
        meanwhile answer from the state before it).
        """
        st = self._live()
        if not self.capabilities.updates:
            raise Unsupported(f"index {self.name!r} does not support updates; build again")
        if st.dims > 1:
            raise Unsupported("updates of multi-column indexes are not part of the contract; "
                              "build again")
        pos = as_1d(positions, "positions")
        new = as_1d(new_keys, "new_keys")
        same_length(pos, new, "positions", "new_keys")
        if pos.dtype.kind not in "iu":
            raise InvalidInput(f"argument 'positions': expected an integer dtype (rowIDs), "
                               f"got {pos.dtype}")
        if pos.shape[0] == 0:
            return self
        enc, outside = st.keymap.encode_points(new, name="new_keys")
        if outside is not None and bool(outside.any()):
            raise InvalidInput(f"argument 'new_keys': values that keys of dtype "
                               f"{st.keymap.source} cannot represent")
        xp = st.xp
        pos = to_device(pos, self.device)
        if bool((pos < 0).any()) or bool((pos >= st.n).any()):
            raise InvalidInput(f"argument 'positions': rowIDs must lie in [0, {st.n}), got "
                               f"{int(pos.min())} .. {int(pos.max())}")
        enc = to_device(enc, self.device).astype(st.keymap.target, copy=False)
        rev = pos[::-1].astype(np.int64)  # last write wins: each position's last occurrence
        uniq, first = xp.unique(rev, return_index=True)
        new_st = self._new_state(st.keymap, st.n, st.values)
        self._update(st, new_st, uniq, enc[::-1][first])
        self._publish(new_st)
        return self

    # ------------------------------------------------------------------ plugin hooks
    @abc.abstractmethod
    def _build(self, st: S, keys: Any) -> None:
        """Fill ``st`` from ``keys`` (uint32/uint64 on ``self.device``, the index's own copy;
        may be empty). ``st.n``, ``st.values``, ``st.rowid_dtype``, ``st.miss`` are set."""

    @abc.abstractmethod
    def _footprint(self, st: S) -> Footprint:
        """The plugin's own buffers in ``st`` (the base adds ``values``)."""

    def _update(self, old: S, new: S, positions: Any, new_keys: Any) -> None:
        """Fill ``new`` from ``old`` with the keys at ``positions`` (unique, increasing int64
        rowIDs) set to ``new_keys`` (native dtype). ``old`` must stay unchanged."""
        raise NotImplementedError(f"{type(self).__name__} declares updates but has no _update")

    def _prepared_point(self, st: S, out: str) -> Callable[[Any], Any] | None:
        """Optional: point lookups of build ``st`` in mode ``out`` ("rowid", "count" or
        "sum") prepared for repeated calls, e.g. with the kernel's fixed arguments bound
        (:meth:`indexzoo.native.targets.Kernel.bind`). The callable takes a batch that the
        base has checked (the device's array type, 1-D, native dtype, 1 to ``max_batch``
        lookups) and returns what ``_point_{out}(st, q)`` returns. None (the default): the
        base calls ``_point_{out}`` itself."""
        return None

    def _point_rowids(self, st: S, q: Any) -> tuple[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement _point_rowids")

    def _range_rowids(self, st: S, lo: Any, hi: Any) -> tuple[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement _range_rowids")


def check_plugin_class(cls: Any) -> None:
    """Raise TypeError unless ``cls`` is a usable GpuIndex subclass (used by the registry)."""
    if not (isinstance(cls, type) and issubclass(cls, GpuIndex)):
        raise TypeError(f"register() expects a GpuIndex subclass, got {cls!r}")
    missing = [a for a in ("name", "capabilities") if not hasattr(cls, a)]
    if missing:
        raise TypeError(f"{cls.__qualname__} lacks {', '.join(missing)}")
    if not isinstance(cls.name, str) or not cls.name:
        raise TypeError(f"{cls.__qualname__}.name must be a non-empty string")
    if not isinstance(cls.capabilities, Capabilities):
        raise TypeError(f"{cls.__qualname__}.capabilities must be a Capabilities instance")
    if not (isinstance(cls.Params, type) and issubclass(cls.Params, IndexParams)):
        raise TypeError(f"{cls.__qualname__}.Params must subclass indexzoo.IndexParams")

