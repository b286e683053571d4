"""Writing a file so that a reader, or the disk after a crash, sees the old file or the whole
new one: the content goes to a temporary file in the destination's folder (a new hidden name,
created exclusively and never through a symbolic link), is flushed to disk, and is renamed
over the destination; then the folder's entry is flushed too.

A temporary's name says whose it is: ``.NAME.indexzoo-HOST-PID-RANDOM.tmp``, with ``HOST`` a
short digest of the writer's host name, ``PID`` its process id and ``RANDOM`` 16 random hex
digits. A writer removes its temporary on any error or interrupt; one that is killed
(``kill -9``, a power cut) cannot, so :func:`remove_stale_temporaries` removes, in one folder,
every temporary of this host whose writer process no longer runs. ``index.save`` and
``indexzoo.load`` call it for the folder they write or read (``docs/persistence.md``). A
temporary of a live process, of another host (a shared network folder), or of another name
form is never touched.

:func:`replace_file` is the one-file form (``index.save``, and bench's JSON through
``indexzoo.tools.publish.rewrite``, which adds its interrupt handling through ``guard`` and
``check``); ``indexzoo.tools.publish`` builds its groups of files on :func:`create_temporary`
and :func:`sync_folder`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["create_temporary", "remove_stale_temporaries", "replace_file", "sync_folder",
           "temporary_owner"]

_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_TRIES = 100  # temporary names tried before giving up (each one random)
_MARK = "indexzoo"
_TEMPORARY = re.compile(rf"\..+\.{_MARK}-(?P<host>[0-9a-f]{{8}})-(?P<pid>[0-9]{{1,10}})"
                        r"-[0-9a-f]{16}\.tmp")


def _host_tag() -> str:
    """Eight hex digits naming this host (a digest of its name: any characters, any length)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def create_temporary(folder: Path, name: str) -> tuple[int, Path]:
    """A new file in ``folder`` with a hidden name starting with ``.name`` that names this
    host and process (see the module docstring): (fd, path). The mode is 0666 less the umask,
    as for any file the user creates."""
    owner = f"{_MARK}-{_host_tag()}-{os.getpid()}"
    for _ in range(_TRIES):
        path = folder / f".{name}.{owner}-{secrets.token_hex(8)}.tmp"
        try:
            return os.open(path, _CREATE, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name after {_TRIES} tries",
                          str(folder / f".{name}.{owner}-*.tmp"))


def temporary_owner(name: str) -> tuple[str, int] | None:
    """(host tag, pid) of the writer of a temporary named ``name``, or None for any other
    name."""
    m = _TEMPORARY.fullmatch(name)
    return None if m is None else (m["host"], int(m["pid"]))


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user's counts)."""
    if pid <= 0:
        return True  # not a process id we wrote: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporaries in ``folder`` left by writers of this host that no longer run
    (a save killed before it could clean up); returns what was removed. Only regular files
    named as :func:`create_temporary` names them are considered, never a link or a folder;
    anything that cannot be listed or removed (a read-only folder) is left as it is."""
    removed: list[Path] = []
    host = _host_tag()
    try:
        entries = list(os.scandir(folder if str(folder) else "."))
    except OSError:
        return removed
    for entry in entries:
        owner = temporary_owner(entry.name)
        if owner is None or owner[0] != host or _running(owner[1]):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def sync_folder(folder: Path) -> None:
    """Flush the folder's new entries to disk (where folders can be opened: not on Windows)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _nothing() -> None:
    return None


def replace_file(dest: Path, write: Callable[[BinaryIO], Any], *,
                 guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
                 check: Callable[[], None] = _nothing) -> Path:
    """Call ``write`` on a new temporary file beside ``dest``, flush it to disk, rename it over
    ``dest`` (a symbolic link at ``dest`` is replaced itself, never followed) and flush the
    folder. On any error the temporary file goes and ``dest`` is left as it was. ``guard``
    wraps the steps that must not be cut short (creating, renaming, removing the temporary);
    ``check`` runs before the work and before the rename (e.g. to raise a deferred
    interrupt)."""
    folder = dest.parent if str(dest.parent) else Path(".")
    check()
    with guard():
        fd, temp = create_temporary(folder, dest.name)
    try:
        with os.fdopen(fd, "wb") as raw:
            write(raw)
            raw.flush()
            os.fsync(raw.fileno())
        check()
        with guard():
            os.replace(temp, dest)
    except BaseException:
        with guard(), contextlib.suppress(OSError):
            os.unlink(temp)  # gone already where the rename happened
        raise
    sync_folder(folder)
    return dest
