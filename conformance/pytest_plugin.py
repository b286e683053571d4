"""The pytest plugin of the conformance suite (entry point ``pytest11``): its options, and a
line naming the device and size after collection in a run that collected conformance tests
(or was given the options). A run without them imports nothing of indexzoo's but this
module and prints nothing."""

from __future__ import annotations

import sys
from typing import Any


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("indexzoo", "indexzoo conformance suite")
    group.addoption("--indexzoo-device", dest="indexzoo_device", choices=("cpu", "cuda"),
                    default=None, help="device the ConformanceSuite runs on (default: cpu)")
    group.addoption("--indexzoo-size", dest="indexzoo_size", choices=("small", "large"),
                    default=None,
                    help="small (default): quick, for CI; large: bigger key sets and the "
                    "'indexzoo-thorough' hypothesis profile")


def _conformance_tests(items: list[Any]) -> bool:
    """Whether ``items`` hold tests of a :class:`~indexzoo.conformance.ConformanceSuite`
    (none unless a test file imported the suite's module: nothing is imported here)."""
    suite = sys.modules.get("indexzoo.conformance.suite")
    base = getattr(suite, "ConformanceSuite", None)
    return base is not None and any(
        isinstance(getattr(item, "cls", None), type) and issubclass(item.cls, base)
        for item in items)


def pytest_report_collectionfinish(config: Any, items: list[Any]) -> str | None:
    device = config.getoption("indexzoo_device")
    size = config.getoption("indexzoo_size")
    if device is None and size is None and not _conformance_tests(items):
        return None
    return f"indexzoo conformance: device={device or 'cpu'}, size={size or 'small'}"
