"""Modules imported on first use: how an index keeps its kernels out of its own import.

The registry imports every plugin's index class to list it (its name, capabilities, params and
docstring), and a kernel module imports numba and compiles nothing until a kernel runs; an
index module therefore names its kernel modules through :func:`lazy_module`, which returns the
module object at once and runs the module's code when one of its attributes is first read
(when an index is built, loaded or queried)::

    if TYPE_CHECKING:
        from . import kernels  # what type checkers (and the import contract) see
    else:
        kernels = lazy_module(f"{__package__}.kernels")

From then on it is the ordinary module, the one ``sys.modules`` holds and a plain ``import``
returns: after its first use, reading its attributes costs what it costs on any module.
Modules that are imported already are returned as they are.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["lazy_module"]

#: One lock per module not run yet: the first use runs its code once, and a use from another
#: thread meanwhile waits for it.
_locks: dict[str, threading.RLock] = {}
_running: set[str] = set()


class _NotRunYet(types.ModuleType):
    """A module whose code has not run: reading an attribute it lacks runs it."""

    def __getattr__(self, attr: str) -> Any:
        _run(self)
        return types.ModuleType.__getattribute__(self, attr)

    def __dir__(self) -> list[str]:
        _run(self)
        return list(types.ModuleType.__getattribute__(self, "__dict__"))


def lazy_module(name: str) -> types.ModuleType:
    """The module ``name`` (absolute), its code run on first use of one of its attributes.

    Its parent package is imported now; ModuleNotFoundError when there is no such module."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    _locks[name] = threading.RLock()
    module.__class__ = _NotRunYet
    module = sys.modules.setdefault(name, module)  # another thread's import may have won
    parent, _, child = name.rpartition(".")
    if parent and sys.modules.get(parent) is not None:
        setattr(sys.modules[parent], child, module)  # as an import binds a submodule
    return module


def _run(module: types.ModuleType) -> None:
    """Run the code of ``module`` unless it ran, or is running in this thread (a cycle of
    imports under way: the module is partly initialised, as a plain import leaves it)."""
    name = types.ModuleType.__getattribute__(module, "__name__")
    lock = _locks.get(name)
    if lock is None:
        return
    with lock:
        if type(module) is not _NotRunYet or name in _running:
            return
        _running.add(name)
        try:
            spec = types.ModuleType.__getattribute__(module, "__spec__")
            spec.loader.exec_module(module)  # a failure leaves it to run on the next use
            ran: types.ModuleType = module
            ran.__class__ = types.ModuleType  # from now on an ordinary module
        finally:
            _running.discard(name)
    _locks.pop(name, None)
