"""The save walk: a build state's values as JSON nodes and a table of arrays
(:class:`Flattener`), and the class annotations both directions of the walk follow
(:func:`class_hints`). The load walk is :mod:`indexzoo.unflatten`; the file format is
:mod:`indexzoo.persist`.

A state is flattened by walking its attributes: arrays (NumPy or CuPy) become members (moved
to the host; an array that is a view of another is saved as a view of it), ``None``/bool/int/
float/str and NumPy scalars and dtypes become JSON, tuples, lists, sets and dicts are walked,
and dataclasses and named tuples are walked field by field. Anything else (a module, a
function, a compiled kernel, a lock) stops the save with an error that points to the plugin
hooks ``_save_state``/``_load_state``, through which a plugin saves such parts in another form
and rebuilds them on load.
"""

from __future__ import annotations

import builtins
import dataclasses
import sys
import typing
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from .devices import device_of, to_numpy
from .errors import IndexFileError
from .npyheader import plain_dtype

__all__ = ["Flattener", "class_hints", "class_key", "classes_of", "is_record", "item_hint",
           "record_fields"]


def class_hints(cls: type) -> dict[str, Any]:
    """The annotations of ``cls`` and its bases, evaluated in their modules. A name that
    cannot be found (one imported only for type checkers) stands for a class of its own that
    nothing saved is an instance of, so ``Gas | OptixGas`` still declares ``Gas``."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # a name that only exists for type checkers: evaluate leniently
        pass
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        module = sys.modules.get(klass.__module__)
        space = _Names(vars(klass), vars(module) if module else {})
        for name, ann in vars(klass).get("__annotations__", {}).items():
            if isinstance(ann, str):
                try:  # the annotation as written in the class's own source
                    ann = eval(ann, {"__builtins__": {}}, space)
                except Exception:
                    continue
            out[name] = ann
    return out


class _Names(dict[str, Any]):
    """Names for evaluating an annotation: the class's, its module's, the builtins', and an
    empty stand-in class for any other name."""

    def __init__(self, own: Mapping[str, Any], module: Mapping[str, Any]) -> None:
        super().__init__()
        self.own, self.module = own, module

    def __missing__(self, name: str) -> Any:
        for space in (self.own, self.module, vars(builtins)):
            if name in space:
                return space[name]
        return type(name, (), {"__module__": "<unresolved>"})


def classes_of(hint: Any) -> list[type]:
    """Every class a type hint names (``A | None``, ``tuple[B, ...]``, ``dict[str, C]``)."""
    out: list[type] = []
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and origin is None:
        out.append(hint)
    elif isinstance(origin, type) and origin not in (tuple, list, dict, set, frozenset):
        out.append(origin)
    for arg in typing.get_args(hint):
        out.extend(classes_of(arg))
    return out


def is_record(cls: type) -> bool:
    """A dataclass or a named tuple: walked field by field."""
    return dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))


def record_fields(obj: Any) -> list[str]:
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    return list(type(obj)._fields)


def _is_array(obj: Any) -> bool:
    return isinstance(obj, np.ndarray) or type(obj).__module__.startswith("cupy")


def _address(arr: Any) -> int:
    if isinstance(arr, np.ndarray):
        return int(arr.__array_interface__["data"][0])
    return int(arr.data.ptr)


def _extent(arr: Any) -> tuple[int, int]:
    """The first and one-past-the-last byte an array reads."""
    lo = hi = _address(arr)
    for size, stride in zip(arr.shape, arr.strides, strict=True):
        span = (size - 1) * stride
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return lo, hi + arr.itemsize


def _contiguous(arr: Any) -> bool:
    return bool(arr.flags.c_contiguous or arr.flags.f_contiguous)


_SCALARS = (bool, int, float, str, type(None))


class Flattener:
    """Turns the values of a state into JSON nodes and a table of arrays.

    ``device``: the state's device; a NumPy array in a state on ``cuda`` is kept on the host
    when loaded (a plugin's deliberate host copy), every other array goes to the device the
    index is loaded onto. Arrays that share memory are saved once: the largest contiguous one,
    and the others as views of it (offset, shape and strides), so a loaded state shares memory
    the way the saved one did.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self._seen: dict[int, Any] = {}  # id -> array, in the order met
        self._nodes: list[tuple[dict[str, Any], Any]] = []  # array nodes to fill in

    def flatten(self, values: Mapping[str, Any], hints: Mapping[str, Any],
                where: str) -> dict[str, Any]:
        """A JSON node of attribute -> value; ``hints`` are the annotations of their owner."""
        return {name: self._node(v, hints.get(name, Any), f"{where}.{name}")
                for name, v in values.items()}

    def _node(self, v: Any, hint: Any, where: str) -> Any:
        if isinstance(v, _SCALARS) and type(v) in _SCALARS:
            return v if not isinstance(v, float) else {"$float": float.hex(v)}
        if _is_array(v):
            node: dict[str, Any] = {}
            self._seen.setdefault(id(v), v)
            self._nodes.append((node, v))
            return node
        if isinstance(v, np.generic):
            if v.dtype.kind not in "biuf":
                raise _unsaveable(where, f"a NumPy scalar of dtype {v.dtype}")
            item = v.item()
            return {"$scalar": v.dtype.str,
                    "v": float.hex(item) if isinstance(item, float) else item}
        if isinstance(v, np.dtype):
            if v.hasobject or v.fields is not None:
                raise _unsaveable(where, f"the dtype {v}")
            return {"$dtype": v.str}
        cls = type(v)
        if is_record(cls):
            owners = classes_of(hint)
            if cls not in owners:
                declared = ", ".join(c.__qualname__ for c in owners) or "no class"
                raise _unsaveable(where, f"a {cls.__qualname__}, where its owner's annotation "
                                         f"declares {declared}")
            hints = class_hints(cls)
            fields = {n: getattr(v, n) for n in record_fields(v)}
            return {"$record": class_key(cls), "fields": self.flatten(fields, hints, where)}
        args = typing.get_args(hint)
        if cls in (tuple, list, set, frozenset):
            inner = [self._node(x, item_hint(args, i), f"{where}[{i}]")
                     for i, x in enumerate(v)]
            return inner if cls is list else {f"${cls.__name__}": inner}
        if cls is dict:
            kh, vh = (args if len(args) == 2 else (Any, Any))
            return {"$dict": [[self._node(k, kh, f"{where}.key"),
                               self._node(x, vh, f"{where}[{k!r}]")] for k, x in v.items()]}
        what = ("a module" if isinstance(v, ModuleType) else
                "a function" if callable(v) else f"an object of type {cls.__qualname__}")
        raise _unsaveable(where, what)

    def arrays(self) -> dict[str, np.ndarray]:
        """Fill the array nodes met so far and return the arrays to save (id -> host array)."""
        roots: list[tuple[str, Any, tuple[int, int]]] = []
        out: dict[str, np.ndarray] = {}
        placed: dict[int, dict[str, Any]] = {}
        # the largest contiguous arrays first: each one that lies inside none before is a root
        order = sorted(self._seen.values(), key=lambda a: -int(a.nbytes))
        for arr in order:
            if arr.size == 0 or not _contiguous(arr):
                continue
            lo, hi = _extent(arr)
            if any(rlo <= lo and hi <= rhi and type(r) is type(arr) for _, r, (rlo, rhi) in roots):
                continue
            name = f"a{len(roots)}"
            roots.append((name, arr, (lo, hi)))
            out[name] = to_numpy(arr)
            placed[id(arr)] = {"$array": name}
        for arr in order:
            if id(arr) in placed:
                continue
            node = None
            if arr.size:
                lo, hi = _extent(arr)
                for name, r, (rlo, rhi) in roots:
                    if rlo <= lo and hi <= rhi and type(r) is type(arr):
                        node = {"$view": name, "offset": _address(arr) - rlo,
                                "shape": list(arr.shape), "strides": list(arr.strides),
                                "dtype": arr.dtype.str}
                        break
            if node is None:  # empty, or not contiguous and inside no other array: a copy
                name = f"a{len(out)}"
                out[name] = np.ascontiguousarray(to_numpy(arr))
                node = {"$array": name}
            placed[id(arr)] = node
        for node, arr in self._nodes:
            node.update(placed[id(arr)])
            if self.device != "cpu" and device_of(arr) == "cpu":
                node["host"] = True
        for name, host in out.items():
            if plain_dtype(host.dtype.str) is None:
                raise IndexFileError(f"array {name} has dtype {host.dtype}, which is not saved "
                                     "(plain numeric and string dtypes only)")
        return out


def item_hint(args: tuple[Any, ...], i: int) -> Any:
    """The hint of item ``i`` of a sequence whose hint has the arguments ``args``
    (``tuple[A, B]``, ``tuple[A, ...]``, ``list[A]``; ``Any`` where none says): both walks."""
    if not args:
        return Any
    if len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return args[i] if i < len(args) else Any


def class_key(cls: type) -> str:
    """How a saved record names its class (``module.qualname``): both walks."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _unsaveable(where: str, what: str) -> IndexFileError:
    return IndexFileError(
        f"cannot save {where}: it holds {what}, which the generic format does not store; the "
        "index's plugin implements _save_state(st) and _load_state(st, saved) to save it in "
        "another form and rebuild it on load (see docs/persistence.md)")
