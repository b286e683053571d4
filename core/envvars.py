"""indexzoo's environment variables: every ``INDEXZOO_*`` variable is declared here and read
through :meth:`EnvVar.value`, which answers the default where the variable is unset or empty
and raises a one-line :class:`~indexzoo.ConfigError` naming the variable, its value and the
accepted form where it is malformed (``INDEXZOO_CPU_SERIAL_BELOW=1e3`` used to fail every
plugin's import with a bare ``int()`` error that named no variable).

Variables read when a module is imported (``at_import``: the CPU kernels' thresholds, the
launch path) are checked by :func:`check_import_time` before the registry imports any plugin,
so a malformed one stops ``indexzoo list`` and ``create`` with that one line instead of making
every plugin unusable; the others are read, and checked, where they are used.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .display import shown
from .errors import ConfigError

__all__ = ["CACHE_DIR", "COMMIT", "CPU_SERIAL_BELOW", "CPU_SERIAL_BELOW_RAYS", "DEVICE",
           "KERNEL_CACHE", "MEMORY_CHECK", "NUMBA_LAUNCH", "PLUGIN_TIMEOUT", "PROGRESS", "RANK_BUDGET",
           "SHARDED_WORKERS", "VARIABLES",
           "EnvVar",
           "check_import_time"]

T = TypeVar("T")

_TRUE, _FALSE = ("1", "yes", "on", "true"), ("0", "no", "off", "false")


@dataclass(frozen=True)
class EnvVar(Generic[T]):
    """One environment variable: its name, how its text becomes a value (``parse`` raises
    ValueError for a malformed text), the default, the accepted form in words, and what it
    does (the docs' list)."""

    name: str
    parse: Callable[[str], T]
    default: T
    form: str
    doc: str
    at_import: bool = False

    def value(self) -> T:
        """The variable's value: the default where unset or empty (blanks stripped), else the
        parsed text, or ConfigError naming the variable and the accepted form."""
        text = os.environ.get(self.name)
        if text is None or not text.strip():
            return self.default
        try:
            return self.parse(text.strip())
        except (ValueError, OverflowError):
            raise ConfigError(f"environment variable {self.name}={shown(text, 40)} must be "
                              f"{self.form}") from None


def _count(text: str) -> int:
    value = int(text, 10)  # "1e3", "0x10", "1.5": ValueError
    if not 0 <= value < 1 << 63:
        raise ValueError(text)
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


def _budget(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(text)
    return value


def _workers(text: str) -> int:
    value = int(text, 10)
    if value < 1:
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    word = text.lower()
    if word not in _TRUE + _FALSE:
        raise ValueError(text)
    return word in _TRUE


def _device(text: str) -> str:
    word = text.lower()
    if word not in ("auto", "cpu", "cuda"):
        raise ValueError(text)
    return word


def _text(text: str) -> str:
    return text


_FLAG_FORM = "1/yes/on/true or 0/no/off/false"

DEVICE: EnvVar[str] = EnvVar(
    "INDEXZOO_DEVICE", _device, "auto", "'auto', 'cpu' or 'cuda'",
    "the device `device=\"auto\"` means (default: cuda where usable, else cpu)")
MEMORY_CHECK: EnvVar[bool] = EnvVar(
    "INDEXZOO_MEMORY_CHECK", _flag, True, _FLAG_FORM,
    "0 turns off the memory check of `run` and `bench`")
PROGRESS: EnvVar[bool] = EnvVar(
    "INDEXZOO_PROGRESS", _flag, True, _FLAG_FORM,
    "0 turns off the progress lines `run` and `bench` show on a terminal (standard error)")
PLUGIN_TIMEOUT: EnvVar[float] = EnvVar(
    "INDEXZOO_PLUGIN_TIMEOUT", _seconds, 30.0, "a positive number of seconds, e.g. 30",
    "seconds one plugin module may take to import (default 30)")
CPU_SERIAL_BELOW: EnvVar[int] = EnvVar(
    "INDEXZOO_CPU_SERIAL_BELOW", _count, 1 << 15, "a whole number >= 0, e.g. 32768",
    "CPU kernel calls with fewer items run on one core (default 32768)", at_import=True)
CPU_SERIAL_BELOW_RAYS: EnvVar[int] = EnvVar(
    "INDEXZOO_CPU_SERIAL_BELOW_RAYS", _count, 1 << 10, "a whole number >= 0, e.g. 1024",
    "CPU ray-tracing launches with fewer rays run on one core (default 1024)", at_import=True)
NUMBA_LAUNCH: EnvVar[bool] = EnvVar(
    "INDEXZOO_NUMBA_LAUNCH", _flag, False, _FLAG_FORM,
    "1 launches GPU kernels through numba-cuda's own launch, not indexzoo's faster one",
    at_import=True)
CACHE_DIR: EnvVar[str | None] = EnvVar(
    "INDEXZOO_CACHE_DIR", _text, None, "a folder",
    "the folder of compiled OptiX programs (default ~/.cache/indexzoo)")
KERNEL_CACHE: EnvVar[str | None] = EnvVar(
    "INDEXZOO_KERNEL_CACHE", _text, None, "a folder",
    "a folder where compiled CPU kernels are kept for other processes of the same tree "
    "(default: none; every process compiles its own)")
RANK_BUDGET: EnvVar[float] = EnvVar(
    "INDEXZOO_RANK_BUDGET", _budget, 60.0, "a number of seconds >= 0, e.g. 60",
    "the default of `bench --rank-budget`: seconds of extra timing rounds per workload while "
    "the ranking is not established (default 60; 0: exactly --repeats rounds)")
SHARDED_WORKERS: EnvVar[int | None] = EnvVar(
    "INDEXZOO_SHARDED_WORKERS", _workers, None, "a whole number >= 1, e.g. 4",
    "workers of the local CPU cluster a sharded index starts (default: the CPU count, at "
    "most 4)")
COMMIT: EnvVar[str | None] = EnvVar(
    "INDEXZOO_COMMIT", _text, None, "a commit",
    "the commit `bench` records where the tree has no git history")

#: Every variable, in the docs' order.
VARIABLES: tuple[EnvVar[Any], ...] = (
    DEVICE, MEMORY_CHECK, PROGRESS, PLUGIN_TIMEOUT, CPU_SERIAL_BELOW, CPU_SERIAL_BELOW_RAYS,
    NUMBA_LAUNCH, RANK_BUDGET, SHARDED_WORKERS, CACHE_DIR, KERNEL_CACHE, COMMIT)


def check_import_time() -> None:
    """ConfigError for the first malformed variable that a module reads when imported."""
    for var in VARIABLES:
        if var.at_import:
            var.value()
