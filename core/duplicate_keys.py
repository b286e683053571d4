"""Duplicate keys in spec files: a key given twice in one mapping is an error naming the key
and its line, never a silent "the last one wins" (YAML's and JSON's parsers keep the last).

* YAML: :func:`check_yaml_mapping`, called by the spec loader for every mapping node, before
  the mapping is built (merge keys ``<<`` aside);
* JSON: :func:`json_duplicate`, over text that parsed: a scan of its tokens that keeps the
  keys of each open object;
* TOML: the parser refuses duplicates itself, with the line but not always the key;
  :func:`toml_duplicate` reads the key off that line.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["DuplicateKey", "check_yaml_mapping", "json_duplicate", "toml_duplicate"]


class DuplicateKey(Exception):
    """``key`` is given a second time, at ``line`` (1-based)."""

    def __init__(self, key: Any, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


_MERGE_TAG = "tag:yaml.org,2002:merge"


def check_yaml_mapping(loader: Any, node: Any) -> None:
    """DuplicateKey for the first key of YAML mapping ``node`` that repeats an earlier one
    (keys compared as constructed: ``1`` and ``"1"`` differ, ``yes`` and ``true`` do not)."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                raise DuplicateKey(key, key_node.start_mark.line + 1)
            seen.add(key)
        except TypeError:  # an unhashable key: the constructor says so itself
            continue


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def json_duplicate(text: str) -> DuplicateKey | None:
    """The first key of ``text`` (valid JSON) that repeats an earlier key of its object (keys
    compared decoded: ``"a"`` and ``"\\u0061"`` are one), or None."""
    objects: list[set[str] | None] = []  # per open bracket: the object's keys, None: an array
    last: tuple[str, int] | None = None  # the string just read, and where it starts
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token.startswith('"'):
            last = (json.loads(token), match.start())
            continue
        if token == ":" and last is not None and objects and objects[-1] is not None:
            keys, (key, at) = objects[-1], last
            if key in keys:
                return DuplicateKey(key, text.count("\n", 0, at) + 1)
            keys.add(key)
        elif token in "{[":
            objects.append(set() if token == "{" else None)
        elif token in "}]" and objects:
            objects.pop()
        last = None
    return None


_TOML_AT = re.compile(r"\(at line (\d+), column \d+\)")
_TOML_DUPLICATE = ("Cannot overwrite a value", "twice", "Duplicate inline table key")


def toml_duplicate(text: str, error: Exception) -> DuplicateKey | None:
    """The duplicate key the TOML parser's ``error`` reports, with its line (the key as the
    line writes it: ``a.b``, or a table's header), or None for any other error."""
    message = str(error)
    at = _TOML_AT.search(message)
    if at is None or not any(word in message for word in _TOML_DUPLICATE):
        return None
    line = int(at.group(1))
    quoted = re.search(r"key '([^']*)'", message)
    lines = text.splitlines()
    written = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    if quoted is not None:
        key = quoted.group(1)
    elif written.startswith("["):
        key = written.strip("[] ")
    else:
        key = written.split("=", 1)[0].strip()
    return DuplicateKey(key, line)
