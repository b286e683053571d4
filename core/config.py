"""Configuration: plugin parameters, :class:`IndexSpec` and spec files.

Every plugin's ``Params`` is a pydantic model derived from :class:`IndexParams`: unknown
parameters are rejected, values are checked against their bounds, and every failure becomes a
:class:`~indexzoo.ConfigError` that names the index, the field, the value and what is allowed,
before any device work starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TypeVar

import annotated_types
import pydantic
from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigError, MissingDependency

__all__ = ["IndexParams", "IndexSpec", "describe_bounds", "format_validation", "load_spec",
           "read_config_file", "validate_params"]

P = TypeVar("P", bound="IndexParams")


class IndexParams(BaseModel):
    """Parameters every index has. Plugins subclass this for their own tunables."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    max_batch: int = Field(
        default=1 << 27,
        ge=1,
        le=1 << 40,
        description=(
            "Most lookups handed to the index at once. A larger batch is cut into chunks of "
            "at most this many lookups, run one after another, so temporary memory stays "
            "bounded; results are joined in query order."
        ),
    )


class IndexSpec(BaseModel):
    """Which index to make, with which parameters, on which device.

    ``{"index": "sorted-array", "params": {"threads_per_block": 256}, "device": "cuda"}``
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: str = Field(description="Registered name of the index, see `indexzoo list`.")
    params: dict[str, Any] = Field(default_factory=dict, description="The index's parameters.")
    device: str = Field(default="auto", description="'auto', 'cpu' or 'cuda'.")


def describe_bounds(field: Any) -> str:
    """``"32 <= value <= 1024"`` style text from a pydantic field's constraints."""
    parts = []
    for meta in getattr(field, "metadata", []):
        for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None and isinstance(meta, annotated_types.BaseMetadata):
                parts.append(f"{op} {bound}")
        if isinstance(meta, annotated_types.MultipleOf):
            parts.append(f"a multiple of {meta.multiple_of}")
    return ", ".join(parts)


def format_validation(exc: pydantic.ValidationError) -> str:
    """One line per problem: ``field = value: message`` (``field: missing`` when absent)."""
    parts = []
    for e in exc.errors():
        loc = ".".join(map(str, e["loc"])) or "<top>"
        if e["type"] == "missing":
            parts.append(f"{loc}: missing (required)")
        elif e["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown entry (value {e.get('input')!r})")
        else:
            parts.append(f"{loc} = {e.get('input')!r}: {e['msg']}")
    return "; ".join(parts)


def _config_error(index: str, cls: type[BaseModel], exc: pydantic.ValidationError) -> ConfigError:
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "<params>"
        if err["type"] == "extra_forbidden":
            known = ", ".join(sorted(cls.model_fields))
            lines.append(f"unknown parameter {field!r} (value {err['input']!r}); known: {known}")
            continue
        top = str(err["loc"][0]) if err["loc"] else ""
        info = cls.model_fields.get(top)
        allowed = describe_bounds(info) if info is not None else ""
        allowed = f" (allowed: {allowed})" if allowed else ""
        lines.append(
            f"parameter {field!r} = {err.get('input')!r} is invalid: {err['msg']}{allowed}"
        )
    return ConfigError(f"index {index!r}: " + "; ".join(lines))


def validate_params(cls: type[P], params: Any, index: str) -> P:
    """An instance of ``cls`` from None, a dict or an instance, or ConfigError."""
    if params is None:
        params = {}
    if isinstance(params, cls):
        return params
    if isinstance(params, BaseModel):
        params = params.model_dump()
    if not isinstance(params, dict):
        raise ConfigError(
            f"index {index!r}: params must be a mapping of parameter names to values, "
            f"got {type(params).__name__}"
        )
    try:
        return cls.model_validate(params)
    except pydantic.ValidationError as exc:
        raise _config_error(index, cls, exc) from None


def read_config_file(path: str | Path) -> Any:
    """Parse a YAML (.yaml/.yml), TOML (.toml) or JSON (.json) file; ConfigError if unreadable."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"spec file {str(p)!r} does not exist")
    text = p.read_text(encoding="utf-8")
    suffix = p.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise MissingDependency("pyyaml", "yaml", "reading YAML spec files") from None
            return yaml.safe_load(text)
        if suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover - Python 3.10
                import tomli as tomllib
            return tomllib.loads(text)
        if suffix == ".json":
            return json.loads(text)
    except MissingDependency:
        raise
    except Exception as exc:  # each parser has its own error type
        raise ConfigError(f"spec file {str(p)!r} is not valid {suffix[1:].upper()}: {exc}") from None
    raise ConfigError(
        f"spec file {str(p)!r}: unknown format {suffix!r}; use .yaml, .yml, .toml or .json"
    )


# Top-level sections a spec file may hold besides the index spec; `indexzoo run` reads them.
RUN_SECTIONS = ("keys", "workload", "out", "repeats")


def load_spec(path: str | Path) -> IndexSpec:
    """Read an :class:`IndexSpec` from a YAML, TOML or JSON file.

    The file holds ``index`` (the name), optionally ``params`` and ``device``, and may hold
    the entries that ``indexzoo run`` reads (``keys``, ``workload``, ``out``, ``repeats``).
    """
    return spec_from_data(read_config_file(path), source=str(path))


def spec_from_data(data: Any, source: str = "<spec>") -> IndexSpec:
    """An :class:`IndexSpec` from parsed data (see :func:`load_spec`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with an 'index' entry, got {data!r}")
    unknown = sorted(set(data) - {"index", "params", "device", *RUN_SECTIONS})
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level entries {unknown}; allowed: index, params, device, "
            + ", ".join(RUN_SECTIONS)
        )
    fields = {k: data[k] for k in ("index", "params", "device") if k in data}
    try:
        return IndexSpec.model_validate(fields)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"{source}: invalid index spec: {format_validation(exc)}") from None
