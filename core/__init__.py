"""indexzoo: a zoo of GPU index structures behind one contract.

    >>> import numpy as np, indexzoo
    >>> index = indexzoo.create("sorted-array", device="cpu").build(np.array([7, 3, 7, 9]))
    >>> index.point(np.array([7, 8]), out="count").count
    array([2, 0], dtype=uint32)

See ``indexzoo.available()`` for the registered indexes and ``GpuIndex`` for the contract.
"""

from __future__ import annotations

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
    load,
    load_errors,
    providers,
    query_engine,
    query_engines,
    register_plugin,
)
from .results import OUT_MODES, LookupResult, Out
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
]
