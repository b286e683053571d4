"""The registry: built-in and third-party plugins found through the same entry-point group,
one rule for a name registered twice (that name unusable, both providers named, every other
index usable: in Python and on the command line alike), broken plugins isolated."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.helpers import add_broken_entry_point, fake_distribution, one_index_plugin

import indexzoo
from indexzoo import registry
from indexzoo.errors import ConfigError, DuplicatePlugin, PluginError


@pytest.fixture
def clean_registry() -> Iterator[None]:
    registry.reset()
    yield
    registry.reset()


def test_builtin_indexes_are_registered() -> None:
    names = indexzoo.available()
    assert {"sorted-array", "searchsorted"} <= set(names)
    assert {"searchsorted", "sorted-array", "warpcore-hash"} <= set(registry.builtin())
    assert "linear-scan" not in registry.builtin()
    for cls in names.values():
        assert cls.capabilities.point


def test_builtin_indexes_come_through_the_entry_point_group() -> None:
    prov = indexzoo.providers()
    assert "entry point 'sorted-array' = indexzoo.plugins.sorted_array" in prov["sorted-array"]


def test_third_party_plugin_package_is_found_through_its_entry_point() -> None:
    assert "linear-scan" in indexzoo.available(), (
        "the example plugin in tests/example_plugin is not installed; "
        "the README's test command installs it"
    )
    assert "distribution indexzoo-example" in indexzoo.providers()["linear-scan"]


def _plugin(cls: type) -> Any:
    mod = types.ModuleType("fake_plugin")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        register(cls)

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    return mod


def test_duplicate_name_is_an_error_naming_both_providers(clean_registry: None) -> None:
    existing = indexzoo.available()["sorted-array"]
    impostor = type("Impostor", (existing,), {"__module__": "somewhere.else"})
    indexzoo.register_plugin(_plugin(impostor), name="impostor-plugin")
    assert "sorted-array" not in indexzoo.available() and "btree" in indexzoo.available()
    with pytest.raises(DuplicatePlugin) as err:
        indexzoo.create("sorted-array")
    msg = str(err.value)
    assert "'sorted-array' is registered twice" in msg
    assert "indexzoo.plugins.sorted_array" in msg and "impostor-plugin" in msg
    assert "somewhere.else.Impostor" in msg
    assert indexzoo.load_errors()["sorted-array"] == msg
    indexzoo.create("btree", device="cpu")  # every other name stays usable


CLASH = one_index_plugin("btree", "Brute force, registered under a built-in's name.", "Clash")


def _clash_distribution(root: Path, entry_point: str) -> Path:
    """A distribution ``clash-pkg`` installed in ``root`` (a folder on the path), with the
    entry point ``entry_point = clash_pkg`` in the ``indexzoo`` group."""
    return fake_distribution(root, "clash-pkg", {entry_point: "clash_pkg"}, {"clash_pkg": CLASH})


@pytest.mark.parametrize("entry_point", ["btree", "clash"])
def test_a_builtin_name_reused_by_an_entry_point_is_unusable_in_python_and_the_others_work(
        entry_point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        clean_registry: None) -> None:
    monkeypatch.syspath_prepend(str(_clash_distribution(tmp_path, entry_point)))
    registry.reset()
    assert "btree" not in indexzoo.available()
    with pytest.raises(DuplicatePlugin) as err:
        indexzoo.create("btree")
    msg = str(err.value)
    assert "index name 'btree' is registered twice" in msg
    assert "indexzoo.plugins.btree.index.BTreeIndex" in msg and "clash_pkg.Clash" in msg
    assert "distribution clash-pkg 1.0" in msg and "distribution indexzoo" in msg
    keys = np.array([3, 1, 3], dtype=np.uint64)
    index = indexzoo.create("sorted-array", device="cpu").build(keys)
    assert index.point(keys, out="count").count.tolist() == [2, 1, 2]


@pytest.mark.parametrize("entry_point", ["btree", "clash"])
def test_the_command_line_follows_the_same_rule(
        entry_point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_registry: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools.cli import main

    monkeypatch.syspath_prepend(str(_clash_distribution(tmp_path / "site", entry_point)))
    monkeypatch.chdir(tmp_path)
    registry.reset()

    def cli(*args: str) -> tuple[int, str, str]:
        out = io.StringIO()
        code = main(list(args), out=out)
        return code, out.getvalue(), capsys.readouterr().err

    code, listed, _ = cli("list")
    assert code == 0
    rows = {line.split()[0]: line for line in listed.splitlines() if line.strip()}
    assert "(unusable)" in rows["btree"] and "registered twice" in rows["btree"]
    assert "(unusable)" not in rows["sorted-array"]
    (tmp_path / "index.yaml").write_text("index: btree\ndevice: cpu\n"
                                         "workload: {n_keys: 100, n_lookups: 10}\n")
    for args in (("info", "btree"), ("check", "btree", "--group", "sizes"),
                 ("run", "index.yaml")):
        code, _, err = cli(*args)
        assert code == 2, err
        assert "index name 'btree' is registered twice" in err
        assert "clash_pkg.Clash" in err and "BTreeIndex" in err
    code, checked, _ = cli("check", "sorted-array", "--group", "sizes")
    assert code == 0 and "0 failed" in checked


def test_the_console_command_in_its_own_process_follows_the_rule(tmp_path: Path) -> None:
    """The same from a fresh process, as a user's shell runs it (entry points read from the
    installed distributions, nothing patched)."""
    root = _clash_distribution(tmp_path / "site", "btree")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "indexzoo.tools.cli", *args], env=env,
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)

    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    assert "registered twice" in listed.stdout and "sorted-array" in listed.stdout
    info = cli("info", "btree")
    assert info.returncode == 2 and "index name 'btree' is registered twice" in info.stderr


def test_runtime_plugin_registers_and_unregisters(clean_registry: None) -> None:
    base = indexzoo.available()["sorted-array"]
    extra = type("Extra", (base,), {"name": "extra-sorted"})
    indexzoo.register_plugin(_plugin(extra), name="extra")
    assert indexzoo.available()["extra-sorted"] is extra
    registry.unregister_plugin("extra")
    assert "extra-sorted" not in indexzoo.available()
    with pytest.raises(ConfigError, match="no plugin named 'extra'"):
        registry.unregister_plugin("extra")


def test_broken_entry_point_does_not_hide_the_others(clean_registry: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    add_broken_entry_point(monkeypatch)
    with pytest.warns(UserWarning, match="'broken' failed to load"):
        names = indexzoo.available()
    assert "sorted-array" in names
    assert "no_such_module_xyz" in indexzoo.load_errors()["broken"]
    with pytest.raises(PluginError, match="'broken' could not be loaded"):
        indexzoo.create("broken")


def test_create_takes_params_as_in_a_spec_file() -> None:
    index = indexzoo.create("sorted-array", params={"threads_per_block": 128}, device="cpu")
    assert index.params.threads_per_block == 128
    both = indexzoo.create("sorted-array", params={"threads_per_block": 128, "max_batch": 64},
                           device="cpu", threads_per_block=512)
    assert (both.params.threads_per_block, both.params.max_batch) == (512, 64)
    spec = indexzoo.IndexSpec(index="sorted-array", params={"max_batch": 32}, device="cpu")
    merged = indexzoo.create(spec, params={"threads_per_block": 64})
    assert (merged.params.threads_per_block, merged.params.max_batch) == (64, 32)


def test_create_with_params_that_are_not_a_mapping_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"params must be a mapping of parameter names to values, "
                                          r"got list \[256\]"):
        indexzoo.create("sorted-array", params=[256], device="cpu")


def test_unknown_index_name_is_shortened_in_the_message() -> None:
    with pytest.raises(ConfigError) as err:
        indexzoo.create("x" * 1_000_000, device="cpu")
    assert len(str(err.value)) < 400
