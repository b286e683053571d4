"""A plugin class's hooks, resolved once against the operation table and checked.

:func:`resolve` answers, for one index class, which function answers each operation its
capabilities declare (:class:`Route`), and raises :class:`~indexzoo.errors.PluginError`
naming every problem at once: a misspelled hook (``_point_cnt``), a hook whose signature
cannot take the arguments the base passes, a hook for an operation the capabilities do not
declare, a declared operation nothing answers, a lifecycle hook left abstract, a plugin API
this indexzoo cannot take. The registry calls it when a class is registered (so ``indexzoo
list`` and ``indexzoo check`` report the problems), ``GpuIndex`` when an index is made, and
the conformance suite's ``contract`` group checks it too.

How an operation is answered, in this order:

1. its own hook, ``_<kind>_<out>`` (:mod:`indexzoo.operations`), or a method marked with
   :func:`~indexzoo.operations.answers` for it, called as ``method(self, st, op, *arrays)``;
2. for a point operation of a class with ``points_as_ranges = True``: the same out mode's
   range operation, found as in 1 and called with the range ``[q, q]``;
3. derived by the base from the same kind's ``rowids`` answer (found by 1-2), else from its
   ``bitmap`` answer: ``rowid`` (the first listed match), ``count``, ``sum``, and ``bitmap``
   from ``rowids`` or ``rowids`` from ``bitmap``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import PluginError
from .operations import KINDS, OPERATIONS, Operation, marked_operations, operation
from .plugin_api import PLUGIN_API, refusal
from .results import OUT_MODES

__all__ = ["CLASS_HOOKS", "LIFECYCLE_HOOKS", "Resolution", "Route", "Source", "declared_operations",
           "resolve"]

#: The hooks that are not operations: name -> the arguments after ``self``, and when needed.
LIFECYCLE_HOOKS: dict[str, tuple[tuple[str, ...], str]] = {
    "_build": (("st", "keys"), "always: fill the state from the keys"),
    "_footprint": (("st",), "always: the plugin's buffers in bytes"),
    "_update": (("old", "new", "positions", "new_keys"), "with capabilities.updates"),
    "_prepared_point": (("st", "op"), "optional: point lookups prepared once per build"),
    "_prepared_range": (("st", "op"), "optional: range lookups prepared once per build"),
    "_save_state": (("st",), "optional: the state's parts to save (docs/persistence.md)"),
    "_load_state": (("st", "saved"), "optional: fill a loaded state from the saved parts"),
    "_params_for_load": (("params", "device"),
                         "optional: saved params as an index loaded onto a device takes them"),
    "_class_for": (("params",),
                   "optional: the class an index made with these params is (a narrower "
                   "subclass its __new__ makes)"),
}
#: The lifecycle hooks that are classmethods (called before the index exists).
CLASS_HOOKS = frozenset({"_params_for_load", "_class_for"})
_RESERVED = re.compile(r"_(point|range)_\w+")
_MODE_LIKE = re.compile(r"_([a-z]+)_(" + "|".join(OUT_MODES) + r")")


@dataclass(frozen=True)
class Source:
    """A plugin function that answers ``op`` (its out mode is what it returns)."""

    op: Operation
    hook: str
    fn: Callable[..., Any]
    as_range: bool = False   # a point batch q is passed as the range (q, q)
    generic: bool = False    # a method marked with answers(): fn(self, st, op, *arrays)

    def __call__(self, index: Any, st: Any, arrays: tuple[Any, ...]) -> Any:
        if self.as_range:
            arrays = (arrays[0], arrays[0])
        if self.generic:
            return self.fn(index, st, self.op, *arrays)
        return self.fn(index, st, *arrays)

    def bind(self, index: Any, st: Any) -> Callable[..., Any]:
        """The hook of one build as the prepared paths call it: ``q -> answer`` for point
        batches, ``(lo, hi) -> answer`` for ranges."""
        fn, op = self.fn, self.op
        if self.generic:
            if self.as_range:
                return lambda q: fn(index, st, op, q, q)
            return functools.partial(fn, index, st, op)
        if self.as_range:
            return lambda q: fn(index, st, q, q)
        return functools.partial(fn, index, st)

    def describe(self) -> str:
        """``_range_count(st, q, q)``, ``_answer(st, range/count, lo, hi)``."""
        args = "q, q" if self.as_range else ", ".join(self.op.arguments)
        if self.generic:
            return f"{self.hook}(st, {self.op.kind}/{self.op.out}, {args})"
        return f"{self.hook}(st, {args})"


@dataclass(frozen=True)
class Route:
    """How the base answers ``op``: by calling ``source``, and, when the source answers
    another out mode (``rowids`` or ``bitmap``), deriving ``op.out`` from its answer."""

    op: Operation
    source: Source

    @property
    def derived(self) -> bool:
        return self.source.op.out != self.op.out

    def describe(self) -> str:
        how = f"derived from {self.source.describe()}" if self.derived else self.source.describe()
        return f"{self.op.kind} {self.op.out}: {how}"


@dataclass(frozen=True)
class Resolution:
    """One class's routes (operation -> :class:`Route`) and the plugin API it targets."""

    routes: Mapping[Operation, Route]
    api: str
    #: the operations the class's ``_prepared_point`` and ``_prepared_range`` may answer: those
    #: of their kind whose hook is defined where the prepared hook is, or above it (a subclass
    #: that overrides the hook and not the prepared one gets its hook, never the base's
    #: prepared shortcut)
    prepared: frozenset[Operation] = field(default=frozenset())


def declared_operations(caps: Any) -> list[Operation]:
    """The operations a :class:`~indexzoo.Capabilities` declares."""
    kinds = [k for k in KINDS if getattr(caps, k)]
    return [op for op in OPERATIONS if op.kind in kinds and op.out in caps.out_modes]


# ---------------------------------------------------------------------- resolution
_LOCK = threading.Lock()
_RESOLVED: weakref.WeakKeyDictionary[type, Resolution] = weakref.WeakKeyDictionary()


def resolve(cls: type, base: type) -> Resolution:
    """The routes of index class ``cls`` (a subclass of ``base``, :class:`~indexzoo.GpuIndex`),
    computed once per class; :class:`~indexzoo.errors.PluginError` listing every problem."""
    got = _RESOLVED.get(cls)
    if got is not None:
        return got
    with _LOCK:
        got = _RESOLVED.get(cls)
        if got is None:
            got = _resolve(cls, base)
            _RESOLVED[cls] = got
    return got


def _where(cls: type) -> str:
    name = getattr(cls, "name", None)
    shown = f" ({name!r})" if isinstance(name, str) and name else ""
    return f"{cls.__module__}.{cls.__qualname__}{shown}"


def _resolve(cls: type, base: type) -> Resolution:
    declared = getattr(cls, "plugin_api", None)
    why = refusal(declared) or getattr(getattr(cls, "capabilities", None), "problem", None)
    if why is not None:
        raise PluginError(f"index class {_where(cls)} is refused: {why}")
    problems = _check(cls, base)
    routes: dict[Operation, Route] = {}
    if not problems:
        routes, missing = _routes(cls, base)
        problems += missing
    if problems:
        raise PluginError(f"index class {_where(cls)} breaks the plugin contract (plugin API "
                          f"{PLUGIN_API}): " + "; ".join(problems))
    return Resolution(routes, str(declared), _preparable(cls, base, routes))


def _preparable(cls: type, base: type, routes: Mapping[Operation, Route]) -> frozenset[Operation]:
    owners = _own_attributes(cls, base)
    found = set()
    for kind in ("point", "range"):
        prepared_owner = owners.get(f"_prepared_{kind}")
        if prepared_owner is None:
            continue
        found |= {op for op, route in routes.items()
                  if op.kind == kind and not route.derived
                  and route.source.hook in owners
                  and issubclass(prepared_owner, owners[route.source.hook])}
    return frozenset(found)


def _own_attributes(cls: type, base: type) -> dict[str, type]:
    """Attribute name -> the class that defines it, for the classes of ``cls``'s MRO that come
    before ``base`` (the plugin's own classes and mixins)."""
    mro = cls.__mro__
    stop = mro.index(base) if base in mro else len(mro)
    owner: dict[str, type] = {}
    for c in reversed(mro[:stop]):
        for name in vars(c):
            owner[name] = c
    return owner


def _function(cls: type, name: str) -> Any:
    return inspect.getattr_static(cls, name)


def _marks(cls: type, base: type, name: str) -> frozenset[Operation]:
    """The operations method ``name`` answers: marked with ``answers`` on its nearest
    definition that has marks (an override need not repeat the decorator)."""
    mro = cls.__mro__
    for c in mro[:mro.index(base) if base in mro else len(mro)]:
        if name in vars(c):
            got = marked_operations(vars(c)[name])
            if got:
                return got
    return frozenset()


def _signature_problem(cls: type, name: str, calls: list[tuple[str, ...]], expected: str
                       ) -> str | None:
    """Why ``cls.name`` cannot be called as the base calls it (None: it can)."""
    raw = _function(cls, name)
    if name in CLASS_HOOKS:
        if not isinstance(raw, classmethod):
            return f"{name} must be a classmethod: @classmethod def {expected}"
        try:
            inspect.signature(getattr(cls, name)).bind(*calls[0])
        except TypeError as exc:
            return f"{name} cannot be called as {name}(cls, {', '.join(calls[0])}) ({exc})"
        except ValueError:
            pass
        return None
    if isinstance(raw, (staticmethod, classmethod, property)):
        return f"{name} is a {type(raw).__name__}; expected a method: def {expected}"
    fn = getattr(cls, name)
    if not callable(fn):
        return f"{name} is not a method but {type(raw).__name__}; expected def {expected}"
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None  # a callable numba or C cannot describe: taken on trust
    for args in calls:
        try:
            sig.bind("self", *args)
        except TypeError as exc:
            plain = sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty)
                                            for p in sig.parameters.values()],
                                return_annotation=inspect.Signature.empty)
            return (f"{name}{plain} cannot be called as {name}(self, {', '.join(args)}) "
                    f"({exc}); expected def {expected}")
    return None


def _close(name: str, candidates: list[str]) -> str:
    hit = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {hit[0]}?" if hit else ""


def _caps_at(owner: type, cls: type, base: type) -> Any:
    """The capabilities that govern a hook defined in ``owner``: the ones in effect where it
    is defined (a subclass may narrow them deliberately), or ``cls``'s for a mixin that
    declares none."""
    caps = getattr(owner, "capabilities", None)
    if caps is None or owner is base:
        caps = getattr(cls, "capabilities", None)
    return caps


def _inherited_problem(cls: type, name: str, owner: type, op: Operation) -> list[str]:
    """A hook ``cls`` inherits from ``owner`` for an operation ``cls`` itself does not declare:
    refused, unless ``cls`` narrows its parent's capabilities deliberately (``narrows =
    True``: the hooks it no longer declares are never called)."""
    caps = getattr(cls, "capabilities", None)
    if (owner is cls or caps is None or op in declared_operations(caps)
            or getattr(cls, "narrows", False) is True):
        return []
    return [f"{name} (inherited from {owner.__qualname__}) answers {op}, which the "
            f"capabilities of {cls.__qualname__} do not declare ({_undeclared(op, caps)}); "
            f"declare it, or set narrows = True in {cls.__qualname__} to drop what its parent "
            f"declares deliberately"]


def _check(cls: type, base: type) -> list[str]:
    """The problems of ``cls``'s hooks."""
    problems: list[str] = []
    owners = _own_attributes(cls, base)
    hook_names = [op.hook for op in OPERATIONS]
    by_hook = {op.hook: op for op in OPERATIONS}
    table = ", ".join(op.signature.split("(")[0] for op in OPERATIONS)
    for name, owner in owners.items():
        if name in by_hook:
            op = by_hook[name]
            bad = _signature_problem(cls, name, [("st", *op.arguments)], op.signature)
            if bad:
                problems.append(bad)
            caps = _caps_at(owner, cls, base)
            if caps is not None and op not in declared_operations(caps):
                problems.append(
                    f"{name} answers {op}, which the capabilities of {owner.__qualname__} do "
                    f"not declare ({_undeclared(op, caps)}); declare it or remove the hook")
            else:
                problems += _inherited_problem(cls, name, owner, op)
        elif _RESERVED.fullmatch(name):
            problems.append(f"{name} is not an operation hook: names starting with _point_ or "
                            f"_range_ are reserved for the operations{_close(name, hook_names)} "
                            f"(the hooks: {table})")
        else:
            m = _MODE_LIKE.fullmatch(name)
            if m and m.group(1) not in KINDS and difflib.get_close_matches(
                    m.group(1), list(KINDS), n=1, cutoff=0.6):
                problems.append(f"{name} looks like a misspelled hook{_close(name, hook_names)}")
    overridable = set(LIFECYCLE_HOOKS) | {op.hook for op in OPERATIONS}
    for name, owner in owners.items():
        if (name.startswith("_") and not name.startswith(("__", "_abc_")) and name not in overridable
                and name in _internals(base)):
            problems.append(f"{owner.__qualname__}.{name} replaces the base class's own "
                            f"{name} (not a hook); rename it")
    for name, (args, _when) in LIFECYCLE_HOOKS.items():
        if name in owners:
            bad = _signature_problem(cls, name, [args], f"{name}(self, {', '.join(args)})")
            if bad:
                problems.append(bad)
    if "_update" in owners:
        caps = _caps_at(owners["_update"], cls, base)
        if caps is not None and not caps.updates:
            problems.append(f"_update is defined but the capabilities of "
                            f"{owners['_update'].__qualname__} declare updates=False")
    answered: dict[Operation, str] = {op: op.hook for op in OPERATIONS if op.hook in owners}
    for name, owner in owners.items():
        marked = _marks(cls, base, name)
        if not marked:
            continue
        kinds = sorted({op.kind for op in marked})
        calls = [("st", "op", *operation(k, "count").arguments) for k in kinds]
        bad = _signature_problem(cls, name, calls, f"{name}(self, st, op, *arrays)")
        if bad:
            problems.append(bad)
        caps = _caps_at(owner, cls, base)
        for op in sorted(marked):
            if caps is not None and op not in declared_operations(caps):
                problems.append(
                    f"{name} is marked to answer {op}, which the capabilities of "
                    f"{owner.__qualname__} do not declare ({_undeclared(op, caps)})")
            else:
                problems += _inherited_problem(cls, name, owner, op)
            if op in answered:
                problems.append(f"{op} are answered twice, by {answered[op]} and by {name}")
            answered[op] = name
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    for name in abstract:
        args = LIFECYCLE_HOOKS.get(name, (("...",), ""))[0]
        problems.append(f"{name} is not implemented; expected def {name}(self, {', '.join(args)})")
    probe_kinds: frozenset[str] = getattr(cls, "sorted_probe_kinds", frozenset())
    if not set(probe_kinds) <= set(KINDS):
        problems.append(f"sorted_probe_kinds {sorted(probe_kinds)} names kinds other than "
                        f"{', '.join(KINDS)}")
    if not isinstance(getattr(cls, "points_as_ranges", False), bool):
        problems.append("points_as_ranges must be True or False")
    for flag in ("narrows", "full_scan"):
        if not isinstance(getattr(cls, flag, False), bool):
            problems.append(f"{flag} must be True or False")
    return problems


def _internals(base: type) -> set[str]:
    """The private names the base class and its bases define (hooks aside)."""
    return {n for c in base.__mro__ for n in vars(c)}


def _undeclared(op: Operation, caps: Any) -> str:
    if not getattr(caps, op.kind):
        return f"{op.kind}=False"
    return f"out_modes {', '.join(caps.out_modes)}"


def _routes(cls: type, base: type) -> tuple[dict[Operation, Route], list[str]]:
    """Every declared operation's route, and the declared operations nothing answers."""
    owners = _own_attributes(cls, base)
    caps = cls.capabilities  # type: ignore[attr-defined]
    as_ranges = bool(getattr(cls, "points_as_ranges", False))
    marked = {op: name for name in owners for op in _marks(cls, base, name)}

    def own(op: Operation, as_range: bool = False) -> Source | None:
        if op.hook in owners:
            return Source(op, op.hook, getattr(cls, op.hook), as_range=as_range)
        if op in marked:
            return Source(op, marked[op], getattr(cls, marked[op]), as_range=as_range,
                          generic=True)
        return None

    def direct(op: Operation) -> Source | None:
        src = own(op)
        if src is None and op.kind == "point" and as_ranges:
            src = own(operation("range", op.out), as_range=True)
        return src

    routes: dict[Operation, Route] = {}
    missing: list[str] = []
    for op in declared_operations(caps):
        src = direct(op)
        if src is None:
            bases = [m for m in ("rowids", "bitmap") if m != op.out]
            for m in bases:
                src = direct(operation(op.kind, m))
                if src is not None:
                    break
        if src is None:
            hint = (f"{op.signature} or {operation(op.kind, 'rowids').signature} (or "
                    f"{operation(op.kind, 'bitmap').hook}), from which the base derives it")
            if op.kind == "point":
                hint += ", or points_as_ranges = True with the range hooks"
            missing.append(f"{op} are declared but nothing answers them: define {hint}")
            continue
        routes[op] = Route(op, src)
    return routes, missing
