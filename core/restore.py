"""Making an index again from its saved form, checking before trusting.

:func:`index_from_saved` is ``GpuIndex.from_saved`` (``indexzoo.load``, unpickling, the
sharded index's shards): the metadata's top level, the params through the index's ``Params``
model, the state layout version, then, for a built index, :func:`restore_state`:

1. the base's key maps (:func:`~indexzoo.base_schema.keymaps_problem`), which give the native
   dtype and the column count, then the rest of the base (:data:`~indexzoo.base_schema.
   BASE_SCHEMA`: values and rows against ``n``, ``n_rows``, the null policy, the names);
2. the plugin's state against its :class:`~indexzoo.schema.StateSchema` (every name, type,
   dtype, length, bound and order it declares, and no array it does not declare);
3. the plugin's ``_load_state``, which may rebuild what was not saved; an error it raises on
   the file's data becomes an IndexFileError too.

No kernel reads the state before step 2 is through. (``cls`` and ``index`` below are a
``GpuIndex`` subclass and instance; this module sits below ``indexzoo.contract``, which calls
it, so it names them only in words.) A plugin without a schema has its files
refused (a pickle, made by indexzoo in memory, still loads: only the types its annotations
declare are checked then); docs/plugin-authors.md says how to declare one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base_schema import BASE_HINTS, BASE_SCHEMA, keymaps_problem
from .config import validate_params
from .errors import ConfigError, IndexFileError, InvalidInput
from .keys import KeyMap
from .metadata import check_top_level
from .persist import SavedIndex, class_hints, to_target, unflatten
from .schema import LoadContext, StateSchema
from .schema_types import mismatch
from .state import BASE_FIELDS, BuildState, rowid_dtype_for

__all__ = ["check_saved", "index_from_saved", "params_from_saved", "restore_state"]

#: Errors a plugin's ``_params_for_load`` or ``_load_state`` may raise on data from a file;
#: they become an IndexFileError (anything else, e.g. MemoryError, goes on as it is).
_DATA_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError,
                AssertionError, InvalidInput)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def index_from_saved(cls: Any, saved: SavedIndex, device: str | None) -> Any:
    """The index ``saved`` holds, on ``device`` (see ``GpuIndex.from_saved``)."""
    meta = check_top_level(saved.meta, saved.source)
    if meta.get("index") != cls.name:
        raise saved.problem(f"holds index {str(meta.get('index'))[:80]!r}, not {cls.name!r}")
    onto = cls._load_device(saved, device)
    index = _made(cls, saved, params_from_saved(cls, saved, onto), onto)
    if meta.get("built"):
        index._state = restore_state(index, saved)
    return index


def params_from_saved(cls: Any, saved: SavedIndex, device: str) -> Any:
    """The saved params as the index loaded onto ``device`` takes them, validated by its
    ``Params`` model; IndexFileError naming what the model refuses."""
    params = saved.meta.get("params")
    if not isinstance(params, dict):
        raise saved.problem("its params are not a mapping")
    try:
        return validate_params(cls.Params, cls._params_for_load(params, device), cls.name)
    except IndexFileError:
        raise
    except (ConfigError, *_DATA_ERRORS) as exc:
        raise saved.problem(f"its params are refused: {_one_line(exc)}") from None


def restore_state(index: Any, saved: SavedIndex) -> BuildState:
    """The build state ``saved`` holds, on the index's device, checked (see the module
    docstring) and sealed."""
    st, attrs = _checked_state(index, saved)
    try:
        index._load_state(st, attrs)
    except IndexFileError:
        raise
    except _DATA_ERRORS as exc:
        raise saved.problem(f"the {index.name} plugin cannot rebuild its state from the file "
                            f"({_one_line(exc)})") from exc
    st.seal()
    return st


def check_saved(cls: Any, saved: SavedIndex) -> BuildState | None:
    """Check ``saved`` as :func:`index_from_saved` would for index class ``cls``, on the host
    and without loading it (no ``_load_state``, no kernel): for an index that holds others'
    saved forms (the sharded index's shards) before it sends them anywhere. Returns the fresh
    state with the base's fields (``n``, the key maps), or None for an unbuilt index or a
    class that does not run on the CPU (checked up to its params)."""
    meta = check_top_level(saved.meta, saved.source)
    if meta.get("index") != cls.name:
        raise saved.problem(f"holds index {str(meta.get('index'))[:80]!r}, not {cls.name!r}")
    params = params_from_saved(cls, saved, "cpu")
    if not meta.get("built") or "cpu" not in cls.capabilities.devices:
        return None
    return _checked_state(_made(cls, saved, params, "cpu"), saved)[0]


def _made(cls: Any, saved: SavedIndex, params: Any, device: str) -> Any:
    """``cls(params, device=device)``; a ConfigError its constructor raises on the file's
    params (an index the sharded index's params name that is not installed) is the file's."""
    try:
        return cls(params, device=device)
    except IndexFileError:
        raise
    except ConfigError as exc:
        raise saved.problem(f"its params are refused: {_one_line(exc)}") from None


def _checked_state(index: Any, saved: SavedIndex) -> tuple[BuildState, dict[str, Any]]:
    """A fresh state with the base's fields and the plugin's saved attributes, every one
    checked (steps 1 and 2 of the module docstring)."""
    meta, cls = saved.meta, type(index)
    if meta.get("state_version") != index.state_version:
        raise saved.problem(
            f"its {index.name} state has layout version {str(meta.get('state_version'))[:20]}; "
            f"this {index.name} reads version {index.state_version}: build the index again")
    schema: StateSchema | None = getattr(cls, "state_schema", None)
    if schema is None and not saved.trusted:
        raise saved.problem(
            f"index {index.name!r} declares no state schema (StateSchema), so its files are not "
            "loaded: nothing would check them before its kernels read them (see "
            "docs/plugin-authors.md)")
    origins: dict[int, str] = {}
    arrays = to_target(saved.arrays, index.device)
    base = unflatten(meta.get("base"), BASE_HINTS, arrays, f"{saved.source}: the base state",
                     origins)
    natives = tuple(np.dtype(d) for d in cls.capabilities.key_dtypes)
    base["keymaps"] = _unpacked(base.get("keymaps"), saved)
    wrong = keymaps_problem(base.get("keymaps"), cls.capabilities.dims, natives)
    if wrong:
        raise saved.problem(f"base.keymaps: {wrong}")
    keymaps: tuple[KeyMap, ...] = base["keymaps"]
    n = int(meta["n"])
    n_rows = base.get("n_rows")
    ctx = LoadContext(source=saved.source, n=n,
                      n_rows=n_rows if isinstance(n_rows, int) else n, dims=len(keymaps),
                      native=keymaps[0].target, rowid=rowid_dtype_for(n), params=index.params,
                      device=index.device, keymaps=keymaps, label="base", origins=origins)
    BASE_SCHEMA.check(base, ctx, BASE_HINTS)
    st = index._new_state(keymaps[0], n, base.get("values"), keymaps, rows=base.get("rows"),
                          n_rows=base["n_rows"], nulls=base["nulls"], names=base.get("names"))
    hints = {k: v for k, v in class_hints(type(st)).items() if k not in BASE_FIELDS}
    attrs = unflatten(meta.get("state"), hints, arrays, f"{saved.source}: the {index.name} state",
                      origins)
    ctx.label = "state"
    _check_state(attrs, hints, schema, ctx)
    return st, attrs


def _unpacked(maps: Any, saved: SavedIndex) -> Any:
    """The file's key maps with their text dictionaries read back from the plain bytes a save
    packs them into (:meth:`KeyMap.packed`); anything that is not a tuple of key maps as it
    is, for :func:`keymaps_problem` to name."""
    if not isinstance(maps, tuple) or not all(isinstance(k, KeyMap) for k in maps):
        return maps
    try:
        return tuple(k.unpacked() if k.kind == "strings" else k for k in maps)
    except (ValueError, TypeError, AttributeError) as exc:
        raise saved.problem(f"base.keymaps: a text dictionary cannot be read ({_one_line(exc)})"
                            ) from None


def _check_state(attrs: dict[str, Any], hints: dict[str, Any], schema: StateSchema | None,
                 ctx: LoadContext) -> None:
    """The plugin's schema, or (a trusted saved index of a plugin without one) its
    annotations' types; never a name of the base's or a private one."""
    for name in attrs:
        if name in BASE_FIELDS or name.startswith("_"):
            raise IndexFileError(f"{ctx.source}: state.{name[:40]}: a name the state may not "
                                 "set from a file")
    if schema is not None:
        schema.check(attrs, ctx, hints)
        return
    for name, value in attrs.items():
        got = mismatch(value, hints.get(name, Any), name)
        if got is not None:
            raise IndexFileError(f"{ctx.source}: state.{got[0]}: is {got[1]}")
