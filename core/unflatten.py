"""The load walk: the JSON nodes of a saved state back into values (:func:`unflatten`), the
inverse of :class:`indexzoo.flatten.Flattener`.

The nodes come from a file, so nothing in them is trusted: every node is checked for its form
(an unknown marker, a field of the wrong type, a dtype that is not plain, a view that reaches
outside its array or holds more bytes than it, a class the code does not declare at that
place) and any problem is an :class:`~indexzoo.errors.IndexFileError` naming where it is.
Classes are never looked up by a name read from the file: a record node names a class, which
must be one of those the owner's annotation declares (:func:`~indexzoo.flatten.class_hints`).

Each array value put in place is noted in ``origins`` (``id(value) -> member``), so that the
state checks (:mod:`indexzoo.schema`) can name the file's member an error is about.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

import numpy as np

from .devices import import_cupy, to_numpy
from .errors import IndexFileError
from .flatten import class_hints, class_key, classes_of, is_record, item_hint
from .npyheader import plain_dtype

__all__ = ["unflatten"]

_MAX_DIMS = 32


def unflatten(node: Any, hints: Mapping[str, Any], arrays: Mapping[str, Any], where: str,
              origins: dict[int, str] | None = None) -> dict[str, Any]:
    """The inverse of :meth:`Flattener.flatten`: attribute -> value, with ``arrays`` (id ->
    array on the target device, or on the host for nodes marked ``host``) in place of the
    array nodes. Classes come from ``hints`` alone; a record of any other class is an error.
    ``origins`` (optional) receives ``id(array) -> member name`` for every array put in
    place."""
    return _Walk(arrays, {} if origins is None else origins).mapping(node, hints, where)


class _Walk:
    def __init__(self, arrays: Mapping[str, Any], origins: dict[int, str]) -> None:
        self.arrays, self.origins = arrays, origins

    def mapping(self, node: Any, hints: Mapping[str, Any], where: str) -> dict[str, Any]:
        if not isinstance(node, Mapping):
            raise IndexFileError(f"{where}: malformed state (expected a mapping)")
        return {name: self.value(v, hints.get(name, Any), f"{where}.{name}")
                for name, v in node.items()}

    def value(self, node: Any, hint: Any, where: str) -> Any:
        if node is None or isinstance(node, (bool, int, str)):
            return node
        if isinstance(node, list):
            args = typing.get_args(hint)
            return [self.value(x, item_hint(args, i), f"{where}[{i}]")
                    for i, x in enumerate(node)]
        if not isinstance(node, dict):
            raise IndexFileError(f"{where}: malformed state node {type(node).__name__}")
        try:
            return self._marked(node, hint, where)
        except IndexFileError:
            raise
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise IndexFileError(f"{where}: malformed state node ({type(exc).__name__}: "
                                 f"{' '.join(str(exc).split())[:160]})") from None

    def _marked(self, node: dict[str, Any], hint: Any, where: str) -> Any:
        markers = [k for k in node if k.startswith("$")]
        if len(markers) != 1:
            raise IndexFileError(f"{where}: malformed state node with keys {sorted(node)[:4]}")
        kind = markers[0]
        body = node[kind]
        if kind == "$float":
            return float.fromhex(_str(body))
        # NumPy arrays on the host: those a GPU state held there, and those annotated as
        # np.ndarray (a key map's dictionary), wherever the index is loaded
        host = node.get("host") is True or np.ndarray in classes_of(hint)
        if kind == "$array":
            return self._pick(_str(body), host)
        if kind == "$view":
            return self._view(self._pick(_str(body), host), node, _str(body), where)
        if kind == "$scalar":
            return _scalar(body, node.get("v"), where)
        if kind == "$dtype":
            dt = plain_dtype(_str(body)) or _key_dtype(_str(body))
            if dt is None:
                raise IndexFileError(f"{where}: dtype {str(body)[:40]!r} is refused")
            return dt
        if kind == "$record":
            return self._record(node, hint, where)
        args = typing.get_args(hint)
        if kind == "$dict":
            kh, vh = (args if len(args) == 2 else (Any, Any))
            return {self.value(k, kh, f"{where}.key"): self.value(v, vh, f"{where}[{k!r}]")
                    for k, v in _pairs(body)}
        makers = {"$tuple": tuple, "$set": set, "$frozenset": frozenset}
        if kind in makers and isinstance(body, list):
            return makers[kind](self.value(x, item_hint(args, i), f"{where}[{i}]")
                                for i, x in enumerate(body))
        raise IndexFileError(f"{where}: malformed state node {kind!r}")

    def _pick(self, name: str, host: bool) -> Any:
        if name not in self.arrays:
            raise IndexFileError(f"array {name[:40]!r} is not in the file")
        arr = self.arrays[name]
        got = to_numpy(arr) if host else arr
        self.origins.setdefault(id(got), f"arrays/{name}.npy")
        return got

    def _view(self, root: Any, node: Mapping[str, Any], name: str, where: str) -> Any:
        dt = plain_dtype(_str(node["dtype"]))
        shape, strides = _ints(node["shape"]), _ints(node["strides"])
        offset = node["offset"]
        if dt is None or not isinstance(offset, int) or offset < 0 or len(shape) != len(strides):
            raise IndexFileError(f"{where}: a malformed view of array {name}")
        count = 1
        for s in shape:
            count *= s
        flat = root.reshape(-1, order="A").view(np.uint8)  # the root's bytes in memory order
        if count * dt.itemsize > int(flat.shape[0]) or any(s < 0 for s in shape):
            raise IndexFileError(f"{where}: a view of {count} x {dt.itemsize} bytes over array "
                                 f"{name} of {int(flat.shape[0])} bytes")
        if count:
            lo = offset + sum(min(0, (s - 1) * st) for s, st in zip(shape, strides, strict=True))
            hi = offset + sum(max(0, (s - 1) * st) for s, st in zip(shape, strides, strict=True))
            if lo < 0 or hi + dt.itemsize > int(flat.shape[0]):
                raise IndexFileError(f"{where}: a view reaches outside its array ({offset} + "
                                     f"{list(shape)})")
        if isinstance(root, np.ndarray):
            out: Any = np.ndarray(shape, dt, buffer=flat, offset=offset if count else 0,
                                  strides=strides)
        else:
            cp = import_cupy("a saved index on the GPU")
            out = cp.ndarray(shape, dt, memptr=flat.data + (offset if count else 0),
                             strides=strides)
        self.origins.setdefault(id(out), f"arrays/{name}.npy (a view at byte {offset})")
        return out

    def _record(self, node: Mapping[str, Any], hint: Any, where: str) -> Any:
        key = _str(node["$record"])
        match = [c for c in classes_of(hint) if class_key(c) == key and is_record(c)]
        if not match:
            raise IndexFileError(f"{where}: the file holds a {key[:80]!r}, which the index's "
                                 "code does not declare there (a file of another version of "
                                 "the plugin?)")
        cls = match[0]
        if set(node) != {"$record", "fields"}:
            raise IndexFileError(f"{where}: malformed record node")
        values = self.mapping(node["fields"], class_hints(cls), where)
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) \
            else list(cls._fields)  # type: ignore[attr-defined]
        if sorted(values) != sorted(names):
            raise IndexFileError(f"{where}: the file's {cls.__qualname__} has the fields "
                                 f"{sorted(values)[:20]}, the code's {sorted(names)}")
        if not dataclasses.is_dataclass(cls):
            return cls(*(values[n] for n in names))
        obj = cls.__new__(cls)  # fields as saved; caches the class computes are made again
        for name in names:
            object.__setattr__(obj, name, values[name])
        return obj


def _str(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise TypeError(f"expected a short string, got {type(value).__name__}")
    return value


def _ints(value: Any) -> tuple[int, ...]:
    if (not isinstance(value, list) or len(value) > _MAX_DIMS
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise TypeError("expected a list of integers")
    return tuple(value)


def _pairs(body: Any) -> list[tuple[Any, Any]]:
    if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
        raise TypeError("expected a list of [key, value] pairs")
    return [(p[0], p[1]) for p in body]


def _scalar(dtype: Any, v: Any, where: str) -> Any:
    dt = plain_dtype(_str(dtype))
    if dt is None or dt.kind not in "biuf":
        raise IndexFileError(f"{where}: a scalar of dtype {str(dtype)[:40]!r} is refused")
    if dt.kind == "f":
        return dt.type(float.fromhex(_str(v)) if isinstance(v, str) else float(v))
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer for a {dt} scalar")
    info = np.iinfo(dt) if dt.kind in "iu" else None
    if info is not None and not info.min <= v <= info.max:
        raise ValueError(f"{v} does not fit {dt}")
    return dt.type(v)


def _key_dtype(text: str) -> np.dtype | None:
    """A dtype of keys that is not an array dtype of a saved index (datetime64, timedelta64:
    a key map's ``source``)."""
    try:
        dt = np.dtype(text)
    except (TypeError, ValueError, SyntaxError):
        return None
    return dt if dt.kind in "mM" and dt.fields is None and not dt.shape else None
