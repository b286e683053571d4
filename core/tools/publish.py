"""Result files that appear whole, under a name of their own, and never through a link.

``indexzoo bench`` (a JSON and its PNGs) and ``indexzoo recommend`` (a spec file) write into
folders that others may write to as well (``/tmp``, a shared results folder). :func:`publish`
writes a group of files in two steps:

1. **Write**: each file goes to a temporary of its own in the target folder, created with
   ``O_CREAT | O_EXCL | O_NOFOLLOW`` under an unpredictable name
   (``.NAME.indexzoo-HOST-PID-<random>.tmp``, see :mod:`indexzoo.files`): nothing already
   there (a file, a planted symbolic link) is opened or written through. It is flushed to
   disk (``fsync``) before step 2.
2. **Name**: every temporary gets its final name, ``NAME + suffix`` for each member:

   * ``replace=False``: by ``os.link``, which fails if anything has the name (a file, a
     directory, a symbolic link, a dangling one too), so nothing is replaced or followed. If a
     name is taken, the group tries the next of ``names`` (``run``, ``run-2``, ``run-3``, ...:
     :func:`numbered`); when none is left, :class:`FileExistsError`. On a file system without
     hard links (FAT, some network shares), the name is checked with ``lstat`` and the file
     renamed in: that check and the rename are two steps, so a file created between them
     would be replaced (nothing is ever written through a link either way).
   * ``replace=True``: by ``os.replace``, which replaces a file at the name, or a symbolic
     link itself, never what the link points to.

A group is published whole or not at all. An error or an interrupt while writing removes the
temporaries; naming runs under :func:`indexzoo.tools.interrupts.deferred`, and if it fails, or
a SIGINT or SIGTERM arrived meanwhile, the members already named are removed as well (those
still ours: same file) before the error or KeyboardInterrupt goes on.

:func:`rewrite` replaces one published file with new contents (``bench`` rewrites its JSON
after each workload): a temporary as above, then ``os.replace``. Readers see the old file or
the new one, whole; an error or interrupt before the rename leaves the old one, and once
renamed the new one stays (it is not taken back as a group's member would be).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from indexzoo.files import create_temporary, replace_file, sync_folder

from . import interrupts

__all__ = ["Member", "numbered", "publish", "rewrite"]

#: ``link`` errors that mean "this file system has no hard links".
_NO_HARD_LINKS = {errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP,
                  getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


@dataclass(frozen=True)
class Member:
    """One file of a group: what follows the group's name in its file name (``".json"``,
    ``"-pareto.png"``, ``""``) and what writes its bytes to an open binary file."""

    suffix: str
    write: Callable[[BinaryIO], object]


def numbered(stem: str, most: int = 1000) -> Iterator[str]:
    """``stem``, ``stem-2``, ``stem-3``, ... ``stem-<most>``: names for :func:`publish` to try."""
    yield stem
    for k in range(2, most + 1):
        yield f"{stem}-{k}"


@dataclass
class _Temp:
    path: Path
    identity: tuple[int, int] | None = None  # (st_dev, st_ino) once written


def publish(folder: Path, names: Iterable[str], members: Sequence[Member], *,
            replace: bool = False) -> list[Path]:
    """Write ``members`` into ``folder`` and name them after the first of ``names`` under which
    every member's name is free (``replace=False``), or after the first name, replacing what is
    there (``replace=True``). Returns the final paths, in the order of ``members``. Raises
    FileExistsError when every name is taken; nothing of the group stays behind on any error
    or interrupt (see the module docstring)."""
    order = iter(names)
    first = next(order)
    temps: list[_Temp] = []
    try:
        for member in members:
            interrupts.check()
            with interrupts.deferred():  # a created temporary is always in ``temps``
                fd, path = create_temporary(folder, first + member.suffix)
                temps.append(_Temp(path))
            with os.fdopen(fd, "wb") as f:
                member.write(f)
                f.flush()
                os.fsync(f.fileno())
                st = os.fstat(f.fileno())
            temps[-1].identity = (st.st_dev, st.st_ino)
        interrupts.check()
    except BaseException:
        with interrupts.deferred():
            _discard(temps)
        raise
    placed: list[tuple[Path, _Temp]] = []
    with interrupts.deferred():
        try:
            finals = _name(folder, first, order, members, temps, replace, placed)
            _discard(temps)  # named: the temporary names go
            sync_folder(folder)
            interrupts.check()  # an interrupt while naming: the group goes (below)
        except BaseException:
            _discard(temps, placed)
            raise
    return finals


def rewrite(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Replace the file at ``path`` with what ``write`` writes to an open binary file, in one
    step (see the module docstring); a symbolic link at ``path`` is replaced itself, never
    followed."""
    replace_file(path, write, guard=interrupts.deferred, check=interrupts.check)


def _name(folder: Path, first: str, others: Iterator[str], members: Sequence[Member],
          temps: Sequence[_Temp], replace: bool, placed: list[tuple[Path, _Temp]]) -> list[Path]:
    """Give every temporary its final name; ``placed`` lists those named so far."""
    name: str | None = first
    while name is not None:
        finals = [folder / (name + m.suffix) for m in members]
        try:
            for final, temp in zip(finals, temps, strict=True):
                if replace:
                    os.replace(temp.path, final)
                else:
                    _link(temp.path, final)
                placed.append((final, temp))
            return finals
        except FileExistsError:
            _take_back(placed)  # this name is taken: try the next with the whole group
            placed.clear()
            name = next(others, None)
    raise FileExistsError(errno.EEXIST, "every name tried is taken",
                          str(folder / (first + (members[0].suffix if members else ""))))


def _link(temp: Path, final: Path) -> None:
    """``final`` becomes a second name of ``temp``; FileExistsError if anything has it."""
    try:
        os.link(temp, final)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(final):
            raise FileExistsError(errno.EEXIST, "exists", str(final)) from None
        os.rename(temp, final)


def _take_back(placed: Sequence[tuple[Path, _Temp]]) -> None:
    """Undo the names given to a group whose next name was taken: a second name is removed, a
    file renamed in (no hard links) goes back to its temporary name."""
    for final, temp in placed:
        if not _ours(final, temp):
            continue
        if os.path.lexists(temp.path):
            os.unlink(final)
        else:
            os.rename(final, temp.path)


def _ours(path: Path, temp: _Temp) -> bool:
    """Whether ``path`` is still the file written to ``temp`` (not replaced meanwhile)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == temp.identity


def _discard(temps: Sequence[_Temp], placed: Sequence[tuple[Path, _Temp]] = ()) -> None:
    """Remove the temporaries, and the final names given, where they are still our files."""
    for final, temp in placed:
        with contextlib.suppress(OSError):
            if _ours(final, temp):
                os.unlink(final)
    for temp in temps:
        with contextlib.suppress(OSError):
            os.unlink(temp.path)
