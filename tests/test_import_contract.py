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
    assert layer("indexzoo.query.plan") == "query" and layer("indexzoo.ssb") == "query"
    assert layer("indexzoo.native.rt.trace") == "rt"
    assert layer("indexzoo.plugins.rx.index") == "plugins"
    assert layer("indexzoo.tools.bench") == "tools"
    assert layer("indexzoo.no_such_module") is None  # no catch-all: undeclared is a violation


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
    ("indexzoo.native.search", "from indexzoo import InvalidInput", "[layers]"),
    ("indexzoo.native.rt.trace", "    from indexzoo.query import plan", "[layers]"),
    ("indexzoo.query.plan", "from indexzoo.registry import available", "[layers]"),
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


def test_a_module_without_a_layer_is_a_violation() -> None:
    modules, packages = modules_of(REPO)
    found = violations({**modules, "indexzoo.newthing": "import numpy\n"}, packages)
    assert found == ["module indexzoo.newthing has no layer in the import contract [undeclared]"]


#: A small tree of one module per layer, clean: each case below breaks one rule in it.
SYNTHETIC = {
    "indexzoo": "from indexzoo import registry\nfrom indexzoo.errors import InvalidInput\n",
    "indexzoo.errors": "class InvalidInput(ValueError): ...\n_hidden = 1\n",
    "indexzoo.contract": "from indexzoo.errors import InvalidInput\n",
    "indexzoo.native": "",
    "indexzoo.native.search": "from indexzoo.errors import InvalidInput\n",
    "indexzoo.native.rt": "",
    "indexzoo.native.rt.trace": "from indexzoo.native import search\n",
    "indexzoo.query": "",
    "indexzoo.query.plan": "from indexzoo import errors\n",
    "indexzoo.registry": "from indexzoo.query import plan\n",
    "indexzoo.plugins": "",
    "indexzoo.plugins.a": "from . import kernels\nfrom indexzoo.native.rt import trace\n",
    "indexzoo.plugins.a.kernels": "from indexzoo.native import search\n",
    "indexzoo.plugins.b": "import indexzoo\n",
    "indexzoo.conformance": "import indexzoo\n",
    "indexzoo.tools": "",
    "indexzoo.tools.cli": "from indexzoo import conformance, registry\n",
}
SYNTHETIC_PACKAGES = ["indexzoo", "indexzoo.native", "indexzoo.native.rt", "indexzoo.query",
                      "indexzoo.plugins", "indexzoo.plugins.a", "indexzoo.plugins.b",
                      "indexzoo.conformance", "indexzoo.tools"]


def test_the_synthetic_tree_is_clean() -> None:
    assert violations(SYNTHETIC, SYNTHETIC_PACKAGES) == []


@pytest.mark.parametrize("changes,rule,culprit", [
    ({"indexzoo.native.search": "from indexzoo import InvalidInput\n"}, "[layers]",
     "indexzoo.native.search:1 (kernels) imports indexzoo (registry)"),
    ({"indexzoo.contract": "def f():\n    from indexzoo.native import search\n"}, "[layers]",
     "indexzoo.contract:2 (contract) imports indexzoo.native.search (kernels)"),
    ({"indexzoo.query.plan": "import indexzoo.tools\n"}, "[layers]",
     "indexzoo.query.plan:1 (query) imports indexzoo.tools (tools)"),
    ({"indexzoo.errors": "from indexzoo import contract\n"}, "[cycles]",
     "indexzoo.contract -> indexzoo.errors"),
    ({"indexzoo.plugins.a.kernels": "def f():\n    from indexzoo.plugins import a\n"},
     "[cycles]", "indexzoo.plugins.a -> indexzoo.plugins.a.kernels"),
    ({"indexzoo.contract": "from indexzoo.errors import _hidden\n"}, "[private names]",
     "indexzoo.contract:1 imports the private name '_hidden'"),
    ({"indexzoo.contract": "from indexzoo import errors\nx = errors._hidden\n"},
     "[private names]", "indexzoo.contract:2 reads the private name '_hidden'"),
    ({"indexzoo.plugins.b": "from indexzoo.plugins.a import kernels\n"}, "[plugins]",
     "indexzoo.plugins.b:1 imports the plugin module indexzoo.plugins.a.kernels"),
    ({"indexzoo.tools.cli": "from indexzoo.plugins import a\n"}, "[plugins]",
     "indexzoo.tools.cli:1 imports the plugin module indexzoo.plugins.a"),
    ({"indexzoo.helpers": "import numpy\n"}, "[undeclared]",
     "module indexzoo.helpers has no layer"),
    ({"indexzoo.native2": "", "indexzoo.native2.x": ""}, "[undeclared]",
     "module indexzoo.native2.x has no layer"),
])
def test_each_rule_is_caught_in_a_synthetic_tree(changes: dict[str, str], rule: str,
                                                 culprit: str) -> None:
    found = violations({**SYNTHETIC, **changes}, SYNTHETIC_PACKAGES)
    assert found, f"{rule} not reported"
    assert all(p.endswith(rule) for p in found), found
    assert any(culprit in p for p in found), found
