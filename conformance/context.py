"""What every conformance check works with: :class:`Check` and the :func:`check` marker, the
check groups, the :class:`Context` of the index under test (how to make one, on which device,
at which size), the hypothesis profiles and :func:`verify`, which compares every offered
``out`` mode with the NumPy oracle."""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

import numpy as np
from hypothesis import HealthCheck, seed, settings

from indexzoo import (
    OUT_MODES,
    Capabilities,
    GpuIndex,
    Out,
)

from .oracle import Oracle, compare

__all__ = ["GROUPS", "Check", "Context", "bitmap_lookups", "check", "checks_in", "fresh_seed",
           "skip_reason", "verify"]

Size = Literal["small", "large"]

GROUPS = ("contract", "differential", "out_modes", "ranges", "columns", "extremes", "sizes",
          "dtypes",
          "order", "bad_input", "ownership", "concurrency", "footprint", "persistence",
          "capabilities")


@dataclass(frozen=True)
class Check:
    """One check: ``func(ctx)`` raises AssertionError when the index breaks the contract."""

    name: str
    group: str
    func: Callable[[Context], None]
    needs: tuple[str, ...] = ()
    doc: str = ""

    def __call__(self, ctx: Context) -> None:
        self.func(ctx)

    @property
    def label(self) -> str:
        return f"{self.group}/{self.name}"


def check(group: str, needs: Iterable[str] = ()) -> Callable[[Callable[[Context], None]],
                                                              Callable[[Context], None]]:
    """Mark a function as a check of ``group`` (its name without ``check_`` is the check's
    name); :func:`checks_in` collects the marked functions of a module."""
    assert group in GROUPS, group

    def deco(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        fn.conformance_check = Check(  # type: ignore[attr-defined]
            fn.__name__.removeprefix("check_"), group, fn, tuple(needs), doc)
        return fn

    return deco


def checks_in(module: ModuleType) -> list[Check]:
    """The checks a module defines (functions marked with :func:`check`), in source order."""
    return [fn.conformance_check for fn in vars(module).values()
            if callable(fn) and isinstance(getattr(fn, "conformance_check", None), Check)]


#: Libraries a check may need (it is skipped, with the reason, where one is not installed).
LIBRARIES = ("pandas", "polars", "pyarrow")


def has(caps: Capabilities, need: str) -> bool:
    if need in LIBRARIES:
        return importlib.util.find_spec(need) is not None
    if need == "multi":
        return caps.dims > 1
    if need in ("uint32", "uint64"):
        return need in caps.key_dtypes
    if need in OUT_MODES:
        return need in caps.out_modes
    return bool(getattr(caps, need))


def _lacks(need: str) -> str:
    if need in LIBRARIES:
        return f"{need} is not installed (pip install {need})"
    if need == "multi":
        return "the index takes one key column (capabilities.dims = 1)"
    if need in ("uint32", "uint64"):
        return f"the index does not take {need} keys (capabilities.key_dtypes)"
    if need in OUT_MODES:
        return f"the index does not offer out={need!r} (capabilities.out_modes)"
    return f"the index declares {need}=False in its capabilities"


def skip_reason(check: Check, caps: Capabilities) -> str | None:
    """Why ``check`` does not apply to an index with ``caps`` (None: it applies)."""
    missing = [n for n in check.needs if not has(caps, n)]
    return "; ".join(_lacks(n) for n in missing) or None


#: Most lookups x keys of one batch of a full-scan index (``GpuIndex.full_scan``) at
#: ``large``: every lookup reads every key, so a large key set is asked small batches.
SCAN_WORK = {"cpu": 1 << 28, "cuda": 1 << 34}

#: Seeds drawn for a run that was given none are below this (short enough to type again).
SEEDS = 1_000_000


def fresh_seed() -> int:
    """A seed for a run that was given none: drawn at random, so that runs differ; the run
    prints it, and giving it back (``--seed``) replays the run."""
    return secrets.randbelow(SEEDS)


@dataclass
class Context:
    """What a check needs to know about the plugin under test."""

    factory: Callable[..., GpuIndex]  # factory(**param_overrides) -> a fresh, unbuilt index
    caps: Capabilities
    device: str
    size: Size = "small"
    name: str = "index"
    hypothesis_profile: str | None = None
    #: check label (``group/name``) -> why the index is expected to fail it
    expected_failures: dict[str, str] = field(default_factory=dict)
    #: the index class under test (None: the class of what ``factory`` makes)
    cls: type[GpuIndex] | None = None
    #: what the run draws from: the scale checks' key counts, batch sizes and data, and the
    #: hypothesis examples of the ``large`` size (``small``'s are derandomized)
    seed: int = field(default_factory=fresh_seed)
    _settings: Any = field(default=None, repr=False)

    def new(self, **params: Any) -> GpuIndex:
        return self.factory(**params)

    @property
    def n_max(self) -> int:
        return 1 << 12 if self.size == "small" else 1 << 18

    @property
    def n_lookups(self) -> int:
        if self.size == "small":
            return 600
        if self.full_scan:  # every lookup reads every key: lookups x keys within reach
            return min(1 << 15, max(600, self.scan_work // self.n_max))
        return 1 << 15

    @property
    def max_matches(self) -> int:
        """Most matches one verified batch may have (all-equal keys x many lookups explode)."""
        return 1 << 20 if self.size == "small" else 1 << 22

    @property
    def n_ranges(self) -> int:
        return 300 if self.size == "small" else 1500

    @property
    def scan_work(self) -> int:
        """Most lookups x keys of one batch of a full-scan index at ``large`` here."""
        return SCAN_WORK.get(self.device, SCAN_WORK["cpu"])

    @property
    def full_scan(self) -> bool:
        """Whether every lookup of the index reads every key (its class's ``full_scan``)."""
        return bool(getattr(self.cls, "full_scan", False))

    @property
    def wide(self) -> bool:
        return "uint64" in self.caps.key_dtypes

    @property
    def modes(self) -> tuple[Out, ...]:
        return tuple(self.caps.out_modes)

    def settings(self) -> Any:
        if self._settings is None:
            name = self.hypothesis_profile or (
                "indexzoo-ci" if self.size == "small" else "indexzoo-thorough")
            self._settings = settings(settings.get_profile(name), database=None)
        return self._settings

    def seeded(self, test: Callable[..., None]) -> Callable[[], None]:
        """A hypothesis test (decorated with ``given``) that draws its examples from the
        run's seed (unless its profile derandomizes it, as ``small``'s does)."""
        if self.settings().derandomize:
            return test
        return seed(self.seed)(test)

    def keys(self, values: Iterable[int], bits: int) -> np.ndarray:
        """Keys as uint32/uint64 (uint32 when the index lacks uint64 and they fit)."""
        arr = np.array(list(values), dtype=np.uint64)
        if bits == 32 or not self.wide:
            return arr.astype(np.uint32)
        return arr


settings.register_profile(
    "indexzoo-ci", max_examples=12, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])
settings.register_profile(
    "indexzoo-thorough", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])


def verify(ctx: Context, index: GpuIndex, keys: np.ndarray, *, values: Any = None,
           points: np.ndarray | None = None, rng: tuple[np.ndarray, np.ndarray] | None = None,
           label: str = "", modes: Iterable[Out] | None = None) -> None:
    """Every offered ``out`` mode of ``index`` agrees with the oracle on these lookups.

    Batches whose matches exceed ``ctx.max_matches`` are cut short first.
    """
    oracle = Oracle(keys, values)
    if points is not None:
        points = _within_budget(oracle, ctx.max_matches, points)[0]
    if rng is not None:
        rng = _within_budget(oracle, ctx.max_matches, *rng)  # type: ignore[assignment]
    problems: list[str] = []
    for mode in modes or ctx.modes:
        p, r = points, rng
        if mode == "bitmap":  # N bits per lookup: fewer lookups
            keep = bitmap_lookups(oracle.keys.shape[0])
            p = None if p is None else p[:keep]
            r = None if r is None else (r[0][:keep], r[1][:keep])
        if p is not None and ctx.caps.point:
            res = index.point(p, out=mode)
            problems += compare(res, oracle.point(p), oracle, mode, index, f"{label} point")
        if r is not None and ctx.caps.range:
            res = index.range(r[0], r[1], out=mode)
            problems += compare(res, oracle.range(*r), oracle, mode, index, f"{label} range")
    if problems:
        raise AssertionError(f"{ctx.name}: " + "\n".join(problems))


#: Bytes of expected bitmaps one verified batch may hold.
BITMAP_BUDGET = 1 << 23


def bitmap_lookups(n: int) -> int:
    """How many lookups of an index of ``n`` rows fit ``BITMAP_BUDGET`` as bitmaps."""
    return max(1, BITMAP_BUDGET // max(n, 1))


def _within_budget(oracle: Oracle, budget: int, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    exp = oracle.range(arrays[0], arrays[-1])
    total = np.cumsum(exp.count)
    if not total.size or total[-1] <= budget:
        return arrays
    keep = max(int(np.searchsorted(total, budget, side="right")), 1)
    return tuple(a[:keep] for a in arrays)


