"""The pytest plugin of the conformance suite (entry point ``pytest11``): its options, the
run's seed, and a line naming the device, size and seed after collection in a run that
collected conformance tests (or was given the options). A run without them imports nothing of
indexzoo's but this module and prints nothing."""

from __future__ import annotations

import secrets
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
    group.addoption("--indexzoo-seed", dest="indexzoo_seed", type=int, default=None,
                    help="what the conformance suite draws its key sets and lookups from "
                    "(default: drawn at random and shown in the header); give a shown seed "
                    "to replay that run")


def pytest_configure(config: Any) -> None:
    """Draw the run's seed where none was given, so every test of the run shares it and the
    header can show it (as :func:`indexzoo.conformance.context.fresh_seed` does)."""
    if getattr(config.option, "indexzoo_seed", None) is None:
        config.option.indexzoo_seed = secrets.randbelow(1_000_000)


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
    return (f"indexzoo conformance: device={device or 'cpu'}, size={size or 'small'}, "
            f"seed={config.getoption('indexzoo_seed')}")
