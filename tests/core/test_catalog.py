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


# ---------------------------------------------------------------------- finding one index
#: Run in the child: make index ARGV[1] on the CPU, look up two keys, then report the answer,
#: the plugin packages imported and (ARGV[2] == "all") every registered name afterwards.
_CREATE = """
import json, sys
import numpy as np
import indexzoo
try:
    index = indexzoo.create(sys.argv[1], device="cpu").build(np.array([5, 1, 3], dtype=np.uint32))
    got = {"rowid": index.point(np.array([3, 4], dtype=np.uint32)).rowid.tolist(),
           "miss": int(index.miss)}
except indexzoo.IndexZooError as exc:
    got = {"error": type(exc).__name__, "message": str(exc)}
got["plugins"] = sorted({m.split(".")[2] for m in sys.modules if m.startswith("indexzoo.plugins.")})
if sys.argv[2:] == ["all"]:
    got["available"] = sorted(indexzoo.available())
print(json.dumps(got))
"""


def _create(cache: Path, name: str, *args: str, path: Path | None = None,
            **env: str) -> dict[str, object]:
    """What ``_CREATE`` reports, run in a process of its own with ``cache`` as indexzoo's cache
    folder, ``path`` first on the module path and ``env`` added to the environment."""
    full = {**os.environ, "INDEXZOO_CACHE_DIR": str(cache), **env}
    if path is not None:
        full["PYTHONPATH"] = os.pathsep.join([str(path), full.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", _CREATE, name, *args], capture_output=True,
                         text=True, timeout=300, env=full)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_creating_an_index_imports_only_its_plugin_once_a_listing_is_kept(tmp_path: Path) -> None:
    first = _create(tmp_path, "btree")
    # no listing yet: every plugin is imported to find the name, and the listing is kept
    assert {"btree", "rx", "sharded", "crystal"} <= set(first["plugins"])  # type: ignore[arg-type]
    assert len(_kept(tmp_path)) == 1
    second = _create(tmp_path, "btree", "all")
    assert second["rowid"] == first["rowid"] == [2, first["miss"]]
    # btree's plugin alone was imported to make the index; every index is still registered
    # when asked for afterwards (that loads the others)
    assert "rx" not in second["plugins"] and "btree" in second["plugins"]
    assert set(second["available"]) >= {"btree", "sorted-array", "rx", "sharded"}  # type: ignore[arg-type]
    third = _create(tmp_path, "sorted-array")
    assert third["rowid"] == [2, third["miss"]] and "rx" not in third["plugins"]


def test_a_stale_listing_or_an_unknown_name_loads_every_plugin(tmp_path: Path) -> None:
    _create(tmp_path, "btree")
    # an INDEXZOO_* variable is part of the stamp: the kept listing is not this environment's
    stale = _create(tmp_path, "btree", INDEXZOO_PLUGIN_TIMEOUT="45")
    assert "rx" in stale["plugins"]  # type: ignore[operator]
    unknown = _create(tmp_path, "btre")
    assert unknown["error"] == "ConfigError" and "did you mean 'btree'" in str(unknown["message"])


def test_a_plugin_installed_after_the_listing_is_found_and_its_name_clash_refused(
        tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    _create(cache, "btree")  # the listing, without the plugin
    fake_distribution(site, "clash-pkg", {"clash": "clash_pkg"},
                      {"clash_pkg": one_index_plugin("btree", "Another btree.")})
    # a new entry point changes the stamp: every plugin loads, and two providers of one name
    # make it unusable, as without a listing
    got = _create(cache, "btree", path=site)
    assert got["error"] == "DuplicatePlugin" and "clash_pkg" in str(got["message"])
