"""The pluggy hook a plugin implements to add indexes.

A plugin module (found through the ``indexzoo`` entry-point group) writes::

    import indexzoo

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register):
        register(MyIndex)

``register`` takes a :class:`~indexzoo.GpuIndex` subclass; call it once per index class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

__all__ = ["hookimpl", "hookspec", "indexzoo_register_indexes"]

PROJECT = "indexzoo"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def indexzoo_register_indexes(register: Callable[[type[Any]], None]) -> None:
    """Register index classes by calling ``register(cls)`` for each."""
