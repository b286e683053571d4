"""A plugin module's pluggy hooks, checked against indexzoo's hook specifications.

pluggy itself refuses a hook whose arguments the specification does not have by raising from
``PluginManager.register`` (which would take every plugin down with it), and accepts two
mistakes without a word: a marked function whose name is no hook (``indexzoo_register_index``)
and a hook function without ``@indexzoo.hookimpl``, both of which register nothing.
:func:`module_problem` names each of them in one line, so the registry can leave that plugin
out and say why (``indexzoo list``), and every other plugin loads.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import pluggy

from . import hookspecs

__all__ = ["HOOKS", "module_problem"]

#: The hooks indexzoo specifies: name -> the arguments it passes.
HOOKS: dict[str, tuple[str, ...]] = {
    name: tuple(inspect.signature(fn).parameters)
    for name, fn in sorted(vars(hookspecs).items())
    if name.startswith(f"{hookspecs.PROJECT}_") and inspect.isfunction(fn)}

#: How close (difflib's ratio) a function's name must be to a hook's to be taken for it.
_CLOSE = 0.8


def _nearest(name: str) -> str | None:
    hit = difflib.get_close_matches(name, list(HOOKS), n=1, cutoff=_CLOSE)
    return hit[0] if hit else None


def _required(fn: Any) -> list[str] | None:
    """The arguments pluggy passes by name to ``fn``: those without a default (None when its
    signature cannot be read)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.default is p.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _expected(hook: str) -> str:
    return f"def {hook}({', '.join(HOOKS[hook])})"


def module_problem(pm: pluggy.PluginManager, plugin: object) -> str | None:
    """Why ``plugin`` (a module found through an entry point) cannot be registered as it is,
    in one line, or None: a marked hook whose name no specification declares (unless marked
    ``optionalhook=True``), a hook that takes arguments the specification does not pass, or,
    in a module that marks nothing, a function named like a hook (or close to one) left
    without the ``@indexzoo.hookimpl`` marker."""
    marked: list[str] = []
    problems: list[str] = []
    for attr in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attr)
        if opts is None:
            continue
        marked.append(attr)
        hook = opts.get("specname") or attr
        fn = inspect.getattr_static(plugin, attr)
        if hook not in HOOKS:
            if opts.get("optionalhook"):
                continue
            near = _nearest(hook)
            hint = (f"; did you mean {near}?" if near else
                    f"; the hooks are {', '.join(HOOKS)}")
            problems.append(f"its hook {hook} is not an indexzoo hook{hint}")
            continue
        args = _required(fn)
        extra = [a for a in args or () if a not in HOOKS[hook]]
        if extra:
            problems.append(f"its hook {hook}({', '.join(args or ())}) takes "
                            f"{', '.join(extra)}, which {hook} does not pass; expected "
                            f"{_expected(hook)}")
    if problems or marked:
        return "; ".join(problems) or None
    for attr in dir(plugin):
        fn = inspect.getattr_static(plugin, attr, None)
        if not inspect.isfunction(fn):
            continue
        near = attr if attr in HOOKS else _nearest(attr)
        if near is None and not attr.startswith(f"{hookspecs.PROJECT}_"):
            continue
        meant = ("" if near == attr else f" (did you mean {near}?)" if near is not None
                 else f" (the hooks are {', '.join(HOOKS)})")
        problems.append(f"its function {attr}{meant} is not marked with @indexzoo.hookimpl, "
                        f"so it registers nothing")
    return "; ".join(problems) or None
