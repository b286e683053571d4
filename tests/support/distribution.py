"""What indexzoo's built distributions must hold, checked on the files ``python -m build`` writes.

The wheel holds every module of every package folder (``core`` is ``indexzoo``, ...), the
``py.typed`` marker, the OptiX programs (``*.cu``) the ray-tracing indexes compile at run
time, the license, and entry points for both pytest plugins (the conformance suite's and the
benchmark fixtures') and the ``indexzoo`` command; its version is ``indexzoo.__version__``.
The source distribution holds what builds that wheel and no tests.

``python tests/support/distribution.py DIST_FOLDER`` checks the one wheel and one sdist in a
folder (CI runs it after ``python -m build``); exit status 1 with every problem listed.
"""

from __future__ import annotations

import ast
import configparser
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"core": "indexzoo", "plugins": "indexzoo/plugins", "native": "indexzoo/native",
           "conformance": "indexzoo/conformance"}
#: The files beside the sources that the sdist holds.
SDIST_NOTES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff",
               "CONTRIBUTING.md")
PYTEST_PLUGINS = {"indexzoo": "indexzoo.conformance.pytest_plugin",
                  "indexzoo-bench": "indexzoo.tools.pytest_bench"}


def source_version(root: Path = ROOT) -> str:
    """``__version__`` as ``core/__init__.py`` assigns it (read, not imported)."""
    tree = ast.parse((root / "core" / "__init__.py").read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "__version__"
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    raise ValueError("core/__init__.py assigns no __version__ string")


def wheel_members(root: Path = ROOT) -> set[str]:
    """The files the wheel must hold from the source tree, as paths inside the wheel."""
    want = {"indexzoo/py.typed"}
    for folder, package in FOLDERS.items():
        for pattern in ("*.py", "*.cu"):
            for src in (root / folder).rglob(pattern):
                if "__pycache__" not in src.parts:
                    want.add(f"{package}/{src.relative_to(root / folder).as_posix()}")
    return want


def wheel_problems(wheel: Path, root: Path = ROOT) -> list[str]:
    """Every way ``wheel`` falls short of what it must hold; empty when it is complete."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        points = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
        metadata = z.read(info).decode() if info else ""
        entry_text = z.read(points).decode() if points else ""
    problems = [f"missing {m}" for m in sorted(wheel_members(root) - names)]
    problems += [f"not a package file: {n}" for n in sorted(names)
                 if not n.startswith("indexzoo/") and ".dist-info/" not in n]
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("no LICENSE in the dist-info")
    version = source_version(root)
    if f"\nVersion: {version}\n" not in metadata:
        problems.append(f"the metadata does not give Version: {version}")
    if "\nLicense-Expression: MIT\n" not in metadata:
        problems.append("the metadata does not give License-Expression: MIT")
    entries = configparser.ConfigParser()
    entries.read_string(entry_text)
    for name, module in PYTEST_PLUGINS.items():
        if entries.get("pytest11", name, fallback=None) != module:
            problems.append(f"no pytest11 entry point {name} = {module}")
        elif f"{module.replace('.', '/')}.py" not in names:
            problems.append(f"pytest plugin {module} is not in the wheel")
    if entries.get("console_scripts", "indexzoo", fallback=None) != "indexzoo.tools.cli:main":
        problems.append("no console script indexzoo = indexzoo.tools.cli:main")
    return problems


def sdist_problems(sdist: Path, root: Path = ROOT) -> list[str]:
    """Every way ``sdist`` falls short: it must hold every package source file and
    :data:`SDIST_NOTES`, and no tests."""
    with tarfile.open(sdist) as t:
        members = [m.name for m in t.getmembers() if m.isfile()]
    top = {m.split("/", 1)[0] for m in members}
    if len(top) != 1:
        return [f"not one top folder: {sorted(top)}"]
    names = {m.split("/", 1)[1] for m in members if "/" in m}
    want = set(SDIST_NOTES)
    for folder in FOLDERS:
        for src in (root / folder).rglob("*"):
            if src.is_file() and src.suffix in (".py", ".cu", ".typed") \
                    and "__pycache__" not in src.parts:
                want.add(src.relative_to(root).as_posix())
    problems = [f"missing {m}" for m in sorted(want - names)]
    problems += [f"holds a test file: {n}" for n in sorted(names)
                 if n.startswith("tests/") or Path(n).name.startswith("test_")]
    return problems


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "dist"
    wheels, sdists = sorted(folder.glob("*.whl")), sorted(folder.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"{folder}: want one wheel and one sdist, found {len(wheels)} and {len(sdists)}")
        return 1
    problems = [f"{wheels[0].name}: {p}" for p in wheel_problems(wheels[0])]
    problems += [f"{sdists[0].name}: {p}" for p in sdist_problems(sdists[0])]
    print("\n".join(problems) if problems else
          f"{wheels[0].name} and {sdists[0].name} hold what they must")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
