"""``indexzoo list`` keeps what it found on disk and a later listing reads it: the same rows,
without importing the registry, NumPy, pydantic or any plugin; listed afresh when anything it
was made from changes (a plugin's file, an installed plugin) and never kept while a plugin is
left out. Each case runs ``python -m indexzoo`` in processes of its own, with a cache folder of
its own, and checks what they print and which modules they imported (never a timing)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from support.helpers import fake_distribution, one_index_plugin

#: Modules a listing read from the file must not import.
HEAVY = re.compile(r"numpy|pydantic|numba|pluggy|indexzoo\.registry|indexzoo\.plugins\.\w+.*")

#: Run in the child: the command line's ``main`` on the arguments, then the modules imported.
_CHILD = """
import json, sys
from indexzoo.tools.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def _list(cache: Path, *args: str, path: Path | None = None) -> tuple[str, list[str]]:
    """(stdout, modules imported) of ``indexzoo list ARGS`` in a process of its own, with
    ``cache`` as indexzoo's cache folder and ``path`` first on the module path."""
    env = {**os.environ, "INDEXZOO_CACHE_DIR": str(cache), "COLUMNS": "100"}
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", _CHILD, "list", *args], capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout, json.loads(res.stderr.strip().splitlines()[-1])


def _kept(cache: Path) -> list[Path]:
    return sorted((cache / "catalog").glob("*.json"))


def test_a_second_listing_prints_the_same_rows_and_imports_no_plugin(tmp_path: Path) -> None:
    first, imported = _list(tmp_path)
    assert "indexzoo.registry" in imported and "indexzoo.plugins.btree" in imported
    assert len(_kept(tmp_path)) == 1
    second, imported = _list(tmp_path)
    assert second == first
    assert [m for m in imported if HEAVY.fullmatch(m)] == []
    as_json, imported = _list(tmp_path, "--json")
    assert [m for m in imported if HEAVY.fullmatch(m)] == []
    listed = json.loads(as_json)
    assert "indexzoo.plugins.btree" in listed["btree"]["provider"]
    assert listed["btree"]["capabilities"]["range"] is True
    assert set(listed) == {line.split()[0] for line in first.splitlines()[1:]
                           if line and not line[0].isspace() and not line.startswith("ray-")}


def test_a_changed_plugin_is_listed_afresh(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    fake_distribution(site, "tiny-pkg", {"tiny": "tiny_pkg"},
                      {"tiny_pkg": one_index_plugin("tiny-a", "The first description.")})
    out, _ = _list(cache, path=site)
    assert "The first description." in out
    out, imported = _list(cache, path=site)
    assert "The first description." in out and "tiny_pkg" not in imported
    # the plugin's file changes (an editable install, a new version with the same number)
    (site / "tiny_pkg.py").write_text(one_index_plugin("tiny-a", "A second, longer description."))
    out, imported = _list(cache, path=site)
    assert "A second, longer description." in out and "tiny_pkg" in imported
    # the plugin is uninstalled: its row goes
    out, _ = _list(cache)
    assert "tiny-a" not in out


def test_a_listing_with_a_plugin_left_out_is_never_kept(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    fake_distribution(site, "broken-pkg", {"broken": "broken_pkg"},
                      {"broken_pkg": "raise RuntimeError('this plugin cannot be imported')\n"})
    for _ in range(2):  # the second listing imports it again and says why again
        out, imported = _list(cache, path=site)
        assert "(unusable)" in out and "cannot be imported" in out
        assert "indexzoo.registry" in imported  # the plugins were imported, not read
    assert _kept(cache) == []


def test_an_unwritable_cache_folder_lists_as_without_one(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be\n")
    first, _ = _list(blocked)
    second, imported = _list(blocked)
    assert second == first and "indexzoo.registry" in imported
