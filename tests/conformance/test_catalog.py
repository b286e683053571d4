"""The catalog runs every check the suite defines: one differential check per key family
(checks made in a loop are collected only when each is an attribute of its module)."""

from __future__ import annotations

from indexzoo import OUT_MODES
from indexzoo.conformance import catalog
from indexzoo.conformance.context import LIBRARIES
from indexzoo.conformance.data import FAMILIES


def test_every_key_family_has_its_differential_check_in_the_catalog() -> None:
    names = {c.name for c in catalog.CHECKS}
    assert {f"differential_{f}" for f in FAMILIES} <= names


def test_check_names_are_unique() -> None:
    names = [f"{c.group}/{c.name}" for c in catalog.CHECKS]
    assert len(names) == len(set(names))


def test_every_need_names_a_capability_a_key_dtype_an_out_mode_or_a_library() -> None:
    known = {"point", "range", "duplicates", "updates", "multi", "uint32", "uint64",
             *OUT_MODES, *LIBRARIES}
    unknown = {f"{c.group}/{c.name}": n for c in catalog.CHECKS for n in c.needs
               if n not in known}
    assert not unknown, unknown
