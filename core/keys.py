"""Order-preserving key maps: every orderable key type onto uint32 or uint64.

Plugins only ever see unsigned 32- or 64-bit keys. Everything else a user may index goes
through one of these maps, applied once, in the base class, for every plugin:

============================  =========  ===================================================
source dtype                  target     map
============================  =========  ===================================================
bool, uint8, uint16, uint32   uint32     zero extension
uint64                        uint64     identity
int8, int16, int32            uint32     sign extension to int32, then flip the sign bit
int64                         uint64     flip the sign bit
datetime64, timedelta64       uint64     as int64 (NaT is rejected, like NaN)
float32                       uint32     IEEE bits; negative: invert all bits,
float64                       uint64     non-negative: set the sign bit (radix-sort trick)
bytes ``S1`` ... ``S8``       uint64     the bytes, zero padded, read big-endian
text (``str``, ``U<w>``),     uint32     rank in the build's dictionary (sorted distinct
other byte strings                       values; uint64 past 2^32 of them)
============================  =========  ===================================================

Each map is strictly increasing (``a < b`` iff ``map(a) < map(b)``), so both point and
range lookups carry over, with three documented exceptions:

* **NaN** has no place in an order: NaN keys or lookups raise :class:`InvalidInput`.
  Infinities are ordinary keys.
* **-0.0 and 0.0** compare equal under IEEE 754 (and in NumPy), so they are one key:
  -0.0 is stored as 0.0. A lookup for either finds rows built with either; the inverse
  map returns 0.0. [decision, documented in docs/keys.md]
* **Text and byte strings** are exact, whatever their length and wherever their NULs
  (:mod:`indexzoo.text`: text read from any container is an object array of ``str``, byte
  strings one of ``bytes``): NumPy ``S`` arrays of up to 8 bytes by their bits (their values
  end in no NUL), everything else through a dictionary of the build's values
  (:meth:`KeyMap.for_keys`, Python objects compared by code point or byte by byte), where a
  point lookup not in the dictionary misses and range bounds take the ranks of the nearest
  values inside the range. Time-zone-aware timestamps are UTC ``datetime64`` with the zone
  kept on the map (``tz``); a tz-naive lookup against them is InvalidInput.

Lookups may use another dtype than the keys. Integer lookups against integer keys are
compared by value: a lookup outside the key dtype's range is a miss, and range bounds are
clamped to it. Float lookups against float keys (and integer lookups against float keys)
are converted exactly: a point lookup that the key dtype cannot represent exactly is a miss,
and range bounds round inwards (``lo`` up, ``hi`` down), so ranges stay exact.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from . import text
from .devices import xp_of as _xp
from .display import shown
from .errors import InvalidInput, Unsupported

__all__ = ["SUPPORTED_KEY_DTYPES", "KeyMap", "UntypedEmpty"]

Kind = Literal["unsigned", "signed", "float", "datetime", "bytes", "strings"]

SUPPORTED_KEY_DTYPES = (
    "bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32, float64, "
    "datetime64, timedelta64, byte strings (bytes, S<w>) and text (str, U<w>)"
)

_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)


class UntypedEmpty(np.ndarray):
    """An empty Python sequence given as lookups (``index.point([])``): it has no dtype of its
    own, so it takes the key dtype (a plain empty array of the map's ``source``)."""



def _kind_of(dtype: np.dtype) -> Kind | None:
    if dtype.kind in "bu":
        return "unsigned"
    if dtype.kind == "i":
        return "signed"
    if dtype.kind == "f" and dtype.itemsize in (4, 8):
        return "float"
    if dtype.kind in "mM":
        return "datetime"
    if dtype.kind == "S" and 0 < dtype.itemsize <= 8:
        return "bytes"
    if dtype.kind in "SU" and dtype.itemsize > 0:
        return "strings"
    return None


def _dictionary_kind(arr: Any) -> text.Kind | None:
    """The text kind of keys that map through a dictionary: text of any form, byte strings
    held as Python objects (their NULs count) or wider than 8 bytes; else None."""
    dt = arr.dtype
    if dt.kind == "S" and dt.itemsize <= 8:
        return None  # the bit map
    return text.kind_of(arr) if dt.kind in "OUS" else None


def _shown_dtype(arr: Any) -> str:
    """``dtype <U3``, or ``text`` / ``byte strings`` for an object array of them."""
    kind = text.kind_of(arr) if arr.dtype.kind == "O" else None
    return f"{text.what(kind)} (Python objects)" if kind else f"dtype {arr.dtype}"


def _unsupported_dtype(dtype: np.dtype, name: str) -> InvalidInput:
    hint = ""
    if dtype.kind == "f":
        hint = " (convert float16 to float32 first)"
    return InvalidInput(
        f"argument {name!r}: dtype {dtype} is not supported as a key; "
        f"allowed: {SUPPORTED_KEY_DTYPES}{hint}"
    )


def _check_no_nan(arr: Any, name: str) -> None:
    xp = _xp(arr)
    bad = xp.isnan(arr) if arr.dtype.kind == "f" else xp.isnat(arr)
    if bool(bad.any()):
        pos = int(xp.argmax(bad))
        what = "NaN" if arr.dtype.kind == "f" else "NaT"
        raise InvalidInput(
            f"argument {name!r}: {what} at position {pos} is not a valid key "
            f"({what} has no place in an order; drop or replace it)"
        )


def _bits(dtype: np.dtype) -> int:
    return dtype.itemsize * 8


@dataclass(frozen=True, eq=False)
class KeyMap:
    """The order-preserving map of one key dtype (``source``) onto ``target``.

    Build with :meth:`for_keys` (or :meth:`for_dtype` where the map needs no data); ``encode``
    keys, ``decode`` them back, and ``encode_points`` / ``encode_ranges`` for lookups of any
    compatible dtype. Everything it holds is plain data: dtypes, strings and, for text and
    long byte strings, one NumPy array (``dictionary``).
    """

    source: np.dtype
    target: np.dtype
    kind: Kind
    #: text and byte strings (but NumPy ``S`` arrays of up to 8 bytes): the build's distinct
    #: values, sorted, as an object array of Python ``str`` or ``bytes`` (exact, NULs
    #: included); a key is its rank in this array (None for every other kind)
    dictionary: np.ndarray | None = None
    #: time-zone-aware timestamps: the zone the keys came in (their values are UTC)
    tz: str | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyMap):
            return NotImplemented
        if (self.source, self.target, self.kind, self.tz) != \
                (other.source, other.target, other.kind, other.tz):
            return False
        a, b = self.dictionary, other.dictionary
        return a is b or (a is not None and b is not None and np.array_equal(a, b))

    def __hash__(self) -> int:
        size = None if self.dictionary is None else int(self.dictionary.shape[0])
        return hash((self.source, self.target, self.kind, self.tz, size))

    # ------------------------------------------------------------------ construction
    @classmethod
    def for_dtype(cls, dtype: Any, *, name: str = "keys") -> KeyMap:
        """The map for keys of ``dtype``; InvalidInput if the dtype cannot be a key."""
        try:
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise InvalidInput(f"argument {name!r}: {shown(dtype)} is not a dtype ({exc})") from None
        kind = _kind_of(dt)
        if kind is None:
            raise _unsupported_dtype(dt, name)
        if kind == "strings":
            raise InvalidInput(
                f"argument {name!r}: keys of dtype {dt} map through a dictionary of the "
                "build's values; make the map with KeyMap.for_keys(keys)")
        wide = kind in ("datetime", "bytes") or dt.itemsize == 8
        return cls(source=dt, target=_U64 if wide else _U32, kind=kind)

    @classmethod
    def for_keys(cls, keys: Any, *, name: str = "keys") -> KeyMap:
        """The map for the build ``keys`` (no nulls among them): :meth:`for_dtype` of their
        dtype, with the time zone of time-zone-aware timestamps and, for text and byte
        strings (but NumPy ``S`` arrays of up to 8 bytes), the dictionary of their distinct
        values. Text held as Python objects is named by the fixed-width dtype of its longest
        value (``source``); its values stay exact in the dictionary."""
        dt = keys.dtype
        kind = _dictionary_kind(keys)
        if kind is not None:
            dictionary = text.distinct(np.asarray(keys))
            source = dt if dt.kind in "US" else text.source_dtype(kind, dictionary)
            target = _U32 if dictionary.shape[0] <= (1 << 32) else _U64
            return cls(source=source, target=target, kind="strings", dictionary=dictionary)
        km = cls.for_dtype(dt, name=name)
        tz = getattr(keys, "tz", None)
        return km if tz is None or km.kind != "datetime" else dataclasses.replace(km, tz=tz)

    def with_target(self, target: Any) -> KeyMap:
        """The same map onto a wider target (uint32 -> uint64 keeps the order)."""
        t = np.dtype(target)
        if t == self.target:
            return self
        if t == _U64 and self.target == _U32:
            return dataclasses.replace(self, target=t)
        raise Unsupported(
            f"keys of dtype {self.source} need {self.target} keys inside the index; "
            f"they cannot be narrowed to {t}"
        )

    @functools.cached_property
    def natural(self) -> np.dtype:
        """The narrowest target of this source: what the bit tricks run on before widening."""
        if self.dictionary is not None:
            return _U32 if self.dictionary.shape[0] <= (1 << 32) else _U64
        return KeyMap.for_dtype(self.source).target

    @functools.cached_property
    def _fixed_dictionary(self) -> np.ndarray | None:
        """The dictionary as a ``U``/``S`` array where that is exact (no value ends in NUL):
        lookups held in such an array are then searched at NumPy's speed."""
        if self.dictionary is None:
            return None
        return text.fixed_width(self.dictionary, self.source)

    @functools.cached_property
    def _ranks_of_objects(self) -> text.Ranks:
        """The dictionary's ranks of lookups held as Python objects."""
        assert self.dictionary is not None
        return text.Ranks(self.dictionary)

    def packed(self) -> KeyMap:
        """This map as a saved index holds it: the dictionary packed into plain bytes
        (:func:`indexzoo.text.pack`; a saved index holds no Python objects)."""
        if self.dictionary is None or self.dictionary.dtype.kind != "O":
            return self
        return dataclasses.replace(self, dictionary=text.pack(self.dictionary,
                                                              self._text_kind))

    def unpacked(self) -> KeyMap:
        """The map :meth:`packed` saved (ValueError where its dictionary is no packing); a
        dictionary saved as a ``U``/``S`` array (before text was held exactly) is read as
        its values."""
        d = self.dictionary
        if d is None or d.dtype.kind == "O":
            return self
        if d.dtype == np.uint8 and d.ndim == 1:
            return dataclasses.replace(self, dictionary=text.unpack(d, self._text_kind))
        if d.dtype.kind == self.source.kind and d.ndim == 1:
            return dataclasses.replace(self, dictionary=text.as_objects(d))
        raise ValueError(f"a dictionary of dtype {d.dtype} for keys of dtype {self.source}")

    @property
    def _text_kind(self) -> text.Kind:
        return "U" if self.source.kind == "U" else "S"

    @property
    def invertible(self) -> bool:
        """Whether :meth:`decode` gives the keys back (every map: strings through their
        dictionary)."""
        return True

    @property
    def exact(self) -> bool:
        """Whether equal encodings mean equal keys (every map)."""
        return True

    # ------------------------------------------------------------------ keys
    def encode(self, arr: Any, *, name: str = "keys", copy: bool = True) -> Any:
        """Map an array of exactly ``source`` dtype onto ``target``, keeping the order.

        The result is a new array unless ``copy=False`` and the map is the identity (then it
        may be ``arr`` itself: fine for lookups, never for keys an index keeps).
        """
        if type(arr) is not np.ndarray and isinstance(arr, np.ndarray):
            arr = arr.view(np.ndarray)  # e.g. timestamps that carry their time zone
        if arr.dtype != self.source and not self._same_text(arr):
            raise InvalidInput(
                f"argument {name!r}: expected dtype {self.source}, got {_shown_dtype(arr)}"
            )
        enc = self._encode_natural(arr, name, copy)
        return enc if enc.dtype == self.target else enc.astype(self.target)

    def _same_text(self, arr: Any) -> bool:
        """Whether ``arr`` holds the text kind of these keys in a form the map takes (byte
        strings as Python objects only through the dictionary)."""
        if self.kind == "bytes":
            return arr.dtype.kind == "S"
        return self.kind == "strings" and arr.dtype.kind in "OUS" and \
            text.kind_of(arr) == self.source.kind

    def _encode_natural(self, arr: Any, name: str, copy: bool) -> Any:
        u = self.natural
        nbits = _bits(u)
        if self.kind == "unsigned":
            return arr.astype(u, copy=copy)
        if self.kind == "signed":
            wide = arr.astype(np.int32 if u == _U32 else np.int64)
            return wide.view(u) ^ u.type(1 << (nbits - 1))
        if self.kind == "float":
            _check_no_nan(arr, name)
            xp = _xp(arr)
            bits = (arr + arr.dtype.type(0.0)).view(u)  # -0.0 + 0.0 == +0.0
            negative = (bits >> u.type(nbits - 1)).astype(bool)
            return bits ^ xp.where(negative, u.type((1 << nbits) - 1), u.type(1 << (nbits - 1)))
        if self.kind == "datetime":
            _check_no_nan(arr, name)
            return arr.view(np.int64).view(_U64) ^ _U64.type(1 << 63)
        if self.kind == "strings":
            return self._ranks(arr, "point")[0]
        return self._encode_bytes(arr, name)

    def _encode_bytes(self, arr: Any, name: str) -> Any:
        if not isinstance(arr, np.ndarray):
            raise InvalidInput(f"argument {name!r}: byte-string keys must be a NumPy array")
        width = arr.dtype.itemsize
        raw = np.ascontiguousarray(arr).view(np.uint8).reshape(arr.shape[0], width)
        buf = np.zeros((arr.shape[0], 8), dtype=np.uint8)
        buf[:, : min(8, width)] = raw[:, :8]
        return buf.view(">u8").reshape(arr.shape[0]).astype(_U64)

    def decode(self, ukeys: Any) -> Any:
        """The inverse map: ``decode(encode(k)) == k`` (with -0.0 returned as 0.0)."""
        if self.dictionary is not None:
            return self.dictionary[np.asarray(ukeys).astype(np.int64)]
        nat = self.natural
        u = ukeys.astype(nat)
        nbits = _bits(nat)
        if self.kind == "unsigned":
            return u.astype(self.source)
        if self.kind == "signed":
            s = (u ^ nat.type(1 << (nbits - 1))).view(np.int32 if nbits == 32 else np.int64)
            return s.astype(self.source)
        if self.kind == "float":
            xp = _xp(u)
            positive = (u >> nat.type(nbits - 1)).astype(bool)
            mask = xp.where(positive, nat.type(1 << (nbits - 1)), nat.type((1 << nbits) - 1))
            return (u ^ mask).view(self.source)
        if self.kind == "datetime":
            return (u ^ _U64.type(1 << 63)).view(np.int64).view(self.source)
        be = np.asarray(u).astype(">u8").view(np.uint8).reshape(-1, 8)
        return np.ascontiguousarray(be[:, : self.source.itemsize]).view(self.source).ravel()

    # ------------------------------------------------------------------ lookups
    def encode_points(self, q: Any, *, name: str = "queries") -> tuple[Any, Any | None]:
        """Encode point lookups of any compatible dtype.

        Returns ``(encoded, outside)``: ``outside`` is None when every lookup can match a
        key, else a boolean mask of lookups that cannot (they must miss).
        """
        if not isinstance(q, UntypedEmpty) and q.dtype == self.source == self.target:
            # unsigned keys of the index's width
            return q, None  # (the identity: nothing to check, convert or copy)
        special = self._special_lookup(q, name, "point")
        if special is not None:
            return special
        conv, outside = self._convert(q, name, mode="point")
        return self.encode(conv, name=name, copy=False), outside

    def encode_ranges(self, lo: Any, hi: Any) -> tuple[Any, Any]:
        """Encode inclusive ranges ``[lo, hi]`` of any compatible dtype.

        Bounds outside the key dtype are clamped; a range that lies wholly outside becomes
        the empty range ``(1, 0)``; inexact float bounds round inwards.
        """
        elo, lo_out = self.encode_bound(lo, "lo")
        ehi, hi_out = self.encode_bound(hi, "hi")
        if lo_out is None and hi_out is None:
            return elo, ehi
        xp = _xp(elo)
        empty = lo_out if hi_out is None else (hi_out if lo_out is None else lo_out | hi_out)
        one, zero = self.target.type(1), self.target.type(0)
        return xp.where(empty, one, elo), xp.where(empty, zero, ehi)

    def encode_bound(self, b: Any, side: str, *, name: str | None = None,
                     ) -> tuple[Any, Any | None]:
        """Encode one side (``"lo"`` or ``"hi"``) of inclusive ranges.

        Returns ``(encoded, empty)``: bounds outside the key dtype are clamped and inexact
        float bounds round inwards; ``empty`` is None or a mask of bounds that leave no key
        on their side (a lower bound above every key, an upper bound below every key).
        """
        what = side if name is None else name
        special = self._special_lookup(b, what, side)
        if special is not None:
            return special
        conv, out = self._convert(b, what, mode=side)
        return self.encode(conv, name=what, copy=False), out

    def _convert(self, q: Any, name: str, mode: str) -> tuple[Any, Any | None]:
        """Bring lookups to ``source`` dtype.

        ``mode`` is "point" (unrepresentable values are flagged), "lo" or "hi" (values are
        clamped/rounded inwards; flagged values make the range empty: for "lo" those above
        every key, for "hi" those below every key).
        """
        if isinstance(q, UntypedEmpty):
            return np.empty(0, self.source), None
        dt = q.dtype
        if self.kind == "datetime" and dt.kind == "M":
            self._check_zone(q, name)
        if dt == self.source:
            if self.kind in ("float", "datetime"):
                _check_no_nan(q, name)
            return q, None
        qkind = _kind_of(dt)
        if self.kind in ("unsigned", "signed") and qkind in ("unsigned", "signed"):
            return _convert_int(q, self.source, mode)
        if self.kind == "float" and dt.kind in "biuf":
            return _convert_float(q, self.source, mode, name)
        if (self.kind == "datetime" and dt.kind == self.source.kind
                and np.can_cast(dt, self.source, casting="safe")):
            _check_no_nan(q, name)
            return q.astype(self.source), None
        raise InvalidInput(
            f"argument {name!r}: dtype {dt} cannot be compared with keys of dtype "
            f"{self.source}; use {self._compatible()}"
        )

    def _compatible(self) -> str:
        return {
            "unsigned": "an integer dtype",
            "signed": "an integer dtype",
            "float": "a float or integer dtype",
            "datetime": f"{self.source} or a coarser unit of it",
            "bytes": "byte strings (bytes, S<w>)",
            "strings": "text (str, U<w>)" if self.source.kind == "U" else
                       "byte strings (bytes, S<w>)",
        }[self.kind]

    def _check_zone(self, q: Any, name: str) -> None:
        """InvalidInput unless timestamp lookups and keys agree on having a time zone."""
        qtz = getattr(q, "tz", None)
        if self.tz is not None and qtz is None:
            raise InvalidInput(
                f"argument {name!r}: the keys are timestamps in time zone {self.tz!r} (held "
                "as UTC); tz-naive lookups are ambiguous: give them a time zone (pandas: "
                "Series.dt.tz_localize, Timestamp(..., tz=...))")
        if self.tz is None and qtz is not None:
            raise InvalidInput(
                f"argument {name!r}: the lookups are in time zone {qtz!r} but the keys are "
                "tz-naive timestamps; drop the lookups' time zone (Series.dt.tz_convert(None) "
                "gives UTC) or build on tz-aware keys")

    def _special_lookup(self, q: Any, name: str, mode: str) -> tuple[Any, Any | None] | None:
        """Lookups that are not converted to ``source`` first: text and byte strings (ranks
        in the dictionary, or against byte-string keys of up to 8 bytes by their first 8
        bytes); None for every other case."""
        if isinstance(q, UntypedEmpty) or q.dtype.kind not in "OSU":
            return None
        kind = text.kind_of(q)
        if kind is None:
            return None  # objects that are no text: _convert says what would work
        if kind != self.source.kind or self.kind not in ("bytes", "strings"):
            raise InvalidInput(
                f"argument {name!r}: {_shown_dtype(q)} cannot be compared with keys of dtype "
                f"{self.source}; use {self._compatible()}")
        if self.kind == "strings":
            return self._ranks(q, mode)
        return self._wide_bytes(q, mode)

    def _ranks(self, q: Any, mode: str) -> tuple[Any, Any | None]:
        """Text or byte-string lookups as ranks in the dictionary, exactly: a point lookup
        not in it misses; a lower bound takes the rank of the first value at or above it, an
        upper bound that of the last value at or below it (a side beyond every value leaves
        the range empty)."""
        d, host = self.dictionary, np.asarray(q)
        assert d is not None
        size, fixed = int(d.shape[0]), self._fixed_dictionary
        if host.dtype.kind in "US" and fixed is not None:
            # neither side has a value ending in NUL: NumPy's comparison is Python's
            common = np.promote_types(fixed.dtype, host.dtype)
            d, host = fixed.astype(common, copy=False), host.astype(common, copy=False)
            if mode == "hi":
                r = np.searchsorted(d, host, side="right") - 1
            else:
                r = np.searchsorted(d, host, side="left")
                if mode == "point" and size:
                    r = np.where(d[np.minimum(r, size - 1)] == host, r, -1)
        else:  # Python objects: Python's dict and bisect
            host, ranks = text.as_objects(host), self._ranks_of_objects
            r = ranks.at_or_below(host) if mode == "hi" else \
                ranks.at_or_above(host) if mode == "lo" else ranks.points(host)
        flagged = (r < 0) | (r >= size)
        enc = np.where(flagged, 0, r).astype(self.natural)
        return enc, (flagged if bool(flagged.any()) else None)

    def _wide_bytes(self, q: Any, mode: str) -> tuple[Any, Any | None]:
        """Byte strings against byte-string keys of at most 8 bytes (an ``S`` array: no key
        ends in NUL), exactly. A lookup that is no such value (its bytes past the 8th are not
        all NUL, or, held as Python bytes, it ends in NUL) equals no key (a point misses),
        lies above every key up to its first 8 bytes without their trailing NULs (a lower
        bound moves up by one) and below every greater key (an upper bound stays)."""
        heads, tail = _byte_heads(q)
        enc = self._encode_bytes(heads, "queries").astype(self.target)
        if tail is None:
            return enc, None
        if not tail.any() or mode == "hi":
            return enc, None
        if mode == "point":
            return enc, tail
        top = enc == np.iinfo(self.target).max
        moved = np.where(tail & ~top, enc + self.target.type(1), enc)
        empty = tail & top
        return moved, (empty if bool(empty.any()) else None)


def _byte_heads(q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Byte-string lookups' first 8 bytes (as ``S``, zero padded by NumPy), and the mask of
    lookups those do not hold whole (None: every lookup is its head)."""
    if q.dtype.kind == "S":
        if q.dtype.itemsize <= 8 or q.shape[0] == 0:
            return q, None
        raw = np.ascontiguousarray(q).view(np.uint8).reshape(q.shape[0], q.dtype.itemsize)
        return q.astype("S8"), np.asarray(raw[:, 8:].any(axis=1))
    heads = [v[:8] for v in q]
    tail = np.fromiter((v != h.rstrip(b"\x00") for v, h in zip(q, heads, strict=True)),
                       dtype=bool, count=q.shape[0])
    return np.array(heads, dtype="S8"), tail


# ---------------------------------------------------------------------- conversions
def _int_limits(dt: np.dtype) -> tuple[int, int]:
    if dt.kind == "b":
        return 0, 1
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def _convert_int(q: Any, source: np.dtype, mode: str) -> tuple[Any, Any | None]:
    """Integer lookups to an integer key dtype, by value."""
    xp = _xp(q)
    qmin, qmax = _int_limits(q.dtype)
    smin, smax = _int_limits(source)
    if qmin >= smin and qmax <= smax:
        return q.astype(source), None
    below = q < q.dtype.type(smin) if qmin < smin else None
    above = q > q.dtype.type(smax) if qmax > smax else None
    clipped = xp.clip(q, q.dtype.type(max(qmin, smin)), q.dtype.type(min(qmax, smax)))
    if mode == "point":
        parts = [m for m in (below, above) if m is not None]
        outside = parts[0] if len(parts) == 1 else parts[0] | parts[1]
    else:
        outside = above if mode == "lo" else below
    if outside is not None and not bool(outside.any()):
        outside = None
    return clipped.astype(source), outside


def _to_float64(q: Any, mode: str) -> tuple[Any, Any | None]:
    """Integers to float64: exactness mask for points, inward rounding for bounds."""
    xp = _xp(q)
    f = q.astype(np.float64)
    if q.dtype.itemsize < 8:
        return f, None
    limit = np.float64(2.0**63 if q.dtype.kind == "i" else 2.0**64)
    safe = f < limit
    back = xp.where(safe, f, 0.0).astype(q.dtype)
    rounded_up = ~safe | (back > q)
    rounded_down = safe & (back < q)
    if mode == "point":
        inexact = rounded_up | rounded_down
        return f, inexact if bool(inexact.any()) else None
    if mode == "lo":
        return xp.where(rounded_down, xp.nextafter(f, np.inf), f), None
    return xp.where(rounded_up, xp.nextafter(f, -np.inf), f), None


def _convert_float(q: Any, source: np.dtype, mode: str, name: str) -> tuple[Any, Any | None]:
    """Float or integer lookups to a float key dtype, exactly."""
    xp = _xp(q)
    outside = None
    if q.dtype.kind == "f":
        _check_no_nan(q, name)
        f = q
    else:
        f, outside = _to_float64(q, mode)
    if f.dtype.itemsize <= source.itemsize:
        return f.astype(source), outside
    with np.errstate(over="ignore"):  # beyond float32's range: inf, then flagged or rounded
        c = f.astype(source)  # float64 -> float32 rounds to nearest
    back = c.astype(f.dtype)
    if mode == "point":
        inexact = back != f
        if outside is not None:
            inexact |= outside
        return c, inexact if bool(inexact.any()) else None
    if mode == "lo":
        return xp.where(back < f, xp.nextafter(c, source.type(np.inf)), c), None
    return xp.where(back > f, xp.nextafter(c, source.type(-np.inf)), c), None
