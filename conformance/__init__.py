"""The shared conformance suite: one certification every index must pass.

* :class:`ConformanceSuite` - subclass it in a pytest file and set ``index``;
* :func:`parametrize_with_checks` - every check of some indexes as the cases of one test
  function (scikit-learn's way), each with the id ``<index>-<group>/<check>``;
* :func:`run_checks` / ``indexzoo check NAME`` - the same checks without pytest;
* :class:`Oracle` - exact NumPy answers for every ``out`` mode.

The checks need ``hypothesis`` (the ``test`` extra: ``pip install 'hypothesis>=6.100'``);
importing this package does not: it imports none of its modules, and each name is loaded on
first use (``ConformanceSuite`` and ``parametrize_with_checks`` need pytest), so the suite's
pytest plugin costs a run that does not use it nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import CHECKS, GROUPS
    from .context import Context
    from .oracle import Expected, Oracle, compare
    from .parametrize import IndexUnderTest, parametrize_with_checks
    from .runner import make_context, run_checks, summary
    from .suite import ConformanceSuite

__all__ = ["CHECKS", "GROUPS", "ConformanceSuite", "Context", "Expected", "IndexUnderTest",
           "Oracle", "compare", "make_context", "parametrize_with_checks", "run_checks",
           "summary"]


def __getattr__(name: str) -> Any:
    if name == "ConformanceSuite":
        from .suite import ConformanceSuite

        return ConformanceSuite
    if name in ("parametrize_with_checks", "IndexUnderTest"):
        from . import parametrize

        return getattr(parametrize, name)
    if name in ("CHECKS", "GROUPS"):
        from . import catalog

        return getattr(catalog, name)
    if name == "Context":
        from .context import Context

        return Context
    if name in ("make_context", "run_checks", "summary"):
        from . import runner

        return getattr(runner, name)
    if name in ("Expected", "Oracle", "compare"):
        from . import oracle

        return getattr(oracle, name)
    raise AttributeError(f"module 'indexzoo.conformance' has no attribute {name!r}")
