"""What one build of an index produced: :class:`BuildState`.

An index publishes each build (and each update) as a new state object with one reference
assignment, and every lookup reads that reference once and works on the state it got, from
start to finish. A lookup that runs while another thread rebuilds the index therefore answers
entirely from the old build or entirely from the new one, never from a mixture; a build that
fails publishes nothing, so the previous build stays in place.

The base class fills the fields every index has (:attr:`keymap`, :attr:`n`, :attr:`values`,
:attr:`device`); a plugin subclasses :class:`BuildState` for its own buffers, names the
subclass as the type argument of ``GpuIndex[...]``, and fills them in ``_build``. Once
published, a state is sealed: assigning an attribute raises ``AttributeError``, so a lookup
cannot change what other threads are reading (compute caches in ``_build`` instead).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from .devices import array_module
from .keys import KeyMap

__all__ = ["BASE_FIELDS", "BuildState", "describe_columns", "rowid_dtype_for"]

#: Indexes holding this many keys or more use uint64 rowIDs (a uint32 rowID could equal the
#: uint32 miss value).
WIDE_ROWIDS_FROM = (1 << 32) - 1


#: The attributes the base sets on every state (the rest are the plugin's): what a saved
#: index records in its own fields, or derives again on load.
BASE_FIELDS = frozenset({"keymap", "keymaps", "n", "values", "device", "rows", "n_rows",
                         "nulls", "names", "rowid_dtype", "miss", "_xp", "_prepared",
                         "_sealed"})


def rowid_dtype_for(n: int) -> np.dtype:
    """uint32, or uint64 once an index holds 2^32 - 1 keys or more."""
    return np.dtype(np.uint32 if n < WIDE_ROWIDS_FROM else np.uint64)


class BuildState:
    """One build of an index: the base's fields and, in a plugin's subclass, the plugin's.

    * ``keymap``: the order-preserving map of the user's key dtype onto the native one (of
      the first column for a multi-column index);
    * ``keymaps``: one key map per column (``(keymap,)`` for a one-column index); every
      column maps onto the same native dtype;
    * ``dims``: number of columns of this build;
    * ``n``: number of keys (rows of a multi-column index; rowIDs are ``0 .. n-1``);
    * ``values``: the index's own uint64 copy of the build's values, or None (sums of rowIDs);
    * ``device``, ``xp`` (NumPy or CuPy), ``rowid_dtype`` and ``miss`` (derived from ``n``);
    * ``rows``: None, or (a build with ``nulls="skip"`` that left rows out) the build's
      position of each row the plugin holds, increasing int64 on the device; the base
      reports rowIDs as these positions, and ``n_rows`` is the build's row count;
    * ``nulls``: the build's null policy (``"refuse"`` or ``"skip"``), which lookups follow;
    * ``names``: the key columns' names, where the build's table had them (else None).
    """

    keymap: KeyMap
    keymaps: tuple[KeyMap, ...]
    n: int
    values: Any
    device: str

    def __init__(self, *, keymap: KeyMap, n: int, values: Any, device: str,
                 keymaps: tuple[KeyMap, ...] | None = None, rows: Any = None,
                 n_rows: int | None = None, nulls: str = "refuse",
                 names: tuple[str, ...] | None = None) -> None:
        self.keymap = keymap
        self.keymaps = (keymap,) if keymaps is None else tuple(keymaps)
        if self.keymaps[0] is not keymap:
            raise ValueError("keymaps[0] must be keymap")
        self.n = int(n)
        self.values = values
        self.device = device
        self.rows = rows
        self.n_rows = self.n if n_rows is None else int(n_rows)
        self.nulls = nulls
        self.names = names
        self.rowid_dtype: np.dtype = rowid_dtype_for(self.n)
        self.miss: np.integer = self.rowid_dtype.type(np.iinfo(self.rowid_dtype).max)
        self._xp = array_module(device)  # looked up once: every lookup call reads it
        # prepared point lookups of this build, per out mode (see GpuIndex.point); filled on
        # first use, after the state is sealed (a dict, so sealing does not freeze it)
        self._prepared: dict[str, Any] = {}

    @property
    def xp(self) -> ModuleType:
        """The array module of the state's device."""
        return self._xp

    @property
    def dims(self) -> int:
        """Number of key columns of this build."""
        return len(self.keymaps)

    @property
    def native_dtype(self) -> np.dtype:
        """uint32 or uint64: the keys the plugin's kernels see."""
        return self.keymap.target

    def seal(self) -> None:
        """Make the state read-only (the base calls this before publishing it)."""
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_sealed", False):
            raise AttributeError(
                f"{type(self).__name__}.{name}: a published build state is read-only "
                "(lookups on other threads may be reading it); compute it in _build")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.n} {describe_columns(self.keymaps)} on {self.device}>"


def describe_columns(keymaps: tuple[KeyMap, ...]) -> str:
    """``keys of int64`` or ``rows of (int64, float32)``."""
    if len(keymaps) == 1:
        return f"keys of {keymaps[0].source}"
    return "rows of (" + ", ".join(str(k.source) for k in keymaps) + ")"
