"""Installed plugin packages that break in every way a module can: each one loses only what it
provides, is reported once in one line, and every other index stays usable, in Python and on
the command line (``indexzoo list`` exits 0; ``--verbose`` shows the traceback).

No verdict here depends on the machine's speed: where a hanging import is cut at the time
limit, every healthy plugin module has been imported before (its entry point then loads from
``sys.modules`` at once), and the real process, whose healthy imports take what the machine
gives them, runs with a limit no import reaches and without the hanging package."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.helpers import fake_distribution

import indexzoo
from indexzoo import registry
from indexzoo.errors import PluginError

HOOK = "import indexzoo\n\n@indexzoo.hookimpl\ndef indexzoo_register_indexes(register):\n"

#: entry-point name -> (module source, what the report says)
BROKEN: dict[str, tuple[str, str]] = {
    "exits": ("import sys\nsys.exit(3)\n", "exited: 3"),
    "interrupts": ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt"),
    "sleeps": ("import time\ntime.sleep(600)\n", "timed out: its module was still importing"),
    "raises": ("raise RuntimeError('the import fails')\n", "RuntimeError: the import fails"),
    "hook-raises": (HOOK + "    raise ValueError('the hook fails')\n",
                    "its register hook failed: ValueError: the hook fails"),
    "registers-object": (HOOK + "    register(object)\n",
                         "register() expects a GpuIndex subclass, got <class 'object'>"),
    "hook-exits": (HOOK + "    import sys\n    sys.exit(4)\n", "its register hook failed: exited: 4"),
}


def _install(root: Path, broken: dict[str, tuple[str, str]] = BROKEN) -> Path:
    modules = {f"broken_{n.replace('-', '_')}": src for n, (src, _) in broken.items()}
    eps = {n: f"broken_{n.replace('-', '_')}" for n in broken}
    return fake_distribution(root, "broken-plugins", eps, modules)


def _report(errors: dict[str, str], entry_point: str) -> str:
    """The one reported line of an entry point (keyed by its name)."""
    assert entry_point in errors, (entry_point, errors)
    return errors[entry_point]


#: The limit under which the hanging package is cut, with every healthy module imported.
CUT_AFTER_S = "5"


@pytest.fixture
def broken_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    registry.reset()
    indexzoo.available()  # every healthy plugin module imported: none can reach the limit
    root = _install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("INDEXZOO_PLUGIN_TIMEOUT", CUT_AFTER_S)
    registry.reset()
    yield root
    registry.reset()


def test_every_broken_package_is_left_out_alone(broken_installed: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = indexzoo.available()
    assert {"btree", "sorted-array", "linear-scan"} <= set(names)
    errors = dict(indexzoo.load_errors())
    for entry_point, (_, says) in BROKEN.items():
        line = _report(errors, entry_point)
        assert says in line and "\n" not in line, line
    warned = [str(w.message) for w in caught]
    assert all("\n" not in w for w in warned)
    assert len(warned) == len(BROKEN)  # each reported once
    keys = np.array([4, 2, 4], dtype=np.uint64)
    index = indexzoo.create("btree", device="cpu").build(keys)
    assert index.point(keys, out="count").count.tolist() == [2, 1, 2]
    with pytest.raises(PluginError, match="'exits' could not be loaded"):
        indexzoo.create("exits")


def test_the_list_command_shows_them_in_one_line_each_and_exits_0(
        broken_installed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools.cli import main

    out = io.StringIO()
    assert main(["list"], out=out) == 0
    rows = [line for line in out.getvalue().splitlines() if "(unusable)" in line]
    assert len(rows) == len(BROKEN)
    assert any(line.startswith("btree ") for line in out.getvalue().splitlines())
    stderr = capsys.readouterr().err
    assert all(line.startswith("indexzoo: UserWarning: indexzoo plugin") for line in
               stderr.splitlines() if line)
    verbose = io.StringIO()
    assert main(["list", "--verbose"], out=verbose) == 0
    assert "Traceback (most recent call last)" in verbose.getvalue()
    assert "RuntimeError: the import fails" in verbose.getvalue()


def test_a_real_process_with_them_installed(tmp_path: Path) -> None:
    """As a shell runs it: ``sys.exit`` in a plugin's import does not end ``indexzoo list``, a
    plugin's KeyboardInterrupt is not the user's. (The hanging package is left out here: in a
    fresh process the healthy imports race the same limit; the tests above cut it.)"""
    broken = {n: v for n, v in BROKEN.items() if n != "sleeps"}
    root = _install(tmp_path / "site", broken)
    env = {**os.environ, "INDEXZOO_PLUGIN_TIMEOUT": "3600", "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    got = subprocess.run([sys.executable, "-m", "indexzoo.tools.cli", "list"], env=env,
                         capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout.count("(unusable)") == len(broken)
    for name in indexzoo.available():  # every healthy index is listed as usable
        assert any(line.startswith(f"{name} ") and "(unusable)" not in line
                   for line in got.stdout.splitlines()), (name, got.stdout)


def test_a_malformed_time_limit_is_a_named_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_PLUGIN_TIMEOUT", "soon")
    registry.reset()
    try:
        with pytest.raises(indexzoo.ConfigError, match="INDEXZOO_PLUGIN_TIMEOUT='soon' must be "
                                                       "a number of seconds above 0"):
            indexzoo.available()
    finally:
        monkeypatch.delenv("INDEXZOO_PLUGIN_TIMEOUT")
        registry.reset()
