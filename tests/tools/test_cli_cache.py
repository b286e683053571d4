"""``indexzoo cache info`` and ``indexzoo cache clear``: where the compiled CPU kernels, OptiX
programs and index listings are kept, whether the kernel cache is on and why, its entries,
size and limit; and removing them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexzoo.tools.cli import main


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A kernel cache with three entries (and a file of someone else's) and an OptiX cache with
    one program, under a cache folder of the test's own."""
    kernels, optix = tmp_path / "kernels", tmp_path / "iz" / "optix"
    kernels.mkdir()
    optix.mkdir(parents=True)
    for name, size in (("a-1.nbk", 1000), ("b-2.nbk", 2000), ("c-3.nbk", 500)):
        (kernels / name).write_bytes(b"x" * size)
    (kernels / "a-1.nbk.0123456789ab.tmp").write_bytes(b"x" * 10)
    (kernels / "README").write_text("not the cache's")
    (optix / "query-abc.ptx").write_bytes(b"//" * 100)
    listings = tmp_path / "iz" / "catalog"
    listings.mkdir()
    (listings / "listing-0123456789abcdef.json").write_bytes(b" " * 120)
    (listings / "notes.txt").write_text("not the cache's")
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(kernels))
    monkeypatch.setenv("INDEXZOO_CACHE_DIR", str(tmp_path / "iz"))
    monkeypatch.delenv("INDEXZOO_KERNEL_CACHE_SIZE", raising=False)
    return kernels, optix


def test_info_shows_the_folders_state_entries_size_and_limit(folders: tuple[Path, Path]) -> None:
    kernels, optix = folders
    code, text = run("cache", "info")
    assert code == 0
    assert text.splitlines() == [
        "CPU kernels:    on (set by INDEXZOO_KERNEL_CACHE)",
        f"  folder:       {kernels}",
        "  entries:      3 (3.50 kB)",
        "  limit:        1024 MiB (INDEXZOO_KERNEL_CACHE_SIZE); the least recently used go first",
        f"OptiX programs: {optix}",
        "  entries:      1 (200 B)",
        "CUDA kernels:   kept with the CPU kernels, as PTX (those CuPy launches)",
        f"index listing:  {optix.parent / 'catalog'} (what `indexzoo list` found, by environment)",
    ]


def test_info_says_why_it_is_off_or_where_it_is_by_default(
        folders: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "off")
    code, text = run("cache", "info")
    assert code == 0
    assert text.splitlines()[0] == ("CPU kernels:    off (INDEXZOO_KERNEL_CACHE=off); each process "
                                    "compiles its own")
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "")
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE_SIZE", "64")
    text = run("cache", "info")[1]
    assert text.splitlines()[:4] == [
        "CPU kernels:    on (the default: kernels/ of INDEXZOO_CACHE_DIR)",
        f"  folder:       {tmp_path / 'iz' / 'kernels'}",
        "  entries:      0 (0 B)",
        "  limit:        64 MiB (INDEXZOO_KERNEL_CACHE_SIZE); the least recently used go first",
    ]
    assert not (tmp_path / "iz" / "kernels").exists()  # info creates nothing
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(blocker / "kernels"))
    text = run("cache", "info")[1]
    assert text.splitlines()[:2] == [
        "CPU kernels:    off (set by INDEXZOO_KERNEL_CACHE)",
        f"  {blocker / 'kernels'} cannot be created: {blocker} is not a folder"]


def test_clear_removes_the_entries_and_says_what_it_removed(folders: tuple[Path, Path]) -> None:
    kernels, optix = folders
    code, text = run("cache", "clear")
    assert code == 0
    listings = optix.parent / "catalog"
    assert text.splitlines() == [f"removed 3 kernel(s) (3.50 kB) from {kernels}",
                                 f"removed 1 OptiX program(s) (200 B) from {optix}",
                                 f"removed 1 index listing(s) (120 B) from {listings}"]
    assert [p.name for p in kernels.iterdir()] == ["README"]  # only the cache's files
    assert list(optix.iterdir()) == []
    assert [p.name for p in listings.iterdir()] == ["notes.txt"]
    assert run("cache", "clear")[1].splitlines()[0] == f"removed 0 kernel(s) (0 B) from {kernels}"
    assert "entries:      0 (0 B)" in run("cache", "info")[1]


def test_clear_of_a_cache_turned_off_removes_nothing(folders: tuple[Path, Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    kernels, _ = folders
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "no")
    code, text = run("cache", "clear")
    assert code == 0
    assert text.splitlines()[0] == ("CPU kernels: the cache is off (INDEXZOO_KERNEL_CACHE=no); "
                                    "nothing removed")
    assert len(list(kernels.iterdir())) == 5


def test_cache_needs_an_action_and_a_malformed_limit_is_a_usage_error(
        folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert run("cache")[0] == 2
    assert "ACTION" in capsys.readouterr().err
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE_SIZE", "1GB")
    assert run("cache", "info")[0] == 2
    assert capsys.readouterr().err.strip() == (
        "indexzoo: error: environment variable INDEXZOO_KERNEL_CACHE_SIZE='1GB' must be a whole "
        "number of MiB from 1 to 1048576 (1 TiB), e.g. 1024")


PROGRAM = """
import numpy as np
import indexzoo
index = indexzoo.create("sorted-array", device="cpu").build(np.arange(100, dtype=np.uint64))
print(index.point(np.array([3, 200], dtype=np.uint64)).rowid.tolist())
"""


def test_a_process_fills_the_cache_that_info_counts_and_clear_empties(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = tmp_path / "kernels"
    env = {**os.environ, "INDEXZOO_KERNEL_CACHE": str(kernels)}
    res = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.strip() == f"[3, {np.iinfo(np.uint32).max}]"
    entries = sorted(kernels.glob("*.nbk"))
    assert entries
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(kernels))
    size = sum(p.stat().st_size for p in entries)
    from indexzoo.display import byte_size

    assert f"  entries:      {len(entries)} ({byte_size(size)})" in run("cache", "info")[1]
    assert run("cache", "clear")[1].startswith(f"removed {len(entries)} kernel(s)")
    assert list(kernels.glob("*.nbk")) == []
