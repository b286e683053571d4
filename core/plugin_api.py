"""The version of the contract plugins are written against: :data:`PLUGIN_API`.

A plugin's index class declares the version it targets::

    class MyIndex(GpuIndex[MyState]):
        plugin_api: ClassVar[str] = "2.0"

and the registry compares it with this indexzoo's version when the class is registered:

* the same major version, at most this minor version: the plugin works;
* an older major version this indexzoo still supports (:data:`SUPPORTED`): the plugin works,
  with a ``DeprecationWarning`` for each hook whose meaning changed since (:data:`CHANGES`);
* anything else (a newer minor or major version, an unsupported older one, text that is not
  ``MAJOR.MINOR``): the plugin is refused with a message naming both versions.

A class that declares no version is taken as 1.0, the contract before versions existed, with
a deprecation warning asking it to declare one. ``docs/plugin-authors.md`` says what the
version covers (what is public and stable) and what changed between versions.
"""

from __future__ import annotations

import re

__all__ = ["CHANGES", "PLUGIN_API", "SUPPORTED", "Compatibility", "compatibility", "parse"]

#: The plugin API this indexzoo provides (``MAJOR.MINOR``).
PLUGIN_API = "2.2"

#: Major versions whose plugins still load (the current one, and older ones with warnings).
SUPPORTED = (1, 2)

#: What changed for plugins in each version, as the deprecation warnings and the docs say it.
CHANGES: dict[str, tuple[str, ...]] = {
    "2.0": (
        "index classes declare plugin_api",
        "the hooks are checked against the operation table when a class is registered: a "
        "misspelled hook, a wrong signature, a hook for an operation the capabilities do "
        "not declare and a declared operation without a hook are errors",
        "names starting with _point_ or _range_ are reserved for the operation hooks",
        "_prepared_point(st, op) receives the Operation (1.0: the out mode as a string)",
        "new: points_as_ranges and the generic hook _answer(st, op, *arrays)",
    ),
    "2.1": (
        "new: the optional hook _prepared_range(st, op), range lookups prepared once per "
        "build (as _prepared_point for points); plugins written for 2.0 load unchanged",
    ),
    "2.2": (
        "new: state_schema (indexzoo.persist.StateSchema), the shape of the saved state, "
        "checked on every load before a kernel reads it; the files of a class without one "
        "are refused (its pickles still load)",
    ),
}

_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse(text: str) -> tuple[int, int]:
    """``"2.0"`` -> ``(2, 0)``; ValueError for anything that is not ``MAJOR.MINOR``."""
    m = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"plugin_api must be a 'MAJOR.MINOR' string such as {PLUGIN_API!r}, "
                         f"got {text!r}")
    return int(m.group(1)), int(m.group(2))


class Compatibility:
    """How this indexzoo takes a class that declares ``declared`` (None: nothing declared)."""

    def __init__(self, declared: str | None) -> None:
        self.declared = declared
        self.version = (1, 0) if declared is None else parse(declared)
        self.current = parse(PLUGIN_API)

    @property
    def major(self) -> int:
        return self.version[0]

    def refusal(self) -> str | None:
        """Why a class targeting this version cannot load here (None: it can)."""
        (major, minor), (cur_major, cur_minor) = self.version, self.current
        shown = f"{major}.{minor}"
        if (major == cur_major and minor > cur_minor) or major > cur_major:
            return (f"it targets indexzoo plugin API {shown}, newer than this indexzoo's "
                    f"{PLUGIN_API}; upgrade indexzoo")
        if major not in SUPPORTED:
            return (f"it targets indexzoo plugin API {shown}, which this indexzoo "
                    f"({PLUGIN_API}) no longer supports; update the plugin")
        return None

    def deprecations(self) -> list[str]:
        """What a class of an older supported major version should change."""
        out = []
        if self.declared is None:
            out.append(f"it declares no plugin_api and is taken as 1.0; declare "
                       f"plugin_api = {PLUGIN_API!r} once it follows {PLUGIN_API}")
        elif self.major < self.current[0]:
            out.append(f"it targets indexzoo plugin API {self.declared}; this indexzoo "
                       f"provides {PLUGIN_API}")
        return out


def compatibility(declared: str | None) -> Compatibility:
    """:class:`Compatibility` of a declared version (ValueError for a malformed one)."""
    return Compatibility(declared)
