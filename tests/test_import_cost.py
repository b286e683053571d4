"""What importing indexzoo imports: ``import indexzoo`` none of its modules, ``indexzoo list``
and ``indexzoo info`` no kernels (no numba, no llvmlite, no kernel module of indexzoo.native or
of a plugin), a plugin's kernels only once an index of it is built, and indexzoo's pytest
plugins nothing of indexzoo's in a run that does not use them. Each case runs in a process of
its own and checks the modules it holds afterwards (never a timing)."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import indexzoo

#: Modules a list or info must not import: numba, its compiler, and indexzoo's kernels.
NOT_FOR_LISTING = re.compile(r"(numba|llvmlite)(\..*)?|indexzoo\.plugins\.\w+\.kernels\w*"
                             r"|indexzoo\.native\.(csr|search|runs\w*|groupagg|coop|cpu_atomics)"
                             r"|indexzoo\.native\.rt\.(bvh|geometry|keymap|keyprims|programs"
                             r"|query|scene|software|trace|traversal)"
                             r"|indexzoo\.tools\.workload_kernels")

#: Printed by the child: the modules whose code ran (a module ``lazy_module`` returned is in
#: sys.modules before its code runs; its globals get ``__builtins__`` when it runs).
_RAN = """
import json, sys
print(json.dumps(sorted(name for name, mod in list(sys.modules.items())
                        if mod is not None and "__builtins__" in vars(mod))))
"""


def _ran(code: str, **env: str) -> list[str]:
    """The modules a fresh interpreter ran after ``code``."""
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + _RAN],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, **env})
    assert res.returncode == 0, res.stderr[-3000:]
    return list(json.loads(res.stdout.strip().splitlines()[-1]))


def test_import_indexzoo_imports_none_of_its_modules() -> None:
    ran = _ran("import indexzoo")
    assert [m for m in ran if m.startswith("indexzoo")] == ["indexzoo"]
    assert not {"numpy", "pydantic", "numba", "llvmlite"} & set(ran)


def test_every_public_name_is_imported_on_first_use() -> None:
    ran = _ran("""
        import indexzoo.join  # the submodule does not hide the function indexzoo.join
        import indexzoo
        assert callable(indexzoo.join) and indexzoo.join is indexzoo.join.__globals__["join"]
        for name in indexzoo.__all__:
            exec(f"from indexzoo import {name}")
            assert name in dir(indexzoo), name
        from indexzoo import *  # noqa: F403
        assert create is indexzoo.registry.create and GpuIndex is indexzoo.contract.GpuIndex
        """)
    assert "numba" not in ran


@pytest.mark.parametrize("name", indexzoo.__all__)
def test_each_name_of_all_is_the_object_of_its_module(name: str) -> None:
    value = getattr(indexzoo, name)
    home = getattr(value, "__module__", None)
    if isinstance(home, str) and home.startswith("indexzoo.") and getattr(
            value, "__name__", None) == name:  # a class or function: the one its module has
        assert getattr(importlib.import_module(home), name) is value


def test_a_name_that_is_not_public_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = indexzoo.no_such_name


def test_list_and_info_import_no_kernels() -> None:
    names = list(indexzoo.available())
    ran = _ran(f"""
        import io
        from indexzoo.tools.cli import main
        for argv in (["list"], ["list", "--json"], ["list", "--verbose"],
                     *(["info", n] for n in {names!r})):
            assert main(argv, out=io.StringIO()) == 0, argv
        """)
    assert [m for m in ran if NOT_FOR_LISTING.fullmatch(m)] == []
    assert "indexzoo.tools.bench" not in ran  # the commands defined elsewhere stay unimported


def test_the_console_script_lists_without_numba(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("indexzoo")
    if not script.exists():
        pytest.skip(f"no console script at {script}")
    # the first listing imports every plugin; the second reads what the first kept
    for registry in (True, False):
        res = subprocess.run([str(script), "list"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1",
                                  "INDEXZOO_CACHE_DIR": str(tmp_path)})
        assert res.returncode == 0, res.stderr[-3000:]
        imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", res.stderr, re.M)
        assert ("indexzoo.registry" in imported) is registry
        assert [m for m in imported if NOT_FOR_LISTING.fullmatch(m)] == []


def test_a_plugins_kernels_load_when_an_index_of_it_is_built() -> None:
    ran = _ran("""
        import numpy as np
        import indexzoo
        keys = np.array([5, 3, 9], dtype=np.uint32)
        index = indexzoo.create("btree", device="cpu").build(keys)
        assert index.point(np.array([3, 4], dtype=np.uint32), out="count").count.tolist() == [1, 0]
        """)
    assert {"numba", "indexzoo.plugins.btree.kernels"} <= set(ran)


def test_the_software_engine_is_found_by_name_in_a_process_that_imported_no_tracer() -> None:
    ran = _ran("""
        import pickle
        from indexzoo.native.rt.engine import engine_named
        engine = engine_named("software")
        assert pickle.loads(pickle.dumps(engine)) is engine and engine.name == "software"
        """)
    assert "indexzoo.native.rt.software" in ran


#: A conftest that records, at the end of the session, the modules of indexzoo (and of numpy
#: and numba) that the run imported.
_RECORDER = """
import json, sys

def pytest_sessionfinish(session):
    names = sorted(m for m in sys.modules if m.split(".")[0] in ("indexzoo", "numpy", "numba"))
    with open("modules.json", "w") as f:
        json.dump(names, f)
"""


def test_a_pytest_run_that_uses_no_indexzoo_fixture_imports_and_prints_nothing_of_it(
        tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(_RECORDER)
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    # only indexzoo's two plugins load: another package's plugin may import NumPy itself
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "-p", "indexzoo.conformance.pytest_plugin",
                          "-p", "indexzoo.tools.pytest_bench", "test_plain.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    modules = json.loads((tmp_path / "modules.json").read_text())
    assert modules == ["indexzoo", "indexzoo.conformance", "indexzoo.conformance.pytest_plugin",
                       "indexzoo.tools", "indexzoo.tools.pytest_bench"]
    assert [line for line in res.stdout.splitlines() if line.startswith("indexzoo")] == []


def test_a_run_that_collects_conformance_tests_names_their_device_size_and_seed(
        tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(
        "from indexzoo.conformance import ConformanceSuite\n\n\n"
        "class TestSortedArray(ConformanceSuite):\n    index = 'sorted-array'\n")
    for given, shown in (([], r"\d+"), (["--indexzoo-seed", "4242"], "4242")):
        res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                              "--collect-only", "-q", "test_suite.py", *given], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        header = rf"indexzoo conformance: device=cpu, size=small, seed={shown}"
        assert any(re.fullmatch(header, line) for line in res.stdout.splitlines()), res.stdout
