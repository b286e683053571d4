"""The version of the contract plugins are written against: :data:`PLUGIN_API`.

A plugin's index class declares the version it targets::

    class MyIndex(GpuIndex[MyState]):
        plugin_api: ClassVar[str] = "2.5"

and the registry compares it with this indexzoo's version when the class is registered:
the same major version and at most this minor version works; anything else (a newer minor
or major version, an older major version, text that is not ``MAJOR.MINOR``, no declaration
at all) is refused with a message naming both versions. ``docs/plugin-authors.md`` says
what the version covers (what is public and stable) and what changed between versions.
"""

from __future__ import annotations

import re

__all__ = ["CHANGES", "PLUGIN_API", "parse", "refusal"]

#: The plugin API this indexzoo provides (``MAJOR.MINOR``).
PLUGIN_API = "2.5"

#: What changed for plugins in each version, as the deprecation warnings and the docs say it.
CHANGES: dict[str, tuple[str, ...]] = {
    "2.0": (
        "index classes declare plugin_api",
        "the hooks are checked against the operation table when a class is registered: a "
        "misspelled hook, a wrong signature, a hook for an operation the capabilities do "
        "not declare and a declared operation without a hook are errors",
        "names starting with _point_ or _range_ are reserved for the operation hooks",
        "_prepared_point(st, op) receives the Operation",
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
    "2.3": (
        "a class that declares no plugin_api is refused (it was taken as 1.0, with a "
        "warning), and 1.0 classes no longer load; a class written for 2.0 to 2.2 loads "
        "unchanged",
    ),
    "2.4": (
        "new: narrows = True for a class that narrows its parent's capabilities on purpose; "
        "without it, a hook the class inherits for an operation it does not declare is "
        "refused, as a hook it defines for one is; a class written for 2.0 to 2.3 that "
        "inherits no such hook loads unchanged",
        "new: full_scan = True for an index whose every lookup reads every key (the "
        "conformance suite's scale checks then keep lookups x keys within reach)",
    ),
    "2.5": (
        "new: the optional classmethod hook _class_for(params), the class an index made "
        "with those params is where the class's __new__ makes a narrower subclass for some "
        "of them; the conformance suite certifies that class (its capabilities, its expected "
        "failures); a class written for 2.0 to 2.4 loads unchanged",
    ),
}

_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse(text: object) -> tuple[int, int]:
    """``"2.0"`` -> ``(2, 0)``; ValueError for anything that is not ``MAJOR.MINOR``."""
    m = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"plugin_api must be a 'MAJOR.MINOR' string such as {PLUGIN_API!r}, "
                         f"got {text!r}")
    return int(m.group(1)), int(m.group(2))


def refusal(declared: object) -> str | None:
    """Why a class that declares ``declared`` (its ``plugin_api``; None: nothing declared)
    cannot load here, or None when it can."""
    if declared is None:
        return (f"it declares no plugin_api; declare plugin_api: ClassVar[str] = "
                f"{PLUGIN_API!r} (the indexzoo plugin API it is written for)")
    try:
        major, minor = parse(declared)
    except ValueError as exc:
        return str(exc)
    cur_major, cur_minor = parse(PLUGIN_API)
    shown = f"{major}.{minor}"
    if (major == cur_major and minor > cur_minor) or major > cur_major:
        return (f"it targets indexzoo plugin API {shown}, newer than this indexzoo's "
                f"{PLUGIN_API}; upgrade indexzoo")
    if major < cur_major:
        return (f"it targets indexzoo plugin API {shown}, which this indexzoo "
                f"({PLUGIN_API}) no longer supports; update the plugin")
    return None
