"""The plugin registry: pluggy, with the entry-point group ``indexzoo``.

Built-in indexes are registered by the project's own ``pyproject.toml`` through the same
group as third-party ones, so both are found the same way. A plugin that fails to import
does not take the others down: it is reported by :func:`load_errors` (and ``indexzoo
list``), and creating one of its indexes raises ConfigError with the reason.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TextIO

import pluggy

from . import hookspecs
from .config import IndexSpec
from .contract import GpuIndex, check_plugin_class
from .display import shown
from .errors import ConfigError, DuplicatePlugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registration",
    "available",
    "builtin",
    "create",
    "load_errors",
    "lookup",
    "named",
    "plugin_manager",
    "providers",
    "register_plugin",
    "reset",
    "selection",
    "unregister_plugin",
]

ENTRY_POINT_GROUP = "indexzoo"


@dataclass(frozen=True)
class Registration:
    """One registered index class and who provided it."""

    cls: type[GpuIndex]
    provider: str
    distribution: str | None = None  # the installed distribution, for entry-point plugins


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pm: pluggy.PluginManager | None = None
        self.dists: dict[str, tuple[str, str | None]] = {}
        self.errors: dict[str, str] = {}
        self.table: dict[str, Registration] | None = None


_state = _State()


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager, with every ``indexzoo`` entry point loaded (once)."""
    with _state.lock:
        if _state.pm is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                    continue
                dist = getattr(ep, "dist", None)
                where = f"distribution {dist.name} {dist.version}" if dist else "unknown dist"
                try:
                    plugin = ep.load()
                except Exception as exc:  # a broken plugin must not hide the others
                    _state.errors[ep.name] = f"{ep.value} ({where}): {type(exc).__name__}: {exc}"
                    warnings.warn(f"indexzoo plugin {ep.name!r} failed to load: "
                                  f"{_state.errors[ep.name]}", stacklevel=2)
                    continue
                pm.register(plugin, name=ep.name)
                _state.dists[ep.name] = (f"entry point {ep.name!r} = {ep.value} ({where})",
                                         dist.name if dist else None)
            _state.pm = pm
        return _state.pm


def _provider(pm: pluggy.PluginManager, plugin: Any) -> tuple[str, str | None]:
    name = pm.get_name(plugin) or repr(plugin)
    return _state.dists.get(name, (f"plugin {name!r} registered at run time", None))


def _table() -> dict[str, Registration]:
    with _state.lock:
        if _state.table is None:
            pm = plugin_manager()
            table: dict[str, Registration] = {}
            for impl in pm.hook.indexzoo_register_indexes.get_hookimpls():
                provider, dist = _provider(pm, impl.plugin)

                def register(cls: Any, provider: str = provider, dist: str | None = dist) -> None:
                    check_plugin_class(cls)
                    old = table.get(cls.name)
                    if old is not None and old.cls is not cls:
                        raise DuplicatePlugin(
                            f"index name {cls.name!r} is registered twice: by {old.provider} "
                            f"as {old.cls.__module__}.{old.cls.__qualname__}, and by "
                            f"{provider} as {cls.__module__}.{cls.__qualname__}"
                        )
                    table[cls.name] = Registration(cls, provider, dist)

                impl.function(register=register)
            _state.table = dict(sorted(table.items()))
        return _state.table


def available() -> MappingProxyType[str, type[GpuIndex]]:
    """Every registered index: name -> class (``.capabilities``, ``.Params``, docstring)."""
    return MappingProxyType({n: r.cls for n, r in _table().items()})


def providers() -> MappingProxyType[str, str]:
    """Every registered index: name -> who provided it."""
    return MappingProxyType({n: r.provider for n, r in _table().items()})


def builtin() -> list[str]:
    """Names of the indexes that ship with indexzoo itself."""
    return [n for n, r in _table().items() if r.distribution == "indexzoo"]


def selection(which: str) -> tuple[list[str], list[str]]:
    """The indexes ``which`` ("all": every registered one, "builtin": those shipped with
    indexzoo) names for one-column workloads (bench, recommend), and the multi-column indexes
    left out of it (``capabilities.dims > 1``: their range answers are N-bit bitmaps, their
    workloads have several columns; naming them includes them)."""
    names = list(available()) if which == "all" else builtin()
    table = available()
    multi = [n for n in names if table[n].capabilities.dims > 1]
    return [n for n in names if n not in multi], multi


def named(spec: str, note: TextIO | None = None) -> list[str]:
    """The indexes a command's ``--indexes`` names: "all" and "builtin" through
    :func:`selection` (a line on ``note`` names the multi-column indexes left out), else a
    comma-separated list, each name checked (ConfigError naming the alternatives)."""
    if spec in ("all", "builtin"):
        names, multi = selection(spec)
        if multi and note is not None:
            note.write(f"note: left out the multi-column indexes {', '.join(multi)} (one-column "
                       "workload; name them with --indexes to include them)\n")
        return names
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for n in names:
        lookup(n)
    return names


def load_errors() -> MappingProxyType[str, str]:
    """Entry points that failed to import: entry-point name -> reason."""
    plugin_manager()
    return MappingProxyType(dict(_state.errors))


def lookup(name: str) -> type[GpuIndex]:
    """The index class registered as ``name``, or ConfigError naming the alternatives."""
    if not isinstance(name, str):
        raise ConfigError(f"index name must be a string, got {type(name).__name__} {shown(name)}")
    table = _table()
    if name in table:
        return table[name].cls
    if name in _state.errors:
        raise ConfigError(f"index {name!r} could not be loaded: {_state.errors[name]}")
    close = difflib.get_close_matches(name, list(table), n=1) if len(name) <= 100 else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"unknown index {shown(name, 40)}{hint} Available: {', '.join(table) or 'none'}"
    )


def create(index: str | IndexSpec | dict[str, Any], /, *, device: str | None = None,
           **params: Any) -> GpuIndex:
    """Make an index from a name and parameters, an :class:`IndexSpec`, or a spec dict.

    ``create("sorted-array", device="cuda", threads_per_block=512)``;
    ``create("sorted-array", params={"threads_per_block": 512})`` (the spec file's shape);
    ``create(load_spec("index.yaml"))``. Keyword parameters override those of ``params=``,
    which override those of a spec. Unknown names, unknown params and out-of-range values
    raise ConfigError before any device work starts.
    """
    if "params" in params:  # the spec's shape: params={...}; no index has a parameter "params"
        given = params.pop("params")
        if given is not None and not isinstance(given, Mapping):
            raise ConfigError(
                f"params must be a mapping of parameter names to values, got "
                f"{type(given).__name__} {shown(given)}")
        params = {**(given or {}), **params}
    if isinstance(index, dict):
        from .config import spec_from_data

        index = spec_from_data(index)
    if isinstance(index, IndexSpec):
        cls = lookup(index.index)
        return cls({**index.params, **params}, device=device or index.device)
    return lookup(index)(params, device=device or "auto")


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Register a plugin object (a module or any object with the hook) at run time."""
    with _state.lock:
        pm = plugin_manager()
        registered = pm.register(plugin, name=name)
        _state.table = None
        if registered is None:
            raise ConfigError(f"plugin {shown(name or plugin)} is blocked and was not registered")
        return registered


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered under ``name`` (by entry point or at run time)."""
    with _state.lock:
        pm = plugin_manager()
        if pm.get_plugin(name) is None:
            raise ConfigError(f"no plugin named {shown(name)} is registered")
        pm.unregister(name=name)
        _state.table = None


def reset() -> None:
    """Forget every plugin and load the entry points again on next use (for tests)."""
    with _state.lock:
        _state.pm, _state.table = None, None
        _state.dists.clear()
        _state.errors.clear()
