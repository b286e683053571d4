"""Packaging and project hygiene: every package folder is installed, the README's commands are
the ones CI runs."""

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


def test_every_non_python_source_is_package_data() -> None:
    """Program sources the package reads at run time (the OptiX programs, ``*.cu``) ship."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]
    for folder, pkg in MAPPING.items():
        for src in (ROOT / folder).rglob("*.cu"):
            rel = src.parent.relative_to(ROOT / folder).parts
            owner = ".".join((pkg, *rel))
            assert "*.cu" in data.get(owner, []), f"{src} is not package data of {owner}"


def _readme_command(kind: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- {kind}-command -->\s*```(?:bash|sh)\n(.+?)\n```", text, re.S)
    assert m, f"README has no <!-- {kind}-command --> block"
    return m.group(1).strip()


def test_ci_runs_the_readme_commands_verbatim_before_upgrading_pip() -> None:
    """CI reads both commands from the README (so they cannot drift apart) and runs them, in
    fresh venvs, before anything installs or upgrades a package."""
    import subprocess

    ci = ROOT / ".ci" / "run"
    text = ci.read_text()
    extract = text[text.index("readme_command() {"):text.index("\n}\n") + 3]
    for kind in ("main", "test"):
        got = subprocess.run(["bash", "-c", f"{extract}\nreadme_command {kind}-command"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        assert got == _readme_command(kind)
    installs = [i for i in (text.find("pip install"), text.find("--upgrade")) if i >= 0]
    first_install = min(installs, default=len(text))
    assert text.index('bash -c "$main_cmd"') < first_install
    assert text.index('bash -c "$test_cmd"') < first_install
    assert "--upgrade pip" not in text
    # the exhaustive tier (and the lint and type checks after it), started beside them,
    # installs only into a clone's own venv
    side = (ROOT / ".ci" / "exhaustive").read_text()
    assert "bash .ci/exhaustive" in text and "pip install" not in text[:text.index("main_cmd=")]
    assert side.index("git clone") < side.index('cd "$dest"') < side.index("pip install")
    assert "--upgrade" not in side


def test_ci_exit_handler_keeps_the_scripts_own_status() -> None:
    """The EXIT handler of .ci/run stops the side job's leftovers; when there are none
    (it already finished), pgrep finds nothing, and under set -e that must not turn a passing
    run into exit 1, nor hide a failing run's status."""
    import subprocess

    text = (ROOT / ".ci" / "run").read_text()
    start = text.index("cleanup() {")
    handler = text[start:text.index("\n}\n", start) + 3]
    assert "trap cleanup EXIT" in text
    for final, want in (("true", 0), ("exit 3", 3)):
        script = (f"set -euo pipefail\nside_dir=$(mktemp -d)\nsleep 0 &\n"
                  f"side_pid=$!\n{handler}\ntrap cleanup EXIT\n"
                  f"wait \"$side_pid\"\n{final}\n")
        got = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert got.returncode == want, got.stderr


def test_ci_exit_handler_stops_what_the_side_job_started(tmp_path: Path) -> None:
    """Leftovers are the side job's whole tree: a CI run that stops early leaves no pytest or
    bench of the side job running (they are its grandchildren)."""
    import os
    import subprocess
    import time

    text = (ROOT / ".ci" / "run").read_text()
    start = text.index("cleanup() {")
    handler = text[start:text.index("\n}\n", start) + 3]
    pid_file = tmp_path / "grandchild"
    script = (f"set -euo pipefail\nside_dir=$(mktemp -d)\n"
              f"(bash -c 'sleep 300 & echo $! > {pid_file}; wait'; true) &\n"
              f"side_pid=$!\n{handler}\ntrap cleanup EXIT\n"
              f"while [ ! -s {pid_file} ]; do sleep 0.05; done\nexit 4\n")
    got = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert got.returncode == 4, got.stderr
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 120  # a hang guard: a killed process goes at once
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":  # killed, not yet reaped
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError("the side job's grandchild outlived the CI script")


def test_readme_main_job_runs_the_comparison() -> None:
    assert "indexzoo bench" in _readme_command("main")


def test_package_docstring_example_runs() -> None:
    import doctest

    import indexzoo

    result = doctest.testmod(indexzoo)
    assert result.attempted > 0 and result.failed == 0


#: Distributions that only a GPU machine can use (or that pull CUDA libraries in).
GPU_PACKAGE = re.compile(r"^(cupy|numba-cuda|nvidia-|cuda-|pyoptix)", re.IGNORECASE)


def _names(requirements: list[str]) -> list[str]:
    return [re.split(r"[\s\[<>=!~;]", r.strip(), maxsplit=1)[0] for r in requirements]


def test_cpu_installs_pull_no_gpu_package() -> None:
    """The base dependencies and every extra but cuda12, cuda13 and optix install on a machine
    without a GPU nothing that needs one: the README's test command is such an install."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    cpu = {"base": project["dependencies"],
           **{k: v for k, v in extras.items() if k not in ("cuda12", "cuda13", "optix")}}
    assert "test" in cpu and "bench" in cpu
    found = {k: [n for n in _names(reqs) if GPU_PACKAGE.match(n)] for k, reqs in cpu.items()}
    assert not any(found.values()), f"GPU packages in CPU installs: {found}"
    for gpu in ("cuda12", "cuda13"):  # what the README sends a GPU machine to
        assert any(n.startswith("cupy") for n in _names(extras[gpu]))
        assert "numba-cuda" in _names(extras[gpu])


def test_the_readme_states_how_long_the_test_command_takes() -> None:
    text = (ROOT / "README.md").read_text()
    after = text[text.index("<!-- test-command -->"):].split("```", 2)[2]
    paragraph = after.strip().split("\n\n", 1)[0]
    assert re.search(r"about \d+ minutes on a (busy )?2-core machine", paragraph), paragraph
    assert "CI prints" in paragraph  # the time of each run, beside the figure stated here
    assert "no GPU package" in paragraph


# ---------------------------------------------------------------------- the distributions
def test_the_version_has_one_source() -> None:
    """pyproject reads the version from ``indexzoo.__version__``; the installed metadata agrees."""
    import importlib.metadata

    import indexzoo

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "indexzoo.__version__"}
    assert importlib.metadata.version("indexzoo") == indexzoo.__version__


def test_the_license_is_the_mit_license_pyproject_names() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["project"]["license"] == "MIT"
    assert config["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the indexzoo authors" in text
    # setuptools reads SPDX license expressions from version 77 on
    assert "setuptools>=77" in config["build-system"]["requires"]
    assert not any(c.startswith("License ::") for c in config["project"]["classifiers"])


def test_ci_builds_and_checks_the_distributions_once() -> None:
    side = (ROOT / ".ci" / "exhaustive").read_text()
    package = (ROOT / ".ci" / "package").read_text()
    assert side.count("bash .ci/package") == 1
    assert package.count("\"$py\" -m build") == 1 and "twine check --strict" in package
    assert "tests/support/distribution.py" in package
    dev = _names(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["dev"])
    assert {"build", "twine"} <= set(dev)


def test_the_sdist_leaves_the_tests_out() -> None:
    lines = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert {"prune tests", "prune benchmarks"} <= set(lines)


def _fake_wheel(path: Path, leave_out: str = "") -> Path:
    """A wheel as setuptools writes indexzoo's, from this source tree, less ``leave_out``."""
    import zipfile

    from tests.support import distribution

    version = distribution.source_version()
    info = f"indexzoo-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        for name in sorted(distribution.wheel_members() - {leave_out}):
            z.writestr(name, "")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.4\nName: indexzoo\nVersion: {version}"
                                       "\nLicense-Expression: MIT\n")
        z.writestr(f"{info}/licenses/LICENSE", "MIT License\n")
        z.writestr(f"{info}/entry_points.txt",
                   "[console_scripts]\nindexzoo = indexzoo.tools.cli:main\n\n[pytest11]\n"
                   "indexzoo = indexzoo.conformance.pytest_plugin\n"
                   "indexzoo-bench = indexzoo.tools.pytest_bench\n")
    return path


def test_the_wheel_check_passes_a_complete_wheel_and_names_each_missing_file(tmp_path: Path) -> None:
    from tests.support import distribution

    assert distribution.wheel_problems(_fake_wheel(tmp_path / "a.whl")) == []
    for gone in ("indexzoo/native/rt/optix/query.cu", "indexzoo/py.typed",
                 "indexzoo/conformance/suite.py", "indexzoo/tools/pytest_bench.py"):
        got = distribution.wheel_problems(_fake_wheel(tmp_path / "b.whl", leave_out=gone))
        assert f"missing {gone}" in got, got


def test_the_wheel_check_wants_both_pytest_plugins_and_the_source_version(tmp_path: Path) -> None:
    import zipfile

    from tests.support import distribution

    wheel = _fake_wheel(tmp_path / "a.whl")
    with zipfile.ZipFile(wheel) as z:
        files = {n: z.read(n).decode() for n in z.namelist()}
    info = next(n for n in files if n.endswith("entry_points.txt"))
    files[info] = files[info].replace("indexzoo-bench = indexzoo.tools.pytest_bench\n", "")
    meta = next(n for n in files if n.endswith("METADATA"))
    files[meta] = files[meta].replace(f"Version: {distribution.source_version()}", "Version: 9.9")
    with zipfile.ZipFile(tmp_path / "b.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    got = distribution.wheel_problems(tmp_path / "b.whl")
    assert "no pytest11 entry point indexzoo-bench = indexzoo.tools.pytest_bench" in got
    assert f"the metadata does not give Version: {distribution.source_version()}" in got


def test_the_sdist_check_refuses_test_files_and_wants_every_source(tmp_path: Path) -> None:
    import io
    import tarfile

    from tests.support import distribution

    def sdist(extra: list[str], leave_out: str = "") -> Path:
        path = tmp_path / f"s{len(extra)}{bool(leave_out)}.tar.gz"
        names = {*distribution.SDIST_NOTES, *extra}
        for folder in distribution.FOLDERS:
            names |= {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
                      if p.is_file() and p.suffix in (".py", ".cu", ".typed")
                      and "__pycache__" not in p.parts}
        with tarfile.open(path, "w:gz") as t:
            for name in sorted(names - {leave_out}):
                t.addfile(tarfile.TarInfo(f"indexzoo-0/{name}"), io.BytesIO(b""))
        return path

    assert distribution.sdist_problems(sdist([])) == []
    assert distribution.sdist_problems(sdist(["tests/conftest.py"])) == [
        "holds a test file: tests/conftest.py"]
    assert distribution.sdist_problems(sdist([], leave_out="core/py.typed")) == [
        "missing core/py.typed"]


# ---------------------------------------------------------------------- install lines
#: An install line that asks a package registry for indexzoo, which no registry serves:
#: ``indexzoo[extra]`` as a requirement, or the bare name after an install command.
REGISTRY_INSTALL = re.compile(
    r"""(?<![\w./-])indexzoo\[[\w,\s-]*\]"""
    r"""|\b(?:pip3?|pipx|uv(?:\s+pip)?|conda|mamba)\s+(?:install|add)\s+(?:-{1,2}[\w-]+\s+)*"""
    r"""['"]?indexzoo(?![\w./-])""")


def test_the_registry_install_pattern_tells_working_lines_from_broken_ones() -> None:
    broken = ["pip install 'indexzoo[dask]'", 'pip install "indexzoo[cuda12,optix]"',
              "pip install indexzoo", "pip install -U indexzoo", "uv pip install indexzoo",
              "Fix: or 'indexzoo[cuda13]' (match your driver)"]
    working = ["pip install -e '.[dask]'", "pip install '.[cuda12,optix]'",
               'pip install "$(echo dist/indexzoo-*.whl)[dask]"', "pip install dist/indexzoo-*.whl",
               "pip install ./tests/example_plugin", "pip install 'dask>=2024.1'",
               "import indexzoo", "pip install indexzoo-example"]
    assert [b for b in broken if not REGISTRY_INSTALL.search(b)] == []
    assert [w for w in working if REGISTRY_INSTALL.search(w)] == []


def _texts_users_read() -> list[Path]:
    """The README, the docs, the project's notes, the CI scripts, and every source file of
    the package (its messages and docstrings)."""
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), ROOT / "benchmarks" / "README.md",
             *ROOT.glob("*.md"), *(ROOT / ".ci").iterdir()]
    for folder in MAPPING:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".cu", ".md")]
    return [f for f in files if f.is_file()]


def test_no_install_line_asks_a_registry_for_indexzoo() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in _texts_users_read()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if REGISTRY_INSTALL.search(line)]
    assert found == [], "indexzoo is on no package registry:\n" + "\n".join(found)


def test_the_readme_says_indexzoo_is_not_on_a_registry_and_how_to_install_it() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "indexzoo is not on a package registry yet" in text
    assert "pip install -e ." in text and "python -m build" in text


def test_missing_package_messages_give_a_line_that_installs_the_package() -> None:
    """The message names the extra and installs the package by its requirement in that extra
    (read from the installed metadata); a package the extra lacks, by its own name."""
    from indexzoo import MissingDependency
    from indexzoo.extras import extra_requirements, install_line

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extra_requirements("dask") == tuple(extras["dask"])
    assert install_line("cuda12") == ("pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'")
    message = str(MissingDependency("pyyaml", "yaml", "reading YAML spec files"))
    assert message.endswith("(indexzoo's yaml extra), which is not installed; install it with: "
                            "pip install 'pyyaml>=6'")
    assert install_line("dask", "dask-cuda") == "pip install dask-cuda"
    # the package named as its extra stands for the whole extra (dask needs distributed too)
    assert install_line("dask", "dask") == "pip install 'dask>=2024.1' 'distributed>=2024.1'"
    assert install_line("yaml", "pyyaml") == "pip install 'pyyaml>=6'"
    assert install_line("no-such-extra") == "pip install -e '.[no-such-extra]' in indexzoo's source folder"


# ---------------------------------------------------------------------- the project's notes
def test_the_citation_file_cites_indexzoo_and_each_reference_in_full() -> None:
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["title"].startswith("indexzoo") and cff["license"] == "MIT"
    assert cff["authors"] == [{"name": "the indexzoo authors"}]
    assert "version" not in cff  # the version has one source: indexzoo.__version__
    assert len(cff["references"]) >= 5
    for ref in cff["references"]:
        assert ref["title"] and ref["type"] and ref["authors"], ref
        assert all(a.get("family-names") and a.get("given-names") for a in ref["authors"]), ref


def test_the_changelog_has_an_entry_for_this_version() -> None:
    import indexzoo

    headings = [line for line in (ROOT / "CHANGELOG.md").read_text().splitlines()
                if line.startswith("## ")]
    assert headings and headings[0].startswith(f"## {indexzoo.__version__} ")


def test_contributing_points_to_the_plugin_guide_and_the_readme_test_command() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    assert "docs/plugin-authors.md" in text
    assert f"```bash\n{_readme_command('test')}\n```" in text
    assert "GPU" in text and (ROOT / "docs" / "plugin-authors.md").is_file()
