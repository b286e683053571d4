"""A plugin author's benchmark: linear-scan (the indexzoo_example plugin) against the built-in
sorted-array, on the presets of ``--indexzoo-bench-presets``, with indexzoo's installed pytest
fixtures (docs/benchmarks.md, "Timing your plugin against the built-ins")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.mark.parametrize("index", ["linear-scan", "sorted-array"])
def test_lookups(indexzoo_bench_lookups: Callable[..., dict[str, Any]], indexzoo_preset: str,
                 index: str) -> None:
    indexzoo_bench_lookups(index, indexzoo_preset)  # builds, checks, times: see extra_info
