"""The documentation site's configuration (mkdocs.yml and docs_site/hooks.py), checked without
MkDocs: every page under docs/ is in the nav or explicitly left out of it, so that a new guide
cannot be forgotten; every page the nav names exists; and the hook's link rewriting points the
links of the pages kept outside docs/ (the README and the others) where their targets are on
the site. ``.ci/docs`` builds the site itself with ``mkdocs build --strict``."""

from __future__ import annotations

import fnmatch
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("indexzoo_docs_site_hooks",
                                                  ROOT / "docs_site" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()


def _config() -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(config, dict)
    return config


def _nav_pages(entry: Any) -> Iterator[str]:
    """Every page a nav names (``- Title: page.md``, ``- page.md``, sections of either)."""
    if isinstance(entry, str):
        if "://" not in entry:  # an external link is not a page
            yield entry
    elif isinstance(entry, list):
        for item in entry:
            yield from _nav_pages(item)
    elif isinstance(entry, dict):
        for value in entry.values():
            yield from _nav_pages(value)


def _left_out(config: dict[str, Any]) -> list[str]:
    """The patterns of pages explicitly kept out of the nav (``not_in_nav``) or of the site
    (``exclude_docs``), one per line as MkDocs takes them."""
    return [line.strip() for key in ("not_in_nav", "exclude_docs")
            for line in str(config.get(key) or "").splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _matches(page: str, pattern: str) -> bool:
    """A gitignore-style pattern as MkDocs reads these (enough of it for a page path)."""
    anchored = pattern.startswith("/")
    pattern = pattern.lstrip("/")
    if pattern.endswith("/"):
        return page.startswith(pattern) if anchored else f"/{pattern}" in f"/{page}"
    if anchored or "/" in pattern:
        return fnmatch.fnmatch(page, pattern)
    return fnmatch.fnmatch(page.rsplit("/", 1)[-1], pattern)


def test_every_page_under_docs_is_in_the_nav_or_left_out_explicitly() -> None:
    config = _config()
    assert config.get("docs_dir", "docs") == "docs"
    named = set(_nav_pages(config["nav"]))
    patterns = _left_out(config)
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert pages, "no pages under docs/"
    forgotten = [p for p in pages if p not in named and not any(_matches(p, pat) for pat in patterns)]
    assert forgotten == [], (
        "pages under docs/ missing from mkdocs.yml's nav (add them there, or to not_in_nav "
        f"with a reason): {forgotten}")


def test_every_page_the_nav_names_exists() -> None:
    named = list(_nav_pages(_config()["nav"]))
    assert len(named) == len(set(named)), "a page is in the nav twice"
    from_repo = set(hooks.REPO_PAGES.values())
    missing = [p for p in named if not (DOCS / p).is_file() and p not in from_repo]
    assert missing == [], f"the nav names pages that neither docs/ nor the hook provides: {missing}"


def test_the_pages_kept_outside_docs_exist_and_are_in_the_nav() -> None:
    named = set(_nav_pages(_config()["nav"]))
    for repo_path, page in hooks.REPO_PAGES.items():
        assert (ROOT / repo_path).is_file(), repo_path
        assert not (DOCS / page).exists(), f"docs/{page} would hide {repo_path}"
        assert page in named, f"{repo_path} (on the site as {page}) is not in the nav"
    assert hooks.REPO_PAGES["README.md"] == "index.md", "the README is the home page"


def test_the_config_needs_no_python_tags() -> None:
    """safe_load above parsed it: mkdocs.yml holds no ``!!python/...`` tag, which would need
    MkDocs' own loader (the hook sets what would need one, the anchors' slugify)."""
    assert "!!python" not in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_api_reference_reads_the_sources_without_importing_them() -> None:
    """griffe may only visit the sources (no GPU, no numba, nothing of indexzoo runs)."""
    plugins = {key: value for item in _config()["plugins"]
               for key, value in (item.items() if isinstance(item, dict) else [(item, {})])}
    options = plugins["mkdocstrings"]["handlers"]["python"]["options"]
    assert options.get("allow_inspection") is False
    assert not options.get("force_inspection", False)


@pytest.mark.parametrize(("markdown", "source", "page", "expected"), [
    # the README's links into docs/, from the repository root to the site's root
    ("[guide](docs/cli.md)", "README.md", "index.md", "[guide](cli.md)"),
    ("[x](docs/plugins/rx.md#ranges)", "README.md", "index.md", "[x](plugins/rx.md#ranges)"),
    ("[x](<docs/keys.md>)", "README.md", "index.md", "[x](<keys.md>)"),
    ("[r]: docs/persistence.md", "README.md", "index.md", "[r]: persistence.md"),
    # a page of docs/ linking to a file kept outside it
    ("[home](../README.md#installing)", "docs/cli.md", "cli.md", "[home](index.md#installing)"),
    ("[r](../../benchmarks/results/README.md)", "docs/plugins/rx.md", "plugins/rx.md",
     "[r](../benchmarks/results.md)"),
    ("[b](../CHANGELOG.md)", "benchmarks/README.md", "benchmarks/running.md", "[b](../changelog.md)"),
    # links between pages of docs/ stay as they are
    ("[k](keys.md) [p](plugins/rx.md)", "docs/cli.md", "cli.md", "[k](keys.md) [p](plugins/rx.md)"),
    ("[up](../cli.md)", "docs/plugins/rx.md", "plugins/rx.md", "[up](../cli.md)"),
    # not rewritten: absolute links, anchors, files not on the site, fenced code
    ("[w](https://example.org/docs/a.md)", "README.md", "index.md",
     "[w](https://example.org/docs/a.md)"),
    ("[s](#the-two-commands)", "README.md", "index.md", "[s](#the-two-commands)"),
    ("[t](tests/example_plugin)", "README.md", "index.md", "[t](tests/example_plugin)"),
    ("```md\n[c](docs/cli.md)\n```\n[c](docs/cli.md)", "README.md", "index.md",
     "```md\n[c](docs/cli.md)\n```\n[c](cli.md)"),
])
def test_links_point_where_their_targets_are_on_the_site(markdown: str, source: str, page: str,
                                                         expected: str) -> None:
    assert hooks.rewrite_links(markdown, source, page) == expected


def test_every_relative_link_of_the_readme_lands_on_a_page_of_the_site() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [m.group("target") for m in hooks._INLINE.finditer(text)]
    relative = [t for t in targets if "://" not in t and not t.startswith("#")]
    assert relative, "the README links to no guide"
    for target in relative:
        path = target.partition("#")[0]
        on_site = hooks.site_path_of(path)
        assert on_site is not None, f"the README links to {target}, which is not on the site"
        assert (DOCS / on_site).is_file() or on_site in hooks.REPO_PAGES.values(), target


def test_the_api_reference_sources_are_laid_out_as_installed(tmp_path: Path) -> None:
    hooks.stage_sources(ROOT, tmp_path)
    for module in ("indexzoo/__init__.py", "indexzoo/contract.py", "indexzoo/tools/cli.py",
                   "indexzoo/conformance/__init__.py", "indexzoo/conformance/suite.py",
                   "indexzoo/plugins/__init__.py", "indexzoo/native/__init__.py"):
        assert (tmp_path / module).is_file(), module
    assert not list(tmp_path.rglob("__pycache__"))
