"""Saved indexes: the file format of ``index.save(path)`` / ``indexzoo.load(path)``.

The file is an uncompressed zip archive (NumPy's ``.npz`` layout): the member
``indexzoo.json`` first (the metadata), then one ``arrays/<id>.npy`` member per array, written
without pickle. ``np.load(path, allow_pickle=False)`` can read every member, and nothing in the
file is ever executed: arrays are read as raw bytes of a plain numeric dtype, the metadata as
JSON, and the classes of the objects inside a state are found only among the classes the
index's own code declares (its state's annotations), never by a name or a path read from the
file. See ``docs/persistence.md``.

A file is untrusted input. Reading (:func:`read`) opens regular files only and checks the
container before it allocates anything it declares (:mod:`indexzoo.archive`), reads the
metadata within a fixed size, depth and value count (:mod:`indexzoo.metadata`), checks each
array's header against the metadata and its size against the member's bytes
(:mod:`indexzoo.npyheader`), and its bytes against the archive's CRC-32. Arrays are read
straight from their offset in the file into one buffer each (the speed of ``np.fromfile``),
not through ``zipfile``'s chunked reader. The state those arrays make up is then checked
against the schema its plugin declares (:class:`StateSchema`, :mod:`indexzoo.schema`) before
any kernel reads it (``GpuIndex.from_saved``).

The walks between a build state and the JSON nodes and arrays of the file (which pickling uses
too) are :mod:`indexzoo.flatten` (save) and :mod:`indexzoo.unflatten` (load).

The same bytes travel without a path: :func:`write` takes a binary file object as well
(anything with ``write``), :func:`to_bytes` returns them, and :func:`read` takes a binary file
object (anything with ``read``), :func:`read_bytes` the bytes; the container, metadata, array
and state checks are the same for every way in.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .archive import META_MEMBER, Archive, Member, Window, open_archive, open_stream, seekable_window
from .config import as_path
from .devices import to_device
from .display import shown
from .errors import ConfigError, IndexFileError
from .files import remove_stale_temporaries, replace_file
from .flatten import Flattener, class_hints
from .metadata import (
    FORMAT,
    FORMAT_VERSION,
    MAX_META_BYTES,
    check_top_level,
    indexzoo_version,
    parse_json,
)
from .npyheader import MAX_HEADER, NpyHeader, parse_header
from .schema import Array, Check, LoadContext, Nested, Scope, Spec, StateSchema, Value, view_at
from .sinks import Sink, sink_for
from .unflatten import unflatten

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_MEMBER",
    "Array",
    "BinaryReader",
    "BinaryWriter",
    "Check",
    "Flattener",
    "LoadContext",
    "Nested",
    "SavedIndex",
    "Scope",
    "Spec",
    "StateSchema",
    "Value",
    "class_hints",
    "indexzoo_version",
    "read",
    "read_bytes",
    "to_bytes",
    "to_target",
    "unflatten",
    "view_at",
    "write",
    "write_stream",
]

_ARRAY_DIR = "arrays/"
_CHUNK = 1 << 22  # bytes read at once (the previous chunk is checksummed meanwhile)
#: Bytes a save into a file object that cannot seek keeps in memory before it spools to a
#: temporary file (the archive is written whole, then copied to the object).
_SPOOL = 1 << 26
#: What messages call bytes given to :func:`read_bytes`.
_BYTES_SOURCE = "the given bytes"


class BinaryReader(Protocol):
    """A binary file object to load from: ``read`` (and, for reading in place, ``seek``,
    ``tell`` and ``seekable``; ``readinto`` where it has one)."""

    def read(self, size: int = ..., /) -> bytes: ...


class BinaryWriter(Protocol):
    """A binary file object to save into: ``write`` (and, for writing in place, ``seek``,
    ``tell`` and ``seekable``)."""

    def write(self, data: bytes, /) -> Any: ...


@dataclass
class SavedIndex:
    """An index in saved form: JSON-able ``meta`` and host ``arrays`` (id -> NumPy array).

    ``meta`` holds the format and its version, the index name and params, the device it was
    saved from, the key maps, and the flattened state (``meta["state"]``), whose array nodes
    name members of ``arrays``. ``trusted``: made in memory by indexzoo (a pickle), not read
    from a file; only a trusted saved index of a plugin without a :class:`StateSchema` is
    loaded (docs/plugin-authors.md).
    """

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = "this index"  # the file it came from, for messages
    trusted: bool = False

    @property
    def index(self) -> str:
        return str(self.meta["index"])

    def problem(self, text: str) -> IndexFileError:
        """An IndexFileError about this saved index."""
        return IndexFileError(f"{self.source}: {text}")


# ---------------------------------------------------------------------- writing
def write(path: str | os.PathLike[str] | BinaryWriter, saved: SavedIndex) -> Path | None:
    """Write ``saved`` to ``path`` through a temporary file in the same folder, flushed to
    disk and renamed over ``path``: a reader sees the old file or the whole new one. The
    temporaries of saves into that folder that were killed are removed first
    (:func:`indexzoo.files.remove_stale_temporaries`). Returns the path.

    ``path`` may be a binary file object instead (anything with ``write``, not a text one):
    the same bytes are written to it from its current position (:func:`write_stream`), and
    None is returned."""
    if not isinstance(path, (str, os.PathLike)) and callable(getattr(path, "write", None)):
        write_stream(path, saved)
        return None
    dest = _path_of(path, "index.save", "write")
    remove_stale_temporaries(dest.parent)
    text = _meta_text(saved)
    return replace_file(dest, lambda raw: _write_zip(raw, text, saved))


def write_stream(stream: BinaryWriter, saved: SavedIndex) -> None:
    """Write the bytes of ``saved`` (what a save to a path writes) to a binary file object,
    from its current position, and flush it. An object that can seek is written in place;
    any other (a pipe, a socket, a file opened for appending) gets the archive written whole
    to a spooled temporary first (in memory up to 64 MiB), then copied to it: the zip
    container has its members' sizes and checksums written back into their headers, which
    needs a seek. Nothing is written when the metadata cannot be saved."""
    _check_stream(stream, "index.save", "write")
    text = _meta_text(saved)
    placed = None if _appends(stream) else seekable_window(stream, "index.save")
    if placed is not None:
        _write_zip(placed[0], text, saved)
    else:
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as spool:
            _write_zip(spool, text, saved)
            spool.seek(0)
            shutil.copyfileobj(spool, Window(stream, 0, "index.save"), _CHUNK)
    flush = getattr(stream, "flush", None)
    if flush is not None:
        flush()


def to_bytes(saved: SavedIndex) -> bytes:
    """The bytes of ``saved``: what a save to a path writes."""
    buffer = io.BytesIO()
    _write_zip(buffer, _meta_text(saved), saved)
    return buffer.getvalue()


def _is_path(obj: Any) -> bool:
    return isinstance(obj, (str, os.PathLike))


def _path_of(obj: Any, what: str, method: str) -> Path:
    """``obj`` as a path (:func:`indexzoo.config.as_path`), with a message for anything else
    that names the file objects taken too (bytes: a path to decode, or a saved index's
    bytes)."""
    if _is_path(obj):
        return as_path(obj, what)
    hint = ""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        hint = ("; a path given as bytes: decode it first (os.fsdecode); the bytes of a saved "
                "index: indexzoo.from_bytes(data)" if method == "read" else
                "; a path given as bytes: decode it first (os.fsdecode)")
    raise ConfigError(f"{what}: expected a path (str or os.PathLike) or a binary file object "
                      f"(with {method}), got {type(obj).__name__} {shown(obj)}{hint}")


def _check_stream(stream: Any, what: str, method: str) -> None:
    """ConfigError for a text file object, or one not open for ``method``."""
    if isinstance(stream, io.TextIOBase):
        raise ConfigError(f"{what}: expected a binary file object, got a text one "
                          f"({type(stream).__name__}); open it in binary mode "
                          f"('{'rb' if method == 'read' else 'wb'}')")
    able = getattr(stream, "readable" if method == "read" else "writable", None)
    try:
        usable = able() if callable(able) else True
    except (OSError, ValueError) as exc:  # closed
        raise ConfigError(f"{what}: the file object cannot be used ({exc})") from None
    if not usable:
        raise ConfigError(f"{what}: the file object is not open for "
                          f"{'reading' if method == 'read' else 'writing'}")


def _appends(stream: Any) -> bool:
    """Whether writes to ``stream`` go to its end wherever it is (opened for appending)."""
    if "a" in str(getattr(stream, "mode", "")):
        return True
    try:
        import fcntl

        return bool(fcntl.fcntl(stream.fileno(), fcntl.F_GETFL) & os.O_APPEND)
    except (ImportError, AttributeError, OSError, ValueError, TypeError, io.UnsupportedOperation):
        return False


def _meta_text(saved: SavedIndex) -> bytes:
    meta = dict(saved.meta)
    meta["arrays"] = {name: {"dtype": a.dtype.str, "shape": list(a.shape)}
                      for name, a in saved.arrays.items()}
    text = json.dumps(meta, separators=(",", ":"), allow_nan=False).encode()
    if len(text) > MAX_META_BYTES:
        raise IndexFileError(f"cannot save: the index's metadata takes {len(text)} bytes, more "
                             f"than the {MAX_META_BYTES} a reader accepts")
    return text


def _write_zip(raw: Any, text: bytes, saved: SavedIndex) -> None:
    """The archive of ``saved`` written to ``raw``, a seekable binary file object."""
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(META_MEMBER, text)
        for name, arr in saved.arrays.items():
            with zf.open(f"{_ARRAY_DIR}{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


# ---------------------------------------------------------------------- reading
def read(path: str | os.PathLike[str] | BinaryReader,
         device: str | Callable[[SavedIndex], str] = "cpu", *,
         source: str | None = None) -> SavedIndex:
    """Read and check a saved index (see the module docstring).

    ``device`` is where the arrays are read to: ``"cuda"`` reads them straight into CuPy
    arrays (through pinned staging buffers, the copy overlapping the read), anything else into
    NumPy arrays; or a function given the metadata (``SavedIndex`` with no arrays yet) that
    returns the device, for a caller that decides it from what the file holds.

    Raises :class:`~indexzoo.errors.IndexFileError` for a file that is not a saved index (a
    FIFO, a device or a folder among them), is truncated or corrupted, or has a newer format
    version; ConfigError for anything but a ``str``, an ``os.PathLike`` or a binary file
    object (an int would be read as an open file descriptor). The temporaries of saves into
    the file's folder that were killed are removed first.

    ``path`` may be a binary file object (anything with ``read``, not a text one): the saved
    index is read from its current position to its end, in place where it can seek, else
    read whole first, and checked the same way; ``source`` names it in messages (default: its
    ``name`` where that is a string, as an open file's is, else "the given file object")."""
    if not _is_path(path) and callable(getattr(path, "read", None)):
        _check_stream(path, "indexzoo.load", "read")
        name = getattr(path, "name", None)
        src = source or (name if isinstance(name, str) else "the given file object")
        return _read_archive(open_stream(path, src), device)
    where = _path_of(path, "indexzoo.load", "read")
    remove_stale_temporaries(where.parent)
    return _read_archive(open_archive(where, source or str(where)), device)


def read_bytes(data: bytes | bytearray | memoryview,
               device: str | Callable[[SavedIndex], str] = "cpu") -> SavedIndex:
    """:func:`read` of the bytes of a saved index (what :func:`to_bytes` returns or a saved
    file holds); ConfigError for anything but bytes, a bytearray or a memoryview."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        hint = "; for a path or an open file use indexzoo.load" if (
            _is_path(data) or hasattr(data, "read")) else ""
        raise ConfigError(f"indexzoo.from_bytes: expected bytes (bytes, bytearray or "
                          f"memoryview), got {type(data).__name__} {shown(data)}{hint}")
    return read(io.BytesIO(data), device, source=_BYTES_SOURCE)


def _read_archive(opened: contextlib.AbstractContextManager[Archive],
                  device: str | Callable[[SavedIndex], str]) -> SavedIndex:
    with opened as archive:
        saved = SavedIndex(_read_meta(archive), source=archive.source)
        table = _array_table(archive, saved)
        target = device(saved) if callable(device) else device
        sink = sink_for(target, _CHUNK)
        try:
            saved.arrays = dict(_read_arrays(archive, table, saved, sink))
        finally:
            sink.close()  # no copy to the device is left running, error or not
    return saved


def _read_meta(archive: Archive) -> dict[str, Any]:
    src = archive.source
    meta = parse_json(archive.read_small(META_MEMBER, MAX_META_BYTES), f"{src}: its metadata")
    return check_top_level(meta, src)


def _array_table(archive: Archive, saved: SavedIndex) -> dict[str, tuple[Member, str, list[int]]]:
    """The metadata's array table matched with the archive's members: name -> (member, dtype,
    shape); every array has its member and every member but the metadata is an array."""
    table = saved.meta.get("arrays")
    if not isinstance(table, dict):
        raise saved.problem("its metadata has no array table")
    out: dict[str, tuple[Member, str, list[int]]] = {}
    for name, spec in table.items():
        member = archive.members.get(f"{_ARRAY_DIR}{name}.npy")
        if member is None:
            raise saved.problem(f"array {name[:40]!r} is missing")
        if (not isinstance(spec, dict) or set(spec) != {"dtype", "shape"}
                or not isinstance(spec["dtype"], str) or not isinstance(spec["shape"], list)):
            raise saved.problem(f"array {name}: malformed entry in the array table")
        out[name] = (member, spec["dtype"], spec["shape"])
    if len(out) + 1 != len(archive.members):
        extra = sorted(set(archive.members) - {META_MEMBER}
                       - {f"{_ARRAY_DIR}{n}.npy" for n in out})
        raise saved.problem(f"member {extra[0] if extra else '?'} is not in its array table")
    return out


def _read_arrays(archive: Archive, table: Mapping[str, tuple[Member, str, list[int]]],
                 saved: SavedIndex, sink: Sink) -> Iterator[tuple[str, Any]]:
    with ThreadPoolExecutor(1, thread_name_prefix="indexzoo-crc") as pool:
        for name, (member, dtype, shape) in table.items():
            head = _header(archive, member, saved)
            if head.dtype.str != dtype or list(head.shape) != shape:
                raise saved.problem(f"array {name} is {head.dtype.str} {list(head.shape)}, the "
                                    f"metadata says {dtype[:20]} {str(shape)[:60]}")
            yield name, _read_member(archive, member, head, saved, pool, sink)


def _header(archive: Archive, member: Member, saved: SavedIndex) -> NpyHeader:
    """The member's ``.npy`` header, whose array must fill the member exactly (so the array
    the reader allocates is never larger than the bytes the file holds)."""
    archive.raw.seek(member.start)
    got = parse_header(archive.raw.read(min(member.size, MAX_HEADER + 12)))
    if isinstance(got, str):
        raise saved.problem(f"{member.name}: damaged array header ({got})")
    if got.length + got.nbytes != member.size:
        raise saved.problem(f"{member.name}: {member.size} bytes, its header describes "
                            f"{got.length + got.nbytes}")
    return got


def _read_member(archive: Archive, member: Member, head: NpyHeader, saved: SavedIndex,
                 pool: ThreadPoolExecutor, sink: Sink) -> Any:
    """One ``.npy`` member read straight from its offset into ``sink``, its CRC-32 checked."""
    raw, what = archive.raw, member.name
    raw.seek(member.start)
    crc = zlib.crc32(raw.read(head.length))
    nbytes = head.nbytes
    sink.start(head.count, head.dtype)
    # read chunk i + 1 while chunk i is checksummed on a thread (zlib releases the GIL)
    pending: Future[int] | None = None
    done = 0
    while done < nbytes:
        view = sink.buffer(done, min(_CHUNK, nbytes - done))
        got = raw.readinto(view)  # type: ignore[union-attr]
        if not got:
            raise saved.problem(f"{what}: the file ends inside it (truncated)")
        if pending is not None:
            crc = pending.result()
        pending = pool.submit(zlib.crc32, view[:got], crc)
        sink.commit(done, got)
        done += got
    if pending is not None:
        crc = pending.result()
    if crc != member.crc:
        raise saved.problem(f"{what}: checksum mismatch (the file is corrupted); save the "
                            "index again")
    return sink.result().reshape(head.shape, order="F" if head.fortran else "C")


def to_target(arrays: Mapping[str, np.ndarray], device: str) -> dict[str, Any]:
    """The saved arrays on ``device`` (nodes marked ``host`` take them back to the host)."""
    return {name: to_device(a, device) for name, a in arrays.items()}
