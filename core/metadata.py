"""The metadata of a saved index (``indexzoo.json``), parsed without trusting it.

:func:`parse_metadata` takes the member's bytes (their size is bounded before they are read:
:data:`MAX_META_BYTES`) and returns the metadata as a plain dict, or raises
:class:`~indexzoo.errors.IndexFileError` and nothing else, in one line:

* the text is UTF-8 JSON with at most :data:`MAX_NODES` values (counted from the bytes before
  parsing, so a small file cannot expand into millions of objects), nested at most
  :data:`MAX_DEPTH` deep, without NaN or infinities and without an object key given twice;
* it names this format and a version this code reads (:func:`check_format`: a newer one says
  to upgrade indexzoo);
* the top level has exactly the keys a saved index has, each of its type
  (:func:`check_top_level`): unknown keys are refused, so a file of a layout this code does
  not know is never read as if it were one it does.

The sharded index keeps each shard's metadata as a JSON string inside its state; it goes
through :func:`parse_metadata` too.
"""

from __future__ import annotations

import importlib.metadata
import json
from typing import Any

from .errors import IndexFileError

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_DEPTH", "MAX_META_BYTES", "MAX_NODES",
           "check_format", "check_top_level", "indexzoo_version", "parse_metadata"]

#: The format's name, as the metadata's ``format``.
FORMAT = "indexzoo-index"
#: The newest format version this code writes and reads; a file of a newer one is refused.
FORMAT_VERSION = 1

#: The largest metadata member read (the metadata holds no array data: a sharded index of
#: 4096 shards stays far below this).
MAX_META_BYTES = 1 << 24
#: The most JSON values (objects, arrays, strings, numbers, ...) in one metadata member.
MAX_NODES = 1 << 20
#: The deepest nesting of JSON arrays and objects.
MAX_DEPTH = 64

#: The top-level keys, with the type of each and whether every file has it.
_TOP: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "format": (str, True),
    "format_version": (int, True),
    "indexzoo_version": (str, False),
    "index": (str, True),
    "plugin_api": (str, False),
    "state_version": (int, True),
    "params": (dict, True),
    "device": (str, True),
    "built": (bool, True),
    "n": (int, False),
    "base": (dict, False),
    "state": (dict, False),
    "arrays": (dict, False),  # in a file (an index in memory holds its arrays itself)
}
#: Present in the metadata of every built index.
_BUILT = ("n", "base", "state")
_MAX_INT = (1 << 63) - 1


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a saved index holds")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key[:40]!r} appears twice in one object")
        out[key] = value
    return out


def _depth_ok(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` containers deep (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return False
            items = node.values() if isinstance(node, dict) else node
            stack.extend((x, depth + 1) for x in items if isinstance(x, (dict, list)))
    return True


def parse_json(data: bytes, what: str) -> Any:
    """``data`` parsed as bounded JSON (see the module docstring), or IndexFileError naming
    ``what``."""
    if len(data) > MAX_META_BYTES:
        raise IndexFileError(f"{what} is {len(data)} bytes; at most {MAX_META_BYTES} are read")
    # every JSON value but the first follows a ',', a ':' or a '[': an upper bound on their
    # number, known before any of them is made
    values = 1 + data.count(b",") + data.count(b":") + data.count(b"[")
    if values > MAX_NODES:
        raise IndexFileError(f"{what} holds up to {values} JSON values; at most {MAX_NODES} "
                             "are read")
    try:
        text = data.decode("utf-8")
        got = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise IndexFileError(f"{what} nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError too
        raise IndexFileError(f"{what} is damaged ({_one_line(exc)})") from None
    if not _depth_ok(got, MAX_DEPTH):
        raise IndexFileError(f"{what} nests deeper than {MAX_DEPTH} levels")
    return got


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def indexzoo_version() -> str:
    """The installed indexzoo's version (recorded in every file, for the reader's messages)."""
    try:
        return importlib.metadata.version("indexzoo")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def check_format(meta: Any, what: str) -> dict[str, Any]:
    """``meta`` if it names this format and a version this code reads, else IndexFileError
    (a newer version: naming both and saying to upgrade)."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise IndexFileError(f"{what}: not a saved indexzoo index (format {str(found)[:40]!r})")
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise IndexFileError(f"{what}: format version {str(version)[:20]!r} is not valid")
    if version > FORMAT_VERSION:
        raise IndexFileError(
            f"{what}: written in format version {version} by indexzoo "
            f"{str(meta.get('indexzoo_version', '?'))[:40]}; this indexzoo ({indexzoo_version()}) "
            f"reads format versions up to {FORMAT_VERSION}: upgrade indexzoo to load it")
    return meta


def check_top_level(meta: Any, what: str) -> dict[str, Any]:
    """``meta`` if it is metadata of this format (:func:`check_format`, first: a file of a
    newer format says so rather than what it lacks) with the keys and types of a saved
    index's (see ``_TOP``), else IndexFileError."""
    check_format(meta, what)
    for key, value in meta.items():
        spec = _TOP.get(key)
        if spec is None:
            raise IndexFileError(f"{what}: unknown key {key[:40]!r} in its metadata (a file of "
                                 "another layout)")
        kind = spec[0]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise IndexFileError(f"{what}: its metadata's {key!r} is a "
                                 f"{type(value).__name__}, not a {_name(kind)}")
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _MAX_INT:
            raise IndexFileError(f"{what}: its metadata's {key!r} ({value}) is out of range")
        if isinstance(value, str) and len(value) > 200:
            raise IndexFileError(f"{what}: its metadata's {key!r} is {len(value)} characters "
                                 "long")
    required = [k for k, (_, always) in _TOP.items() if always]
    if meta.get("built") is True:
        required += list(_BUILT)
    missing = [k for k in required if k not in meta]
    if missing:
        raise IndexFileError(f"{what}: its metadata lacks {', '.join(map(repr, missing))}")
    if meta.get("built") is False and (any(k in meta for k in _BUILT) or meta.get("arrays")):
        raise IndexFileError(f"{what}: its metadata says the index is not built, and holds a "
                             "built index's state")
    return meta


def _name(kind: type | tuple[type, ...]) -> str:
    return kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)


def parse_metadata(data: bytes, what: str) -> dict[str, Any]:
    """The metadata in ``data``: bounded JSON with a checked top level (see the module
    docstring)."""
    return check_top_level(parse_json(data, what), what)
