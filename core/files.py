"""Writing a file so that a reader, or the disk after a crash, sees the old file or the whole
new one: the content goes to a temporary file in the destination's folder, is flushed to disk,
and is renamed over the destination; then the folder's entry is flushed too.

:func:`replace_file` is the one-file form (``index.save``); ``indexzoo.tools.publish`` builds
its groups of files (a bench run's JSON and plots) on :func:`sync_folder`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["replace_file", "sync_folder"]


def sync_folder(folder: Path) -> None:
    """Flush the folder's new entries to disk (where folders can be opened: not on Windows)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_file(dest: Path, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write`` on a new temporary file beside ``dest`` (a hidden name starting with
    ``.dest.``), flush it to disk, rename it over ``dest`` and flush the folder. On any error or
    interrupt the temporary file goes and ``dest`` is left as it was."""
    folder = dest.parent if str(dest.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as raw:
            write(raw)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sync_folder(folder)
    return dest
