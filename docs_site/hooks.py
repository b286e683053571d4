"""MkDocs hooks of the documentation site (``mkdocs.yml`` names this file under ``hooks``).

**Pages kept outside docs/.** The README is the site's home page, and the benchmark guide,
the index of recorded results, the contributing notes and the changelog are pages of it too
(:data:`REPO_PAGES`). Each stays where GitHub shows it, and its relative links keep pointing
at files of the repository (``docs/cli.md`` from the README). Why a hook, not a layout: MkDocs
refuses a ``docs_dir`` that is the folder of ``mkdocs.yml`` itself (the repository root, where
the README's links would be valid as they are), and a copy or a symbolic link of the README
under docs/ would leave its ``docs/...`` links one folder off. So the hook adds each of these
files to the site as a page at its place in :data:`REPO_PAGES`, and rewrites every relative
link of every page by where its target lands on the site (:func:`rewrite_links`): from the
README, ``docs/cli.md`` becomes ``cli.md``; from a page in docs/, ``../README.md`` becomes
``index.md``. The files themselves are never changed, so their links stay valid on GitHub; a
link to a file that is not on the site is left alone, and ``mkdocs build --strict`` fails on
it.

**The API reference's sources.** setuptools installs the folders as packages under other names
(``core`` is ``indexzoo``, ``conformance`` is ``indexzoo.conformance``, as pyproject's
``package-dir`` says), which griffe, the reader of mkdocstrings' Python handler, cannot follow:
it finds a package by the name of its folder. The hook copies the ``.py`` files into a
temporary folder laid out as they are installed and makes that folder the handler's search
path. griffe reads them there without importing anything, so building the site needs neither a
GPU nor indexzoo's own dependencies.

**Heading anchors as GitHub makes them** (``pymdownx.slugs``: lower case, one hyphen per space),
so that a ``#section`` link in the docs works on both.

This module imports MkDocs and pymdownx only inside the hooks: the tests read
:data:`REPO_PAGES` and call :func:`rewrite_links` without MkDocs installed.
"""

from __future__ import annotations

import atexit
import posixpath
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

#: Files outside docs/ that are pages of the site: repository path -> path on the site.
REPO_PAGES: dict[str, str] = {
    "README.md": "index.md",
    "benchmarks/README.md": "benchmarks/running.md",
    "benchmarks/results/README.md": "benchmarks/results.md",
    "CONTRIBUTING.md": "contributing.md",
    "CHANGELOG.md": "changelog.md",
}
DOCS_DIR = "docs"

#: ``[text](target)`` and ``![alt](target)``, the target optionally in angle brackets and
#: followed by a title; and reference definitions, ``[name]: target``.
_INLINE = re.compile(r"(?P<head>\]\(\s*)(?P<target><[^>\n]*>|[^)\s]+)")
_REFERENCE = re.compile(r"^(?P<head> {0,3}\[[^\]\n]+\]:\s*)(?P<target><[^>\n]*>|\S+)", re.M)
_FENCED = re.compile(r"(^ {0,3}(?:```|~~~).*?^ {0,3}(?:```|~~~)[^\n]*$)", re.M | re.S)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

_staged: Path | None = None  # the temporary folder of the package sources, while MkDocs runs


def site_path_of(repo_path: str) -> str | None:
    """Where the repository file ``repo_path`` is on the site, or None if it is not there."""
    if repo_path in REPO_PAGES:
        return REPO_PAGES[repo_path]
    if repo_path.startswith(DOCS_DIR + "/"):
        return repo_path[len(DOCS_DIR) + 1:]
    return None


def _rewrite_target(target: str, source: str, page: str) -> str:
    bracketed = target.startswith("<") and target.endswith(">")
    raw = target[1:-1] if bracketed else target
    if not raw or raw.startswith(("#", "/")) or _SCHEME.match(raw):
        return target
    path, hash_, fragment = raw.partition("#")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    on_site = site_path_of(resolved)
    if on_site is None:
        return target  # not a page or file of the site: strict mode reports it
    new = posixpath.relpath(on_site, posixpath.dirname(page) or ".") + hash_ + fragment
    return f"<{new}>" if bracketed else new


def rewrite_links(markdown: str, source: str, page: str) -> str:
    """``markdown``, read from the repository file ``source`` and shown on the site at
    ``page``, with each relative link pointing where its target is on the site. Links in
    fenced code blocks, absolute links and anchors on the same page are left as they are."""
    parts = _FENCED.split(markdown)  # the odd parts are fenced blocks, left as they are

    def fix(match: re.Match[str]) -> str:
        return match.group("head") + _rewrite_target(match.group("target"), source, page)

    return "".join(part if i % 2 else _REFERENCE.sub(fix, _INLINE.sub(fix, part))
                   for i, part in enumerate(parts))


def stage_sources(root: Path, dest: Path) -> None:
    """Copy the package's ``.py`` files under ``dest`` as they are installed (by pyproject's
    ``package-dir``: ``core/registry.py`` as ``dest/indexzoo/registry.py``)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    for package, folder in package_dir.items():
        target = dest.joinpath(*package.split("."))
        for src in (root / folder).rglob("*.py"):
            if "__pycache__" in src.parts:
                continue
            copy = target / src.relative_to(root / folder)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, copy)


def on_config(config: Any) -> Any:
    """Stage the sources and hand them to mkdocstrings; GitHub's heading anchors."""
    global _staged
    from pymdownx.slugs import slugify

    _remove_staged()  # `mkdocs serve` rebuilds: stage the sources afresh
    _staged = Path(tempfile.mkdtemp(prefix="indexzoo-docs-"))
    stage_sources(ROOT, _staged)
    handlers = config.plugins["mkdocstrings"].config.handlers
    handlers.setdefault("python", {})["paths"] = [str(_staged)]
    config.mdx_configs.setdefault("toc", {})["slugify"] = slugify(case="lower")
    return config


# Before mkdocstrings' own on_config (a plugin's priority is 0), which may start the handler.
on_config.mkdocs_priority = 50  # type: ignore[attr-defined]


def on_files(files: Any, config: Any) -> Any:
    """Add the pages kept outside docs/ (:data:`REPO_PAGES`)."""
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    for repo_path, page in REPO_PAGES.items():
        if files.get_file_from_path(page) is not None:
            raise PluginError(f"docs/{page} would hide {repo_path}, which the site shows there")
        files.append(File.generated(config, page, abs_src_path=str(ROOT / repo_path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Point each relative link where its target is on the site."""
    page_path = page.file.src_uri
    origin = {site: repo for repo, site in REPO_PAGES.items()}
    source = origin.get(page_path, f"{DOCS_DIR}/{page_path}")
    return rewrite_links(markdown, source, page_path)


def _remove_staged() -> None:
    global _staged
    if _staged is not None:
        shutil.rmtree(_staged, ignore_errors=True)
        _staged = None


atexit.register(_remove_staged)  # also when MkDocs stops without its shutdown event


def on_shutdown() -> None:
    """Remove the staged sources."""
    _remove_staged()
