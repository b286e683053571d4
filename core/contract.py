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
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from . import results
from .config import IndexParams, validate_params
from .devices import array_module, device_of, resolve_device, to_device
from .errors import NotBuilt, Unsupported
from .keys import KeyMap
from .results import OUT_MODES, LookupResult, Out
from .validation import as_1d, check_out, prepare_values, same_length

__all__ = ["Capabilities", "Footprint", "GpuIndex"]

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


class GpuIndex(abc.ABC):
    """A secondary index over a key column: build once, then batches of lookups.

    ``rowID`` = position in the build array. ``values`` (optional) default to the rowIDs and
    are what ``out="sum"`` adds up.
    """

    name: ClassVar[str]
    Params: ClassVar[type[IndexParams]] = IndexParams
    capabilities: ClassVar[Capabilities]

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
        self._keymap: KeyMap | None = None
        self._n: int = 0
        self._values: Any = None

    # ------------------------------------------------------------------ state
    @property
    def xp(self) -> Any:
        """The array module of the index's device (numpy or cupy)."""
        return array_module(self.device)

    @property
    def is_built(self) -> bool:
        return self._keymap is not None

    def __len__(self) -> int:
        return self._n

    @property
    def key_dtype(self) -> np.dtype:
        """The dtype of the keys the index was built on (before the key map)."""
        return self._built_map().source

    @property
    def native_key_dtype(self) -> np.dtype:
        """uint32 or uint64: what the plugin's kernels see."""
        return self._built_map().target

    @property
    def rowid_dtype(self) -> np.dtype:
        """uint32, or uint64 once the index holds 2^32 - 1 keys or more."""
        return np.dtype(np.uint32 if self._n < (1 << 32) - 1 else np.uint64)

    @property
    def miss(self) -> np.integer:
        """The rowID that ``out="rowid"`` reports for a lookup without a match."""
        return self.rowid_dtype.type(np.iinfo(self.rowid_dtype).max)

    def _built_map(self) -> KeyMap:
        if self._keymap is None:
            raise NotBuilt(f"index {self.name!r} is not built yet; call build(keys) first")
        return self._keymap

    def __repr__(self) -> str:
        state = (f"{self._n} keys of {self.key_dtype}" if self.is_built else "not built")
        return f"<{type(self).__name__} {self.name!r} on {self.device}: {state}>"

    # ------------------------------------------------------------------ build
    def build(self, keys: Any, values: Any = None) -> GpuIndex:
        """Index ``keys`` (rowID = position); ``values`` of the same length are optional.

        On any error the index keeps its previous build (or stays unbuilt).
        """
        arr = as_1d(keys, "keys")
        keymap = KeyMap.for_dtype(arr.dtype, name="keys")
        keymap = keymap.with_target(self._native_dtype(keymap))
        vals = None if values is None else prepare_values(values, arr)
        moved = device_of(arr) != self.device  # moving makes the index's own copy anyway
        ukeys = to_device(keymap.encode(arr, name="keys", copy=not moved), self.device)
        if (not self.capabilities.duplicates and ukeys.shape[0] > 1
                and int(self.xp.unique(ukeys).shape[0]) != int(ukeys.shape[0])):
            raise Unsupported(f"index {self.name!r} does not support duplicate keys")
        saved = dict(self.__dict__)
        try:
            self._keymap, self._n = keymap, int(ukeys.shape[0])
            self._values = None if vals is None else to_device(vals, self.device)
            self._build(ukeys)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        return self

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
        keymap = self._built_map()
        self._require("point", "point lookups")
        mode = check_out(out, self.capabilities.out_modes, self.name)
        q = as_1d(queries, "queries")
        enc, outside = keymap.encode_points(q, name="queries")
        enc = to_device(enc, self.device)
        if outside is not None:
            outside = to_device(outside, self.device)
        return self._run("point", mode, (enc,), outside)

    def range(self, lo: Any, hi: Any, *, out: Out = "count") -> LookupResult:
        """Inclusive ranges ``[lo[i], hi[i]]``; ``lo > hi`` is an empty range, not an error."""
        keymap = self._built_map()
        self._require("range", "range lookups")
        mode = check_out(out, self.capabilities.out_modes, self.name)
        a, b = as_1d(lo, "lo"), as_1d(hi, "hi")
        same_length(a, b, "lo", "hi")
        elo, ehi = keymap.encode_ranges(a, b)
        return self._run("range", mode, (to_device(elo, self.device),
                                          to_device(ehi, self.device)), None)

    def _require(self, capability: str, what: str) -> None:
        if not getattr(self.capabilities, capability):
            hint = "; an ordered index such as 'sorted-array' does" if capability == "range" else ""
            raise Unsupported(f"index {self.name!r} does not support {what}{hint}")

    def _run(self, kind: str, out: Out, arrays: tuple[Any, ...], outside: Any) -> LookupResult:
        xp, q = self.xp, int(arrays[0].shape[0])
        if self._n == 0 or q == 0:
            return results.empty_result(out, q, xp, self.rowid_dtype, self.miss)
        if outside is not None:
            inside = xp.nonzero(~outside)[0]
            part = self._run(kind, out, tuple(a[inside] for a in arrays), None)
            return results.scatter_result(part, inside, q, xp, self.rowid_dtype, self.miss)
        step = self.params.max_batch
        parts = [self._dispatch(kind, out, tuple(a[s:s + step] for a in arrays))
                 for s in range(0, q, step)]
        return results.concat_results(parts, xp)

    def _dispatch(self, kind: str, out: Out, arrays: tuple[Any, ...]) -> LookupResult:
        fused: Callable[..., Any] | None = getattr(self, f"_{kind}_{out}", None)
        if fused is not None:
            if out == "rowids":
                offsets, rowids = fused(*arrays)
                return LookupResult(out, offsets=offsets, rowids=rowids)
            return LookupResult(out, **{out: fused(*arrays)})
        offsets, rowids = getattr(self, f"_{kind}_rowids")(*arrays)
        if out == "rowid":
            return LookupResult(out, rowid=results.rowid_from_csr(
                offsets, rowids, self.miss, self.rowid_dtype))
        if out == "count":
            return LookupResult(out, count=results.count_from_csr(offsets, self.rowid_dtype))
        return LookupResult(out, sum=results.sum_from_csr(offsets, rowids, self._values))

    # ------------------------------------------------------------------ memory
    def memory_footprint(self) -> Footprint:
        """Device bytes held after build, their breakdown, and the peak during build."""
        self._built_map()
        fp = self._footprint()
        if self._values is None:
            return fp
        extra = int(self._values.nbytes)
        return Footprint(breakdown={**fp.breakdown, "values": extra},
                         peak_build_bytes=fp.peak_build_bytes + extra)

    # ------------------------------------------------------------------ updates
    def update(self, positions: Any, new_keys: Any) -> GpuIndex:
        """Change the keys at ``positions`` (capability ``updates``)."""
        self._built_map()
        if not self.capabilities.updates:
            raise Unsupported(f"index {self.name!r} does not support updates; build again")
        raise NotImplementedError  # pragma: no cover - plugins with updates override this

    # ------------------------------------------------------------------ plugin hooks
    @abc.abstractmethod
    def _build(self, keys: Any) -> None:
        """Build from ``keys`` (uint32/uint64 on ``self.device``; may be empty)."""

    @abc.abstractmethod
    def _footprint(self) -> Footprint:
        """The plugin's own buffers (the base adds ``values``)."""

    def _point_rowids(self, q: Any) -> tuple[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement _point_rowids")

    def _range_rowids(self, lo: Any, hi: Any) -> tuple[Any, Any]:
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

