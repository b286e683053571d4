"""Values the commands read from their options: ``--set PARAM=VALUE`` (JSON, else text),
``--set NAME.PARAM=VALUE`` and ``--workload FILE``."""

from __future__ import annotations

import json
from typing import Any

import pydantic

from indexzoo.config import format_validation, read_config_file
from indexzoo.display import shown, shown_path
from indexzoo.errors import ConfigError

from .workloads import Workload

__all__ = ["load_workload", "option_value", "parse_assignment"]


def load_workload(path: str) -> Workload:
    """The workload a file (YAML, TOML or JSON) describes, or ConfigError saying what is wrong."""
    data = read_config_file(path, what="workload file")
    try:
        return Workload.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"{shown_path(path)[1:-1]}: invalid workload: "
                          f"{format_validation(exc, Workload)}") from None


def parse_assignment(text: str, flag: str) -> tuple[str, str, str]:
    """``NAME.PARAM=VALUE`` -> (name, param, value text)."""
    left, sep, value = text.partition("=")
    name, dot, param = left.rpartition(".")
    if not (sep and dot and name and param and value):
        raise ConfigError(f"{flag} {shown(text)}: expected NAME.PARAM=VALUE, "
                          "e.g. warpcore-hash.load_factor=0.5")
    return name, param, value


def option_value(text: str) -> Any:
    """An option's value: JSON where it parses (numbers, booleans, lists), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
