"""``indexzoo.native.lazy.lazy_module``: the module object at once, its code run on the first
use of one of its attributes, once, whichever thread gets there first; from then on the
ordinary module that ``import`` returns."""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from indexzoo.native.lazy import lazy_module

_COUNTER = """runs = []
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
            ) -> Iterator[str]:
    """A fresh package on sys.path (its name unique to the test) with a counter module that
    its modules append their names to when their code runs."""
    name = f"lazyprobe_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "counter.py").write_text(_COUNTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def _module(package: str, name: str, body: str) -> str:
    path = Path(importlib.import_module(package).__path__[0]) / f"{name}.py"
    path.write_text(f"from {package} import counter\ncounter.runs.append(__name__)\n{body}")
    return f"{package}.{name}"


def _runs(package: str) -> list[str]:
    return list(importlib.import_module(f"{package}.counter").runs)


def test_the_code_runs_on_first_use_and_the_module_is_the_imported_one(package: str) -> None:
    name = _module(package, "kernels", "VALUE = 42\n")
    mod = lazy_module(name)
    assert isinstance(mod, types.ModuleType) and sys.modules[name] is mod
    assert _runs(package) == []  # nothing ran yet
    assert mod.VALUE == 42
    assert _runs(package) == [name]
    assert type(mod) is types.ModuleType  # an ordinary module now
    assert importlib.import_module(name) is mod
    assert mod.VALUE == 42 and _runs(package) == [name]  # ran once


def test_a_module_imported_already_is_returned_as_it_is(package: str) -> None:
    name = _module(package, "done", "VALUE = 1\n")
    mod = importlib.import_module(name)
    assert lazy_module(name) is mod and _runs(package) == [name]


def test_threads_that_use_it_first_together_run_it_once(package: str) -> None:
    name = _module(package, "slow", "import time\ntime.sleep(0.2)\nVALUE = 7\n")
    mod = lazy_module(name)
    start = threading.Barrier(8)
    got: list[int] = []

    def use() -> None:
        start.wait()
        got.append(mod.VALUE)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [7] * 8 and _runs(package) == [name]


def test_an_error_in_its_code_reaches_the_first_use_and_the_next_use_runs_it_again(
        package: str) -> None:
    name = _module(package, "broken", "raise RuntimeError('no compiler')\n")
    mod = lazy_module(name)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="no compiler"):
            _ = mod.anything
    assert _runs(package) == [name, name]


def test_a_missing_module_is_an_error_at_once(package: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        lazy_module(f"{package}.nonesuch")
