"""Lookup throughput and build time of every index on the papers' workloads."""

from __future__ import annotations

from typing import Any

import pytest

import indexzoo
from indexzoo.tools.bench import LATENCY_BATCHES
from indexzoo.tools.timing import synchronize, time_call
from indexzoo.tools.workloads import Dataset

ROUNDS = 5


def _lookups(index: Any, data: Dataset, out: str) -> Any:
    batches = data.batches()
    if data.queries is not None:
        return lambda: [index.point(b[0], out=out) for b in batches]
    return lambda: [index.range(b[0], b[1], out=out) for b in batches]


def test_lookup_throughput(benchmark: Any, index_name: str, preset: str, dataset: Dataset,
                           bench_device: str, environment_info: dict[str, Any]) -> None:
    index = indexzoo.create(index_name, device=bench_device)
    point = dataset.queries is not None
    if not point and not index.capabilities.range:
        pytest.skip(f"{index_name} has no range lookups")
    out = "rowid" if point else "count"
    build = time_call(lambda: index.build(dataset.keys), bench_device, repeats=3)
    fp = index.memory_footprint()
    work = _lookups(index, dataset, out)
    events = time_call(work, bench_device, repeats=ROUNDS)

    def timed() -> None:
        work()
        synchronize(bench_device)

    benchmark.group = f"{preset} ({'point' if point else 'range'}, {bench_device})"
    benchmark.pedantic(timed, rounds=ROUNDS, warmup_rounds=1, iterations=1)
    median = benchmark.stats.stats.median
    throughput = dataset.n_lookups / median if median > 0 else float("inf")
    benchmark.extra_info.update({
        "index": index_name,
        "workload": dataset.workload.model_dump(),
        "n_lookups": dataset.n_lookups,
        "out": out,
        "throughput_lookups_per_s": throughput,
        "lookup_s_cuda_events_median": events.median if bench_device == "cuda" else None,
        "build_s": build.median,
        "resident_bytes": fp.resident_bytes,
        "peak_build_bytes": fp.peak_build_bytes,
        "throughput_per_byte": throughput / fp.resident_bytes if fp.resident_bytes else None,
        "footprint": fp.breakdown,
        "device": bench_device,
        "device_name": environment_info["device_name"],
        "commit": environment_info["commit"],
    })


@pytest.mark.parametrize("batch", LATENCY_BATCHES)
def test_small_batch_latency(benchmark: Any, index_name: str, bench_device: str, batch: int,
                             environment_info: dict[str, Any]) -> None:
    """Wall time of one call with a small batch, Python and launch overhead included."""
    from indexzoo.tools.bench import PRESETS
    from indexzoo.tools.workloads import generate

    data = generate(PRESETS["latency"], bench_device)
    index = indexzoo.create(index_name, device=bench_device).build(data.keys)
    q = data.queries[:batch]

    def call() -> None:
        index.point(q)
        synchronize(bench_device)

    call()
    benchmark.group = f"latency ({bench_device})"
    benchmark.extra_info.update({"index": index_name, "batch": batch, "device": bench_device,
                                 "device_name": environment_info["device_name"],
                                 "commit": environment_info["commit"]})
    benchmark(call)
