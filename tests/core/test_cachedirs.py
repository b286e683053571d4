"""indexzoo's cache folder (``indexzoo.cachedirs``): the user's cache folder by the platform's
convention (XDG on Linux, ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows),
``INDEXZOO_CACHE_DIR`` where set, and none where no home folder can be told."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from indexzoo import cachedirs


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("XDG_CACHE_HOME", "LOCALAPPDATA", "INDEXZOO_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    return tmp_path / "me"


def test_linux_follows_xdg(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cachedirs.user_cache_root("linux") == os.path.join(home, ".cache", "indexzoo")
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/me")
    assert cachedirs.user_cache_root("linux") == "/var/cache/me/indexzoo"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the spec says
    assert cachedirs.user_cache_root("linux") == os.path.join(home, ".cache", "indexzoo")


def test_macos_and_windows(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cachedirs.user_cache_root("darwin") == os.path.join(home, "Library", "Caches",
                                                               "indexzoo")
    assert cachedirs.user_cache_root("win32") == os.path.join(home, "AppData", "Local",
                                                              "indexzoo", "Cache")
    monkeypatch.setenv("LOCALAPPDATA", "/c/Users/me/AppData/Local")
    assert cachedirs.user_cache_root("win32") == os.path.join("/c/Users/me/AppData/Local",
                                                              "indexzoo", "Cache")


def test_no_home_folder_no_cache_folder(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def nobody(uid: int) -> None:
        raise KeyError(uid)

    monkeypatch.delenv("HOME")
    monkeypatch.setattr(pwd, "getpwuid", nobody)
    for platform in ("linux", "darwin", "win32"):
        assert cachedirs.user_cache_root(platform) is None
    assert cachedirs.cache_root() is None
    # an XDG cache folder needs no home
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/me")
    assert cachedirs.user_cache_root("linux") == "/var/cache/me/indexzoo"


def test_indexzoo_cache_dir_moves_it(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cachedirs.cache_root() == cachedirs.user_cache_root()
    monkeypatch.setenv("INDEXZOO_CACHE_DIR", "~/elsewhere")
    assert cachedirs.cache_root() == os.path.join(home, "elsewhere")
