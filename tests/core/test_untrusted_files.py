"""A saved index from anywhere may be refused, but never crash, leak or exhaust the reader.
Each way a hand-made file used to do so has its test here; tests/core/test_file_fuzz.py
fuzzes the files of every built-in index.

Loads whose old behaviour was a segfault or a hang run in a child process, so that a
regression fails the test instead of killing or stalling pytest.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from support.file_fuzz import Saved, pack
from support.helpers import killed_writer
from support.toy_index import Brute

import indexzoo
from indexzoo import (
    IndexFileError,
    persist,
)
from indexzoo.files import temporary_owner

KEYS = np.array([7, 3, 9, 3], dtype=np.uint64)


def saved(tmp_path: Path, name: str = "sorted-array", keys: Any = KEYS) -> Path:
    path = tmp_path / f"{name}.izo"
    indexzoo.create(name, device="cpu").build(keys).save(path)
    return path


def rewritten(src: Path, dest: Path, change: Callable[[Saved], None]) -> Path:
    """A copy of ``src`` changed by ``change``, every checksum, header and table consistent
    with the change (a file that lies well)."""
    s = Saved.parse(src.read_bytes())
    change(s)
    dest.write_bytes(pack(s.members()))
    return dest


def in_child(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``script`` run by a fresh interpreter (its stdout and stderr, and how it ended)."""
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


#: Loads the file, then looks up every key with every out mode; prints what happened.
_LOAD_AND_LOOK_UP = """
import sys
import numpy as np
import indexzoo
try:
    index = indexzoo.load(sys.argv[1])
except indexzoo.IndexFileError as exc:
    print("refused:", exc)
    raise SystemExit(0)
q = np.arange(12, dtype=np.uint64)
for out in ("rowid", "count", "sum", "rowids"):
    index.point(q, out=out)
    index.range(q, q + np.uint64(3), out=out)
print("answered")
"""


# ---------------------------------------------------------------------- out-of-bounds reads
def test_a_rowid_far_past_n_is_refused_before_a_lookup_reads_with_it(tmp_path: Path) -> None:
    """Finding: a sorted-array file whose rowID array held 3,000,000,000 for four keys
    loaded, and point(..., out="sum") then read values[3e9] (a segfault)."""
    def lie(s: Saved) -> None:
        rowids = s.arrays["a1"].copy()  # uint32, the rowID dtype of four keys
        rowids[2] = 3_000_000_000
        s.arrays["a1"] = rowids

    bad = rewritten(saved(tmp_path), tmp_path / "bad.izo", lie)
    run = in_child(_LOAD_AND_LOOK_UP, str(bad))
    assert run.returncode == 0, run.stdout + run.stderr  # no crash
    assert "refused:" in run.stdout and "pairs.rowids (arrays/a1.npy)" in run.stdout, run.stdout
    assert "holds 3000000000 at position 2, outside 0 .. 3" in run.stdout


def test_a_rowid_array_shorter_than_its_keys_is_refused(tmp_path: Path) -> None:
    """Finding: a rowID array shorter than its key array made range(..., out="rowids")
    answer with about two million values read past the end of an array."""
    def lie(s: Saved) -> None:
        s.arrays["a1"] = s.arrays["a1"][:2]

    bad = rewritten(saved(tmp_path), tmp_path / "short.izo", lie)
    run = in_child(_LOAD_AND_LOOK_UP, str(bad))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "refused:" in run.stdout and "has length 2, not n = 4" in run.stdout, run.stdout


@pytest.mark.parametrize("name", ["btree", "warpcore-hash", "rx", "cgrx", "eo-bs", "rtscan"])
def test_an_index_array_pointing_outside_its_target_is_refused(tmp_path: Path, name: str
                                                              ) -> None:
    """The same lie (one element of an array a kernel indexes with, set far out of range)
    in indexes of other layouts."""
    src = saved(tmp_path, name, np.arange(40, dtype=np.uint64) % 17)
    base = Saved.parse(src.read_bytes())
    refused = 0
    for array in base.arrays:
        def lie(s: Saved, array: str = array) -> None:
            a = s.arrays[array].copy()
            if a.size and a.dtype.kind in "iu":
                a.reshape(-1)[0] = np.iinfo(a.dtype).max
            s.arrays[array] = a

        path = rewritten(src, tmp_path / f"lie-{array}.izo", lie)
        try:
            indexzoo.load(path)
        except IndexFileError:
            refused += 1
    assert refused >= 1


def _packed(values: list[bytes], count: int | None = None) -> np.ndarray:
    """A packed text dictionary (KeyMap.packed's layout) of ``values``, its count as given."""
    ends = np.cumsum([len(v) for v in values], dtype=np.int64)
    head = np.concatenate([[len(values) if count is None else count], ends]).astype("<i8")
    return np.concatenate([head.view(np.uint8), np.frombuffer(b"".join(values), np.uint8)])


_TEXT_LIES = {
    "unsorted": (_packed([b"b", b"a", b"a\x00"]), "not sorted and distinct"),
    "a repeated value": (_packed([b"a", b"a", b"a\x00"]), "not sorted and distinct"),
    "a count past the bytes": (_packed([b"a", b"a\x00", b"b"], count=1 << 40),
                               "cannot hold"),
    "ends past the bytes": (_packed([b"a", b"a\x00", b"b"])[:-1], "do not fit"),
    "bytes that are not UTF-8": (_packed([b"a", b"\xff\xfe", b"b"]), "cannot be read"),
    "a float array": (np.zeros(3, np.float64), "dictionary"),
}


@pytest.mark.parametrize("case", sorted(_TEXT_LIES))
def test_a_lying_text_dictionary_is_refused(tmp_path: Path, case: str) -> None:
    """A text index saves its dictionary packed into plain bytes (count, ends, UTF-8); one
    that is not a packing, or not sorted and distinct, is refused, never searched."""
    keys = np.array(["a", "a\x00", "b"], dtype=object)
    src = saved(tmp_path, "sorted-array", keys)
    wrong, says = _TEXT_LIES[case]
    dictionary = next(k for k, a in Saved.parse(src.read_bytes()).arrays.items()
                      if a.dtype == np.uint8)

    def lie(s: Saved) -> None:
        s.arrays[dictionary] = wrong

    with pytest.raises(IndexFileError, match=says):
        indexzoo.load(rewritten(src, tmp_path / "lie.izo", lie))


# ---------------------------------------------------------------------- the reader's resources
def _compressed_metadata(dest: Path, inflated: int) -> None:
    """A zip whose metadata member is deflated: ``inflated`` bytes in a few KB."""
    head = b'{"format": "indexzoo-index", "format_version": 1, "pad": "'
    tail = b'"}'
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunks = [packer.compress(head)]
    block = b"a" * (1 << 20)
    crc = zlib.crc32(head)
    for _ in range(inflated >> 20):
        chunks.append(packer.compress(block))
        crc = zlib.crc32(block, crc)
    chunks.append(packer.compress(tail))
    crc = zlib.crc32(tail, crc)
    chunks.append(packer.flush())
    body = b"".join(chunks)
    size = len(head) + (inflated >> 20 << 20) + len(tail)
    info = zipfile.ZipInfo(persist.META_MEMBER)
    info.compress_type = zipfile.ZIP_DEFLATED
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # a placeholder, then the real sizes by hand
        zf.writestr(info, b"")
    raw = bytearray(buf.getvalue())
    name = persist.META_MEMBER.encode()
    local = raw[:30 + len(name)]
    central_at = raw.index(b"PK\x01\x02")
    central = raw[central_at:central_at + 46 + len(name)]
    for header, at in ((local, 14), (central, 16)):
        header[at:at + 12] = (crc.to_bytes(4, "little") + len(body).to_bytes(4, "little")
                              + size.to_bytes(4, "little"))
    central[42:46] = (0).to_bytes(4, "little")
    end = bytearray(raw[raw.index(b"PK\x05\x06"):])
    cd_offset = len(local) + len(body)
    end[12:16] = len(central).to_bytes(4, "little")
    end[16:20] = cd_offset.to_bytes(4, "little")
    dest.write_bytes(bytes(local) + body + bytes(central) + bytes(end))


def test_a_compressed_metadata_member_is_refused_without_inflating_it(tmp_path: Path) -> None:
    """Finding: a 150 KB file whose compressed metadata inflated to 2 GB cost the reader
    that much memory and 42 s before a KeyError. The metadata must be stored, and its size
    is bounded before it is read: nothing of the bomb is inflated."""
    bomb = tmp_path / "bomb.izo"
    _compressed_metadata(bomb, 256 << 20)
    assert bomb.stat().st_size < 1 << 20
    with zipfile.ZipFile(bomb) as zf:  # a well-formed zip: zipfile itself would inflate it
        assert zf.getinfo(persist.META_MEMBER).file_size > 256 << 20
    tracemalloc.start()
    try:
        with pytest.raises(IndexFileError, match=r"indexzoo\.json is compressed"):
            indexzoo.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_metadata_larger_than_the_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    def big(s: Saved) -> None:
        s.meta["indexzoo_version"] = "x"
        s.meta["params"]["pad"] = "a" * (17 << 20)

    path = rewritten(saved(tmp_path), tmp_path / "big.izo", big)
    with pytest.raises(IndexFileError, match=r"indexzoo.json is \d+ bytes; at most 16777216"):
        indexzoo.load(path)


#: Loads the FIFO named on the command line (a reader that blocked would never print).
_LOAD_FIFO = """
import sys
import indexzoo
try:
    indexzoo.load(sys.argv[1])
except indexzoo.IndexFileError as exc:
    print("refused:", exc)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """Finding: a FIFO at the path made indexzoo.load block forever (no writer ever comes).
    The child's time limit only stops a regression from stalling the run."""
    fifo = tmp_path / "index.izo"
    os.mkfifo(fifo)
    try:
        run = in_child(_LOAD_FIFO, str(fifo), timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("indexzoo.load blocked on a FIFO")
    assert "refused:" in run.stdout and "it is a FIFO (named pipe)" in run.stdout, \
        run.stdout + run.stderr


@pytest.mark.parametrize("what", ["folder", "device"])
def test_a_folder_or_a_device_is_refused(tmp_path: Path, what: str) -> None:
    path = tmp_path if what == "folder" else Path(os.devnull)
    if what == "device" and not Path(os.devnull).exists():
        pytest.skip("no null device")
    with pytest.raises(IndexFileError, match="only regular files are read"):
        indexzoo.load(path)


# ---------------------------------------------------------------------- only IndexFileError
def _text(s: Saved, old: bytes, new: bytes) -> bytes:
    members = s.members()
    name, body = members[0]
    assert old in body
    members[0] = (name, body.replace(old, new, 1))
    return pack(members)


def _meta_cases() -> dict[str, Callable[[Saved], bytes]]:
    def edit(fn: Callable[[dict[str, Any]], None]) -> Callable[[Saved], bytes]:
        def make(s: Saved) -> bytes:
            fn(s.meta)
            return pack(s.members())
        return make

    return {
        # what the issue found: KeyError, AttributeError, RecursionError
        "no index name": edit(lambda m: m.pop("index")),
        "params not a mapping": edit(lambda m: m.update(params=[1, 2])),
        "n a string": edit(lambda m: m.update(n="4")),
        "state a list": edit(lambda m: m.update(state=[])),
        "nested 100000 deep": lambda s: _text(s, b'"refuse"', b"[" * 100_000 + b"]" * 100_000),
        # and more of the kind
        "an unknown top-level key": edit(lambda m: m.update(extra=1)),
        "n past 2^63": edit(lambda m: m.update(n=10 ** 30)),
        "built a string": edit(lambda m: m.update(built="yes")),
        "unbuilt with a state": edit(lambda m: m.update(built=False)),
        "state_version a string": edit(lambda m: m.update(state_version="1")),
        "key maps not a tuple": edit(lambda m: m["base"].update(keymaps=5)),
        "a record of a class the code does not declare": edit(
            lambda m: m["state"].update(pairs={"$record": "os.system", "fields": {}})),
        "a record with a missing field": edit(
            lambda m: m["state"]["pairs"]["fields"].pop("peak_bytes")),
        "a view outside its array": edit(lambda m: m["state"]["pairs"].update(
            fields={**m["state"]["pairs"]["fields"],
                    "keys": {"$view": "a0", "offset": 8, "shape": [4], "strides": [8],
                             "dtype": "<u8"}})),
        "a view of 2^40 elements with stride 0": edit(lambda m: m["state"]["pairs"].update(
            fields={**m["state"]["pairs"]["fields"],
                    "keys": {"$view": "a0", "offset": 0, "shape": [1 << 40], "strides": [0],
                             "dtype": "<u8"}})),
        "an array that is not in the file": edit(
            lambda m: m["state"]["pairs"]["fields"].update(keys={"$array": "a9"})),
        "a dict node of a number": edit(lambda m: m["state"].update(pairs={"$dict": 7})),
        "an unknown marker": edit(lambda m: m["state"].update(pairs={"$pickle": "x"})),
        "a float that is not hex": edit(lambda m: m["base"].update(n_rows={"$float": "zz"})),
        "a scalar of a datetime dtype": edit(lambda m: m["base"].update(
            n_rows={"$scalar": "<M8[ns]", "v": 4})),
        "a base field set from the state": edit(lambda m: m["state"].update(n=1)),
        "a private name in the state": edit(lambda m: m["state"].update(_sealed=True)),
        "an object dtype": edit(lambda m: m["base"]["keymaps"]["$tuple"][0]["fields"].update(
            source={"$dtype": "|O"})),
        "a key given twice": lambda s: _text(s, b'"built": true', b'"built": true, "built": true'),
        "NaN": lambda s: _text(s, b'"n": 4', b'"n": NaN'),
        "not UTF-8": lambda s: _text(s, b'"refuse"', b'"\xff\xfe"'),
        "an int of 5000 digits": lambda s: _text(s, b'"n": 4', b'"n": ' + b"9" * 5000),
    }


@pytest.mark.parametrize("case", sorted(_meta_cases()))
def test_hand_made_metadata_is_refused_with_an_index_file_error(tmp_path: Path, case: str
                                                                ) -> None:
    """Finding: hand-made metadata raised KeyError, AttributeError and RecursionError.
    Every problem of the metadata is now one IndexFileError of one line."""
    s = Saved.parse(saved(tmp_path).read_bytes())
    path = tmp_path / "made.izo"
    path.write_bytes(_meta_cases()[case](s))
    with pytest.raises(IndexFileError) as got:
        indexzoo.load(path)
    assert "\n" not in str(got.value)


def test_every_single_bit_flip_of_a_file_is_refused_or_harmless(tmp_path: Path) -> None:
    """Finding: 307 of 30,694 bit-flipped files raised TokenError, NotImplementedError and
    the like. One bit of every byte of a file flipped in turn: each load raises
    IndexFileError or gives an index answering as the original (a flip in a field nothing
    reads: a timestamp, an attribute byte)."""
    src = saved(tmp_path)
    data = src.read_bytes()
    q = np.arange(12, dtype=np.uint64)
    want = indexzoo.load(src).point(q, out="rowids").rowids.tolist()
    rng = np.random.default_rng(52)
    path = tmp_path / "flipped.izo"
    outcomes = {"refused": 0, "equal": 0}
    for at in range(len(data)):
        b = bytearray(data)
        b[at] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(b))
        try:
            index = indexzoo.load(path)
        except IndexFileError:
            outcomes["refused"] += 1
            continue
        assert index.point(q, out="rowids").rowids.tolist() == want, f"byte {at}"
        outcomes["equal"] += 1
    assert outcomes["refused"] > len(data) // 2


# ---------------------------------------------------------------------- what saves leave
_SLOW_SAVE = """
import sys, time
import numpy as np
import numpy.lib.format as fmt
import indexzoo

write = fmt.write_array

def slow(*args, **kwargs):
    write(*args, **kwargs)
    print("writing", flush=True)
    time.sleep(600)

fmt.write_array = slow
index = indexzoo.create("sorted-array", device="cpu").build(np.arange(1000, dtype=np.uint64))
index.save(sys.argv[1])
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("then", ["save", "load"])
def test_a_save_killed_with_sigkill_leaves_a_temporary_the_next_save_or_load_removes(
        tmp_path: Path, then: str) -> None:
    """Finding: kill -9 during a save left hidden temporaries (up to the index's size) that
    nothing removed. The temporary names its writer; the next save or load in the folder
    removes it once its writer is gone."""
    good = saved(tmp_path)
    pid = killed_writer(_SLOW_SAVE, str(tmp_path / "index.izo"))  # a save killed mid-write
    left = [p for p in tmp_path.iterdir() if p != good]
    assert len(left) == 1 and left[0].name.startswith(".index.izo.indexzoo-")
    owner = temporary_owner(left[0].name)
    assert owner is not None and owner[1] == pid
    if then == "save":
        saved(tmp_path)
    else:
        indexzoo.load(good)
    assert list(tmp_path.iterdir()) == [good]


# ---------------------------------------------------------------------- the schema rule
class NoSchemaIndex(Brute):
    """A third-party index that declares no state schema."""

    name: ClassVar[str] = "no-schema"


def test_files_of_a_plugin_without_a_schema_are_refused_but_its_pickles_load(
        tmp_path: Path) -> None:
    import pickle

    index = NoSchemaIndex(device="cpu").build(KEYS)
    index.save(tmp_path / "x.izo")
    with pytest.raises(IndexFileError, match="declares no state schema"):
        NoSchemaIndex.from_saved(persist.read(tmp_path / "x.izo"))
    back = pickle.loads(pickle.dumps(index))
    assert back.point(np.array([3], dtype=np.uint64), out="count").count.tolist() == [2]


def test_every_built_in_index_declares_a_state_schema() -> None:
    missing = [name for name, cls in indexzoo.available().items()
               if getattr(cls, "state_schema", None) is None]
    assert missing == []


@pytest.mark.parametrize("bad", ["n +", "len(3)", "__import__('os')", "n.__class__",
                                 "lambda: 1", "n if n else 1"])
def test_a_schema_expression_outside_the_language_fails_when_it_is_declared(bad: str) -> None:
    with pytest.raises(ValueError, match=r"schema (expression|path)|takes a path"):
        persist.Array("keys", shape=(bad,))


def test_a_load_error_names_the_value_its_member_and_the_problem_in_one_line(
        tmp_path: Path) -> None:
    def lie(s: Saved) -> None:
        keys = s.arrays["a0"].copy()
        keys[0], keys[-1] = keys[-1], keys[0]
        s.arrays["a0"] = keys

    path = rewritten(saved(tmp_path), tmp_path / "order.izo", lie)
    with pytest.raises(IndexFileError) as got:
        indexzoo.load(path)
    assert str(got.value) == (f"{path}: state.pairs.keys (arrays/a0.npy): decreases at "
                              "position 1 (9 then 3); it must be nondecreasing")
