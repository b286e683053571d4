"""Packaging and project hygiene: every package folder is installed, the README's test command
is the one CI runs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"core": "indexzoo", "plugins": "indexzoo.plugins", "native": "indexzoo.native",
           "conformance": "indexzoo.conformance"}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = set()
    for folder, pkg in MAPPING.items():
        assert cfg["package-dir"][pkg] == folder
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((pkg, *rel)))
    assert found == listed, f"unlisted: {found - listed}, stale: {listed - found}"


def _readme_command(kind: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {kind}-command -->\s*```(?:bash|sh)\n(.+?)\n```", text, re.S)
    assert m, f"README has no <!-- {kind}-command --> block"
    return m.group(1).strip()


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    command = _readme_command("test")
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci, f"README test command not found in .ci/run:\n{command}"


def test_readme_main_job_runs_the_comparison() -> None:
    assert "indexzoo bench" in _readme_command("main")


def test_package_docstring_example_runs() -> None:
    import doctest

    import indexzoo

    result = doctest.testmod(indexzoo)
    assert result.attempted > 0 and result.failed == 0
