"""The import contract of indexzoo: which layer may import which, checked from the sources.

The layers, bottom to top (a module may import its own layer and those below it, never one
above):

1. ``contract`` - the modules of :data:`CONTRACT_MODULES`, ``indexzoo.<module>``: the contract
   (``GpuIndex``, ``Capabilities``, the operation table, the plugin API version), keys and key
   maps, devices, config, errors, results, saved files;
2. ``kernels`` - ``indexzoo.native`` (the numba kernels and primitives several families share,
   the kernel cache);
3. ``rt`` - ``indexzoo.native.rt`` (the ray-tracing engine, software and OptiX);
4. ``query`` - ``indexzoo.query`` (the query engines' API: expressions, plans, tables, SQL,
   the SSB benchmark) and the alias ``indexzoo.ssb``;
5. ``registry`` - ``indexzoo`` itself (the public names), ``indexzoo.registry`` (the pluggy
   registry of indexes and query engines), ``indexzoo.catalog`` (what ``indexzoo list`` keeps
   on disk) and ``indexzoo.join``;
6. ``plugins`` - ``indexzoo.plugins.*`` (the built-in indexes and query engines, each family
   with its own kernels);
7. ``conformance`` - ``indexzoo.conformance`` (the shared suite);
8. ``tools`` - ``indexzoo.tools`` (the command line, bench, plots, recommend, doctor) and
   ``indexzoo.__main__`` (``python -m indexzoo``).

The order is the one the imports make, kept as strict as they allow: the kernels and the
ray-tracing engine import only the contract's modules (``indexzoo.errors``,
``indexzoo.devices``, ...), never the public ``indexzoo`` package, so they sit right above
the contract and a kernel cannot reach the registry; the query API imports only the
contract's modules and is imported by the registry (which registers query engines) and by the
query-engine plugins (crystal, rtcudb), so it sits below the registry; nothing below the
registry imports it, so the public names and plugin discovery sit on top of every library
layer and below the plugins they find.

Every module has a layer declared here: by its package (:data:`PACKAGE_LAYERS`) or by name
(:data:`CONTRACT_MODULES`, :data:`QUERY_MODULES`, :data:`REGISTRY_MODULES`,
:data:`TOOLS_MODULES`); a module of the top-level package that none of them names has no
layer, and that is itself a violation.

Rules, each over every import statement (at module level, inside functions, and under
``TYPE_CHECKING``):

* **layers**: no import of a module of a higher layer;
* **cycles**: the import graph of the modules is acyclic, deferred imports included, so that no
  import is deferred to dodge a cycle (a deferred import is for start-up cost or an optional
  dependency, never for order);
* **private names**: no module imports a private name (``_x``) of another module, or reads
  one as ``module._x``;
* **plugins**: a plugin's modules are imported by that plugin alone: the core, the kernels,
  the conformance suite, the tools and the other plugins know no plugin by module (they find
  plugins through the registry and its hooks);
* **undeclared**: every module has a layer in this contract.

:func:`violations` returns every broken rule as a line that names the modules, the line and
the rule; ``tests/test_import_contract.py`` runs it over the source tree.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

LAYERS = ("contract", "kernels", "rt", "query", "registry", "plugins", "conformance", "tools")

#: The source folders and the packages they are installed as (pyproject's package-dir).
ROOTS = {"core": "indexzoo", "native": "indexzoo.native", "plugins": "indexzoo.plugins",
         "conformance": "indexzoo.conformance"}

#: Packages whose every module is of one layer (the most specific package wins).
PACKAGE_LAYERS = (("indexzoo.tools", "tools"), ("indexzoo.conformance", "conformance"),
                  ("indexzoo.plugins", "plugins"), ("indexzoo.query", "query"),
                  ("indexzoo.native.rt", "rt"), ("indexzoo.native", "kernels"))

#: The modules of the top-level package ``indexzoo`` (``core/*.py``) that form the contract.
CONTRACT_MODULES = frozenset(f"indexzoo.{m}" for m in (
    "archive", "base_schema", "buildtime", "cachedirs", "columns", "config", "contract", "devices", "display",
    "duplicate_keys", "envvars", "errors", "extras", "files", "flatten", "hooks", "hookspecs", "keys",
    "lookup", "metadata", "npyheader", "operations", "persist", "pipeline", "plugin_api",
    "plugin_hooks", "presets", "probes", "reading", "resources", "restore", "result_export",
    "result_memory", "results", "schema", "schema_paths", "schema_types", "sinks", "state", "text",
    "unflatten", "validation"))

#: Top-level modules of the query layer: ``indexzoo.ssb``, the documented name of
#: :mod:`indexzoo.query.ssb` (it re-exports it).
QUERY_MODULES = frozenset({"indexzoo.ssb"})

REGISTRY_MODULES = frozenset({"indexzoo", "indexzoo.registry", "indexzoo.join", "indexzoo.catalog"})

#: Top-level modules of the tools layer: ``indexzoo.__main__`` (``python -m indexzoo``, the
#: command line).
TOOLS_MODULES = frozenset({"indexzoo.__main__"})


def layer(module: str) -> str | None:
    """The layer of an ``indexzoo`` module; None for a module the contract does not declare."""
    for prefix, name in PACKAGE_LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return name
    for names, name in ((CONTRACT_MODULES, "contract"), (QUERY_MODULES, "query"),
                        (REGISTRY_MODULES, "registry"), (TOOLS_MODULES, "tools")):
        if module in names:
            return name
    return None


def plugin_of(module: str) -> str | None:
    """``indexzoo.plugins.rx`` for ``indexzoo.plugins.rx.index``; None outside a plugin."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["indexzoo", "plugins"]:
        return ".".join(parts[:3])
    return None


@dataclass(frozen=True)
class Import:
    """One imported module (and the names taken from it) at one line of one module."""

    source: str
    target: str
    names: tuple[str, ...]
    line: int
    deferred: bool


def modules_of(repo: Path) -> tuple[dict[str, str], set[str]]:
    """Module name -> source text of every module of the distribution, and the names of
    those that are packages."""
    out: dict[str, str] = {}
    packages: set[str] = set()
    for folder, package in ROOTS.items():
        for path in sorted((repo / folder).rglob("*.py")):
            rel = path.relative_to(repo / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            out[name] = path.read_text()
            if path.name == "__init__.py":
                packages.add(name)
    return out, packages


def imports_of(name: str, source: str, modules: Mapping[str, str],
               packages: frozenset[str]) -> list[Import]:
    """The ``indexzoo`` modules ``name`` imports; ``from pkg import sub`` is an import of the
    submodule ``pkg.sub`` (not of the package's namespace) when ``pkg.sub`` is a module."""
    tree = _parse(source)
    found: list[Import] = []

    def base_of(node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        here = name.split(".")
        if name not in packages:
            here = here[:-1]
        here = here[:len(here) - (node.level - 1)]
        return ".".join(here + ([node.module] if node.module else []))

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "indexzoo":
                        found.append(Import(name, alias.name, (), child.lineno, inner))
            elif isinstance(child, ast.ImportFrom):
                base = base_of(child)
                if base.split(".")[0] != "indexzoo":
                    continue
                plain = []
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        found.append(Import(name, sub, (), child.lineno, inner))
                    else:
                        plain.append(alias.name)
                if plain or not child.names:
                    found.append(Import(name, base, tuple(plain), child.lineno, inner))
            visit(child, inner)

    visit(tree, False)
    return found


def _private_attributes(name: str, source: str, imports: list[Import],
                        modules: Mapping[str, str]) -> list[str]:
    """``module._x`` reads, where ``module`` is a name bound to an imported indexzoo module."""
    bound: dict[str, str] = {}
    tree = _parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            for imp in imports:
                if imp.line == node.lineno and not imp.names:
                    for alias in node.names:
                        if imp.target.endswith("." + alias.name):
                            bound[alias.asname or alias.name] = imp.target
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in bound and _private(node.attr)):
            out.append(f"{name}:{node.lineno} reads the private name {node.attr!r} of "
                       f"{bound[node.value.id]} [private names]")
    return out


@functools.lru_cache(maxsize=512)
def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, and self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def strong(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def violations(modules: Mapping[str, str], packages: Iterable[str]) -> list[str]:
    """Every broken rule of the contract, one line each (empty: the contract holds).

    ``modules``: module name -> source; ``packages``: the names among them that are packages
    (``__init__.py``), for relative imports.
    """
    pkgs = frozenset(packages)
    problems: list[str] = []
    graph: dict[str, set[str]] = {m: set() for m in modules}
    rank = {name: i for i, name in enumerate(LAYERS)}
    names = frozenset(modules)
    for name, source in modules.items():
        home_layer = layer(name)
        if home_layer is None:
            problems.append(f"module {name} has no layer in the import contract [undeclared]")
        imps, private = _facts(name, source, names, pkgs)
        for imp in imps:
            target = imp.target
            if target not in modules:
                continue
            graph[name].add(target)
            where = f"{name}:{imp.line}"
            target_layer = layer(target)
            if (home_layer is not None and target_layer is not None
                    and rank[target_layer] > rank[home_layer]):
                problems.append(f"{where} ({home_layer}) imports {target} ({target_layer}), a "
                                f"higher layer [layers]")
            home, other = plugin_of(name), plugin_of(target)
            if other is not None and home != other:
                problems.append(f"{where} imports the plugin module {target}; plugins are found "
                                f"through the registry [plugins]")
            for n in imp.names:
                if _private(n):
                    problems.append(f"{where} imports the private name {n!r} of {target} "
                                    f"[private names]")
        problems += private
    for comp in _cycles(graph):
        problems.append(f"import cycle: {' -> '.join(comp)} [cycles]")
    return problems


@functools.lru_cache(maxsize=1024)
def _facts(name: str, source: str, names: frozenset[str], packages: frozenset[str]
           ) -> tuple[list[Import], list[str]]:
    """What one module imports, and its reads of other modules' private names (cached: the
    tests plant one change at a time into the same tree)."""
    modules = dict.fromkeys(names, "")
    imps = imports_of(name, source, modules, packages)
    return imps, _private_attributes(name, source, imps, modules)


def tree_violations(repo: Path) -> list[str]:
    """:func:`violations` of the source tree at ``repo``."""
    return violations(*modules_of(repo))
