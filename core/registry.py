"""The plugin registry: pluggy, with the entry-point group ``indexzoo``.

Built-in indexes are registered by the project's own ``pyproject.toml`` through the same
group as third-party ones, so both are found the same way, and one rule holds for all:

* an index class is checked when it is registered (:func:`~indexzoo.contract.check_plugin_class`:
  its hooks against the operation table, its plugin API version);
* a plugin that fails (its module cannot be imported or exits, its hooks are wrong:
  :func:`~indexzoo.plugin_hooks.module_problem`, its register hook raises, a class it
  registers breaks the contract, a class's Params cannot make their defaults, found on
  first use) loses only what it provides: the names it registered, or all of its names
  when its module or hook fails;
* a name registered by two providers is unusable until one of them goes: using it raises
  :class:`~indexzoo.DuplicatePlugin` naming both, in Python and on the command line alike;
* every other index stays usable, and :func:`load_errors` (``indexzoo list``) says what is
  not and why.

Finding one index by its name (:func:`lookup`, so :func:`create` and :func:`load`) imports
only the plugin that registers it where the listing that ``indexzoo list`` keeps
(:mod:`indexzoo.catalog`) matches this environment: that listing was made with every plugin
loaded and usable, so the rules above held for it, and a stamp of every entry point, plugin
file and ``INDEXZOO_*`` variable tells whether anything changed since. The plugin is imported
and its register hook run as when every plugin loads; anything unexpected (the name not
registered by it, a class that breaks the contract) falls back to loading every plugin, as does
a missing or stale listing, which the full load then writes for the next process.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import threading
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TextIO

import pluggy
from pydantic import ValidationError

from . import catalog, envvars, hookspecs, persist
from .config import IndexSpec, params_problem, spec_from_data
from .contract import GpuIndex, check_plugin_class
from .devices import cuda_status
from .display import one_line, shown
from .errors import ConfigError, DuplicatePlugin, PluginError, UnknownIndexInFile
from .hookspecs import Suggestion, SuggestQuestion
from .plugin_hooks import module_problem

if TYPE_CHECKING:  # the query layer is imported where a query engine is asked for
    from .query import EngineSpec, QueryEngine

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registration",
    "available",
    "builtin",
    "create",
    "entry_points",
    "from_bytes",
    "import_timeout",
    "listed",
    "load",
    "load_error_details",
    "load_errors",
    "lookup",
    "named",
    "plugin_manager",
    "providers",
    "query_engine",
    "query_engines",
    "register_plugin",
    "reset",
    "selection",
    "suggestions",
    "unregister_plugin",
]

#: The entry-point group plugins register through: the catalog's, whose scan of it the
#: one-plugin lookup (:func:`_found_alone`) uses, so the two can never name different groups.
ENTRY_POINT_GROUP = catalog.GROUP
#: Seconds a plugin's module may take to import before it is left out (``INDEXZOO_PLUGIN_TIMEOUT``)
IMPORT_TIMEOUT_S = envvars.PLUGIN_TIMEOUT.default
TIMEOUT_ENV = envvars.PLUGIN_TIMEOUT.name


@dataclass(frozen=True)
class Registration:
    """One registered index class and who provided it."""

    cls: type[GpuIndex]
    provider: str
    distribution: str | None = None  # the installed distribution, for entry-point plugins
    entry_point: str | None = None  # the name of the entry point that loaded its plugin


@dataclass
class _Table:
    """The result of running every register hook: usable names, and what is not usable."""

    usable: dict[str, Registration] = field(default_factory=dict)
    #: index name -> the error its use raises (a clash, a class that breaks the contract)
    unusable: dict[str, PluginError] = field(default_factory=dict)
    #: plugin -> why it provides nothing (its register hook failed)
    broken: dict[str, str] = field(default_factory=dict)
    #: usable names whose Params made their defaults (on first use)
    params_checked: set[str] = field(default_factory=set)


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pm: pluggy.PluginManager | None = None
        self.dists: dict[str, tuple[str, str | None]] = {}
        self.eps: dict[str, str] = {}  # plugin's name -> its entry point's name
        self.errors: dict[str, str] = {}  # entry point -> why it could not be loaded
        self.details: dict[str, str] = {}  # name -> the traceback behind an error
        self.table: _Table | None = None
        #: indexes found through the kept listing while no plugin manager is loaded
        self.found: dict[str, Registration] = {}
        #: a plugin registered or unregistered at run time: the entry points are not the
        #: whole story (no listing is kept, none is read)
        self.changed = False


_state = _State()


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager, with every ``indexzoo`` entry point loaded (once)."""
    with _state.lock:
        if _state.pm is None:
            # a malformed variable that plugin modules read as they are imported: one named
            # ConfigError here, not every plugin unusable with a bare parse error
            envvars.check_import_time()
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            named: dict[int, tuple[str, str]] = {}
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                _load_entry_point(pm, ep, named)
            _state.pm = pm
        return _state.pm


def import_timeout() -> float:
    """Seconds one plugin module may take to import: ``INDEXZOO_PLUGIN_TIMEOUT`` (default
    :data:`IMPORT_TIMEOUT_S`)."""
    return envvars.PLUGIN_TIMEOUT.value()


def _import(ep: importlib.metadata.EntryPoint, timeout: float) -> Any:
    """``ep.load()`` in a worker thread, so that whatever the plugin's module does while it is
    imported (raise, exit, raise KeyboardInterrupt, hang) stays with that plugin: a real Ctrl-C
    still reaches the main thread, which waits at most ``timeout`` seconds."""
    got: dict[str, Any] = {}

    def load() -> None:
        try:
            got["plugin"] = ep.load()
        except BaseException as exc:  # the plugin's own failure, reported by the caller
            got["error"] = exc

    worker = threading.Thread(target=load, name=f"indexzoo-import-{ep.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"its module was still importing after {timeout:g} s (the limit is "
                           f"{TIMEOUT_ENV}); it is left out")
    if "error" in got:
        raise got["error"]
    return got["plugin"]


def _distribution(ep: importlib.metadata.EntryPoint,
                  named: dict[int, tuple[str, str]]) -> tuple[str, str] | None:
    """The name and version of the distribution of ``ep``, read once per distribution:
    each read of ``name`` or ``version`` parses the distribution's whole METADATA file, and
    the entry points of one distribution share one object."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    if id(dist) not in named:
        meta = dist.metadata
        named[id(dist)] = (meta["Name"], meta["Version"])
    return named[id(dist)]


def _load_entry_point(pm: pluggy.PluginManager, ep: importlib.metadata.EntryPoint,
                      named: dict[int, tuple[str, str]] | None = None) -> None:
    if pm.is_blocked(ep.name):
        return
    dist = _distribution(ep, {} if named is None else named)
    where = _where(dist)
    try:
        plugin = _import(ep, import_timeout())
    except ConfigError:
        raise
    except BaseException as exc:  # a broken plugin must not take the others down
        what = {SystemExit: "exited", KeyboardInterrupt: "raised KeyboardInterrupt",
                TimeoutError: "timed out"}.get(type(exc), type(exc).__name__)
        _left_out(ep, f"{ep.value} ({where}): {what}: {exc}", exc)
        return
    if pm.is_registered(plugin):  # the same module under a second entry point
        return
    # its hooks as pluggy takes them, and the mistakes pluggy passes over in silence (a hook
    # name no specification declares, a hook function without the marker): left out, named
    why = module_problem(pm, plugin)
    if why is not None:
        _left_out(ep, f"{ep.value} ({where}): {why}")
        return
    # two distributions may use one entry-point name: both load, and a name clash between
    # their indexes is decided by the duplicate-name rule, not by which loaded first
    name = ep.name if pm.get_plugin(ep.name) is None else f"{ep.name} ({where})"
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:  # what module_problem does not foresee
        _left_out(ep, f"{ep.value} ({where}): pluggy refuses its hooks: {exc}", exc)
        return
    _state.dists[name] = (_entry_point_provider(ep, where), dist[0] if dist else None)
    if name == ep.name:
        _state.eps[name] = ep.name


def _where(dist: tuple[str, str] | None) -> str:
    return f"distribution {dist[0]} {dist[1]}" if dist else "unknown dist"


def _entry_point_provider(ep: importlib.metadata.EntryPoint, where: str) -> str:
    return f"entry point {ep.name!r} = {ep.value} ({where})"


def _left_out(ep: importlib.metadata.EntryPoint, why: str,
              exc: BaseException | None = None) -> None:
    """Record why the plugin of entry point ``ep`` provides nothing, in one line (``indexzoo
    list``), with the traceback where there is one (``--verbose``), and warn once."""
    _state.errors[ep.name] = one_line(why)
    if exc is not None:
        _state.details[ep.name] = "".join(traceback.format_exception(exc))
    warnings.warn(f"indexzoo plugin {ep.name!r} failed to load: {_state.errors[ep.name]}",
                  stacklevel=4)


def _provider(pm: pluggy.PluginManager, plugin: Any) -> tuple[str, str | None]:
    name = pm.get_name(plugin) or repr(plugin)
    return _state.dists.get(name, (f"plugin {name!r} registered at run time", None))


def _run_register_hooks() -> _Table:
    pm = plugin_manager()
    table = _Table()
    seen: dict[str, list[Registration]] = {}
    refused: dict[str, PluginError] = {}
    for impl in pm.hook.indexzoo_register_indexes.get_hookimpls():
        provider, dist = _provider(pm, impl.plugin)
        ep_name = _state.eps.get(pm.get_name(impl.plugin) or "")
        mine: list[Registration] = []

        def register(cls: Any, provider: str = provider, dist: str | None = dist,
                     mine: list[Registration] = mine, ep_name: str | None = ep_name) -> None:
            name = getattr(cls, "name", None) if isinstance(cls, type) else None
            try:
                check_plugin_class(cls)
            except PluginError as exc:
                if not (isinstance(name, str) and name):
                    raise  # nothing to name: the plugin's hook fails as a whole
                refused[name] = PluginError(f"index {name!r} of {provider} cannot be used: {exc}")
                return
            mine.append(Registration(cls, provider, dist, ep_name))

        try:
            impl.function(register=register)
        except (Exception, SystemExit) as exc:
            what = "exited" if isinstance(exc, SystemExit) else type(exc).__name__
            plugin = pm.get_name(impl.plugin) or provider
            table.broken[plugin] = one_line(f"{provider}: its register hook failed: {what}: "
                                            f"{exc}")
            _state.details[plugin] = "".join(traceback.format_exception(exc))
            warnings.warn(f"indexzoo plugin {plugin!r} failed: {table.broken[plugin]}",
                          stacklevel=4)
            continue
        for reg in mine:
            seen.setdefault(reg.cls.name, []).append(reg)
    for name, regs in seen.items():
        distinct = {id(r.cls): r for r in regs}
        if len(distinct) > 1:
            a, b = list(distinct.values())[:2]
            table.unusable[name] = DuplicatePlugin(
                f"index name {name!r} is registered twice: by {a.provider} as "
                f"{a.cls.__module__}.{a.cls.__qualname__}, and by {b.provider} as "
                f"{b.cls.__module__}.{b.cls.__qualname__}; uninstall one of them (every other "
                f"index is usable)")
        else:
            table.usable[name] = regs[0]
    for name, err in refused.items():
        table.unusable.setdefault(name, err)
        table.usable.pop(name, None)
    table.usable = dict(sorted(table.usable.items()))
    return table


def _table() -> _Table:
    with _state.lock:
        if _state.table is None:
            _state.table = _run_register_hooks()
            if not _state.changed:
                catalog.remember(listed)
        return _state.table


def _found_alone(name: str) -> type[GpuIndex] | None:
    """Index ``name`` with only its own plugin imported, where no plugin manager is loaded
    yet and the kept listing of this environment names its entry point (see the module's
    docstring); None where anything is other than that listing says, and the caller loads
    every plugin. Called with the lock held."""
    if _state.pm is not None or _state.changed:
        return None
    if name in _state.found:
        return _state.found[name].cls
    ep = catalog.entry_point_of(name)  # (the entry points the listing's stamp read)
    if ep is None:
        return None
    envvars.check_import_time()  # a malformed variable: the ConfigError of a full load
    try:
        plugin = _import(ep, import_timeout())
    except BaseException:  # the full load reports it
        return None
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if module_problem(pm, plugin) is not None:
        return None
    try:
        pm.register(plugin, name=ep.name)
    except pluggy.PluginValidationError:
        return None
    classes: list[Any] = []
    try:
        for impl in pm.hook.indexzoo_register_indexes.get_hookimpls():
            impl.function(register=classes.append)
    except (Exception, SystemExit):
        return None
    mine = {id(c): c for c in classes if isinstance(c, type) and getattr(c, "name", None) == name}
    if len(mine) != 1:
        return None
    [cls] = mine.values()
    try:
        check_plugin_class(cls)
    except PluginError:
        return None
    if params_problem(cls) is not None:
        return None
    dist = _distribution(ep, {})
    _state.found[name] = Registration(cls, _entry_point_provider(ep, _where(dist)),
                                      dist[0] if dist else None, ep.name)
    return cls


def available() -> MappingProxyType[str, type[GpuIndex]]:
    """Every usable registered index: name -> class (``.capabilities``, ``.Params``, doc)."""
    return MappingProxyType({n: r.cls for n, r in _table().usable.items()})


def providers() -> MappingProxyType[str, str]:
    """Every usable registered index: name -> who provided it."""
    return MappingProxyType({n: r.provider for n, r in _table().usable.items()})


def listed() -> catalog.Listing:
    """Every registered index as ``indexzoo list`` shows it, and what is not usable (the
    listing :mod:`indexzoo.catalog` keeps)."""
    table, provider, eps = available(), providers(), entry_points()
    entries = [catalog.Entry(name, catalog.describe(cls), cls.capabilities.summary(),
                             cls.capabilities.model_dump(mode="json"), provider[name],
                             "engine" in cls.Params.model_fields, eps.get(name))
               for name, cls in table.items()]
    return catalog.Listing(entries, dict(load_errors()), dict(load_error_details()))


def entry_points() -> MappingProxyType[str, str]:
    """Every usable registered index that an entry point's plugin provides: name -> the entry
    point's name."""
    return MappingProxyType({n: r.entry_point for n, r in _table().usable.items()
                             if r.entry_point is not None})


def builtin() -> list[str]:
    """Names of the indexes that ship with indexzoo itself."""
    return [n for n, r in _table().usable.items() if r.distribution == "indexzoo"]


def selection(which: str) -> tuple[list[str], list[str]]:
    """The indexes ``which`` ("all": every registered one, "builtin": those shipped with
    indexzoo) names for one-column workloads (bench, recommend), and the multi-column indexes
    left out of it (``capabilities.dims > 1``: their range answers are N-bit bitmaps, their
    workloads have several columns; naming them includes them). Indexes that wrap others
    (``selected_by_default = False``: ``sharded``) are in neither list; naming them runs them."""
    table = available()
    names = [n for n in (list(table) if which == "all" else builtin())
             if n in table and table[n].selected_by_default]
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
    """What is registered but unusable, and why: entry points that failed to load, plugins
    whose register hook failed, index names registered twice, index classes that break the
    plugin contract (name -> reason)."""
    table = _table()
    out = dict(_state.errors)
    out.update(table.broken)
    out.update({name: str(err) for name, err in table.unusable.items()})
    return MappingProxyType(out)


def load_error_details() -> MappingProxyType[str, str]:
    """The tracebacks behind :func:`load_errors` where there was an exception (name -> text),
    for ``indexzoo list --verbose``."""
    _table()
    return MappingProxyType(dict(_state.details))


def lookup(name: str) -> type[GpuIndex]:
    """The index class registered as ``name``; :class:`~indexzoo.DuplicatePlugin` or
    :class:`~indexzoo.errors.PluginError` for a name that is registered but unusable,
    ConfigError naming the alternatives for an unknown one."""
    if not isinstance(name, str):
        raise ConfigError(f"index name must be a string, got {type(name).__name__} {shown(name)}")
    with _state.lock:
        if _state.table is None:
            cls = _found_alone(name)
            if cls is not None:
                return cls
    table = _table()
    if name in table.usable:
        return _params_checked(table, name)
    if name in table.unusable:
        err = table.unusable[name]
        raise type(err)(str(err))
    if name in _state.errors:
        raise PluginError(f"index {name!r} could not be loaded: {_state.errors[name]}")
    usable = list(table.usable)
    close = _closest(name, usable)
    hint = f"; did you mean {close!r}?" if close else "."
    raise ConfigError(
        f"unknown index {shown(name, 40)}{hint} Available: {', '.join(usable) or 'none'}"
    )


def _params_checked(table: _Table, name: str) -> type[GpuIndex]:
    """The usable class ``name`` once its Params make their defaults (checked on its first
    use, where its validator is built anyway, not when the indexes are listed); else it
    becomes unusable, and PluginError names the class and the field."""
    reg = table.usable[name]
    with _state.lock:
        if name not in table.params_checked:
            why = params_problem(reg.cls)
            table.params_checked.add(name)
            if why is not None:
                table.usable.pop(name)
                table.unusable[name] = PluginError(
                    f"index {name!r} of {reg.provider} cannot be used: {why}")
    if name in table.unusable:
        raise PluginError(str(table.unusable[name]))
    return reg.cls


def _closest(name: str, names: list[str]) -> str | None:
    """The registered name ``name`` most likely meant: the closest spelling (difflib), else
    the only name that contains it (``hash`` -> ``warpcore-hash``); None when nothing fits."""
    if len(name) > 100 or not name.strip():
        return None
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return close[0]
    holding = [n for n in names if name.lower() in n.lower()]
    return holding[0] if len(holding) == 1 else None


def create(index: str | IndexSpec | dict[str, Any] | type[GpuIndex], /, *,
           device: str | None = None, **params: Any) -> GpuIndex:
    """Make an index from a name and parameters, an :class:`IndexSpec`, a spec dict, or an
    index class (a :class:`GpuIndex` subclass, registered or not, as the conformance suite
    takes it).

    ``create("sorted-array", device="cuda", threads_per_block=512)``;
    ``create("sorted-array", params={"threads_per_block": 512})`` (the spec file's shape);
    ``create(load_spec("index.yaml"))``; ``create(MyIndex, fanout=8)``. Keyword parameters
    override those of ``params=``, which override those of a spec. Unknown names, unknown
    params and out-of-range values raise ConfigError before any device work starts; a class
    that breaks the plugin contract raises :class:`~indexzoo.errors.PluginError`.
    """
    if "params" in params:  # the spec's shape: params={...}; no index has a parameter "params"
        given = params.pop("params")
        if given is not None and not isinstance(given, Mapping):
            raise ConfigError(
                f"params must be a mapping of parameter names to values, got "
                f"{type(given).__name__} {shown(given)}")
        params = {**(given or {}), **params}
    if isinstance(index, dict):
        index = spec_from_data(index)
    if isinstance(index, IndexSpec):
        cls = lookup(index.index)
        return cls({**index.params, **params}, device=device or index.device)
    if isinstance(index, type):
        return _index_class(index)(params, device=device or "auto")
    return lookup(index)(params, device=device or "auto")


def _index_class(cls: type) -> type[GpuIndex]:
    """``cls`` when it is an index class that keeps the plugin contract; ConfigError for any
    other class, PluginError naming what a GpuIndex subclass breaks."""
    if not issubclass(cls, GpuIndex):
        raise ConfigError(f"create() takes an index name, a spec or a GpuIndex subclass; "
                          f"{cls.__module__}.{cls.__qualname__} is not a GpuIndex subclass")
    check_plugin_class(cls)
    return cls


def load(path: str | os.PathLike[str] | persist.BinaryReader, *,
         device: str | None = None) -> GpuIndex:
    """The index saved at ``path`` (by ``index.save(path)``), on ``device`` (default: the
    device it was saved from where the index runs there and it is usable here, else the CPU).

    ``path`` may be a binary file object instead (anything with ``read``: an open file, an
    ``io.BytesIO``, a pipe): the saved index is read from its current position to its end.

    Its class is found by the index name the file holds, through the registry (never by a
    class path read from the file). The file is untrusted input: every way it can be wrong
    (not a saved index, not a regular file, truncated, corrupted, of a newer format version,
    a state its plugin's schema refuses) is an :class:`~indexzoo.errors.IndexFileError`
    naming the file and what is wrong (docs/persistence.md); an index it names that is not
    installed is :class:`~indexzoo.errors.UnknownIndexInFile`, an IndexFileError that is also
    a ConfigError."""
    return _loaded(lambda target: persist.read(path, target), device)


def from_bytes(data: bytes | bytearray | memoryview, *, device: str | None = None) -> GpuIndex:
    """The index whose saved bytes are ``data`` (``index.to_bytes()``, or a saved file's
    contents), on ``device`` as for :func:`load`, refused exactly as the same bytes in a file
    would be (the messages name "the given bytes"); ConfigError for anything but bytes, a
    bytearray or a memoryview."""
    return _loaded(lambda target: persist.read_bytes(data, target), device)


def _loaded(read: Callable[[Callable[[persist.SavedIndex], str]], persist.SavedIndex],
            device: str | None) -> GpuIndex:
    """The index ``read(target)`` returns the saved form of, its class found by name."""
    found: dict[str, Any] = {}

    def target(saved: persist.SavedIndex) -> str:
        """The device the arrays are read onto, known once the metadata is read (a load onto
        the GPU reads them straight into device memory)."""
        try:
            cls = lookup(saved.index)
        except ConfigError as exc:
            raise UnknownIndexInFile(f"{saved.source}: holds index {saved.index[:80]!r}, which "
                                     f"cannot be used here: {exc}") from None
        found["cls"], found["device"] = cls, cls._load_device(saved, device)
        onto_gpu = (found["device"] == "cuda" and "cuda" in cls.capabilities.devices
                    and cuda_status()[0])
        return "cuda" if onto_gpu else "cpu"  # else the index's own checks speak, after reading

    saved = read(target)
    return found["cls"].from_saved(saved, device=found["device"])


def suggestions(question: SuggestQuestion) -> list[Suggestion]:
    """What the plugins suggest for ``question`` (the hook ``indexzoo_suggest_indexes``); a
    plugin whose hook fails is left out with a warning."""
    pm = plugin_manager()
    out: list[Suggestion] = []
    for impl in pm.hook.indexzoo_suggest_indexes.get_hookimpls():
        call: Callable[..., Any] = impl.function
        try:
            got = call(question=question)
        except Exception as exc:
            warnings.warn(f"indexzoo plugin {_provider(pm, impl.plugin)[0]}: its suggestion "
                          f"hook failed: {type(exc).__name__}: {exc}", stacklevel=2)
            continue
        if isinstance(got, Suggestion):
            out.append(got)
    return out


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Register a plugin object (a module or any object with the hook) at run time."""
    with _state.lock:
        pm = plugin_manager()
        registered = pm.register(plugin, name=name)
        _state.table, _state.changed = None, True
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
        _state.table, _state.changed = None, True


def reset() -> None:
    """Forget every plugin and load the entry points again on next use (for tests)."""
    with _state.lock:
        _state.pm, _state.table, _state.changed = None, None, False
        _state.dists.clear()
        _state.eps.clear()
        _state.errors.clear()
        _state.details.clear()
        _state.found.clear()
        catalog.forget()


# ----------------------------------------------------------------------------- query engines
def query_engines() -> dict[str, type[QueryEngine]]:
    """Every registered query engine (hook ``indexzoo_register_query_engines``): name ->
    class."""
    from .query import QueryEngine

    found: dict[str, type[QueryEngine]] = {}

    def register(cls: type[QueryEngine]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, QueryEngine)):
            raise ConfigError(f"register takes QueryEngine subclasses, got {cls!r}")
        if cls.name in found and found[cls.name] is not cls:
            raise ConfigError(f"query engine name {cls.name!r} is registered twice")
        found[cls.name] = cls

    for impl in plugin_manager().hook.indexzoo_register_query_engines.get_hookimpls():
        impl.function(register=register)
    return dict(sorted(found.items()))


def query_engine(spec: str | EngineSpec | Mapping[str, Any], /, *, device: str | None = None,
                 **params: Any) -> QueryEngine:
    """A query engine by name (``query_engine("rtcudb", backend="sorted")``) or by spec
    (``{"engine": ..., "params": {...}, "device": ...}``); unknown names and bad parameters
    raise ConfigError before any work."""
    from .query import EngineSpec

    if isinstance(spec, str):
        s = EngineSpec(engine=spec, params=params, device=device or "auto")
    else:
        try:
            s = spec if isinstance(spec, EngineSpec) else EngineSpec(**spec)
        except ValidationError as exc:
            raise ConfigError(f"bad query engine spec: {exc.errors()[0]['msg']}") from None
        s = s.model_copy(update={"params": {**s.params, **params},
                                 "device": device or s.device})
    known = query_engines()
    if s.engine not in known:
        close = _closest(s.engine, list(known))
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ConfigError(f"unknown query engine {s.engine!r}{hint}; registered: "
                          f"{', '.join(known) or 'none'}")
    return known[s.engine](s.params, device=s.device)
