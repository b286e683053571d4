"""A file written by replace_file is the old one or the whole new one, never a part."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import BinaryIO

import pytest
from support.helpers import killed_writer

from indexzoo.files import create_temporary, remove_stale_temporaries, replace_file, temporary_owner


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


# ---------------------------------------------------------------------- killed writers
#: A writer that creates its temporary, says so, and then waits to be killed.
_SLOW_WRITER = """
import sys, time
from pathlib import Path
from indexzoo.files import replace_file

def write(f):
    f.write(b"x" * (1 << 20))
    f.flush()
    print("writing", flush=True)
    time.sleep(600)

replace_file(Path(sys.argv[1]), write)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_temporary_of_a_killed_writer_names_it_and_the_next_cleanup_removes_it(
        tmp_path: Path) -> None:
    pid = killed_writer(_SLOW_WRITER, str(tmp_path / "index.izo"))
    left = [p for p in tmp_path.iterdir()]
    assert len(left) == 1 and temporary_owner(left[0].name) == (left[0].name.split("-")[1], pid)
    assert remove_stale_temporaries(tmp_path) == left
    assert list(tmp_path.iterdir()) == []


def test_cleanup_leaves_live_writers_other_hosts_and_other_files_alone(tmp_path: Path) -> None:
    fd, mine = create_temporary(tmp_path, "index.izo")  # this process: alive
    os.close(fd)
    host = temporary_owner(mine.name)
    assert host is not None and host[1] == os.getpid()
    elsewhere = "0" * 8 if host[0] != "0" * 8 else "1" * 8
    other_host = tmp_path / f".index.izo.indexzoo-{elsewhere}-1-{'a' * 16}.tmp"
    plain = tmp_path / ".index.izo.0123456789abcdef.tmp"  # the old form, and any other file
    folder = tmp_path / f".x.indexzoo-{host[0]}-999999999-{'b' * 16}.tmp"
    for p in (other_host, plain):
        p.write_bytes(b"")
    folder.mkdir()  # a folder named like a temporary is never removed
    assert remove_stale_temporaries(tmp_path) == []
    assert sorted(tmp_path.iterdir()) == sorted([mine, other_host, plain, folder])
