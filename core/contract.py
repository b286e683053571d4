"""The contract every index fulfils: :class:`GpuIndex`, :class:`Capabilities`,
:class:`Footprint`.

A plugin subclasses :class:`GpuIndex`, sets ``name``, ``Params``, ``capabilities`` and
``plugin_api`` (:data:`~indexzoo.plugin_api.PLUGIN_API`), and implements hooks on clean
arrays. The hooks of the lookups are named by the operation table
(:data:`~indexzoo.operations.OPERATIONS`: ``_point_<out>(st, q)``, ``_range_<out>(st, lo,
hi)``); :mod:`indexzoo.hooks` resolves and checks them once per class, and says how the base
derives the operations a plugin has no hook for. The others::

    _build(st, keys)        keys: uint32/uint64 array (the index's own copy), rowID = position
    _footprint(st)          -> Footprint of the plugin's buffers
    _update(old, new, positions, new_keys)    with capabilities.updates
    _prepared_point(st, op) optional: point lookups prepared once per build
    _prepared_range(st, op) optional: range lookups prepared once per build
    _save_state(st)         optional: the state's parts to save (default: its attributes)
    _load_state(st, saved)  optional: fill a loaded state from them (default: set them)
    _params_for_load(params, device)  optional (a classmethod): the saved params as an index
                            loaded onto ``device`` takes them (default: unchanged)
    _class_for(params)      optional (a classmethod): the class an index made with ``params``
                            is, where ``__new__`` makes a narrower subclass for some params
                            (default: the class itself); the conformance suite certifies it

The base does everything that must behave the same for every index, as the stages of
:mod:`indexzoo.pipeline`, routed by :mod:`indexzoo.lookup` (which also holds the prepared
paths): validation (the specific error, nothing changed), the order-preserving key map (plugins
only see uint32 or uint64 keys), lookups outside the key dtype's range and lookups on an empty
index, sorted probes, chunking of batches larger than ``params.max_batch``, and the out modes a
plugin has no hook for. A multi-column plugin (``dims > 1``) gets ``keys`` of shape (N, d) in
Fortran order (each column contiguous), ``q``, ``lo`` and ``hi`` of shape (Q, d), all of one
native dtype; an unconstrained column has ``lo = 0`` and ``hi`` = the native maximum. A build
that fails leaves the previous build in place.
"""

from __future__ import annotations

import abc
import difflib
import math
import os
import sys
import threading
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, computed_field

from . import buildtime, lookup, persist, restore
from . import columns as columns_module
from .base_schema import BASE_HINTS
from .config import IndexParams, validate_params
from .devices import array_module, cuda_status, device_of, resolve_device, to_device
from .display import shown
from .errors import InvalidInput, NotBuilt, PluginError, Unsupported
from .hooks import Resolution, resolve
from .keys import KeyMap
from .operations import Operation
from .results import OUT_MODES, LookupResult, Out
from .schema import StateSchema
from .state import BASE_FIELDS, BuildState, describe_columns, rowid_dtype_for
from .validation import as_1d, null_error, prepare_values, read_1d, same_length

__all__ = ["NULL_POLICIES", "BuildState", "Capabilities", "Footprint", "GpuIndex", "NullPolicy"]

#: What ``build(..., nulls=...)`` does with a null key: ``refuse`` raises InvalidInput naming
#: the column and the first null's position; ``skip`` leaves the row out (it never matches;
#: the other rows keep their rowIDs) and makes null lookups miss.
NullPolicy = Literal["refuse", "skip"]
NULL_POLICIES: tuple[NullPolicy, ...] = ("refuse", "skip")

S = TypeVar("S", bound=BuildState)

KeyDtypeName = Literal["uint32", "uint64"]

DeviceName = Literal["cpu", "cuda"]


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
    _problem: str | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        """Validated as any pydantic model, with one exception: values refused in the body of
        a class (``capabilities = Capabilities(point="yes")``) do not stop the module that
        defines it (and every other class of that module) from importing; the class is
        refused instead, when it is registered or made, naming itself and the field."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            where = _class_body(sys._getframe(1))
            if where is None:
                raise
            super().__init__()
            self._problem = f"the capabilities declared in {where} are invalid: " + "; ".join(
                _field_problem(err) for err in exc.errors())

    @property
    def problem(self) -> str | None:
        """Why these capabilities are invalid (values refused in a class body), else None."""
        return self._problem

    def summary(self) -> str:
        """One line, e.g. ``point range dup | uint32 uint64 | cpu cuda``."""
        flags = [n for n, on in (("point", self.point), ("range", self.range),
                                 ("dup", self.duplicates), ("update", self.updates)) if on]
        dims = f" | {self.dims}-d" if self.dims > 1 else ""
        return (f"{' '.join(flags)} | {' '.join(self.key_dtypes)} | "
                f"{' '.join(self.devices)}{dims}")


def _class_body(frame: Any) -> str | None:
    """``module.Class`` when ``frame`` runs the body of a class statement, else None."""
    scope = frame.f_locals
    if scope is frame.f_globals or not isinstance(scope.get("__qualname__"), str):
        return None
    return f"{scope.get('__module__')}.{scope['__qualname__']}"


def _field_problem(err: Any) -> str:
    """One pydantic error of :class:`Capabilities` as ``field 'point' = 'maybe': ...``."""
    field = ".".join(str(part) for part in err["loc"]) or "?"
    text = f"field {field!r} = {shown(err.get('input'))}: {err['msg']}"
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(field, list(Capabilities.model_fields), n=1)
        text += f" (did you mean {close[0]!r}?)" if close else (
            f" (the fields are {', '.join(Capabilities.model_fields)})")
    return text


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
        """One line in one unit, the one of its largest count: ``resident 12.00 MB (keys
        8.00 MB, rowids 4.00 MB); peak during build 32.00 MB``."""
        resident, peak, *parts = _in_one_unit(
            [self.resident_bytes, self.peak_build_bytes, *self.breakdown.values()])
        listed = ", ".join(f"{k} {v}" for k, v in zip(self.breakdown, parts, strict=True))
        return f"resident {resident} ({listed}); peak during build {peak}"


def _table_without_columns(index: str, keys: Any) -> InvalidInput | None:
    """The error for a table (a DataFrame, an Arrow table, a dict) given as the keys of a
    one-column index without ``columns``: it names the table's columns and ``columns=[...]``;
    None where ``keys`` is no table."""
    try:
        names = columns_module.table_names(keys)
    except Exception:  # not a table this can read the names of: the reader's own error stands
        return None
    if not names:
        return None
    listed = ", ".join(shown(n, 40) for n in names[:8]) + (", ..." if len(names) > 8 else "")
    return InvalidInput(f"argument 'keys': a table of {len(names)} column(s) ({listed}); index "
                        f"{index!r} indexes one column: name it with columns=[...], e.g. "
                        f"build(keys, columns=[{shown(names[0], 40)}]), or pass the column "
                        "itself")


def _in_one_unit(counts: list[int]) -> list[str]:
    """Byte counts in the unit of the largest: bytes below 1 kB, else kB, MB or GB with two
    decimals (a line never mixes ``8000 B`` with ``0.02 MB``)."""
    top = max(counts, default=0)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if top >= scale:
            return [f"{n / scale:.2f} {unit}" for n in counts]
    return [f"{n} B" for n in counts]


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
    #: The plugin API the class is written against (:data:`~indexzoo.plugin_api.PLUGIN_API`);
    #: a class that declares none is refused when it is registered.
    plugin_api: ClassVar[str]
    #: True: a point lookup ``q`` the class has no point hook for is answered by the range
    #: hook of the same out mode with the range ``[q, q]``.
    points_as_ranges: ClassVar[bool] = False
    #: True: the class narrows the capabilities of the index class it derives from on purpose
    #: (fewer kinds, out modes, dtypes, ...); the hooks it inherits for operations it no longer
    #: declares are never called. False (the default): such an inherited hook is refused when
    #: the class is registered, as a hook for an undeclared operation is.
    narrows: ClassVar[bool] = False
    #: True: every lookup reads every key (a full scan, as RTScan and fused-scan do). The
    #: conformance suite's scale checks then keep lookups x keys within reach: large key sets
    #: get small batches (and a range over every row), large batches small key sets.
    full_scan: ClassVar[bool] = False
    #: The layout of the plugin's saved state: raise it when ``_build`` starts to store
    #: something else, and files saved with the old layout are refused (never loaded into code
    #: that would read them differently). See docs/persistence.md.
    state_version: ClassVar[int] = 1
    #: The shape of the plugin's saved state (:class:`~indexzoo.schema.StateSchema`): every
    #: load checks a file's state against it before any kernel reads it. None: the plugin's
    #: files are refused (its pickles still load). See docs/plugin-authors.md.
    state_schema: ClassVar[StateSchema | None] = None
    #: False for an index that wraps others (``sharded``): the ``builtin`` and ``all``
    #: selections of ``indexzoo bench`` and ``recommend`` leave it out; naming it runs it.
    selected_by_default: ClassVar[bool] = True
    #: Keys (rows, for a multi-column index) a build makes per second, by device, as measured
    #: at 2^22 keys on the CPU and 2^26 on a GPU: a build predicted from it to take more than a
    #: few seconds says so on standard error (:mod:`indexzoo.buildtime`). No figure for a
    #: device: no prediction.
    build_rate: ClassVar[Mapping[str, float]] = {}

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
        # held by update() from reading the state to publishing the next, and by a build's
        # publication: updates take turns and are never lost (lookups never take it)
        self._writing = threading.RLock()
        # the class's hooks, resolved against the operation table once per class (a plugin
        # that breaks the contract fails here, with every problem named)
        self._resolution: Resolution = resolve(type(self), GpuIndex)

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
        """Rows of the build (rows left out under ``nulls="skip"`` included)."""
        st = self._state
        return 0 if st is None else st.n_rows

    @property
    def column_names(self) -> tuple[str, ...] | None:
        """The key columns' names, where the build's keys were a table or dict (else None)."""
        return self._live().names

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
    def build(self, keys: Any, values: Any = None, *, nulls: NullPolicy = "refuse",
              columns: Sequence[str] | None = None) -> GpuIndex[S]:
        """Index ``keys`` (rowID = position); ``values`` of the same length are optional.

        ``keys`` is any column (NumPy, CuPy, pandas, Polars, Arrow, cuDF, a list; see
        :mod:`indexzoo.reading`) or, for a multi-column index, a table or list of columns
        (:mod:`indexzoo.columns`). ``columns``: names of the columns to index, from a table
        or dict; the index keeps the names (:attr:`column_names`), reads lookup tables by
        them and takes range bounds by name. ``nulls``: ``"refuse"`` (InvalidInput naming the
        column and the first null's position) or ``"skip"`` (rows with a null are never
        matched and keep their rowIDs; null lookups miss).

        The index keeps its own copies of keys and values: changing the caller's arrays
        afterwards changes no answer. On any error the index keeps its previous build (or
        stays unbuilt); lookups running meanwhile on other threads answer from the previous
        build.
        """
        if nulls not in NULL_POLICIES:
            raise InvalidInput(f"argument 'nulls': {shown(nulls)} is not one of 'refuse', "
                               "'skip'")
        if self.capabilities.dims > 1:
            return self._build_columns(keys, values, nulls, columns)
        names = None
        if columns is not None:
            got = columns_module.read_columns(keys, "keys", select=columns)
            if len(got.arrays) != 1:
                raise InvalidInput(f"argument 'columns': {len(got.arrays)} columns; index "
                                   f"{self.name!r} takes one")
            arr, null, names = got.arrays[0], got.nulls[0], got.names
        else:
            try:
                arr, null = read_1d(keys, "keys")
            except InvalidInput as exc:
                raise _table_without_columns(self.name, keys) or exc from None
        full = arr
        arr, rows = self._without_nulls([arr], [null], nulls, names)
        arr = arr[0]
        keymap = KeyMap.for_keys(arr, name="keys")
        keymap = keymap.with_target(self._native_dtype(keymap))
        vals = self._held_values(values, full, rows)
        moved = device_of(arr) != self.device  # moving makes the index's own copy anyway
        ukeys = to_device(keymap.encode(arr, name="keys", copy=not moved and rows is None),
                          self.device)
        if (not self.capabilities.duplicates and ukeys.shape[0] > 1
                and int(self.xp.unique(ukeys).shape[0]) != int(ukeys.shape[0])):
            raise Unsupported(f"index {self.name!r} does not support duplicate keys")
        st = self._new_state(keymap, int(ukeys.shape[0]), vals, rows=rows,
                             n_rows=int(full.shape[0]), nulls=nulls, names=names)
        self._logged_build(st, ukeys)
        self._publish(st)
        return self

    def _logged_build(self, st: S, keys: Any) -> None:
        """The plugin's ``_build``, told (:mod:`indexzoo.buildtime`): on the ``indexzoo``
        logger, and on standard error before and after a build predicted from
        ``build_rate`` to take more than a few seconds."""
        with buildtime.told(self.name, int(keys.shape[0]), self.device, self.build_rate,
                            "rows" if keys.ndim > 1 else "keys"):
            self._build(st, keys)

    def _without_nulls(self, cols: list[Any], nulls: list[Any], policy: str,
                       names: tuple[str, ...] | None) -> tuple[list[Any], Any]:
        """The key columns without their null rows and the positions of the rows kept (None:
        no row has a null); InvalidInput for a null under ``nulls="refuse"``."""
        d = len(cols)
        any_null = None
        for j, null in enumerate(nulls):
            if null is None:
                continue
            if policy == "refuse":
                raise null_error("keys" if d == 1 else f"keys[{j}]", null,
                                 None if names is None else names[j])
            any_null = null if any_null is None else any_null | null
        if any_null is None:
            return cols, None
        rows = np.flatnonzero(~any_null)
        kept = [c[to_device(rows, "cuda")] if device_of(c) == "cuda" else c[rows] for c in cols]
        return kept, to_device(rows.astype(np.int64), self.device)

    def _held_values(self, values: Any, keys: Any, rows: Any) -> Any:
        """The index's copy of ``values`` for the rows it holds (the rowIDs of those rows
        when ``values`` is None and rows were left out, so sums stay sums of rowIDs)."""
        vals = None if values is None else prepare_values(values, keys, self.device)
        if rows is None:
            return vals
        return rows.astype(np.uint64) if vals is None else vals[rows]

    def _build_columns(self, keys: Any, values: Any, nulls: str,
                       select: Sequence[str] | None) -> GpuIndex[S]:
        """``build`` of a multi-column index: the plugin gets an (N, d) Fortran-order array."""
        got = columns_module.read_columns(keys, "keys", select=select)
        d = len(got.arrays)
        if d > self.capabilities.dims:
            raise InvalidInput(f"argument 'keys': {d} columns; index {self.name!r} takes at "
                               f"most {self.capabilities.dims}")
        full = got.arrays[0]
        cols, rows = self._without_nulls(got.arrays, got.nulls, nulls, got.names)
        names = ["keys" if d == 1 else f"keys[{j}]" for j in range(d)]
        maps = [KeyMap.for_keys(c, name=nm) for c, nm in zip(cols, names, strict=True)]
        # one native dtype for all columns: that of the widest column's map
        target = self._native_dtype(max(maps, key=lambda m: m.target.itemsize))
        keymaps = tuple(m.with_target(target) for m in maps)
        vals = self._held_values(values, full, rows)
        n = int(cols[0].shape[0])
        ukeys = self.xp.empty((n, d), dtype=target, order="F")
        for j, (c, m, nm) in enumerate(zip(cols, keymaps, names, strict=True)):
            ukeys[:, j] = to_device(m.encode(c, name=nm, copy=False), self.device)
        if not self.capabilities.duplicates and n > 1:
            host = np.asarray(to_device(ukeys, "cpu"))
            if np.unique(host, axis=0).shape[0] != n:
                raise Unsupported(f"index {self.name!r} does not support duplicate rows")
        st = self._new_state(keymaps[0], n, vals, keymaps, rows=rows,
                             n_rows=int(full.shape[0]), nulls=nulls, names=got.names)
        self._logged_build(st, ukeys)
        self._publish(st)
        return self

    def _new_state(self, keymap: KeyMap, n: int, values: Any,
                   keymaps: tuple[KeyMap, ...] | None = None, **base: Any) -> S:
        """A fresh state of the plugin's class with the base's fields set (``base``: rows,
        n_rows, nulls, names)."""
        return typing.cast(S, self.State(keymap=keymap, n=n, values=values, device=self.device,
                                         keymaps=keymaps, **base))

    def _publish(self, st: S) -> None:
        st.seal()
        with self._writing:  # never in the middle of an update, which read the state before
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
        return lookup.point(self, queries, out)

    def range(self, lo: Any, hi: Any = None, *, out: Out = "count") -> LookupResult:
        """Inclusive ranges ``[lo[i], hi[i]]``; ``lo > hi`` is an empty range, not an error.

        Bounds may also be given by column, as one dict ``{column: (lo, hi)}`` (``hi`` left
        out): a column is a name of :attr:`column_names` or a position; a column not named is
        unconstrained, and so is a side given as None; a scalar bound applies to every
        lookup (``index.range({"a": (lo, hi), "b": (None, 10)})``)."""
        return lookup.range_lookup(self, lo, hi, out)

    def _lookup(self, kind: str, out: Any, raw: tuple[Any, ...]) -> LookupResult:
        """A lookup call that the prepared path does not take: the pipeline's stages."""
        return lookup.run(self, kind, out, raw)

    # ------------------------------------------------------------------ memory
    def memory_footprint(self) -> Footprint:
        """Device bytes held after build, their breakdown, and the peak during build."""
        st = self._live()
        fp = self._footprint(st)
        held = {name: int(arr.nbytes) for name, arr in (("values", st.values), ("rows", st.rows))
                if arr is not None}
        if not held:
            return fp
        return Footprint(breakdown={**fp.breakdown, **held},
                         peak_build_bytes=fp.peak_build_bytes + sum(held.values()))

    # ------------------------------------------------------------------ updates
    def update(self, positions: Any, new_keys: Any) -> GpuIndex[S]:
        """Set the keys at ``positions`` (rowIDs) to ``new_keys`` (capability ``updates``).

        RowIDs and values stay; a position given twice takes its last new key. Answers
        afterwards equal those of a fresh build over the updated key column. Bad input raises
        before anything changes; the update is published like a build (lookups running
        meanwhile answer from the state before it). Updates from several threads take turns
        (each applies to the state the previous one published: none is lost), and a build
        publishes between updates, never under one.
        """
        with self._writing:
            return self._update_locked(positions, new_keys)

    def _update_locked(self, positions: Any, new_keys: Any) -> GpuIndex[S]:
        st = self._live()
        if not self.capabilities.updates:
            raise Unsupported(f"index {self.name!r} does not support updates; build again")
        if st.dims > 1:
            raise Unsupported("updates of multi-column indexes are not part of the contract; "
                              "build again")
        if st.rows is not None:
            raise Unsupported("updates of a build that left null rows out (nulls='skip') are "
                              "not part of the contract; build again")
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

    # ------------------------------------------------------------------ saving
    @typing.overload
    def save(self, path: str | os.PathLike[str]) -> Path: ...

    @typing.overload
    def save(self, path: persist.BinaryWriter) -> None: ...

    def save(self, path: str | os.PathLike[str] | persist.BinaryWriter) -> Path | None:
        """Write the index, built or not, to ``path`` (see docs/persistence.md);
        :func:`indexzoo.load` reads it back, on this device or another one the index supports.

        The file replaces ``path`` in one rename once it is complete; the path is returned.
        ``path`` may be a binary file object instead (anything with ``write``: an open file,
        an ``io.BytesIO``): the same bytes are written to it from its current position and
        None is returned. Raises :class:`~indexzoo.errors.IndexFileError` if the state holds
        something the format does not store (the plugin then implements
        ``_save_state``/``_load_state``); ConfigError for anything but a path or a binary
        file object."""
        return persist.write(path, self.to_saved())

    def to_bytes(self) -> bytes:
        """The index, built or not, as the bytes ``save`` writes to a file;
        :func:`indexzoo.from_bytes` reads them back, with the checks of a load from a file."""
        return persist.to_bytes(self.to_saved())

    def to_saved(self) -> persist.SavedIndex:
        """The index in saved form, in memory: metadata and host arrays (what ``save`` writes
        and what pickling carries)."""
        st = self._state
        meta: dict[str, Any] = {
            "format": persist.FORMAT, "format_version": persist.FORMAT_VERSION,
            "indexzoo_version": persist.indexzoo_version(), "index": self.name,
            "plugin_api": self._resolution.api,
            "state_version": self.state_version,
            "params": self.params.model_dump(mode="json"), "device": self.device,
            "built": st is not None,
        }
        if st is None:
            return persist.SavedIndex(meta)
        flat = persist.Flattener(st.device)
        meta["n"] = st.n
        keymaps = tuple(k.packed() for k in st.keymaps)  # text dictionaries as plain bytes
        meta["base"] = flat.flatten({"keymaps": keymaps, "values": st.values, "rows": st.rows,
                                     "n_rows": st.n_rows, "nulls": st.nulls, "names": st.names},
                                    BASE_HINTS, "the base state")
        meta["state"] = flat.flatten(self._save_state(st), persist.class_hints(type(st)),
                                     f"the {self.name} state")
        return persist.SavedIndex(meta, flat.arrays())

    @classmethod
    def from_saved(cls, saved: persist.SavedIndex, device: str | None = None) -> GpuIndex[S]:
        """The index ``saved`` holds, on ``device`` (default: the device it was saved from if
        the index runs there and it is usable here, else the CPU), its state checked against
        the plugin's ``state_schema`` before any kernel reads it (:mod:`indexzoo.restore`);
        IndexFileError for anything the file gets wrong."""
        return typing.cast(GpuIndex[S], restore.index_from_saved(cls, saved, device))

    @classmethod
    def _params_for_load(cls, params: Any, device: str) -> Any:
        """The saved ``params`` as an index loaded onto ``device`` takes them: unchanged here;
        a plugin whose params hold a setting of one device only (an engine that runs only on
        the GPU) maps it to what runs on ``device``, and documents it."""
        return params

    @classmethod
    def _class_for(cls, params: Any) -> type[GpuIndex[Any]]:
        """The class of an index made as ``cls(params)``: ``cls`` here. A plugin whose
        ``__new__`` makes a subclass for some parameters (``sharded`` makes one declaring
        its inner index's capabilities) names it, so that what is certified for those
        parameters is what they make."""
        return cls

    @classmethod
    def _load_device(cls, saved: persist.SavedIndex, device: str | None) -> str:
        if device is not None:
            return device
        devices = cls.capabilities.devices
        if saved.meta.get("device") == "cuda" and "cuda" in devices and cuda_status()[0]:
            return "cuda"
        return "cpu" if "cpu" in devices else "auto"

    def _restore(self, saved: persist.SavedIndex) -> S:
        """The build state ``saved`` holds, on this index's device, checked and sealed."""
        return typing.cast(S, restore.restore_state(self, saved))

    def __getstate__(self) -> dict[str, Any]:
        """Pickling (and ``copy.deepcopy``): the saved form, plus a subclass's own instance
        attributes; the lock and the resolved hooks are made again on unpickling."""
        saved = self.to_saved()
        extra = {k: v for k, v in self.__dict__.items() if k not in _INDEX_FIELDS}
        return {"meta": saved.meta, "arrays": saved.arrays, "extra": extra}

    def __setstate__(self, data: dict[str, Any]) -> None:
        saved = persist.SavedIndex(data["meta"], data["arrays"], source="a pickled index",
                                   trusted=True)
        onto = self._load_device(saved, None)
        GpuIndex.__init__(self, restore.params_from_saved(type(self), saved, onto), device=onto)
        self.__dict__.update(data.get("extra", {}))
        if saved.meta.get("built"):
            self._state = self._restore(saved)

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

    def _save_state(self, st: S) -> dict[str, Any]:
        """Optional: the parts of ``st`` to save, by name (default: every attribute the plugin
        set in ``_build``). Each value is saved by the generic walk (arrays, scalars, tuples,
        lists, dicts, dataclasses and named tuples declared in the state's annotations); a
        plugin whose state holds anything else (a compiled function, an engine's handle)
        returns it in a form the walk saves, and rebuilds it in ``_load_state``."""
        return {k: v for k, v in vars(st).items() if k not in BASE_FIELDS}

    def _load_state(self, st: S, saved: dict[str, Any]) -> None:
        """Optional: fill ``st`` (its base fields set, on ``self.device``) from what
        ``_save_state`` returned, arrays moved to this device (default: set each attribute).
        Rebuild here what was not saved, e.g. a structure specific to the device."""
        for name, value in saved.items():
            setattr(st, name, value)

    def _prepared_point(self, st: S, op: Operation) -> Callable[[Any], Any] | None:
        """Optional: point lookups of build ``st`` for ``op`` (a point operation whose out mode
        is "rowid", "count" or "sum", answered by its own hook) prepared for repeated calls,
        e.g. with the kernel's fixed arguments bound
        (:meth:`indexzoo.native.targets.Kernel.bind`). The callable takes a batch that the
        base has checked (the device's array type, 1-D, native dtype, 1 to ``max_batch``
        lookups) and returns what the operation's hook returns. None (the default): the base
        calls the hook itself."""
        return None

    def _prepared_range(self, st: S, op: Operation) -> Callable[[Any, Any], Any] | None:
        """Optional: range lookups of build ``st`` for ``op`` (a range operation whose out mode
        is "rowid", "count", "sum" or "bitmap", answered by its own hook) prepared for
        repeated calls, as :meth:`_prepared_point` does for points. The callable takes bounds
        that the base has checked (two C-contiguous arrays of the device's type and the native
        dtype, (Q,) on a one-column index or (Q, d), 1 to ``max_batch`` ranges; bitmaps that
        need no memory check) and returns what the operation's hook returns. None (the
        default): the base calls the hook itself."""
        return None


#: The instance attributes of every index that pickling makes again (not carried as they are).
_INDEX_FIELDS = frozenset({"params", "device", "_state", "_writing", "_resolution"})


def check_plugin_class(cls: Any) -> Resolution:
    """How ``cls`` answers each operation, or :class:`~indexzoo.errors.PluginError` naming
    every way it breaks the plugin contract (the registry calls this at registration)."""
    if not (isinstance(cls, type) and issubclass(cls, GpuIndex)):
        raise PluginError(f"register() expects a GpuIndex subclass, got {cls!r}")
    problems = []
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        problems.append("name must be a non-empty string")
    if not isinstance(getattr(cls, "capabilities", None), Capabilities):
        problems.append("capabilities must be a Capabilities instance")
    if not (isinstance(cls.Params, type) and issubclass(cls.Params, IndexParams)):
        problems.append("Params must subclass indexzoo.IndexParams")
    if not isinstance(getattr(cls, "state_schema", None), (StateSchema, type(None))):
        problems.append("state_schema must be an indexzoo.persist.StateSchema or None")
    rates = getattr(cls, "build_rate", None)
    if not (isinstance(rates, Mapping) and all(
            k in ("cpu", "cuda") and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v > 0 for k, v in rates.items())):
        problems.append("build_rate must map 'cpu' and/or 'cuda' to keys a second (a finite "
                        f"number > 0), got {shown(rates)}")
    if problems:
        raise PluginError(f"index class {cls.__module__}.{cls.__qualname__} breaks the plugin "
                          f"contract: {'; '.join(problems)}")
    return resolve(cls, GpuIndex)
