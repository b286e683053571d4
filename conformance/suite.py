"""``ConformanceSuite``: the pytest face of the checks. Subclass it, name your index::

    from indexzoo.conformance import ConformanceSuite

    class TestMyIndex(ConformanceSuite):
        index = "my-index"          # a registered name, an IndexSpec, or a GpuIndex subclass
        params = {"fanout": 8}      # optional parameters

and pytest runs one test per applicable check, named ``group/check``. The device and size
come from ``--indexzoo-device`` (default cpu) and ``--indexzoo-size`` (default small).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from indexzoo import Unsupported

from .checks import Check, Context, applicable
from .runner import make_context, resolve_index

__all__ = ["ConformanceSuite"]


class ConformanceSuite:
    """Every conformance check that applies to ``index``, as pytest tests."""

    index: ClassVar[Any] = None
    params: ClassVar[dict[str, Any]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "conformance_check" not in metafunc.fixturenames:
            return
        if self.index is None:
            raise TypeError(f"{type(self).__name__} must set `index` to the index to certify")
        cls, _ = resolve_index(self.index, self.params)
        checks = applicable(cls.capabilities)
        metafunc.parametrize("conformance_check", checks,
                             ids=[f"{c.group}/{c.name}" for c in checks])

    @pytest.fixture
    def conformance_context(self, request: pytest.FixtureRequest) -> Context:
        device = request.config.getoption("indexzoo_device", default=None) or "cpu"
        size = request.config.getoption("indexzoo_size", default=None) or "small"
        try:
            return make_context(self.index, device=device, size=size, params=self.params)
        except Unsupported as exc:
            pytest.skip(str(exc))

    def test_conformance(self, conformance_check: Check, conformance_context: Context) -> None:
        conformance_check(conformance_context)
