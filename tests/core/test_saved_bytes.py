"""Saved indexes without a path: ``index.to_bytes()`` / ``indexzoo.from_bytes(data)``, and
``index.save(f)`` / ``indexzoo.load(f)`` on binary file objects (docs/persistence.md, "Bytes
and file objects").

There is one format: the bytes are those a save to a path writes, and whatever way they come
in (a path, bytes, a file object), a load refuses the same files with the same error and the
same message after the name of where they came from.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo import ConfigError, IndexFileError, persist
from indexzoo.errors import UnknownIndexInFile

KEYS = np.array([7, 3, 7, 9, 1 << 40, 0], dtype=np.uint64)
LOOKUPS = np.array([7, 8, 9, 0, 1 << 40], dtype=np.uint64)
COUNTS = [2, 0, 1, 1, 1]


def built(name: str = "sorted-array") -> indexzoo.GpuIndex:
    return indexzoo.create(name, device="cpu").build(KEYS)


def counts(index: indexzoo.GpuIndex) -> list[int]:
    return index.point(LOOKUPS, out="count").to_host().count.tolist()


@pytest.fixture
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """One time for every zip member written (the container stamps each with the time)."""
    monkeypatch.setattr(zipfile.time, "time", lambda: 1_767_225_600.0)


class OnlyWrites:
    """A file object that has ``write`` and nothing else (a pipe, a socket, a response)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: Any) -> int:
        self.chunks.append(bytes(data))
        return len(data)


class OnlyReads:
    """A file object that has ``read`` and nothing else, and hands out 1000 bytes at most."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else self.at + min(size, 1000)
        part, self.at = self.data[self.at:end], min(end, len(self.data))
        return part


# ---------------------------------------------------------------------- one format
def test_to_bytes_are_the_bytes_a_save_writes_to_a_path_or_a_file_object(
        tmp_path: Path, still_clock: None) -> None:
    index = built()
    index.save(tmp_path / "keys.izo")
    into = io.BytesIO()
    assert index.save(into) is None
    with open(tmp_path / "open.izo", "wb") as f:
        index.save(f)
    data = index.to_bytes()
    assert data[:4] == b"PK\x03\x04" and isinstance(data, bytes)
    assert data == (tmp_path / "keys.izo").read_bytes() == into.getvalue()
    assert data == (tmp_path / "open.izo").read_bytes()


@pytest.mark.parametrize("name", ["sorted-array", "btree", "warpcore-hash"])
def test_bytes_load_back_into_an_index_that_answers_the_same(name: str) -> None:
    index = indexzoo.from_bytes(built(name).to_bytes())
    assert (index.name, index.device, len(index)) == (name, "cpu", len(KEYS))
    assert counts(index) == COUNTS


def test_an_unbuilt_index_goes_through_bytes_unbuilt_with_its_params() -> None:
    index = indexzoo.from_bytes(indexzoo.create("btree", device="cpu", node_width=8).to_bytes())
    assert not index.is_built and index.params.node_width == 8


def test_from_bytes_takes_bytes_a_bytearray_or_a_memoryview() -> None:
    data = built().to_bytes()
    for given in (data, bytearray(data), memoryview(data)):
        assert counts(indexzoo.from_bytes(given, device="cpu")) == COUNTS


def test_a_file_saved_to_a_path_loads_from_an_open_file_and_back(tmp_path: Path) -> None:
    built().save(tmp_path / "a.izo")
    with open(tmp_path / "a.izo", "rb") as f:
        first = indexzoo.load(f)
    with open(tmp_path / "b.izo", "wb") as f:
        first.save(f)
    assert counts(indexzoo.load(tmp_path / "b.izo")) == COUNTS
    assert counts(indexzoo.from_bytes((tmp_path / "a.izo").read_bytes())) == COUNTS


def test_a_file_object_is_read_from_its_position_and_left_at_its_end(still_clock: None) -> None:
    stream = io.BytesIO()
    stream.write(b"a header of the caller's own\n")
    start = stream.tell()
    built().save(stream)
    assert stream.getvalue()[start:] == built().to_bytes()  # offsets count from the start
    stream.seek(start)
    assert counts(indexzoo.load(stream)) == COUNTS
    assert stream.tell() == len(stream.getvalue())


def test_file_objects_that_cannot_seek_save_and_load_the_same_bytes(still_clock: None) -> None:
    out = OnlyWrites()
    built().save(out)
    data = b"".join(out.chunks)
    assert data == built().to_bytes()
    assert counts(indexzoo.load(OnlyReads(data))) == COUNTS


def test_a_file_opened_for_appending_gets_the_same_bytes(tmp_path: Path, still_clock: None
                                                          ) -> None:
    """Writes to it land at its end wherever it seeks, so the archive is written whole first."""
    with open(tmp_path / "a.izo", "ab") as f:
        built().save(f)
    assert (tmp_path / "a.izo").read_bytes() == built().to_bytes()


# ---------------------------------------------------------------------- refused the same way
def _with_meta(change: Callable[[dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    def rewrite(data: bytes) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(data)) as zin, \
                zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                member = zin.read(info.filename)
                if info.filename == persist.META_MEMBER:
                    meta = json.loads(member)
                    change(meta)
                    member = json.dumps(meta).encode()
                zout.writestr(info.filename, member)
        return out.getvalue()
    return rewrite


def _flipped(data: bytes) -> bytes:
    at = data.index(np.sort(KEYS).tobytes())  # the sorted keys' bytes
    return data[:at + 3] + bytes([data[at + 3] ^ 0x10]) + data[at + 4:]


def _plain_npz(_: bytes) -> bytes:
    out = io.BytesIO()
    np.savez(out, keys=KEYS)
    return out.getvalue()


#: A saved index made wrong, and the start of the message every way in gives for it.
REFUSED: dict[str, tuple[Callable[[bytes], bytes], type[Exception], str]] = {
    "truncated near its end": (lambda d: d[:-10], IndexFileError, "the file is truncated"),
    "truncated in half": (lambda d: d[:len(d) // 2], IndexFileError, "the file is truncated"),
    "truncated to 40 bytes": (lambda d: d[:40], IndexFileError, "the file is truncated"),
    "garbage": (lambda d: np.random.default_rng(3).bytes(len(d)), IndexFileError,
                "not a saved indexzoo index"),
    "text": (lambda d: b"hello, world\n", IndexFileError, "not a saved indexzoo index"),
    "empty": (lambda d: b"", IndexFileError, "not a saved indexzoo index"),
    "a flipped bit in an array": (_flipped, IndexFileError, "arrays/"),
    "a plain npz from elsewhere": (_plain_npz, IndexFileError, "not a saved indexzoo index"),
    "a newer format version": (_with_meta(lambda m: m.update(format_version=99)),
                               IndexFileError, "written in format version 99"),
    "another state layout": (_with_meta(lambda m: m.update(state_version=0)), IndexFileError,
                             "its sorted-array state has layout version 0"),
    "an index not installed here": (_with_meta(lambda m: m.update(index="no-such-index")),
                                    UnknownIndexInFile, "holds index 'no-such-index'"),
}


def _load_open(path: Path) -> indexzoo.GpuIndex:
    with open(path, "rb") as f:
        return indexzoo.load(f)


def _refusal(way: str, data: bytes, tmp_path: Path) -> tuple[type[Exception], str]:
    """The error a load of ``data`` given ``way`` raises, and its message after the name of
    the source."""
    path = tmp_path / "wrong.izo"
    path.write_bytes(data)
    loads: dict[str, tuple[Callable[[], Any], str]] = {
        "path": (lambda: indexzoo.load(path), str(path)),
        "bytes": (lambda: indexzoo.from_bytes(data), "the given bytes"),
        "BytesIO": (lambda: indexzoo.load(io.BytesIO(data)), "the given file object"),
        "open file": (lambda: _load_open(path), str(path)),
        "stream that cannot seek": (lambda: indexzoo.load(OnlyReads(data)),
                                    "the given file object"),
    }
    load, source = loads[way]
    with pytest.raises(Exception) as err:
        load()
    text = str(err.value)
    assert text.startswith(f"{source}: "), text
    return type(err.value), text[len(source) + 2:]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_every_way_in_refuses_a_wrong_file_with_the_same_error(tmp_path: Path, case: str
                                                                ) -> None:
    make, error, start = REFUSED[case]
    data = make(built().to_bytes())
    by_path = _refusal("path", data, tmp_path)
    assert by_path[0] is error and start in by_path[1], by_path
    for way in ("bytes", "BytesIO", "open file", "stream that cannot seek"):
        assert _refusal(way, data, tmp_path) == by_path, way


def test_truncated_bytes_are_refused_wherever_they_are_cut() -> None:
    data = built().to_bytes()
    for keep in range(0, len(data), 97):
        with pytest.raises(IndexFileError, match=r"^the given bytes: (the file is truncated|"
                                                 r"not a saved indexzoo index)"):
            indexzoo.from_bytes(data[:keep])


def test_garbage_bytes_are_refused_as_no_saved_index() -> None:
    rng = np.random.default_rng(11)
    for size in (1, 3, 4, 100, 5000):
        with pytest.raises(IndexFileError, match=r"^the given bytes: not a saved indexzoo index"):
            indexzoo.from_bytes(rng.bytes(size))
    with pytest.raises(IndexFileError, match=r"^the given bytes: the file is truncated"):
        indexzoo.from_bytes(b"PK\x03\x04" + rng.bytes(200))  # starts like a zip archive


# ---------------------------------------------------------------------- wrong arguments
def test_anything_but_bytes_for_from_bytes_is_a_config_error_pointing_to_load() -> None:
    for given in ("keys.izo", Path("keys.izo"), io.BytesIO(b"")):
        with pytest.raises(ConfigError, match=r"^indexzoo.from_bytes: expected bytes .*use "
                                              r"indexzoo.load"):
            indexzoo.from_bytes(given)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^indexzoo.from_bytes: expected bytes"):
        indexzoo.from_bytes(None)  # type: ignore[arg-type]


def test_bytes_for_load_is_a_config_error_naming_from_bytes() -> None:
    with pytest.raises(ConfigError, match=r"^indexzoo.load: expected a path \(str or "
                                          r"os.PathLike\) or a binary file object.*"
                                          r"indexzoo.from_bytes\(data\)"):
        indexzoo.load(built().to_bytes())  # type: ignore[arg-type]


def test_a_text_file_object_or_one_open_the_other_way_is_a_config_error(tmp_path: Path
                                                                        ) -> None:
    with pytest.raises(ConfigError, match=r"binary file object, got a text one.*'wb'"):
        built().save(io.StringIO())  # type: ignore[call-overload]
    with pytest.raises(ConfigError, match=r"binary file object, got a text one.*'rb'"):
        indexzoo.load(io.StringIO())  # type: ignore[arg-type]
    built().save(tmp_path / "k.izo")
    with open(tmp_path / "k.izo", "rb") as f, pytest.raises(ConfigError,
                                                          match="not open for writing"):
        built().save(f)
    with open(tmp_path / "w.izo", "wb") as f, pytest.raises(ConfigError,
                                                          match="not open for reading"):
        indexzoo.load(f)


@pytest.mark.gpu
def test_bytes_load_onto_the_gpu() -> None:
    index = indexzoo.from_bytes(built().to_bytes(), device="cuda")
    assert index.device == "cuda" and counts(index) == COUNTS
    assert counts(indexzoo.from_bytes(index.to_bytes(), device="cpu")) == COUNTS
