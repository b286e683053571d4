"""The pytest plugin of the conformance suite (entry point ``pytest11``): its options."""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("indexzoo", "indexzoo conformance suite")
    group.addoption("--indexzoo-device", dest="indexzoo_device", choices=("cpu", "cuda"),
                    default=None, help="device the ConformanceSuite runs on (default: cpu)")
    group.addoption("--indexzoo-size", dest="indexzoo_size", choices=("small", "large"),
                    default=None,
                    help="small (default): quick, for CI; large: bigger key sets and the "
                    "'indexzoo-thorough' hypothesis profile")


def pytest_report_header(config: Any) -> str:
    device = config.getoption("indexzoo_device") or "cpu"
    size = config.getoption("indexzoo_size") or "small"
    return f"indexzoo conformance: device={device}, size={size}"
