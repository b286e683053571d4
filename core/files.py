"""Writing a file so that a reader, or the disk after a crash, sees the old file or the whole
new one: the content goes to a temporary file in the destination's folder (a new, random,
hidden name, created exclusively and never through a symbolic link), is flushed to disk, and
is renamed over the destination; then the folder's entry is flushed too.

:func:`replace_file` is the one-file form (``index.save``, and bench's JSON through
``indexzoo.tools.publish.rewrite``, which adds its interrupt handling through ``guard`` and
``check``); ``indexzoo.tools.publish`` builds its groups of files on :func:`create_temporary`
and :func:`sync_folder`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["create_temporary", "replace_file", "sync_folder"]

_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_TRIES = 100  # temporary names tried before giving up (each one random)


def create_temporary(folder: Path, name: str) -> tuple[int, Path]:
    """A new file in ``folder`` with a random hidden name starting with ``.name``: (fd, path).
    The mode is 0666 less the umask, as for any file the user creates."""
    for _ in range(_TRIES):
        path = folder / f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(path, _CREATE, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name after {_TRIES} tries",
                          str(folder / f".{name}.*.tmp"))


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
