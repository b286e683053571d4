"""Every built-in index, and the third-party example plugin, passes the conformance suite.

One ConformanceSuite subclass per index is generated from the registry, so a new built-in
plugin is certified without touching this file (presets and variants of an index run the
groups that check answers here and the rest of the suite in the exhaustive tier: VARIANTS; the
sharded index that wraps one runs the answer groups but ``differential`` here: WRAPPERS).
Device and size: --indexzoo-device, --indexzoo-size (CI: cpu, small).
"""

from __future__ import annotations

import pytest

from indexzoo.conformance import GROUPS, ConformanceSuite
from indexzoo.registry import builtin

#: The groups that check answers: every index runs them in the default tier.
ANSWER_GROUPS = ("differential", "out_modes", "ranges", "extremes")
#: Presets and variants of an index whose whole suite runs here (lightweight's layouts beside
#: ``lightweight`` and ``eo-ks``, cgrx's node shapes, rtscan's ablations and RTc1/RTc3): the
#: groups that check answers run in the default tier, the rest of the suite in the exhaustive
#: tier. Every other index, a new one included, runs the whole suite here.
VARIANTS = {"ao-bs", "ao-pb-bs", "ao-pb-ks", "eo-bs", "cgrx-5x4", "cgrx-8x4", "rtc1", "rtc3",
            "rtscan-direct", "rtscan-noenc", "rtscan-nosieve", "rtscan-paper", "rtscan-rt"}
#: Indexes that wrap another built-in index: ``sharded`` answers through its inner index
#: (sorted-array, whose whole suite runs here) on a local Dask cluster. The groups that check
#: answers run here but ``differential``, whose hypothesis examples each build the index on the
#: cluster again (about 100 s of Dask round trips a run); ``differential`` and the rest of the
#: suite run in the exhaustive tier. What is its own (routing, the caller's order, save and
#: load, footprint, lost workers) is tests/plugins/sharded's.
WRAPPERS = {"sharded"}
#: The groups that check answers that a wrapper runs in the exhaustive tier only.
WRAPPER_EXHAUSTIVE_GROUPS = ("differential",)

for _name in [*builtin(), "linear-scan"]:
    _base = {"index": _name, "__module__": __name__}
    _title = f"TestConformance_{_name.replace('-', '_')}"
    if _name not in VARIANTS | WRAPPERS:
        globals()[_title] = type(_title, (ConformanceSuite,), _base)
        continue
    _here = ANSWER_GROUPS if _name in VARIANTS else tuple(
        g for g in ANSWER_GROUPS if g not in WRAPPER_EXHAUSTIVE_GROUPS)
    globals()[_title] = type(_title, (ConformanceSuite,), {**_base, "groups": _here})
    globals()[f"{_title}_rest"] = type(f"{_title}_rest", (ConformanceSuite,), {
        **_base, "groups": tuple(g for g in GROUPS if g not in _here),
        "pytestmark": [pytest.mark.exhaustive]})


def test_every_variant_is_a_builtin_index() -> None:
    assert set(builtin()) >= VARIANTS | WRAPPERS


def test_every_builtin_index_has_a_suite() -> None:
    suites = {v.index for v in globals().values()
              if isinstance(v, type) and issubclass(v, ConformanceSuite) and v.index}
    assert set(builtin()) <= suites
