"""indexzoo's environment variables: each is declared once (``indexzoo.envvars``) and read by
one helper; unset or empty means the default, a malformed value is a one-line ConfigError that
names the variable and the accepted form, and the ones read as the kernels are imported stop
``create`` and ``indexzoo list`` with that line instead of making every plugin unusable."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexzoo import ConfigError, envvars
from indexzoo.envvars import VARIABLES, EnvVar

ROOT = Path(__file__).parents[2]
PACKAGE_DIRS = ("core", "native", "plugins", "conformance")

#: A malformed value of each variable that has a form to break (folders and commits take any text).
MALFORMED = {"INDEXZOO_DEVICE": "gpu", "INDEXZOO_MEMORY_CHECK": "maybe", "INDEXZOO_PROGRESS": "quiet",
             "INDEXZOO_PLUGIN_TIMEOUT": "soon", "INDEXZOO_CPU_SERIAL_BELOW": "1e3",
             "INDEXZOO_CPU_SERIAL_BELOW_RAYS": "-1", "INDEXZOO_NUMBA_LAUNCH": "2",
             "INDEXZOO_RANK_BUDGET": "-5", "INDEXZOO_SHARDED_WORKERS": "0",
             "INDEXZOO_KERNEL_CACHE_SIZE": "1GB"}


def test_every_indexzoo_variable_is_read_through_the_helper() -> None:
    """No module but ``envvars`` names an INDEXZOO_* variable in code (docstrings aside)."""
    found = []
    for folder in PACKAGE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "envvars.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
                          and n.body and isinstance(n.body[0], ast.Expr)}
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and "INDEXZOO_" in node.value and id(node) not in docstrings
                      and node.value.strip().startswith("INDEXZOO_")]
    assert not found, f"read INDEXZOO_* variables through indexzoo.envvars: {found}"


def test_the_docs_list_every_variable_with_its_form() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for var in VARIABLES:
        assert f"| `{var.name}` |" in text, var.name


@pytest.mark.parametrize("var", VARIABLES, ids=lambda v: v.name)
def test_unset_or_empty_is_the_default(var: EnvVar[object], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(var.name, raising=False)
    assert var.value() == var.default
    monkeypatch.setenv(var.name, "  ")
    assert var.value() == var.default


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_value_is_one_line_naming_the_variable_and_the_form(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    var = next(v for v in VARIABLES if v.name == name)
    monkeypatch.setenv(name, MALFORMED[name])
    with pytest.raises(ConfigError) as got:
        var.value()
    assert str(got.value) == (f"environment variable {name}={MALFORMED[name]!r} must be "
                              f"{var.form}")


@pytest.mark.parametrize(("var", "text", "value"), [
    (envvars.CPU_SERIAL_BELOW, " 4096 ", 4096), (envvars.CPU_SERIAL_BELOW, "0", 0),
    (envvars.NUMBA_LAUNCH, "1", True), (envvars.NUMBA_LAUNCH, "Off", False),
    (envvars.MEMORY_CHECK, "no", False), (envvars.DEVICE, "CPU", "cpu"),
    (envvars.PLUGIN_TIMEOUT, "2.5", 2.5), (envvars.CACHE_DIR, "/tmp/c", "/tmp/c"),
    (envvars.KERNEL_CACHE, "/tmp/k", "/tmp/k"), (envvars.KERNEL_CACHE, "Off", "off"),
    (envvars.KERNEL_CACHE, "0", "off"), (envvars.KERNEL_CACHE, "no", "off"),
    (envvars.KERNEL_CACHE, "FALSE", "off"), (envvars.KERNEL_CACHE, "none", "off"),
    (envvars.KERNEL_CACHE_SIZE, "512", 512),
])
def test_well_formed_values(var: EnvVar[object], text: str, value: object,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(var.name, text)
    assert var.value() == value


IMPORT_TIME = """
import io, sys
import indexzoo
from indexzoo.tools.cli import main

try:
    indexzoo.create("btree")
except indexzoo.ConfigError as exc:
    print("create:", exc)
print("list exits", main(["list"], out=io.StringIO()))
"""


@pytest.mark.parametrize("name", [v.name for v in VARIABLES if v.at_import])
def test_a_malformed_variable_read_at_import_stops_create_and_list_with_its_name(name: str) -> None:
    env = {**os.environ, name: MALFORMED[name]}
    res = subprocess.run([sys.executable, "-c", IMPORT_TIME], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    var = next(v for v in VARIABLES if v.name == name)
    line = f"environment variable {name}={MALFORMED[name]!r} must be {var.form}"
    assert res.stdout.splitlines() == [f"create: {line}", "list exits 2"]
    assert res.stderr.strip() == f"indexzoo: error: {line}"


#: Values out of each bounded variable's bounds (the others take one of a few words).
OUT_OF_BOUNDS = {
    "INDEXZOO_SHARDED_WORKERS": ["99999999999", str(envvars.MOST_WORKERS + 1)],
    "INDEXZOO_PLUGIN_TIMEOUT": ["3601", "1e308", "0"],
    "INDEXZOO_CPU_SERIAL_BELOW": [str((1 << 40) + 1), str(1 << 63)],
    "INDEXZOO_CPU_SERIAL_BELOW_RAYS": [str((1 << 40) + 1)],
    "INDEXZOO_RANK_BUDGET": ["86401", "inf"],
    "INDEXZOO_CACHE_DIR": ["/" + "d" * 5000],
    "INDEXZOO_KERNEL_CACHE": ["/" + "d" * 5000],
    "INDEXZOO_KERNEL_CACHE_SIZE": ["0", str(envvars.MOST_CACHE_MIB + 1), "-1"],
    "INDEXZOO_COMMIT": ["c" * 101, "abc\x1b[31m"],
}
ENUMERATED = {"INDEXZOO_DEVICE", "INDEXZOO_MEMORY_CHECK", "INDEXZOO_PROGRESS",
              "INDEXZOO_NUMBA_LAUNCH"}


def test_every_variable_is_bounded() -> None:
    assert {v.name for v in VARIABLES} == set(OUT_OF_BOUNDS) | ENUMERATED


@pytest.mark.parametrize(("name", "text"), [(n, t) for n, ts in OUT_OF_BOUNDS.items() for t in ts])
def test_a_value_out_of_bounds_names_the_variable_the_value_and_the_bounds(
        name: str, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    var = next(v for v in VARIABLES if v.name == name)
    monkeypatch.setenv(name, text)
    with pytest.raises(ConfigError) as got:
        var.value()
    message = str(got.value)
    assert message.startswith(f"environment variable {name}={repr(text)[:10]}")
    assert message.endswith(f"must be {var.form}")
    assert any(word in var.form for word in ("at most", " to ")), var.form


def test_the_bounds_themselves_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, text, value in ((envvars.SHARDED_WORKERS, str(envvars.MOST_WORKERS),
                              envvars.MOST_WORKERS), (envvars.SHARDED_WORKERS, "1", 1),
                             (envvars.PLUGIN_TIMEOUT, "3600", 3600.0),
                             (envvars.CPU_SERIAL_BELOW, str(1 << 40), 1 << 40),
                             (envvars.RANK_BUDGET, "86400", 86400.0),
                             (envvars.KERNEL_CACHE_SIZE, "1", 1),
                             (envvars.KERNEL_CACHE_SIZE, str(envvars.MOST_CACHE_MIB),
                              envvars.MOST_CACHE_MIB),
                             (envvars.COMMIT, "c" * 100, "c" * 100)):
        monkeypatch.setenv(var.name, text)
        assert var.value() == value


def test_sharded_workers_beyond_the_cpus_start_no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    import indexzoo
    from indexzoo.plugins.sharded import cluster

    cluster.close_local()

    def no_cluster(*args: object, **kwargs: object) -> None:
        raise AssertionError("a local cluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    # no client of the caller's (a client an earlier test of this process made is still
    # Dask's default while it lives): the index would start its own cluster
    monkeypatch.setattr(cluster, "_default_client", lambda: None)
    monkeypatch.setenv("INDEXZOO_SHARDED_WORKERS", "99999999999")
    with pytest.raises(ConfigError, match=r"INDEXZOO_SHARDED_WORKERS='99999999999' must be a "
                                          r"whole number from 1 to \d+"):
        indexzoo.create("sharded", device="cpu")
