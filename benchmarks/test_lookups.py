"""Lookup throughput and build time of every index on the papers' workloads, with the fixtures
and options of indexzoo's pytest plugin (``indexzoo.tools.pytest_bench``, installed with
indexzoo):

    pytest benchmarks --indexzoo-bench-presets quick                    # CPU-sized
    pytest benchmarks --indexzoo-bench-device cuda --indexzoo-bench-presets paper,l2 --benchmark-json out.json
    pytest-benchmark compare out.json --histogram hist

``--indexzoo-bench-indexes`` picks the indexes (names, 'builtin' or 'all'); docs/benchmarks.md
says more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import indexzoo
from indexzoo.tools.bench import LATENCY_BATCHES
from indexzoo.tools.timing import synchronize


def test_lookup_throughput(indexzoo_bench_lookups: Callable[..., dict[str, Any]],
                           indexzoo_index: str, indexzoo_preset: str) -> None:
    indexzoo_bench_lookups(indexzoo_index, indexzoo_preset)


@pytest.mark.parametrize("batch", LATENCY_BATCHES)
def test_small_batch_latency(benchmark: Any, indexzoo_index: str, indexzoo_bench_device: str,
                             indexzoo_bench_data: Callable[[str], Any], batch: int,
                             indexzoo_bench_environment: dict[str, Any]) -> None:
    """Wall time of one call with a small batch, Python and launch overhead included."""
    data = indexzoo_bench_data("latency")
    index = indexzoo.create(indexzoo_index, device=indexzoo_bench_device).build(data.keys)
    q = data.queries[:batch]

    def call() -> None:
        index.point(q)
        synchronize(indexzoo_bench_device)

    call()
    benchmark.group = f"latency ({indexzoo_bench_device})"
    benchmark.extra_info.update({"index": indexzoo_index, "batch": batch,
                                 "device": indexzoo_bench_device,
                                 "device_name": indexzoo_bench_environment["device_name"],
                                 "commit": indexzoo_bench_environment["commit"]})
    benchmark(call)
