"""mypy over every package of the distribution, in place.

The top-level folders map into the ``indexzoo`` namespace only through setuptools'
``package-dir`` (``core`` is ``indexzoo``, ``native`` is ``indexzoo.native``, ...), which mypy
cannot be told: its search path (``mypy_path``, ``explicit_package_bases``) finds a package by
its folder's name, and the editable install's import hook is code mypy never runs (a strict
editable install's link tree would be found through its ``.pth``, but mypy silences errors in
anything on the interpreter's path, as in site-packages). So this script gives mypy every
source file with its module name, read from pyproject's ``package-dir``, through mypy's
``build`` API (the one ``mypy.main`` calls, not part of the documented ``mypy.api``): errors
name the real files, and imports between the packages resolve to these sources.

Usage: ``python .ci/typecheck.py [mypy options]`` from anywhere; exit status 1 on errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

REPO = Path(__file__).resolve().parents[1]


def sources(repo: Path) -> list[BuildSource]:
    """Every ``.py`` file under a folder of pyproject's ``package-dir``, named by the package
    of the deepest folder that holds it (``core/tools/cli.py`` is ``indexzoo.tools.cli``)."""
    config = tomllib.loads((repo / "pyproject.toml").read_text())
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    folders = {(repo / folder).resolve(): package for package, folder in package_dir.items()}
    out: dict[Path, str] = {}
    for folder in sorted(folders, key=lambda f: len(f.parts)):  # deeper folders last: they win
        for path in sorted(folder.rglob("*.py")):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            out[path] = ".".join([folders[folder], *parts])
    return [BuildSource(str(path.relative_to(repo)), module) for path, module in out.items()]


def main(args: list[str]) -> int:
    _, options = process_options(["--config-file", str(REPO / "pyproject.toml"), *args,
                                  "-c", "pass"])  # the program text is a placeholder, not checked
    found = sources(REPO)
    try:
        result = build.build(found, options)
        messages = result.errors
    except CompileError as exc:  # a blocking error (a syntax error, a duplicate module)
        messages = exc.messages
    for line in messages:
        print(line)
    errors = [m for m in messages if ": error:" in m]
    if errors:
        files = {m.split(":", 1)[0] for m in errors}
        print(f"Found {len(errors)} error{'s' * (len(errors) != 1)} in {len(files)} "
              f"file{'s' * (len(files) != 1)} (checked {len(found)} source files)")
        return 1
    print(f"Success: no issues found in {len(found)} source files")
    return 0


if __name__ == "__main__":
    import os

    os.chdir(REPO)  # errors name files relative to the repository
    sys.exit(main(sys.argv[1:]))
