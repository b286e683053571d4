"""What ``indexzoo list`` shows, kept on disk so that a later listing imports no plugin.

Listing the registered indexes needs every plugin's module, its index classes and their
pydantic models: about a second of CPU on a small machine, almost all of it imports. The
first listing in an environment therefore writes what it found (each index's name,
description, capabilities and provider) to ``catalog/`` under indexzoo's cache folder
(:mod:`indexzoo.cachedirs`), one file per Python environment, with a *stamp* of what it was
made from:

* indexzoo's version, the Python version and environment (``sys.prefix``), and every
  ``INDEXZOO_*`` environment variable of :mod:`indexzoo.envvars` (a plugin's import may read
  one: a malformed one must still stop the listing, a shorter ``INDEXZOO_PLUGIN_TIMEOUT`` may
  leave a plugin out);
* every entry point of the ``indexzoo`` group: its name, its target, its distribution's
  metadata folder (``name-version.dist-info``, so its name and version);
* the path, size and modification time of every Python file of each entry point's module
  (its package folder, searched to the bottom) and of indexzoo's own package, so that an
  editable install whose code changed is noticed like a new version.

A later listing computes the stamp (it finds the modules' files without running them: only
the parent packages of a dotted entry point are imported) and, where it matches, reads the
file instead of importing the plugins. The registry reads it too: :func:`entry_point_of`
tells ``indexzoo.create(name)`` which entry point's plugin registers ``name``, so that only
that plugin is imported (:func:`indexzoo.registry.lookup`); and a process whose registry has
loaded every plugin keeps the listing where the file is missing or stale
(:func:`remember`), so that the next process finds it. A listing with any plugin left out (a load error, a
clash) is never written, so what a broken plugin reports is always found afresh; nor is one
made in a process that has already used the registry (a plugin registered at run time is
not in the entry points). Nothing here is needed: a missing, unreadable, unwritable or
stale file means the plugins are imported, as without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .cachedirs import cache_root
from .envvars import VARIABLES

__all__ = ["Entry", "Listing", "clear", "entry_point_of", "folder", "forget", "listing", "remember"]

#: The entry-point group plugins register through (``indexzoo.registry.ENTRY_POINT_GROUP``
#: is this).
GROUP = "indexzoo"
#: Bumped when the file's layout changes.
FORMAT = 2


@dataclass(frozen=True)
class Entry:
    """One registered index as ``indexzoo list`` shows it."""

    name: str
    description: str
    #: ``Capabilities.summary()``: ``point range dup | uint32 uint64 | cpu cuda``
    summary: str
    #: ``Capabilities.model_dump(mode="json")``
    capabilities: dict[str, Any]
    provider: str
    #: whether its parameters have an ``engine`` (a ray-tracing index)
    engine: bool
    #: the name of the entry point whose plugin registers it (None: not told apart, e.g. two
    #: distributions' entry points of one name)
    entry_point: str | None = None


@dataclass
class Listing:
    """The registered indexes (by name, in the registry's order), and what is not usable."""

    entries: list[Entry] = field(default_factory=list)
    #: name or plugin -> why it is not usable (``indexzoo.load_errors()``)
    errors: dict[str, str] = field(default_factory=dict)
    #: name -> the traceback behind an error
    details: dict[str, str] = field(default_factory=dict)
    #: whether it was read from the file rather than made by importing the plugins
    from_file: bool = False


def describe(cls: Any) -> str:
    """The first paragraph of a class's docstring, on one line, as a terminal shows it (whole
    sentences: a summary that wraps over several docstring lines is not cut at the first)."""
    from .display import plain, printable

    doc = (cls.__doc__ or "").strip()
    first = doc.split("\n\n", 1)[0]
    return printable(plain(" ".join(first.split()))) if doc else ""


def listing(make: Callable[[], Listing]) -> Listing:
    """The registered indexes: from the file where its stamp matches, else ``make()`` (the
    registry's listing, :func:`indexzoo.registry.listed`, which imports every plugin),
    writing the file where nothing is left out."""
    fresh = "indexzoo.registry" not in sys.modules
    stamp = _stamp()[0] if fresh else None
    if stamp is not None:
        kept = _read(stamp)
        if kept is not None:
            return kept
    made = make()
    if stamp is not None and not made.errors:
        _write(stamp, made)
    return made


# ---------------------------------------------------------------------- for the registry
#: This process's (key, stamp, kept listing, entry points of the group): the key is what a
#: test or a program may change in a running process (the entry points' function, the
#: INDEXZOO_* variables); the plugins' files are taken as they were when the stamp was made
#: (their modules, once imported, are not imported again either).
_current: tuple[Any, str | None, Listing | None, tuple[Any, ...]] | None = None


def _now() -> tuple[str | None, Listing | None, tuple[Any, ...]]:
    """The stamp of this environment, the kept listing that matches it (None: none) and the
    group's entry points the stamp was made from."""
    global _current
    key = (importlib.metadata.entry_points,  # the function itself: compared by identity
           tuple(os.environ.get(var.name) for var in VARIABLES))
    if _current is None or _current[0] != key:
        stamp, eps = _stamp()
        _current = (key, stamp, _read(stamp) if stamp is not None else None, eps)
    return _current[1], _current[2], _current[3]


def forget() -> None:
    """Drop this process's stamp and kept listing (:func:`indexzoo.registry.reset`)."""
    global _current
    _current = None


def entry_point_of(name: str) -> importlib.metadata.EntryPoint | None:
    """The entry point whose plugin registers index ``name``, from the kept listing of this
    environment (every plugin of it loaded and usable when it was made); None where there is
    no such listing, no such name, or not exactly one entry point of that name."""
    _, kept, eps = _now()
    if kept is None:
        return None
    names = [entry.entry_point for entry in kept.entries if entry.name == name]
    if len(names) != 1 or names[0] is None:
        return None
    found = [ep for ep in eps if ep.name == names[0]]
    return found[0] if len(found) == 1 else None


def remember(make: Callable[[], Listing]) -> None:
    """Keep the registry's listing, ``make()``, where the file is missing or stale: called by
    the registry once it has loaded every plugin, in a process that registered none at run
    time. Never raises (nothing here is needed)."""
    global _current
    try:
        stamp, kept, eps = _now()
        if stamp is None or kept is not None:
            return
        made = make()
        if not made.errors:
            _write(stamp, made)
            if _current is not None:
                _current = (_current[0], stamp, made, eps)
    except Exception:  # a class whose description or capabilities cannot be shown: not kept
        return


# ---------------------------------------------------------------------- the file
def folder() -> str | None:
    """Where the listings are kept (``catalog/`` under the cache folder), None where there is
    no cache folder."""
    root = cache_root()
    return None if root is None else os.path.join(root, "catalog")


def _path() -> str | None:
    where = folder()
    if where is None:
        return None
    env = hashlib.sha256(os.path.abspath(sys.prefix).encode()).hexdigest()[:16]
    return os.path.join(where, f"listing-{env}.json")


def _read(stamp: str) -> Listing | None:
    path = _path()
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != FORMAT or data.get("stamp") != stamp:
            return None
        return Listing([Entry(**e) for e in data["entries"]], from_file=True)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _write(stamp: str, made: Listing) -> None:
    path = _path()
    if path is None:
        return
    data = {"format": FORMAT, "stamp": stamp, "entries": [asdict(e) for e in made.entries]}
    with contextlib.suppress(OSError):  # a read-only or full disk: listed again next time
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".listing-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, path)  # whole or not at all, whoever writes at the same time
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def clear() -> tuple[int, int]:
    """Remove the kept listings: (files removed, bytes)."""
    where = folder()
    count = nbytes = 0
    if where is None or not os.path.isdir(where):
        return 0, 0
    for entry in os.scandir(where):
        if entry.is_file() and entry.name.endswith(".json"):
            with contextlib.suppress(OSError):
                size = entry.stat().st_size
                os.unlink(entry.path)
                count, nbytes = count + 1, nbytes + size
    return count, nbytes


# ---------------------------------------------------------------------- the stamp
def _stamp() -> tuple[str | None, tuple[Any, ...]]:
    """A hash of everything the listing is made from (see the module's docstring), or None
    where a module's files cannot be told (then nothing is read or written); and the group's
    entry points it read."""
    # (indexzoo's version is there in its built-in entry points' distribution folder, and
    # its package's files are stamped below)
    parts: list[Any] = [FORMAT, sys.version, os.path.abspath(sys.prefix),
                        [(var.name, os.environ.get(var.name)) for var in VARIABLES]]
    eps: tuple[Any, ...] = ()
    try:
        eps = tuple(sorted(importlib.metadata.entry_points(group=GROUP),
                           key=lambda ep: (ep.name, ep.value)))
        modules = ["indexzoo"]
        for ep in eps:
            parts.append([ep.name, ep.value, _distribution(getattr(ep, "dist", None))])
            modules.append(ep.value.split(":", 1)[0].strip())
        for module in dict.fromkeys(modules):
            files = _files(module)
            if files is None:
                return None, eps
            parts.append([module, files])
    except Exception:  # a parent package that fails to import, a malformed entry point
        return None, eps
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest(), eps


def _distribution(dist: Any) -> Any:
    """What tells an entry point's distribution apart: its metadata folder
    (``name-version.dist-info``: reading the name and version from the metadata instead costs
    a parse of each distribution's METADATA), else its name and version."""
    path = getattr(dist, "_path", None)
    if path is not None:
        return os.fspath(path)
    return [getattr(dist, "name", None), getattr(dist, "version", None)]


def _files(module: str) -> list[list[Any]] | None:
    """(path, size, mtime) of every Python file of ``module``: its package's folders to the
    bottom, or its one file; None where it cannot be found."""
    spec = importlib.util.find_spec(module)
    if spec is None:
        return None
    roots = list(spec.submodule_search_locations or [])
    if not roots:
        if not spec.origin or not os.path.isfile(spec.origin):
            return None
        st = os.stat(spec.origin)
        return [[spec.origin, st.st_size, st.st_mtime_ns]]
    out: list[list[Any]] = []
    for root in roots:
        for here, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(here, name)
                    st = os.stat(path)
                    out.append([path, st.st_size, st.st_mtime_ns])
    return out
