"""``parametrize_with_checks``: every conformance check of some indexes as the parametrized
cases of one test function, as scikit-learn offers its estimator checks::

    from indexzoo.conformance import parametrize_with_checks

    @parametrize_with_checks([MyIndex, "sorted-array", {"index": "btree",
                                                        "params": {"node_width": 8}}])
    def test_conformance(conformance_context, conformance_check):
        conformance_check(conformance_context)

Each (index, check) pair is one test, with the id ``<index>-<group>/<check>``
(``my-index-ranges/range_bounds_are_inclusive``; an index given with parameters is named
``btree(node_width=8)``). A check that needs a capability the index does not declare is
skipped with the reason, a check the index declares it fails is a strict expected failure,
and on a device the index's capabilities do not list every check is skipped with that reason.
The device and size come from ``--indexzoo-device`` and ``--indexzoo-size``, as for
:class:`~indexzoo.conformance.ConformanceSuite`; the ``conformance_context`` fixture of the
suite's pytest plugin makes each test's :class:`~indexzoo.conformance.Context`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from indexzoo import GpuIndex, IndexSpec, Unsupported

from .catalog import CHECKS
from .context import Context, skip_reason
from .runner import chosen_groups, make_context, resolve_index
from .runner import expected_failures as declared_failures

__all__ = ["IndexUnderTest", "context_for", "parametrize_with_checks"]

#: The test function's two arguments: what ``conformance_check`` is called with, and the check.
ARGNAMES = ("conformance_context", "conformance_check")


@dataclass(frozen=True)
class IndexUnderTest:
    """One index the decorator certifies: its class, its parameters and the checks it is
    declared to fail (label -> reason). The parametrized value of ``conformance_context``,
    which the fixture turns into a :class:`Context`."""

    cls: type[GpuIndex]
    params: Mapping[str, Any] = field(default_factory=dict)
    expected: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``name``, or ``name(param=value, ...)`` for an index given with parameters."""
        if not self.params:
            return self.cls.name
        shown = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.cls.name}({shown})"


def _resolve(index: Any) -> tuple[type[GpuIndex], dict[str, Any]]:
    """(class, params) of a registered name, an IndexSpec or its dict, a GpuIndex subclass,
    or a factory: a callable that makes an unbuilt index (called once, here, for the class
    and parameters of what it makes)."""
    if isinstance(index, (str, dict, IndexSpec)) or (
            isinstance(index, type) and issubclass(index, GpuIndex)):
        return resolve_index(index)
    if callable(index):
        made = index()
        if not isinstance(made, GpuIndex):
            raise TypeError(f"parametrize_with_checks: the factory {index!r} made "
                            f"{type(made).__name__}, not a GpuIndex")
        return type(made), made.params.model_dump(exclude_defaults=True)
    raise TypeError("parametrize_with_checks takes index classes, registered names, "
                    f"IndexSpecs (or their dicts) and factories; got {index!r}")


def parametrize_with_checks(indexes: Iterable[Any], *, groups: Collection[str] | None = None,
                            expected_failures: Mapping[str, str] | None = None
                            ) -> pytest.MarkDecorator:
    """A ``pytest.mark.parametrize`` of ``(conformance_context, conformance_check)`` over
    every check of every index in ``indexes`` (index classes, registered names, IndexSpecs or
    their dicts, factories of unbuilt indexes): one test per pair, named
    ``<index>-<group>/<check>``.

    ``groups``: run only these groups' checks (:data:`~indexzoo.conformance.GROUPS`; None:
    all). ``expected_failures``: label -> reason, checks every index here is known to fail,
    besides each class's own ``conformance_expected_failures``; they run as strict expected
    failures. A check an index cannot take (a capability it does not declare) is skipped with
    the reason.
    """
    wanted = chosen_groups(groups, "parametrize_with_checks: groups")
    cases = []
    for index in indexes:
        cls, params = _resolve(index)
        xfail = declared_failures(cls, dict(expected_failures or {}))
        target = IndexUnderTest(cls, params, xfail)
        for chk in CHECKS:
            if chk.group not in wanted:
                continue
            reason = skip_reason(chk, cls.capabilities)
            if reason is not None:
                marks = [pytest.mark.skip(reason=reason)]
            elif chk.label in xfail:
                marks = [pytest.mark.xfail(reason=xfail[chk.label], strict=True)]
            else:
                marks = []
            cases.append(pytest.param(target, chk, marks=marks,
                                      id=f"{target.label}-{chk.label}"))
    return pytest.mark.parametrize(ARGNAMES, cases, indirect=[ARGNAMES[0]])


def context_for(request: pytest.FixtureRequest) -> Context:
    """The context of the :class:`IndexUnderTest` that ``request`` is parametrized with, on
    the ``--indexzoo-device`` at the ``--indexzoo-size``; the test is skipped where the index
    does not run on that device."""
    target = getattr(request, "param", None)
    if not isinstance(target, IndexUnderTest):
        raise TypeError("the conformance_context fixture is parametrized by "
                        "indexzoo.conformance.parametrize_with_checks (or given by a "
                        "ConformanceSuite subclass)")
    device = request.config.getoption("indexzoo_device", default=None) or "cpu"
    size = request.config.getoption("indexzoo_size", default=None) or "small"
    try:
        return make_context(target.cls, device=device, size=size, params=dict(target.params),
                            expected=dict(target.expected),
                            seed=request.config.getoption("indexzoo_seed", default=None))
    except Unsupported as exc:
        pytest.skip(str(exc))
