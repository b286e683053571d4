"""A file written by replace_file is the old one or the whole new one, never a part."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest

from indexzoo.files import replace_file


def test_the_new_content_replaces_the_old_and_no_temporary_stays(tmp_path: Path) -> None:
    dest = tmp_path / "index.izx"
    dest.write_bytes(b"old")
    assert replace_file(dest, lambda f: f.write(b"new content")) == dest
    assert dest.read_bytes() == b"new content"
    assert [p.name for p in tmp_path.iterdir()] == ["index.izx"]


def test_a_writer_that_fails_halfway_leaves_the_old_file_and_nothing_else(tmp_path: Path) -> None:
    dest = tmp_path / "index.izx"
    dest.write_bytes(b"old")

    def half(f: BinaryIO) -> None:
        f.write(b"half of it")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_file(dest, half)
    assert dest.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["index.izx"]
