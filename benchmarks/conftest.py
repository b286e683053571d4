"""pytest-benchmark suites over registered indexes x workload presets.

    pytest benchmarks --bench-presets quick                      # CPU-sized
    pytest benchmarks --bench-device cuda --bench-presets paper,l2 --benchmark-json out.json
    pytest-benchmark compare out.json --histogram hist

Options: --bench-device (auto|cpu|cuda, default auto), --bench-presets (comma-separated names
from indexzoo.tools.bench.PRESETS, default quick), --bench-indexes (comma-separated names, 'builtin'
(default) or 'all'). Data is generated once per (preset, device) and excluded from timings;
GPU timings synchronize the device at the end of every round, and extra_info also records the
CUDA-event median of the same work.
"""

from __future__ import annotations

from typing import Any

import pytest

from indexzoo.devices import resolve_device
from indexzoo.registry import available, builtin
from indexzoo.tools.bench import PRESETS
from indexzoo.tools.workloads import Dataset, generate


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("indexzoo-bench", "indexzoo benchmarks")
    g.addoption("--bench-device", default="auto", choices=("auto", "cpu", "cuda"))
    g.addoption("--bench-presets", default="quick",
                help=f"comma-separated presets: {', '.join(PRESETS)} (default quick)")
    g.addoption("--bench-indexes", default="builtin",
                help="comma-separated index names, 'builtin' (default) or 'all'")


def _names(config: pytest.Config) -> list[str]:
    opt = config.getoption("bench_indexes")
    if opt == "builtin":
        return builtin()
    if opt == "all":
        return list(available())
    return [n.strip() for n in opt.split(",") if n.strip()]


def _presets(config: pytest.Config) -> list[str]:
    names = [p.strip() for p in config.getoption("bench_presets").split(",") if p.strip()]
    unknown = [p for p in names if p not in PRESETS]
    if unknown:
        raise pytest.UsageError(f"unknown presets {unknown}; allowed: {', '.join(PRESETS)}")
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "index_name" in metafunc.fixturenames:
        metafunc.parametrize("index_name", _names(metafunc.config))
    if "preset" in metafunc.fixturenames:
        metafunc.parametrize("preset", _presets(metafunc.config))


@pytest.fixture(scope="session")
def bench_device(request: pytest.FixtureRequest) -> str:
    return resolve_device(request.config.getoption("bench_device"))


_DATA: dict[tuple[str, str], Dataset] = {}


@pytest.fixture
def dataset(preset: str, bench_device: str) -> Dataset:
    """The preset's keys and lookups on the device, generated once per session."""
    key = (preset, bench_device)
    if key not in _DATA:
        _DATA.clear()  # keep one dataset alive at a time: paper-sized data is large
        _DATA[key] = generate(PRESETS[preset], bench_device)
    return _DATA[key]


@pytest.fixture(scope="session")
def environment_info(bench_device: str) -> dict[str, Any]:
    from indexzoo.tools.bench import environment

    return environment(bench_device)
