"""indexzoo's environment variables: every ``INDEXZOO_*`` variable is declared here and read
through :meth:`EnvVar.value`, which answers the default where the variable is unset or empty
and raises a one-line :class:`~indexzoo.ConfigError` naming the variable, its value and the
accepted form where it is malformed (``INDEXZOO_CPU_SERIAL_BELOW=1e3`` used to fail every
plugin's import with a bare ``int()`` error that named no variable).

Every variable is bounded, and its form states the bounds: counts and thresholds, seconds,
worker counts (``INDEXZOO_SHARDED_WORKERS=99999999999`` once started worker processes until
the machine ran out of memory), and the length of folders and commits. A value out of bounds
is malformed like any other.

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
           "KERNEL_CACHE", "KERNEL_CACHE_OFF", "KERNEL_CACHE_SIZE", "MEMORY_CHECK", "MOST_BUDGET_S",
           "MOST_CACHE_MIB", "MOST_COMMIT_CHARS", "MOST_ITEMS", "MOST_PATH_CHARS", "MOST_TIMEOUT_S",
           "MOST_WORKERS", "NUMBA_LAUNCH", "PLUGIN_TIMEOUT", "PROGRESS", "RANK_BUDGET",
           "SHARDED_WORKERS", "VARIABLES", "EnvVar", "check_import_time"]

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


def _whole(low: int, high: int) -> Callable[[str], int]:
    """A parser of whole numbers in ``[low, high]`` ("1e3", "0x10", "1.5": ValueError)."""
    def parse(text: str) -> int:
        value = int(text, 10)
        if not low <= value <= high:
            raise ValueError(text)
        return value
    return parse


def _seconds(low: float, high: float, *, low_allowed: bool) -> Callable[[str], float]:
    """A parser of seconds up to ``high``, above ``low`` (or from it, ``low_allowed``)."""
    def parse(text: str) -> float:
        value = float(text)
        if not (math.isfinite(value) and value <= high
                and (value >= low if low_allowed else value > low)):
            raise ValueError(text)
        return value
    return parse


def _cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


#: Bounds of the variables: counts of items, seconds, local worker processes, text lengths.
MOST_ITEMS = 1 << 40
MOST_TIMEOUT_S = 3600.0
MOST_BUDGET_S = 86400.0
MOST_WORKERS = max(4, _cpus())
MOST_PATH_CHARS = 4096
MOST_COMMIT_CHARS = 100
MOST_CACHE_MIB = 1 << 20  # 1 TiB


def _folder(text: str) -> str:
    if len(text) > MOST_PATH_CHARS:
        raise ValueError(text)
    return text


#: What ``INDEXZOO_KERNEL_CACHE`` reads as when it turns the cache off (any of its words).
KERNEL_CACHE_OFF = "off"
_OFF_WORDS = ("off", "0", "no", "false", "none")


def _folder_or_off(text: str) -> str:
    if text.lower() in _OFF_WORDS:
        return KERNEL_CACHE_OFF
    return _folder(text)


def _commit(text: str) -> str:
    if len(text) > MOST_COMMIT_CHARS or not text.isprintable():
        raise ValueError(text)
    return text


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


_FLAG_FORM = "1/yes/on/true or 0/no/off/false"

DEVICE: EnvVar[str] = EnvVar(
    "INDEXZOO_DEVICE", _device, "auto", "'auto', 'cpu' or 'cuda'",
    "the device `device=\"auto\"` means (default: cuda where usable, else cpu)")
MEMORY_CHECK: EnvVar[bool] = EnvVar(
    "INDEXZOO_MEMORY_CHECK", _flag, True, _FLAG_FORM,
    "0 turns off the memory check of `run` and `bench`")
PROGRESS: EnvVar[bool | None] = EnvVar(
    "INDEXZOO_PROGRESS", _flag, None, _FLAG_FORM,
    "0 turns off the progress lines `run` and `bench` show on a terminal (standard error) and "
    "the lines a long build writes there from Python; 1 writes the build's lines also where "
    "standard error is not a terminal (unset: on a terminal only)")
PLUGIN_TIMEOUT: EnvVar[float] = EnvVar(
    "INDEXZOO_PLUGIN_TIMEOUT", _seconds(0.0, MOST_TIMEOUT_S, low_allowed=False), 30.0,
    f"a number of seconds above 0 and at most {MOST_TIMEOUT_S:g}, e.g. 30",
    "seconds one plugin module may take to import (default 30)")
CPU_SERIAL_BELOW: EnvVar[int] = EnvVar(
    "INDEXZOO_CPU_SERIAL_BELOW", _whole(0, MOST_ITEMS), 1 << 15,
    f"a whole number from 0 to {MOST_ITEMS} (2^40), e.g. 32768",
    "CPU kernel calls with fewer items run on one core (default 32768)", at_import=True)
CPU_SERIAL_BELOW_RAYS: EnvVar[int] = EnvVar(
    "INDEXZOO_CPU_SERIAL_BELOW_RAYS", _whole(0, MOST_ITEMS), 1 << 10,
    f"a whole number from 0 to {MOST_ITEMS} (2^40), e.g. 1024",
    "CPU ray-tracing launches with fewer rays run on one core (default 1024)", at_import=True)
NUMBA_LAUNCH: EnvVar[bool] = EnvVar(
    "INDEXZOO_NUMBA_LAUNCH", _flag, False, _FLAG_FORM,
    "1 launches GPU kernels through numba-cuda's own launch, not indexzoo's faster one",
    at_import=True)
CACHE_DIR: EnvVar[str | None] = EnvVar(
    "INDEXZOO_CACHE_DIR", _folder, None, f"a folder (at most {MOST_PATH_CHARS} characters)",
    "indexzoo's cache folder: compiled OptiX programs in its optix/, compiled CPU and CUDA "
    "kernels in its kernels/ (default: the user's cache folder: ~/.cache/indexzoo, or "
    "$XDG_CACHE_HOME/indexzoo, on Linux; ~/Library/Caches/indexzoo on macOS; "
    "%LOCALAPPDATA%\\indexzoo\\Cache on Windows)")
KERNEL_CACHE: EnvVar[str | None] = EnvVar(
    "INDEXZOO_KERNEL_CACHE", _folder_or_off, None,
    f"a folder (at most {MOST_PATH_CHARS} characters), or off/0/no/false/none",
    "the folder where compiled CPU and CUDA kernels are kept for later processes (default: "
    "kernels/ in the cache folder of INDEXZOO_CACHE_DIR); off (or 0/no/false/none): every process "
    "compiles its own")
KERNEL_CACHE_SIZE: EnvVar[int] = EnvVar(
    "INDEXZOO_KERNEL_CACHE_SIZE", _whole(1, MOST_CACHE_MIB), 1024,
    f"a whole number of MiB from 1 to {MOST_CACHE_MIB} (1 TiB), e.g. 1024",
    "the most MiB of compiled kernels kept; past it the least recently used go first "
    "(default 1024)")
RANK_BUDGET: EnvVar[float] = EnvVar(
    "INDEXZOO_RANK_BUDGET", _seconds(0.0, MOST_BUDGET_S, low_allowed=True), 60.0,
    f"a number of seconds from 0 to {MOST_BUDGET_S:g} (a day), e.g. 60",
    "the default of `bench --rank-budget`: seconds of extra timing rounds per workload while "
    "the ranking is not established (default 60; 0: exactly --repeats rounds)")
SHARDED_WORKERS: EnvVar[int | None] = EnvVar(
    "INDEXZOO_SHARDED_WORKERS", _whole(1, MOST_WORKERS), None,
    f"a whole number from 1 to {MOST_WORKERS} (the CPUs here, at least 4), e.g. 4",
    "workers of the local CPU cluster a sharded index starts (default: the CPU count, at "
    "most 4)")
COMMIT: EnvVar[str | None] = EnvVar(
    "INDEXZOO_COMMIT", _commit, None,
    f"a commit (at most {MOST_COMMIT_CHARS} printable characters)",
    "the commit `bench` records where the tree has no git history")

#: Every variable, in the docs' order.
VARIABLES: tuple[EnvVar[Any], ...] = (
    DEVICE, MEMORY_CHECK, PROGRESS, PLUGIN_TIMEOUT, CPU_SERIAL_BELOW, CPU_SERIAL_BELOW_RAYS,
    NUMBA_LAUNCH, RANK_BUDGET, SHARDED_WORKERS, CACHE_DIR, KERNEL_CACHE, KERNEL_CACHE_SIZE, COMMIT)


def check_import_time() -> None:
    """ConfigError for the first malformed variable that a module reads when imported."""
    for var in VARIABLES:
        if var.at_import:
            var.value()
