"""Configuration: plugin parameters, :class:`IndexSpec` and spec files.

Every plugin's ``Params`` is a pydantic model derived from :class:`IndexParams`: unknown
parameters are rejected, values are checked against their bounds, and every failure becomes a
:class:`~indexzoo.ConfigError` that names the index, the field, the value and what is allowed,
before any device work starts.
"""

from __future__ import annotations

import difflib
import json
import numbers
import os
import stat
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import annotated_types
import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .display import one_line, shown, shown_path
from .duplicate_keys import DuplicateKey, check_yaml_mapping, json_duplicate, toml_duplicate
from .errors import ConfigError, MissingDependency
from .probes import BUCKET_BITS

__all__ = ["MAX_SPEC_BYTES", "PRESET", "IndexParams", "IndexSpec", "UnknownPreset", "as_path",
           "check_regular_file", "check_writable_folder", "describe_bounds", "format_validation",
           "load_spec", "read_config_file", "validate_params", "with_preset"]

#: Spec and workload files larger than this are refused before they are parsed.
MAX_SPEC_BYTES = 1 << 20

P = TypeVar("P", bound="IndexParams")

#: The parameter that names one of an index's presets (``params: {preset: lean}``,
#: ``--set preset=lean``): the preset's values, with the parameters given beside it over them.
PRESET = "preset"


class IndexParams(BaseModel):
    """Parameters every index has. Plugins subclass this for their own tunables.

    ``presets`` names configurations of the family (name -> parameter values) that a user
    selects with the parameter ``preset``: ``create("rx", preset="lean", leaf_size=16)`` is
    the preset's values with ``leaf_size`` given over them (:func:`with_preset`)."""

    #: The family's named configurations: preset name -> parameter values.
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    # every float parameter of every plugin is finite: inf and NaN pass pydantic's bounds
    # checks in surprising ways (NaN compares false) and end as OverflowError deep in a build
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              allow_inf_nan=False, defer_build=True)

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
    sort_probes: bool = Field(
        default=False,
        description=(
            "Sort each batch (point lookups by key, ranges by their lower bound; by the top "
            "probe_sort_bits bits of the batch's key span) before the index answers it, and "
            "return the answers in the caller's order: neighbouring lookups then follow "
            "neighbouring paths. The sort and the un-permute are part of the call's time. "
            "Point batches of at most 4096 lookups of the index's key dtype are not sorted "
            "(ordering so few costs more than it saves)."
        ),
    )
    probe_sort_bits: int = Field(
        default=BUCKET_BITS, ge=1, le=64,
        description=(
            "With sort_probes: how many top bits of the batch's key span order it. 16 (two "
            "radix passes) groups lookups that share their upper tree levels and neighbouring "
            "leaves, for a quarter of a full 64-bit sort; 64 (or the key width) is a full sort."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        """``preset: NAME`` replaced by the preset's values (the given parameters over them)."""
        return with_preset(cls, data) if isinstance(data, Mapping) else data

    @field_validator("*", mode="before")
    @classmethod
    def _strict_types(cls, value: Any, info: ValidationInfo) -> Any:
        """No bool where a number is expected, no text where a number is expected, no float
        where an integer is expected (pydantic's lax mode would take ``True`` as 1)."""
        field = cls.model_fields.get(info.field_name or "")
        if field is not None:
            problem = _type_problem(field.annotation, value)
            if problem:
                raise PydanticCustomError("strict_type", problem)
        return value


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not _is_bool(value)


def _expected(annotation: Any) -> tuple[str, Any] | None:
    """(what is expected, a check of a value) for the annotations given strict types."""
    if annotation is bool:
        return "a boolean (true or false)", _is_bool
    if annotation is int:
        return "an integer", lambda v: isinstance(v, numbers.Integral) and not _is_bool(v)
    if annotation is float:
        return "a number", _is_number
    if typing.get_origin(annotation) is typing.Literal:
        options = typing.get_args(annotation)
        if all(_is_number(o) for o in options):
            listed = ", ".join(repr(o) for o in options)
            return f"one of {listed}", _is_number
    return None


def _type_problem(annotation: Any, value: Any) -> str | None:
    """Why ``value`` has the wrong type for ``annotation``, or None (pydantic checks the rest)."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    members: tuple[Any, ...] = (annotation,)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = typing.get_args(annotation)
    if value is None and type(None) in members:
        return None
    found = [_expected(m) for m in members if m is not type(None)]
    checks = [c for c in found if c is not None]
    if not checks or len(checks) != len(found):
        return None  # an annotation without strict rules: pydantic decides
    if any(check(value) for _, check in checks):
        return None
    wanted = " or ".join(what for what, _ in checks)
    if type(None) in members:
        wanted += " or null"
    kind = "bool" if _is_bool(value) else "None" if value is None else type(value).__name__
    return f"expected {wanted}, got {kind}"


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


def _loc(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as ``a.b.0``; user-given names are shortened."""
    return ".".join(p if isinstance(p, str) and len(p) <= 40 else
                    (shown(p, 40) if isinstance(p, str) else str(p)) for p in loc)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation allows (``Workload``, ``KeyFile | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _meant(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> str:
    """``; did you mean 'n_keys'?`` for an unknown entry at ``loc`` of ``model`` whose name is
    close to one of the fields there (nested models followed); else ""."""
    scope = [model] if model is not None else []
    for part in loc[:-1]:
        scope = [m for s in scope if isinstance(part, str) and part in s.model_fields
                 for m in _models_in(s.model_fields[part].annotation)]
    name = loc[-1] if loc else None
    if not scope or not isinstance(name, str) or len(name) > 100:
        return ""
    known = [f for s in scope for f in s.model_fields]
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def format_validation(exc: pydantic.ValidationError,
                      model: type[BaseModel] | None = None) -> str:
    """One entry per problem: ``field = value: message`` (``field: missing`` when absent);
    given the ``model`` validated, an unknown entry close to a field's name gets a "did you
    mean" (``workload.n_key: unknown entry (value 4096); did you mean 'n_keys'?``).

    Values are shown shortened (:func:`indexzoo.display.shown`), whatever their size."""
    parts = []
    errors = exc.errors(include_url=False, include_context=False)
    for e in errors[:8]:
        loc = _loc(e["loc"]) or "<top>"
        if e["type"] == "missing":
            parts.append(f"{loc}: missing (required)")
        elif e["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown entry (value {shown(e.get('input'))})"
                         + _meant(model, tuple(e["loc"])))
        else:
            parts.append(f"{loc} = {shown(e.get('input'))}: {one_line(e['msg'])}")
    if len(errors) > 8:
        parts.append(f"and {len(errors) - 8} more")
    return "; ".join(parts)


def _config_error(index: str, cls: type[BaseModel], exc: pydantic.ValidationError) -> ConfigError:
    lines = []
    errors = exc.errors(include_url=False, include_context=False)
    for err in errors[:8]:
        field = ".".join(str(p) for p in err["loc"]) or "<params>"
        name = shown(field, 40)
        if err["type"] == "extra_forbidden":
            known = sorted(cls.model_fields)
            close = difflib.get_close_matches(field, known, n=1) if len(field) <= 100 else []
            listed = ", ".join(known)
            hint = f"; did you mean {close[0]!r}? (known: {listed})" if close else \
                f"; known: {listed}"
            lines.append(f"unknown parameter {name} (value {shown(err['input'])}){hint}")
            continue
        top = str(err["loc"][0]) if err["loc"] else ""
        info = cls.model_fields.get(top)
        allowed = describe_bounds(info) if info is not None else ""
        allowed = f" (allowed: {allowed})" if allowed else ""
        lines.append(
            f"parameter {name} = {shown(err.get('input'))} is invalid: "
            f"{one_line(err['msg'])}{allowed}"
        )
    if len(errors) > 8:
        lines.append(f"and {len(errors) - 8} more problems")
    return ConfigError(f"index {shown(index, 40)}: " + "; ".join(lines))


class UnknownPreset(ValueError):
    """A ``preset`` that names none of the family's presets (or is not a name)."""


def with_preset(cls: type[IndexParams], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with its ``preset`` entry replaced by the values of that preset of ``cls``,
    the other entries given over them (explicit parameters win); ``preset: None`` is no preset.
    :class:`UnknownPreset` (a ValueError) for a name that is none of ``cls.presets``, saying
    which one was meant and listing them. A Params class with a field of its own named
    ``preset`` keeps it as that field."""
    if PRESET not in params or PRESET in cls.model_fields:
        return dict(params)
    name = params[PRESET]
    given = {k: v for k, v in params.items() if k != PRESET}
    if name is None:
        return given
    presets = cls.presets
    if isinstance(name, str) and name in presets:
        return {**presets[name], **given}
    listed = (f"its presets: {', '.join(presets)}" if presets else
              "it has no presets")
    if not isinstance(name, str):
        raise UnknownPreset(f"preset must be a preset's name, got {type(name).__name__} "
                            f"{shown(name)}; {listed}")
    close = difflib.get_close_matches(name, list(presets), n=1) if len(name) <= 100 else []
    meant = f"; did you mean {close[0]!r}?" if close else ""
    raise UnknownPreset(f"unknown preset {shown(name, 40)}{meant} ({listed})")


def validate_params(cls: type[P], params: Any, index: str) -> P:
    """An instance of ``cls`` from None, a dict or an instance, or ConfigError. A ``preset``
    entry selects one of ``cls.presets`` (:func:`with_preset`)."""
    if params is None:
        params = {}
    if isinstance(params, cls):
        return params
    if isinstance(params, BaseModel):
        params = params.model_dump()
    if not isinstance(params, dict):
        raise ConfigError(
            f"index {shown(index, 40)}: params must be a mapping of parameter names to values, "
            f"got {type(params).__name__}"
        )
    try:
        params = with_preset(cls, params)
    except UnknownPreset as exc:
        raise ConfigError(f"index {shown(index, 40)}: {exc}") from None
    try:
        return cls.model_validate(params)
    except pydantic.ValidationError as exc:
        raise _config_error(index, cls, exc) from None


def params_problem(index_cls: type) -> str | None:
    """Why the ``Params`` of index class ``index_cls`` cannot make the defaults every index
    starts from (a default its own field refuses, a model pydantic cannot build), in one line
    naming the class and the field, or None. Builds the model's validator (deferred until
    then, as listing the indexes does not need it)."""
    params = index_cls.Params  # type: ignore[attr-defined]
    where = f"index class {index_cls.__module__}.{index_cls.__qualname__}"
    try:
        params()
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False, include_context=False):
            field = ".".join(str(p) for p in err["loc"]) or "<params>"
            info = params.model_fields.get(str(err["loc"][0])) if err["loc"] else None
            allowed = describe_bounds(info) if info is not None else ""
            problems.append(f"the default of field {field!r}, {shown(err.get('input'))}, is "
                            f"invalid: {one_line(err['msg'])}"
                            + (f" (allowed: {allowed})" if allowed else ""))
        return f"{where}: its Params {params.__qualname__}: " + "; ".join(problems)
    except Exception as exc:  # pydantic's schema errors come in several types
        return (f"{where}: its Params {params.__qualname__} cannot be built: "
                f"{type(exc).__name__}: {one_line(str(exc))}")
    return None


def check_regular_file(path: Path, what: str) -> os.stat_result:
    """The ``stat`` of ``path``, or ConfigError saying why it cannot be read as a file: it does
    not exist, it is a directory, or it is not a regular file (a device such as /dev/zero, a
    pipe, a socket: never read, since reading one may never end)."""
    name = shown_path(path)
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{what} {name} does not exist") from None
    except OSError as exc:  # permission denied on a parent, name too long, a loop of links
        raise ConfigError(f"{what} {name} cannot be read: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL byte
        raise ConfigError(f"{what} {name} is not a valid path") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{what} {name} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{what} {name} is not a regular file (a device, pipe or socket)")
    return st


def check_writable_folder(folder: Path, what: str) -> None:
    """ConfigError ``"{what}: files cannot be written there (...)"`` unless a file can be
    created in ``folder`` (a probe file, removed at once)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix=".indexzoo-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{what}: files cannot be written there "
                          f"({exc.strerror or exc})") from None


def _read_bounded(p: Path, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file, or ConfigError (larger, unreadable)."""
    st = check_regular_file(p, what)

    def too_big(size: int) -> ConfigError:
        return ConfigError(f"{what} {shown_path(p)} is {_size(size)}; the limit is "
                           f"{_size(limit)}")

    if st.st_size > limit:
        raise too_big(st.st_size)
    try:
        with p.open("rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"{what} {shown_path(p)} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > limit:  # grew since stat
        raise too_big(len(raw))
    return raw


def _size(n: int) -> str:
    """``1.5 MiB (1572864 bytes)``; ``1 MiB (1048576 bytes)``; ``512 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            amount = f"{n // scale}" if n % scale == 0 else f"{n / scale:.1f}"
            return f"{amount} {unit} ({n} bytes)"
    return f"{n} bytes"


class _AliasRefused(Exception):
    def __init__(self, alias: str, line: int):
        super().__init__(alias, line)
        self.alias, self.line = alias, line


def _yaml_load(text: str) -> Any:
    """YAML through a SafeLoader that refuses aliases (a few hundred bytes of nested aliases
    stand for billions of values, "billion laughs", which every consumer would walk) and a
    key given twice in one mapping (DuplicateKey)."""
    try:
        import yaml
    except ImportError:
        raise MissingDependency("pyyaml", "yaml", "reading YAML spec files") from None

    class SpecLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _AliasRefused(str(event.anchor), event.start_mark.line + 1)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            check_yaml_mapping(self, node)
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=SpecLoader)  # a SafeLoader: no Python objects


def _parse_error(exc: Exception) -> str:
    """One line from a parser's error: YAML's are several, with the offending text."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem is not None and mark is not None:  # yaml.MarkedYAMLError
        context = getattr(exc, "context", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})"
        return f"{problem}{where}" + (f", {context}" if context else "")
    text = one_line(str(exc)) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def as_path(path: Any, what: str) -> Path:
    """``path`` as a Path where it is a ``str`` or an ``os.PathLike`` of text, else ConfigError
    (``None``, a number, ``bytes``: ``Path`` raised a bare TypeError for them)."""
    text: Any = path
    if isinstance(path, os.PathLike):
        try:
            text = os.fspath(path)
        except Exception:
            text = None
    if isinstance(text, str):
        return Path(text)
    hint = "; decode it first (os.fsdecode)" if isinstance(text, bytes) else ""
    raise ConfigError(f"{what}: expected a path (str or os.PathLike), got "
                      f"{type(path).__name__} {shown(path)}{hint}")


def read_config_file(path: str | Path, what: str = "spec file") -> Any:
    """Parse a YAML (.yaml/.yml), TOML (.toml) or JSON (.json) file; ConfigError if unreadable.

    Files must be regular files of at most :data:`MAX_SPEC_BYTES`, in UTF-8; YAML aliases
    (``*name``) and a key given twice in one mapping (any format) are refused.
    """
    p = as_path(path, what)
    suffix = p.suffix.lower()
    raw = _read_bounded(p, what, MAX_SPEC_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {shown_path(p)} is not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                          f"at offset {exc.start})") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark
    try:
        if suffix in (".yaml", ".yml"):
            return _yaml_load(text)
        if suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover - Python 3.10
                import tomli as tomllib
            try:
                return tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise toml_duplicate(text, exc) or exc from None
        if suffix == ".json":
            data = json.loads(text)
            twice = json_duplicate(text)
            if twice is not None:
                raise twice
            return data
    except MissingDependency:
        raise
    except DuplicateKey as exc:
        raise ConfigError(
            f"{what} {shown_path(p)}, line {exc.line}: the key {shown(exc.key, 40)} is given "
            "twice in one mapping; give each key once") from None
    except _AliasRefused as exc:
        raise ConfigError(
            f"{what} {shown_path(p)}, line {exc.line}: YAML aliases (*name) are not allowed in "
            f"spec files (found *{shown(exc.alias, 30)[1:-1]}); write the value out") from None
    except Exception as exc:  # each parser has its own error type
        raise ConfigError(f"{what} {shown_path(p)} is not valid {suffix[1:].upper()}: "
                          f"{_parse_error(exc)}") from None
    raise ConfigError(
        f"{what} {shown_path(p)}: unknown format {shown(suffix, 20)}; "
        "use .yaml, .yml, .toml or .json"
    )


# Top-level sections a spec file may hold besides the index spec; `indexzoo run` reads them.
RUN_SECTIONS = ("keys", "workload", "out", "repeats")


def load_spec(path: str | Path) -> IndexSpec:
    """Read an :class:`IndexSpec` from a YAML, TOML or JSON file.

    The file holds ``index`` (the name), optionally ``params`` and ``device``, and may hold
    the entries that ``indexzoo run`` reads (``keys``, ``workload``, ``out``, ``repeats``).
    """
    return spec_from_data(read_config_file(path), source=shown_path(path)[1:-1])


def check_sections(data: dict[Any, Any], source: str, allowed: tuple[str, ...]) -> None:
    """ConfigError naming the top-level entries of ``data`` that are not in ``allowed``."""
    unknown = sorted((k for k in data if k not in allowed), key=shown)
    if unknown:
        names = ", ".join(shown(k, 40) for k in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise ConfigError(
            f"{source}: unknown top-level entries [{names}]; allowed: {', '.join(allowed)}"
        )


def spec_from_data(data: Any, source: str = "<spec>") -> IndexSpec:
    """An :class:`IndexSpec` from parsed data (see :func:`load_spec`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with an 'index' entry, got "
                          f"{type(data).__name__} {shown(data)}")
    check_sections(data, source, ("index", "params", "device", *RUN_SECTIONS))
    fields = {k: data[k] for k in ("index", "params", "device") if k in data}
    try:
        return IndexSpec.model_validate(fields)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"{source}: invalid index spec: "
                          f"{format_validation(exc, IndexSpec)}") from None
