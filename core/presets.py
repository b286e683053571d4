"""Presets: an index class registered under its own name whose parameters default to a named
configuration of another index (the papers' variants: ``cgrx-5x4``, ``rtc3``, ...)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import create_model
from pydantic.fields import FieldInfo

from .config import IndexParams

__all__ = ["preset_class", "preset_params"]

P = TypeVar("P", bound=IndexParams)
C = TypeVar("C", bound=type)


def preset_params(base: type[P], name: str, defaults: Mapping[str, Any]) -> type[P]:
    """``base`` with new defaults for some fields; their types, bounds and descriptions kept."""
    unknown = sorted(set(defaults) - set(base.model_fields))
    if unknown:
        raise ValueError(f"preset {name!r}: {base.__name__} has no fields {unknown}")
    fields: dict[str, Any] = {
        k: (base.model_fields[k].annotation,
            FieldInfo.merge_field_infos(base.model_fields[k], default=v))
        for k, v in defaults.items()}
    model: type[P] = create_model(
        f"{name.title().replace('-', '')}Params", __base__=base, **fields)
    model.__doc__ = f"Parameters of the preset ``{name}``: {base.__name__} with its defaults."
    model.presets = {}  # a preset is one configuration: the family's presets are the base's
    return model


def preset_class(base: C, name: str, defaults: Mapping[str, Any], doc: str,
                 module: str) -> C:
    """A subclass of the index class ``base`` named ``name`` (its registered name), whose
    ``Params`` default to ``defaults``; ``doc`` is what ``indexzoo list`` shows.

    The class is also bound in ``module`` (the module being imported that calls this) under
    its class name, ``<Base>_<name>``, so that pickle finds it by its qualified name."""
    params = preset_params(base.Params, name, defaults)  # type: ignore[attr-defined]
    attrs: dict[str, Any] = {"name": name, "Params": params, "__doc__": doc,
                             "__module__": module}
    cls = type(f"{base.__name__}_{name.replace('-', '_')}", (base,), attrs)
    owner = sys.modules.get(module)
    if owner is not None:
        setattr(owner, cls.__name__, cls)
    return cls  # type: ignore[return-value]
