"""Every built-in index, and the third-party example plugin, passes the conformance suite.

One ConformanceSuite subclass per index is generated from the registry, so a new built-in
plugin is certified without touching this file. Device and size: --indexzoo-device,
--indexzoo-size (CI: cpu, small).
"""

from __future__ import annotations

from indexzoo.conformance import ConformanceSuite
from indexzoo.registry import builtin

for _name in [*builtin(), "linear-scan"]:
    _cls = type(f"TestConformance_{_name.replace('-', '_')}", (ConformanceSuite,),
                {"index": _name, "__module__": __name__})
    globals()[_cls.__name__] = _cls


def test_every_builtin_index_has_a_suite() -> None:
    suites = {v.index for v in globals().values()
              if isinstance(v, type) and issubclass(v, ConformanceSuite) and v.index}
    assert set(builtin()) <= suites
