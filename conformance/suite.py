"""``ConformanceSuite``: the pytest face of the checks. Subclass it, name your index::

    from indexzoo.conformance import ConformanceSuite

    class TestMyIndex(ConformanceSuite):
        index = "my-index"          # a registered name, an IndexSpec, or a GpuIndex subclass
        params = {"fanout": 8}      # optional parameters

and pytest runs one test per check, named ``group/check`` (``groups = {"differential",
"ranges"}`` runs only those groups' checks): a check that needs a capability the
index does not declare is skipped with the reason, and a check the index declares it fails
(``expected_failures = {"group/check": "why"}``, or ``conformance_expected_failures`` on the
index class) is a strict expected failure (it must fail; passing is reported). The device and
size come from ``--indexzoo-device`` (default cpu) and ``--indexzoo-size`` (default small), the
seed of the data from ``--indexzoo-seed`` (default drawn at random, shown in the header); on
a device the index's capabilities do not list, every check is skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

import pytest

from indexzoo import Unsupported

from .catalog import CHECKS
from .context import Check, Context, skip_reason
from .runner import (
    chosen_groups,
    device_refusal,
    expected_failures,
    make_context,
    resolve_index,
)

__all__ = ["ConformanceSuite"]


class ConformanceSuite:
    """Every conformance check, as pytest tests: those that do not apply to ``index`` (a
    capability it does not declare) are reported as skipped with the reason, and checks it
    declares it fails (``conformance_expected_failures`` on the index class, or
    ``expected_failures`` here: label -> reason) as strict expected failures."""

    index: ClassVar[Any] = None
    params: ClassVar[dict[str, Any]] = {}
    expected_failures: ClassVar[dict[str, str]] = {}
    #: The groups whose checks run (:data:`~indexzoo.conformance.GROUPS`); None: every group.
    groups: ClassVar[Collection[str] | None] = None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "conformance_check" not in metafunc.fixturenames:
            return
        if self.index is None:
            raise TypeError(f"{type(self).__name__} must set `index` to the index to certify")
        cls, _ = resolve_index(self.index, self.params)
        xfail = expected_failures(cls, self.expected_failures)
        device = metafunc.config.getoption("indexzoo_device", default=None) or "cpu"
        elsewhere = device_refusal(cls, device)  # every check skipped, with this reason
        wanted = chosen_groups(self.groups, f"{type(self).__name__}.groups")
        cases = []
        for c in CHECKS:
            if c.group not in wanted:
                continue
            reason = elsewhere or skip_reason(c, cls.capabilities)
            if reason is not None:
                marks = [pytest.mark.skip(reason=reason)]
            elif c.label in xfail:
                marks = [pytest.mark.xfail(reason=xfail[c.label], strict=True)]
            else:
                marks = []
            cases.append(pytest.param(c, marks=marks, id=c.label))
        metafunc.parametrize("conformance_check", cases)

    @pytest.fixture
    def conformance_context(self, request: pytest.FixtureRequest) -> Context:
        device = request.config.getoption("indexzoo_device", default=None) or "cpu"
        size = request.config.getoption("indexzoo_size", default=None) or "small"
        seed = request.config.getoption("indexzoo_seed", default=None)
        try:
            return make_context(self.index, device=device, size=size, params=self.params,
                                expected=self.expected_failures, seed=seed)
        except Unsupported as exc:
            pytest.skip(str(exc))

    def test_conformance(self, conformance_check: Check, conformance_context: Context) -> None:
        conformance_check(conformance_context)
