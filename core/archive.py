"""The zip container of a saved index, read without trusting it.

A saved index is a zip archive that indexzoo wrote itself: stored members only, no comment, no
encryption, no data descriptors, the metadata member first at offset 0, the central directory
right before the end record. :func:`open_archive` opens the file and reads that directory
with checks before anything is allocated from what it says:

* only a regular file is opened: the path is opened with ``O_NONBLOCK`` (a FIFO's open then
  returns at once instead of waiting for a writer) and the opened descriptor is checked with
  ``fstat``; a FIFO, a device, a socket or a folder is refused without a byte read;
* the end record must sit at the very end of the file (no comment) and the central directory
  right before it (or before the zip64 end record), at most :data:`MAX_MEMBERS` entries;
* every member is stored (not compressed), unencrypted, has a plain name (``indexzoo.json`` or
  ``arrays/<id>.npy``) met once, and its local header and data lie inside the file, before the
  central directory and apart from every other member's (no overlapping or duplicated
  members, no member past the end).

A member's bytes are then read only within its declared size, which the file's own size
bounds: a file cannot make the reader allocate more than it holds.

:func:`open_stream` reads the same archive from a binary file object the caller opened (the
bytes of ``indexzoo.from_bytes``, an ``io.BytesIO``, an open file), from the object's current
position to its end, with the same checks: a seekable object is read in place through a
:class:`Window` (its current position is offset 0), any other is read to its end first.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import ConfigError, IndexFileError

__all__ = ["MAX_MEMBERS", "META_MEMBER", "Archive", "Member", "Window", "open_archive",
           "open_regular", "open_stream", "seekable_window"]

#: The metadata member, the archive's first.
META_MEMBER = "indexzoo.json"
#: The most members an archive may list (a sharded index of 4096 shards of the widest index
#: holds well under this).
MAX_MEMBERS = 1 << 18
_LOCAL_MAGIC = b"PK\x03\x04"
_LOCAL = struct.Struct("<4sHHHHHIIIHH")  # local file header, 30 bytes
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")  # central directory entry, 46 bytes
_END = struct.Struct("<4sHHHHIIH")  # end of central directory record, 22 bytes
_END64_LOCATOR = struct.Struct("<4sIQI")  # zip64 end of central directory locator, 20 bytes
_END64 = struct.Struct("<4sQHHIIQQQQ")  # zip64 end of central directory record, 56 bytes
_ZIP64_EXTRA = 0x0001
_UTF8_NAMES = 0x0800  # the only general-purpose flag indexzoo's files may carry
_NAME = re.compile(r"indexzoo\.json|arrays/[A-Za-z0-9_]{1,64}\.npy")
_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


@dataclass(frozen=True)
class Member:
    """One member of the archive: where its local header and its data start, its size and
    the CRC-32 the central directory gives for it."""

    name: str
    header: int
    start: int
    size: int
    crc: int


def open_regular(path: Path, source: str) -> BinaryIO:
    """``path`` opened for unbuffered reading if it is a regular file, else IndexFileError
    saying what it is. The open does not block on a FIFO (``O_NONBLOCK``); the type is checked
    on the opened descriptor (``fstat``), so a file swapped in between is seen too."""
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    if not hasattr(os, "O_NONBLOCK"):  # no such flag (Windows): look before opening
        _refuse_special(os.stat(path).st_mode, source)
    fd = os.open(path, flags)
    try:
        _refuse_special(os.fstat(fd).st_mode, source)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads never wait anyway
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _refuse_special(mode: int, source: str) -> None:
    if not stat.S_ISREG(mode):
        what = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise IndexFileError(f"{source}: not a saved indexzoo index: it is {what}, and only "
                             "regular files are read")


class Archive:
    """An open saved index: the file and its checked member table (see the module
    docstring)."""

    def __init__(self, raw: BinaryIO | Window, size: int, source: str) -> None:
        self.raw, self.size, self.source = raw, size, source
        self.members: dict[str, Member] = {}
        self._directory()

    def problem(self, text: str) -> IndexFileError:
        return IndexFileError(f"{self.source}: {text}")

    def _at(self, offset: int, count: int) -> bytes:
        """Exactly ``count`` bytes at ``offset``, or the error of a truncated file."""
        self.raw.seek(offset)
        got = self.raw.read(count)
        if len(got) != count:
            raise self.problem("the file is truncated or damaged (it ends early); save the "
                               "index again")
        return got

    # ------------------------------------------------------------------ directory
    def _directory(self) -> None:
        if self.size < 4 or self._at(0, 4) != _LOCAL_MAGIC:
            raise self.problem("not a saved indexzoo index (it does not start like one: "
                               "indexzoo writes a zip archive with indexzoo.json first)")
        if self.size < _END.size + _LOCAL.size:
            raise self.problem("the file is truncated or damaged (too short); save the index "
                               "again")
        end_at = self.size - _END.size
        sig, disk, cd_disk, here, total, cd_size, cd_offset, comment = _END.unpack(
            self._at(end_at, _END.size))
        if sig != b"PK\x05\x06" or comment != 0:
            raise self.problem("the file is truncated or damaged (no zip end record at its "
                               "end); save the index again")
        if disk or cd_disk or here != total:
            raise self.problem("a zip archive split over several disks is not a saved index")
        cd_end = end_at
        if total == 0xFFFF or 0xFFFFFFFF in (cd_size, cd_offset):
            total, cd_size, cd_offset, cd_end = self._zip64_end(end_at)
        if total > MAX_MEMBERS:
            raise self.problem(f"the archive lists {total} members; a saved index has at most "
                               f"{MAX_MEMBERS}")
        if cd_offset + cd_size != cd_end or total * _CENTRAL.size > cd_size:
            raise self.problem("the zip central directory is damaged (its size and place "
                               "disagree with the end record)")
        table = self._at(cd_offset, cd_size)
        pos = 0
        for _ in range(total):
            member, pos = self._entry(table, pos)
            if member.name in self.members:
                raise self.problem(f"member {member.name} is listed twice")
            self.members[member.name] = member
        if pos != cd_size:
            raise self.problem("the zip central directory is damaged (bytes after its last "
                               "entry)")
        self._check_layout(cd_offset)

    def _zip64_end(self, end_at: int) -> tuple[int, int, int, int]:
        at = end_at - _END64_LOCATOR.size
        if at < 0:
            raise self.problem("the file is truncated or damaged (no zip64 end record)")
        sig, disk, offset, disks = _END64_LOCATOR.unpack(self._at(at, _END64_LOCATOR.size))
        if sig != b"PK\x06\x07" or disk != 0 or disks != 1 or offset + _END64.size != at:
            raise self.problem("the file is truncated or damaged (its zip64 end record is "
                               "missing or misplaced)")
        (sig, _size, _made, _need, disk, cd_disk, here, total, cd_size,
         cd_offset) = _END64.unpack(self._at(offset, _END64.size))
        if sig != b"PK\x06\x06" or disk or cd_disk or here != total:
            raise self.problem("the file is truncated or damaged (bad zip64 end record)")
        return total, cd_size, cd_offset, offset

    def _entry(self, table: bytes, pos: int) -> tuple[Member, int]:
        if pos + _CENTRAL.size > len(table):
            raise self.problem("the zip central directory is damaged (an entry runs past it)")
        (sig, _made, _need, flags, method, _time, _date, crc, csize, usize, name_len,
         extra_len, comment_len, disk, _iattr, _eattr, header) = _CENTRAL.unpack_from(table, pos)
        pos += _CENTRAL.size
        end = pos + name_len + extra_len + comment_len
        if sig != b"PK\x01\x02" or end > len(table):
            raise self.problem("the zip central directory is damaged (a bad entry)")
        raw_name = table[pos:pos + name_len]
        name = raw_name.decode("ascii", "replace")
        if not _NAME.fullmatch(name) or comment_len:
            raise self.problem(f"not a saved indexzoo index (its member {name[:80]!r} is "
                               "not indexzoo.json or arrays/<id>.npy, or has a comment)")
        extra = table[pos + name_len:pos + name_len + extra_len]
        usize, csize, header, disk = self._zip64(name, extra, usize, csize, header, disk)
        if method != 0:
            raise self.problem(f"member {name} is compressed (method {method}); indexzoo "
                               "writes stored members only and reads nothing else")
        if flags & ~_UTF8_NAMES:
            raise self.problem(f"member {name} has zip flags {flags:#06x} (encryption or a "
                               "data descriptor); indexzoo writes none")
        if usize != csize or disk != 0:
            raise self.problem(f"member {name}: its sizes disagree ({csize} stored, {usize} "
                               "declared)")
        return Member(name, header, -1, usize, crc), end

    def _zip64(self, name: str, extra: bytes, usize: int, csize: int, header: int,
               disk: int) -> tuple[int, int, int, int]:
        """The sizes, header offset and disk of an entry, from its zip64 extra field where
        the fixed fields are saturated."""
        pos = 0
        while pos + 4 <= len(extra):
            tag, size = struct.unpack_from("<HH", extra, pos)
            body = extra[pos + 4:pos + 4 + size]
            pos += 4 + size
            if tag != _ZIP64_EXTRA:
                continue
            fields = [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, header == 0xFFFFFFFF]
            values: list[int] = []
            for i, wanted in enumerate(fields):
                if wanted:
                    at = 8 * len(values)
                    if at + 8 > len(body):
                        raise self.problem(f"member {name}: damaged zip64 field")
                    values.append(struct.unpack_from("<Q", body, at)[0])
                    if i == 0:
                        usize = values[-1]
                    elif i == 1:
                        csize = values[-1]
                    else:
                        header = values[-1]
        if pos != len(extra):
            raise self.problem(f"member {name}: damaged extra field")
        if 0xFFFFFFFF in (usize, csize, header):
            raise self.problem(f"member {name}: its zip64 sizes are missing")
        return usize, csize, header, disk

    def _check_layout(self, cd_offset: int) -> None:
        """Local headers where the directory says, data inside the file before the directory,
        the members apart, the metadata first at offset 0."""
        ordered = sorted(self.members.values(), key=lambda m: m.header)
        if not ordered or ordered[0].name != META_MEMBER or ordered[0].header != 0:
            raise self.problem(f"not a saved indexzoo index (a zip archive without "
                               f"{META_MEMBER} as its first member)")
        free = 0
        for m in ordered:
            if m.header < free:
                raise self.problem(f"member {m.name} overlaps the member before it")
            if m.header + _LOCAL.size > cd_offset:
                raise self.problem(f"member {m.name} lies outside the archive's data")
            (sig, _need, flags, method, _time, _date, _crc, _csize, _usize, name_len,
             extra_len) = _LOCAL.unpack(self._at(m.header, _LOCAL.size))
            local_name = self._at(m.header + _LOCAL.size, name_len) if name_len < 256 else b""
            if (sig != _LOCAL_MAGIC or method != 0 or flags & ~_UTF8_NAMES
                    or local_name != m.name.encode("ascii")):
                raise self.problem(f"member {m.name}: its local header disagrees with the "
                                   "central directory")
            start = m.header + _LOCAL.size + name_len + extra_len
            if start + m.size > cd_offset:
                raise self.problem(f"member {m.name} ({m.size} bytes) reaches past the "
                                   "archive's data: the file is truncated or lies about it")
            self.members[m.name] = Member(m.name, m.header, start, m.size, m.crc)
            free = start + m.size

    # ------------------------------------------------------------------ reading
    def read_small(self, name: str, limit: int) -> bytes:
        """The whole of member ``name`` (at most ``limit`` bytes, else IndexFileError before
        reading it), its CRC-32 checked."""
        m = self.members[name]
        if m.size > limit:
            raise self.problem(f"member {name} is {m.size} bytes; at most {limit} are read")
        data = self._at(m.start, m.size)
        if zlib.crc32(data) != m.crc:
            raise self.problem(f"{name}: checksum mismatch (the file is corrupted); save the "
                               "index again")
        return data


@contextlib.contextmanager
def open_archive(path: Path, source: str) -> Iterator[Archive]:
    """The archive at ``path`` (see the module docstring); closed on leaving."""
    with open_regular(path, source) as raw:
        size = os.fstat(raw.fileno()).st_size
        yield Archive(raw, size, source)


# ---------------------------------------------------------------------- file objects
def as_bytes(data: Any, what: str) -> bytes | bytearray | memoryview:
    """What a binary file object's ``read`` returned, else ConfigError (a text file object
    reads ``str``); ``None`` (nothing to read yet) is no bytes."""
    if data is None:
        return b""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data
    raise ConfigError(f"{what}: the file object read {type(data).__name__}, not bytes; open it "
                      "in binary mode ('rb', 'wb')")


class Window:
    """A seekable binary file object seen from ``start``: the window's offset 0 is the
    object's position ``start``. Reads and writes go through the object's own methods; a
    short read or a partial write is completed here."""

    def __init__(self, stream: Any, start: int, what: str = "a file object") -> None:
        self.stream, self.start, self.what = stream, start, what

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return int(self.stream.tell()) - self.start

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self.stream.seek(self.start + offset if whence == os.SEEK_SET else offset, whence)
        return self.tell()

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return bytes(as_bytes(self.stream.read(), self.what))
        parts, left = [], size
        while left > 0:
            got = as_bytes(self.stream.read(left), self.what)
            if not got:
                break
            parts.append(bytes(got))
            left -= len(got)
        return b"".join(parts)

    def readinto(self, view: Any) -> int:
        fill = getattr(self.stream, "readinto", None)
        if fill is not None:
            return int(fill(view) or 0)
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while len(view):
            done = self.stream.write(view)
            if done is None or done >= len(view):  # None: a write that reports no count
                break
            view = view[done:]
        return total

    def flush(self) -> None:
        flush = getattr(self.stream, "flush", None)
        if flush is not None:
            flush()


def seekable_window(stream: Any, what: str = "a file object") -> tuple[Window, int] | None:
    """A :class:`Window` from the object's current position and the bytes from there to its
    end, where the object can seek (forward, backward and to its end); else None, the
    position unchanged."""
    try:
        if not stream.seekable():
            return None
        start = int(stream.tell())
        stream.seek(0, os.SEEK_END)
        end = int(stream.tell())
        stream.seek(start)
    except (AttributeError, OSError, ValueError, TypeError):
        return None
    return Window(stream, start, what), end - start


@contextlib.contextmanager
def open_stream(stream: Any, source: str) -> Iterator[Archive]:
    """The archive a binary file object holds from its current position to its end (see the
    module docstring; ``source`` names it in messages), checked as :func:`open_archive`
    checks a file; after a load the object is left at its end."""
    placed = seekable_window(stream, source)
    if placed is None:  # a pipe, a socket, a reader that cannot seek: its bytes, read whole
        data = bytes(as_bytes(stream.read(), source))
        placed = Window(io.BytesIO(data), 0, source), len(data)
    window, size = placed
    yield Archive(window, size, source)
    with contextlib.suppress(OSError, ValueError):
        window.seek(size)
