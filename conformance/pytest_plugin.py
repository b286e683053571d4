"""The pytest plugin of the conformance suite (entry point ``pytest11``): its options, the
``conformance_context`` fixture of :func:`~indexzoo.conformance.parametrize_with_checks`, the
run's seed, and a line naming the device, size and seed after collection in a run that
collected conformance tests (or was given the options). A run without them imports nothing of
indexzoo's but this module and prints nothing."""

from __future__ import annotations

import secrets
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("indexzoo", "indexzoo conformance suite")
    group.addoption("--indexzoo-device", dest="indexzoo_device", choices=("cpu", "cuda"),
                    default=None, help="device the conformance checks run on (default: cpu)")
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


@pytest.fixture
def conformance_context(request: pytest.FixtureRequest) -> Any:
    """The :class:`~indexzoo.conformance.Context` of the index a test is parametrized with
    by :func:`~indexzoo.conformance.parametrize_with_checks` (a ``ConformanceSuite``
    subclass has its own)."""
    from indexzoo.conformance.parametrize import context_for

    return context_for(request)


def _conformance_tests(items: list[Any]) -> bool:
    """Whether ``items`` hold conformance checks: tests of a ``ConformanceSuite`` subclass or
    of ``parametrize_with_checks`` (both take the ``conformance_check`` argument)."""
    return any("conformance_check" in getattr(item, "fixturenames", ()) for item in items)


def pytest_report_collectionfinish(config: Any, items: list[Any]) -> str | None:
    device = config.getoption("indexzoo_device")
    size = config.getoption("indexzoo_size")
    if device is None and size is None and not _conformance_tests(items):
        return None
    return (f"indexzoo conformance: device={device or 'cpu'}, size={size or 'small'}, "
            f"seed={config.getoption('indexzoo_seed')}")
