"""The layers of indexzoo form a DAG (``tests/import_contract.py`` says which layer may import
which): the tree keeps the contract, and each rule, broken on purpose, is caught."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_contract import LAYERS, layer, modules_of, tree_violations, violations

REPO = Path(__file__).resolve().parents[1]


def test_the_source_tree_keeps_the_import_contract() -> None:
    problems = tree_violations(REPO)
    assert not problems, "\n".join(problems)


def test_every_module_has_a_layer_and_every_layer_has_modules() -> None:
    modules, _ = modules_of(REPO)
    assert {layer(m) for m in modules} == set(LAYERS)
    assert layer("indexzoo.contract") == "contract"
    assert layer("indexzoo") == "registry" and layer("indexzoo.registry") == "registry"
    assert layer("indexzoo.native.search") == "kernels"
    assert layer("indexzoo.native.rt.trace") == "rt"
    assert layer("indexzoo.plugins.rx.index") == "plugins"
    assert layer("indexzoo.tools.bench") == "tools"


def _planted(module: str, line: str) -> list[str]:
    """The contract's violations after adding ``line`` to ``module`` (inside a function when
    it is indented: a deferred import)."""
    modules, packages = modules_of(REPO)
    body = f"\ndef _planted():\n{line}\n" if line.startswith(" ") else f"\n{line}\n"
    return violations({**modules, module: modules[module] + body}, packages)


@pytest.mark.parametrize("module,line,rule", [
    ("indexzoo.contract", "from indexzoo.tools import bench", "[layers]"),
    ("indexzoo.contract", "    from indexzoo.native import search", "[layers]"),
    ("indexzoo.native.search", "import indexzoo.native.rt.trace", "[layers]"),
    ("indexzoo.native.rt.trace", "from indexzoo.plugins.rx import RxIndex", "[layers]"),
    ("indexzoo.plugins.btree.index", "from indexzoo.conformance import checks", "[layers]"),
    ("indexzoo.conformance.checks", "    from indexzoo.tools.bench import run_bench", "[layers]"),
    ("indexzoo.tools.recommend", "    from indexzoo.plugins.lightweight import recommend",
     "[plugins]"),
    ("indexzoo.plugins.cgrx.index", "from indexzoo.plugins.rx.params import RxParams",
     "[plugins]"),
    ("indexzoo.tools.bench", "from indexzoo.tools.plots import _describe", "[private names]"),
    ("indexzoo.tools.doctor", "x = devices._import_problem", "[private names]"),
    ("indexzoo.native.jitcache", "    from indexzoo.native import targets", "[cycles]"),
])
def test_a_planted_violation_is_caught(module: str, line: str, rule: str) -> None:
    found = [p for p in _planted(module, line) if p.endswith(rule)]
    assert found, f"{rule} not reported for {line!r} in {module}"
    assert all(module in p or "cycle" in p for p in found)


def test_a_clean_import_is_not_a_violation() -> None:
    assert _planted("indexzoo.tools.bench", "from indexzoo.native import search") == []
    assert _planted("indexzoo.plugins.rx.index", "    from indexzoo.native.rt import trace") == []
