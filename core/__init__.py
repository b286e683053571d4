"""indexzoo: a zoo of GPU index structures behind one contract.

    >>> import numpy as np, indexzoo
    >>> index = indexzoo.create("sorted-array", device="cpu").build(np.array([7, 3, 7, 9]))
    >>> index.point(np.array([7, 8]), out="count").count
    array([2, 0], dtype=uint32)

See ``indexzoo.available()`` for the registered indexes and ``GpuIndex`` for the contract.

``import indexzoo`` imports none of its modules: each public name is imported from its module
on first use (``indexzoo.create``, ``from indexzoo import GpuIndex``), so a program or tool
that uses a part of indexzoo pays for that part only.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers and IDEs see them; at run time see _HOMES
    from .buildtime import set_progress
    from .config import IndexParams, IndexSpec, load_spec
    from .contract import Capabilities, Footprint, GpuIndex
    from .devices import resolve_device
    from .errors import (
        ConfigError,
        DeviceUnavailable,
        DuplicatePlugin,
        IndexFileError,
        IndexZooError,
        InvalidInput,
        MissingDependency,
        NotBuilt,
        OutOfRange,
        PluginError,
        ResourceError,
        Unsupported,
    )
    from .hookspecs import Suggestion, SuggestQuestion, hookimpl
    from .join import JoinResult, join
    from .keys import KeyMap
    from .operations import OPERATIONS, Operation, answers
    from .plugin_api import PLUGIN_API
    from .registry import (
        available,
        create,
        from_bytes,
        load,
        load_errors,
        providers,
        query_engine,
        query_engines,
        register_plugin,
    )
    from .results import OUT_MODES, LookupResult, Miss, Out
    from .state import BuildState

__version__ = "0.1.0"

__all__ = [
    "OPERATIONS",
    "OUT_MODES",
    "PLUGIN_API",
    "BuildState",
    "Capabilities",
    "ConfigError",
    "DeviceUnavailable",
    "DuplicatePlugin",
    "Footprint",
    "GpuIndex",
    "IndexFileError",
    "IndexParams",
    "IndexSpec",
    "IndexZooError",
    "InvalidInput",
    "JoinResult",
    "KeyMap",
    "LookupResult",
    "Miss",
    "MissingDependency",
    "NotBuilt",
    "Operation",
    "Out",
    "OutOfRange",
    "PluginError",
    "ResourceError",
    "SuggestQuestion",
    "Suggestion",
    "Unsupported",
    "__version__",
    "answers",
    "available",
    "create",
    "from_bytes",
    "hookimpl",
    "join",
    "load",
    "load_errors",
    "load_spec",
    "providers",
    "query_engine",
    "query_engines",
    "register_plugin",
    "resolve_device",
    "set_progress",
]

#: The module of each public name (the ``TYPE_CHECKING`` imports above, as data).
_HOMES = {
    **dict.fromkeys(("IndexParams", "IndexSpec", "load_spec"), "config"),
    **dict.fromkeys(("Capabilities", "Footprint", "GpuIndex"), "contract"),
    "resolve_device": "devices",
    **dict.fromkeys(("ConfigError", "DeviceUnavailable", "DuplicatePlugin", "IndexFileError",
                     "IndexZooError", "InvalidInput", "MissingDependency", "NotBuilt",
                     "OutOfRange", "PluginError", "ResourceError", "Unsupported"), "errors"),
    **dict.fromkeys(("Suggestion", "SuggestQuestion", "hookimpl"), "hookspecs"),
    **dict.fromkeys(("JoinResult", "join"), "join"),
    "KeyMap": "keys",
    **dict.fromkeys(("OPERATIONS", "Operation", "answers"), "operations"),
    "PLUGIN_API": "plugin_api",
    **dict.fromkeys(("available", "create", "from_bytes", "load", "load_errors", "providers",
                     "query_engine", "query_engines", "register_plugin"), "registry"),
    **dict.fromkeys(("OUT_MODES", "LookupResult", "Miss", "Out"), "results"),
    "BuildState": "state",
    "set_progress": "buildtime",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562) and kept here; or a
    submodule, imported (``indexzoo.registry`` after a plain ``import indexzoo``)."""
    home = _HOMES.get(name)
    if home is None:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """The package's module type: importing the submodule ``indexzoo.join`` does not bind the
    package's name ``join`` to that module (it is the function :func:`indexzoo.join.join`), as
    an import of a submodule otherwise would."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
