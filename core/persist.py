"""Saved indexes: the file format of ``index.save(path)`` / ``indexzoo.load(path)``, and the
flattening of a build state into JSON metadata and arrays that pickling uses too.

The file is an uncompressed zip archive (NumPy's ``.npz`` layout): the member
``indexzoo.json`` first (the metadata), then one ``arrays/<id>.npy`` member per array, written
without pickle. ``np.load(path, allow_pickle=False)`` can read every member, and nothing in the
file is ever executed: arrays are read as raw bytes of a plain numeric dtype, the metadata as
JSON, and the classes of the objects inside a state are found only among the classes the
index's own code declares (its state's annotations), never by a name or a path read from the
file. See ``docs/persistence.md``.

Reading checks, before any index exists: the archive is complete (a truncated file has no
central directory), the metadata names this format and a version this code reads, every member
is stored uncompressed and its bytes match the archive's CRC-32, and each array's dtype and
shape match the metadata. Arrays are read straight from their offset in the file into one
buffer each (the speed of ``np.fromfile``), not through ``zipfile``'s chunked reader.

A state is flattened by walking its attributes (:class:`Flattener`): arrays (NumPy or CuPy)
become members (moved to the host; an array that is a view of another is saved as a view of
it), ``None``/bool/int/float/str and NumPy scalars and dtypes become JSON, tuples, lists, sets
and dicts are walked, and dataclasses and named tuples are walked field by field. Anything else
(a module, a function, a compiled kernel, a lock) stops the save with an error that points to
the plugin hooks ``_save_state``/``_load_state``, through which a plugin saves such parts in
another form and rebuilds them on load.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib.metadata
import io
import json
import os
import struct
import sys
import typing
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import numpy as np

from .config import as_path
from .devices import device_of, import_cupy, to_device, to_numpy
from .errors import IndexFileError
from .files import replace_file
from .sinks import Sink, sink_for

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_MEMBER",
    "Flattener",
    "SavedIndex",
    "class_hints",
    "read",
    "to_target",
    "unflatten",
    "write",
]

#: The format's name, as the metadata's ``format``.
FORMAT = "indexzoo-index"
#: The newest format version this code writes and reads; a file of a newer one is refused.
FORMAT_VERSION = 1
#: The metadata member, the archive's first.
META_MEMBER = "indexzoo.json"
_ARRAY_DIR = "arrays/"
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # a zip local file header (30 bytes)
_LOCAL_MAGIC = b"PK\x03\x04"
_CHUNK = 1 << 22  # bytes read at once (the previous chunk is checksummed meanwhile)


def indexzoo_version() -> str:
    """The installed indexzoo's version (recorded in every file, for the reader's messages)."""
    try:
        return importlib.metadata.version("indexzoo")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass
class SavedIndex:
    """An index in saved form: JSON-able ``meta`` and host ``arrays`` (id -> NumPy array).

    ``meta`` holds the format and its version, the index name and params, the device it was
    saved from, the key maps, and the flattened state (``meta["state"]``), whose array nodes
    name members of ``arrays``.
    """

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = "this index"  # the file it came from, for messages

    @property
    def index(self) -> str:
        return str(self.meta["index"])

    def problem(self, text: str) -> IndexFileError:
        """An IndexFileError about this saved index."""
        return IndexFileError(f"{self.source}: {text}")


# ---------------------------------------------------------------------- flattening
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


def _classes(hint: Any) -> list[type]:
    """Every class a type hint names (``A | None``, ``tuple[B, ...]``, ``dict[str, C]``)."""
    out: list[type] = []
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and origin is None:
        out.append(hint)
    elif isinstance(origin, type) and origin not in (tuple, list, dict, set, frozenset):
        out.append(origin)
    for arg in typing.get_args(hint):
        out.extend(_classes(arg))
    return out


def _is_record(cls: type) -> bool:
    """A dataclass or a named tuple: walked field by field."""
    return dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields"))


def _record_fields(obj: Any) -> list[str]:
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
        if _is_record(cls):
            owners = _classes(hint)
            if cls not in owners:
                declared = ", ".join(c.__qualname__ for c in owners) or "no class"
                raise _unsaveable(where, f"a {cls.__qualname__}, where its owner's annotation "
                                         f"declares {declared}")
            hints = class_hints(cls)
            fields = {n: getattr(v, n) for n in _record_fields(v)}
            return {"$record": _class_key(cls), "fields": self.flatten(fields, hints, where)}
        args = typing.get_args(hint)
        if cls in (tuple, list, set, frozenset):
            inner = [self._node(x, _item_hint(hint, args, i), f"{where}[{i}]")
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
            if host.dtype.hasobject or host.dtype.fields is not None:
                raise IndexFileError(f"array {name} has dtype {host.dtype}, which is not saved "
                                     "(plain numeric dtypes only)")
        return out


def _item_hint(hint: Any, args: tuple[Any, ...], i: int) -> Any:
    if not args:
        return Any
    if len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return args[i] if i < len(args) else Any


def _class_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _unsaveable(where: str, what: str) -> IndexFileError:
    return IndexFileError(
        f"cannot save {where}: it holds {what}, which the generic format does not store; the "
        "index's plugin implements _save_state(st) and _load_state(st, saved) to save it in "
        "another form and rebuild it on load (see docs/persistence.md)")


def unflatten(node: Mapping[str, Any], hints: Mapping[str, Any], arrays: Mapping[str, Any],
              where: str) -> dict[str, Any]:
    """The inverse of :meth:`Flattener.flatten`: attribute -> value, with ``arrays`` (id ->
    array on the target device, or on the host for nodes marked ``host``) in place of the
    array nodes. Classes come from ``hints`` alone; a record of any other class is an error."""
    if not isinstance(node, Mapping):
        raise IndexFileError(f"{where}: malformed state (expected a mapping)")
    return {name: _value(v, hints.get(name, Any), arrays, f"{where}.{name}")
            for name, v in node.items()}


def _value(node: Any, hint: Any, arrays: Mapping[str, Any], where: str) -> Any:
    if node is None or isinstance(node, (bool, int, str)):
        return node
    if isinstance(node, list):
        return [_value(x, _item_hint(hint, typing.get_args(hint), i), arrays, f"{where}[{i}]")
                for i, x in enumerate(node)]
    if not isinstance(node, dict):
        raise IndexFileError(f"{where}: malformed state node {type(node).__name__}")
    try:
        if "$float" in node:
            return float.fromhex(node["$float"])
        # NumPy arrays on the host: those a GPU state held there, and those annotated as
        # np.ndarray (a key map's dictionary), wherever the index is loaded
        host = bool(node.get("host")) or np.ndarray in _classes(hint)
        if "$array" in node:
            return _pick(arrays, node["$array"], host)
        if "$view" in node:
            root = _pick(arrays, node["$view"], host)
            return _view(root, node)
        if "$scalar" in node:
            dt = _plain_dtype(node["$scalar"])
            v = node["v"]
            return dt.type(float.fromhex(v) if isinstance(v, str) else v)
        if "$dtype" in node:
            return _plain_dtype(node["$dtype"])
        if "$record" in node:
            return _record(node, hint, arrays, where)
        if "$dict" in node:
            args = typing.get_args(hint)
            kh, vh = (args if len(args) == 2 else (Any, Any))
            return {_value(k, kh, arrays, where): _value(v, vh, arrays, where)
                    for k, v in node["$dict"]}
        for kind, make in (("$tuple", tuple), ("$set", set), ("$frozenset", frozenset)):
            if kind in node:
                args = typing.get_args(hint)
                return make(_value(x, _item_hint(hint, args, i), arrays, f"{where}[{i}]")
                            for i, x in enumerate(node[kind]))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, IndexFileError):
            raise
        raise IndexFileError(f"{where}: malformed state node ({type(exc).__name__}: {exc})"
                             ) from None
    raise IndexFileError(f"{where}: malformed state node with keys {sorted(node)[:4]}")


def _pick(arrays: Mapping[str, Any], name: str, host: bool) -> Any:
    arr = arrays[name]
    return to_numpy(arr) if host else arr


def _view(root: Any, node: Mapping[str, Any]) -> Any:
    dt = _plain_dtype(node["dtype"])
    shape = tuple(int(s) for s in node["shape"])
    strides = tuple(int(s) for s in node["strides"])
    offset = int(node["offset"])
    flat = root.reshape(-1, order="A").view(np.uint8)  # the root's bytes in memory order
    lo = offset + sum(min(0, (s - 1) * st) for s, st in zip(shape, strides, strict=True))
    hi = offset + sum(max(0, (s - 1) * st) for s, st in zip(shape, strides, strict=True))
    if lo < 0 or hi + dt.itemsize > int(flat.shape[0]):
        raise IndexFileError(f"a view reaches outside its array ({offset} + {shape})")
    if isinstance(root, np.ndarray):
        return np.ndarray(shape, dt, buffer=flat, offset=offset, strides=strides)
    cp = import_cupy("a saved index on the GPU")
    return cp.ndarray(shape, dt, memptr=flat.data + offset, strides=strides)


def _record(node: Mapping[str, Any], hint: Any, arrays: Mapping[str, Any], where: str) -> Any:
    key = node["$record"]
    match = [c for c in _classes(hint) if _class_key(c) == key and _is_record(c)]
    if not match:
        raise IndexFileError(f"{where}: the file holds a {key!r}, which the index's code does "
                             "not declare there (a file of another version of the plugin?)")
    cls = match[0]
    values = unflatten(node["fields"], class_hints(cls), arrays, where)
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) \
        else list(cls._fields)  # type: ignore[attr-defined]
    if sorted(values) != sorted(names):
        raise IndexFileError(f"{where}: the file's {cls.__qualname__} has the fields "
                             f"{sorted(values)}, the code's {sorted(names)}")
    if not dataclasses.is_dataclass(cls):
        return cls(*(values[n] for n in names))
    obj = cls.__new__(cls)  # fields as saved; caches the class computes are made again
    for name in names:
        object.__setattr__(obj, name, values[name])
    return obj


def _plain_dtype(text: Any) -> np.dtype:
    try:
        dt = np.dtype(str(text))
    except TypeError:
        raise IndexFileError(f"unknown dtype {text!r}") from None
    if dt.hasobject or dt.fields is not None:
        raise IndexFileError(f"dtype {text!r} is refused (plain numeric dtypes only)")
    return dt


# ---------------------------------------------------------------------- the file
def write(path: str | os.PathLike[str], saved: SavedIndex) -> Path:
    """Write ``saved`` to ``path`` through a temporary file in the same folder, flushed to
    disk and renamed over ``path``: a reader sees the old file or the whole new one."""
    return replace_file(as_path(path, "index.save"), lambda raw: _write_zip(raw, saved))


def _write_zip(raw: BinaryIO, saved: SavedIndex) -> None:
    meta = dict(saved.meta)
    meta["arrays"] = {name: {"dtype": a.dtype.str, "shape": list(a.shape)}
                      for name, a in saved.arrays.items()}
    text = json.dumps(meta, separators=(",", ":"), allow_nan=False).encode()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(META_MEMBER, text)
        for name, arr in saved.arrays.items():
            with zf.open(f"{_ARRAY_DIR}{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def read(path: str | os.PathLike[str],
         device: str | Callable[[SavedIndex], str] = "cpu") -> SavedIndex:
    """Read and check a saved index (see the module docstring).

    ``device`` is where the arrays are read to: ``"cuda"`` reads them straight into CuPy
    arrays (through pinned staging buffers, the copy overlapping the read), anything else into
    NumPy arrays; or a function given the metadata (``SavedIndex`` with no arrays yet) that
    returns the device, for a caller that decides it from what the file holds.

    Raises :class:`~indexzoo.errors.IndexFileError` for a file that is not a saved index, is
    truncated or corrupted, or has a newer format version; ConfigError for anything but a
    ``str`` or ``os.PathLike`` (an int would be read as an open file descriptor)."""
    path = as_path(path, "indexzoo.load")
    src = str(path)
    with open(path, "rb", buffering=0) as raw:  # arrays are read straight into their buffers
        head = raw.read(4)
        if head != _LOCAL_MAGIC:
            raise IndexFileError(f"{src}: not a saved indexzoo index (it does not start like "
                                 "one: indexzoo writes a zip archive with indexzoo.json first)")
        raw.seek(0)
        try:
            zf = zipfile.ZipFile(raw)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise IndexFileError(f"{src}: the file is truncated or damaged ({exc}); save the "
                                 "index again") from None
        with zf:
            saved = SavedIndex(_read_meta(zf, src), source=src)
            target = device(saved) if callable(device) else device
            sink = sink_for(target, _CHUNK)
            try:
                saved.arrays = dict(_read_arrays(raw, zf, saved, sink))
            finally:
                sink.close()  # no copy to the device is left running, error or not
    return saved


def _read_meta(zf: zipfile.ZipFile, src: str) -> dict[str, Any]:
    names = zf.namelist()
    if not names or names[0] != META_MEMBER:
        raise IndexFileError(f"{src}: not a saved indexzoo index (a zip archive without "
                             f"{META_MEMBER} as its first member)")
    try:
        meta = json.loads(zf.read(META_MEMBER))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise IndexFileError(f"{src}: its metadata is damaged ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise IndexFileError(f"{src}: not a saved indexzoo index (format "
                             f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise IndexFileError(f"{src}: format version {version!r} is not valid")
    if version > FORMAT_VERSION:
        raise IndexFileError(
            f"{src}: written in format version {version} by indexzoo "
            f"{meta.get('indexzoo_version', '?')}; this indexzoo ({indexzoo_version()}) reads "
            f"format versions up to {FORMAT_VERSION}: upgrade indexzoo to load it")
    return meta


def _read_arrays(raw: BinaryIO, zf: zipfile.ZipFile, saved: SavedIndex,
                 sink: Sink) -> Iterator[tuple[str, Any]]:
    table = saved.meta.get("arrays")
    if not isinstance(table, dict):
        raise saved.problem("its metadata has no array table")
    members = {i.filename: i for i in zf.infolist()}
    with ThreadPoolExecutor(1, thread_name_prefix="indexzoo-crc") as pool:
        for name, spec in table.items():
            info = members.get(f"{_ARRAY_DIR}{name}.npy")
            if info is None:
                raise saved.problem(f"array {name} is missing")
            yield name, _checked(_read_member(raw, info, saved, pool, sink), name, spec, saved)


def _checked(arr: Any, name: str, spec: Any, saved: SavedIndex) -> Any:
    if not isinstance(spec, dict):
        raise saved.problem(f"array {name}: malformed entry in the array table")
    if arr.dtype.str != spec.get("dtype") or list(arr.shape) != spec.get("shape"):
        raise saved.problem(f"array {name} is {arr.dtype.str} {list(arr.shape)}, the "
                            f"metadata says {spec.get('dtype')} {spec.get('shape')}")
    return arr


def _read_member(raw: BinaryIO, info: zipfile.ZipInfo, saved: SavedIndex,
                 pool: ThreadPoolExecutor, sink: Sink) -> Any:
    """One ``.npy`` member read straight from its offset into ``sink``, its CRC-32 checked."""
    what = info.filename
    if info.compress_type != zipfile.ZIP_STORED:
        raise saved.problem(f"{what} is compressed; indexzoo writes stored members only")
    raw.seek(info.header_offset)
    local = raw.read(_LOCAL_HEADER.size)
    if len(local) != _LOCAL_HEADER.size or local[:4] != _LOCAL_MAGIC:
        raise saved.problem(f"{what}: damaged member header")
    fields = _LOCAL_HEADER.unpack(local)
    start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
    raw.seek(start)
    head = io.BytesIO(raw.read(min(info.file_size, 1 << 16)))
    try:
        major, minor = np.lib.format.read_magic(head)
        reader = {(1, 0): np.lib.format.read_array_header_1_0,
                  (2, 0): np.lib.format.read_array_header_2_0}.get((major, minor))
        if reader is None:
            raise ValueError(f"npy format version {major}.{minor}")
        shape, fortran, dtype = reader(head, max_header_size=1 << 16)
    except (ValueError, SyntaxError) as exc:
        raise saved.problem(f"{what}: damaged array header ({exc})") from None
    if dtype.hasobject or dtype.fields is not None:
        raise saved.problem(f"{what}: dtype {dtype} is refused (plain numeric dtypes only; "
                            "nothing in a saved index is unpickled)")
    header_len = head.tell()
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    nbytes = count * dtype.itemsize
    if header_len + nbytes != info.file_size:
        raise saved.problem(f"{what}: {info.file_size} bytes, its header describes "
                            f"{header_len + nbytes}")
    raw.seek(start)
    crc = zlib.crc32(raw.read(header_len))
    sink.start(count, dtype)
    # read chunk i + 1 while chunk i is checksummed on a thread (zlib releases the GIL)
    pending: Future[int] | None = None
    done = 0
    while done < nbytes:
        view = sink.buffer(done, min(_CHUNK, nbytes - done))
        got = raw.readinto(view)  # type: ignore[attr-defined]
        if not got:
            raise saved.problem(f"{what}: the file ends inside it (truncated)")
        if pending is not None:
            crc = pending.result()
        pending = pool.submit(zlib.crc32, view[:got], crc)
        sink.commit(done, got)
        done += got
    if pending is not None:
        crc = pending.result()
    if crc != info.CRC:
        raise saved.problem(f"{what}: checksum mismatch (the file is corrupted); save the "
                            "index again")
    return sink.result().reshape(shape, order="F" if fortran else "C")


def to_target(arrays: Mapping[str, np.ndarray], device: str) -> dict[str, Any]:
    """The saved arrays on ``device`` (nodes marked ``host`` take them back to the host)."""
    return {name: to_device(a, device) for name, a in arrays.items()}
