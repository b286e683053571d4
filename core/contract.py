"""The contract every index fulfils: :class:`GpuIndex`, :class:`Capabilities`,
:class:`Footprint`.

A plugin subclasses :class:`GpuIndex`, sets ``name``, ``Params`` and ``capabilities``, and
implements a few hooks on clean arrays; the base class does everything that must behave the
same for every index:

* validation of keys, values, lookups and ``out`` (the specific error, nothing changed);
* the order-preserving key map (plugins only see uint32 or uint64 keys);
* lookups outside the key dtype's range, and lookups on an empty index;
* chunking of batches larger than ``params.max_batch``;
* ``"rowid"``, ``"count"`` and ``"sum"`` derived from ``"rowids"`` where the plugin has no
  fused version;
* a build that fails leaves the previous build in place.

Hooks (``Q`` lookups of the index's key dtype, on the index's device)::

    _build(keys)                 keys: uint32/uint64 array (the index's own copy), rowID = position
    _point_rowids(q)  -> (offsets, rowids)      required if capabilities.point
    _range_rowids(lo, hi) -> (offsets, rowids)  required if capabilities.range
    _point_rowid / _point_count / _point_sum(q) -> array         optional, fused
    _range_rowid / _range_count / _range_sum(lo, hi) -> array    optional, fused
    _footprint() -> Footprint
"""

from __future__ import annotations

import abc
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from . import results
from .config import IndexParams, validate_params
from .devices import array_module, device_of, resolve_device, to_device
from .errors import InvalidInput, NotBuilt, Unsupported
from .keys import KeyMap
from .results import OUT_MODES, LookupResult, Out
from .state import BuildState, rowid_dtype_for
from .validation import as_1d, check_out, prepare_values, same_length

__all__ = ["BuildState", "Capabilities", "Footprint", "GpuIndex"]

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
        """The dtype of the keys the index was built on (before the key map)."""
        return self._live().keymap.source

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
        what = "not built" if st is None else f"{st.n} keys of {st.keymap.source}"
        return f"<{type(self).__name__} {self.name!r} on {self.device}: {what}>"

    # ------------------------------------------------------------------ build
    def build(self, keys: Any, values: Any = None) -> GpuIndex[S]:
        """Index ``keys`` (rowID = position); ``values`` of the same length are optional.

        The index keeps its own copies of both: changing the caller's arrays afterwards
        changes no answer. On any error the index keeps its previous build (or stays
        unbuilt); lookups running meanwhile on other threads answer from the previous build.
        """
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

    def _new_state(self, keymap: KeyMap, n: int, values: Any) -> S:
        """A fresh state of the plugin's class with the base's fields set."""
        return typing.cast(S, self.State(keymap=keymap, n=n, values=values, device=self.device))

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
        st = self._live()
        self._require("point", "point lookups")
        mode = check_out(out, self.capabilities.out_modes, self.name)
        q = as_1d(queries, "queries")
        enc, outside = st.keymap.encode_points(q, name="queries")
        enc = to_device(enc, self.device)
        if outside is not None:
            outside = to_device(outside, self.device)
        return self._run(st, "point", mode, (enc,), outside)

    def range(self, lo: Any, hi: Any, *, out: Out = "count") -> LookupResult:
        """Inclusive ranges ``[lo[i], hi[i]]``; ``lo > hi`` is an empty range, not an error."""
        st = self._live()
        self._require("range", "range lookups")
        mode = check_out(out, self.capabilities.out_modes, self.name)
        a, b = as_1d(lo, "lo"), as_1d(hi, "hi")
        same_length(a, b, "lo", "hi")
        elo, ehi = st.keymap.encode_ranges(a, b)
        return self._run(st, "range", mode, (to_device(elo, self.device),
                                              to_device(ehi, self.device)), None)

    def _require(self, capability: str, what: str) -> None:
        if not getattr(self.capabilities, capability):
            hint = "; an ordered index such as 'sorted-array' does" if capability == "range" else ""
            raise Unsupported(f"index {self.name!r} does not support {what}{hint}")

    def _run(self, st: S, kind: str, out: Out, arrays: tuple[Any, ...],
             outside: Any) -> LookupResult:
        xp, q = st.xp, int(arrays[0].shape[0])
        if st.n == 0 or q == 0:
            return results.empty_result(out, q, xp, st.rowid_dtype, st.miss)
        if outside is not None:
            inside = xp.nonzero(~outside)[0]
            part = self._run(st, kind, out, tuple(a[inside] for a in arrays), None)
            return results.scatter_result(part, inside, q, xp, st.rowid_dtype, st.miss)
        if self.params.sort_probes and q > 1:
            # sorted probes: lookups sorted by key (ranges by lo), answered, put back in the
            # caller's order; the sort and the un-permute are part of the call
            order = xp.argsort(arrays[0])
            res = self._chunked(st, kind, out, tuple(a[order] for a in arrays))
            return results.unpermute_result(res, order, xp)
        return self._chunked(st, kind, out, arrays)

    def _chunked(self, st: S, kind: str, out: Out, arrays: tuple[Any, ...]) -> LookupResult:
        step = self.params.max_batch
        parts = [self._dispatch(st, kind, out, tuple(a[s:s + step] for a in arrays))
                 for s in range(0, int(arrays[0].shape[0]), step)]
        return results.concat_results(parts, st.xp)

    def _dispatch(self, st: S, kind: str, out: Out, arrays: tuple[Any, ...]) -> LookupResult:
        fused: Callable[..., Any] | None = getattr(self, f"_{kind}_{out}", None)
        if fused is not None:
            if out == "rowids":
                offsets, rowids = fused(st, *arrays)
                return LookupResult(out, offsets=offsets, rowids=rowids)
            return LookupResult(out, **{out: fused(st, *arrays)})
        offsets, rowids = getattr(self, f"_{kind}_rowids")(st, *arrays)
        if out == "rowid":
            return LookupResult(out, rowid=results.rowid_from_csr(
                offsets, rowids, st.miss, st.rowid_dtype))
        if out == "count":
            return LookupResult(out, count=results.count_from_csr(offsets, st.rowid_dtype))
        return LookupResult(out, sum=results.sum_from_csr(offsets, rowids, st.values))

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

