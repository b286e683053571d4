"""Saved indexes: ``index.save(path)``, ``indexzoo.load(path)``, pickling and deep copies.

Every built-in index's round trips are certified by the conformance group ``persistence``
(tests/conformance/test_builtin_conformance.py); these tests guard the file format itself: what
is refused, and how.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import indexzoo
from indexzoo import (
    BuildState,
    Capabilities,
    ConfigError,
    Footprint,
    GpuIndex,
    IndexFileError,
    IndexParams,
    persist,
)
from indexzoo.devices import cuda_status

KEYS = np.array([7, 3, 7, 9, 1 << 40, 0], dtype=np.uint64)
LOOKUPS = np.array([7, 8, 9, 0, 1 << 40], dtype=np.uint64)


def saved_index(tmp_path: Path, name: str = "sorted-array") -> Path:
    path = tmp_path / "index.izo"
    indexzoo.create(name, device="cpu").build(KEYS).save(path)
    return path


def rewrite_meta(src: Path, dest: Path, change: Any) -> None:
    """A copy of a saved index whose metadata went through ``change(meta)``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == persist.META_MEMBER:
                meta = json.loads(data)
                change(meta)
                data = json.dumps(meta).encode()
            zout.writestr(info.filename, data)


def counts(index: GpuIndex) -> list[int]:
    return index.point(LOOKUPS, out="count").to_host().count.tolist()


# ---------------------------------------------------------------------- round trips
def test_a_saved_index_loads_and_answers_the_same(tmp_path: Path) -> None:
    path = saved_index(tmp_path)
    index = indexzoo.load(path)
    assert (index.name, index.device, len(index)) == ("sorted-array", "cpu", 6)
    assert counts(index) == [2, 0, 1, 1, 1]


def test_keys_through_a_key_map_come_back_with_their_dtype(tmp_path: Path) -> None:
    keys = np.array([b"pear", b"apple", b"fig"], dtype="S5")
    indexzoo.create("btree", device="cpu").build(keys).save(tmp_path / "s.izo")
    index = indexzoo.load(tmp_path / "s.izo")
    assert index.key_dtype == np.dtype("S5")
    assert index.point(np.array([b"fig", b"kiwi"]), out="count").count.tolist() == [1, 0]


def test_text_keys_keep_their_dictionary_and_skipped_nulls_stay_skipped(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    words = indexzoo.create("sorted-array", device="cpu").build(
        np.array(["pear", "apple", "fig", "apple"]))
    words.save(tmp_path / "w.izo")
    back = indexzoo.load(tmp_path / "w.izo")
    assert isinstance(back.state.keymap.dictionary, np.ndarray)  # on the host, as built
    assert back.point(np.array(["apple", "kiwi"]), out="count").count.tolist() == [2, 0]
    nulls = indexzoo.create("btree", device="cpu").build(pd.Series([1, None, 3, 1], dtype="Int64"),
                                                         nulls="skip")
    nulls.save(tmp_path / "n.izo")
    back = indexzoo.load(tmp_path / "n.izo")
    assert back.state.nulls == "skip" and len(back) == 4
    assert sorted(back.point(np.array([1]), out="rowids").to_host().rowids.tolist()) == [0, 3]


def test_an_unbuilt_index_saves_and_loads_unbuilt_with_its_params(tmp_path: Path) -> None:
    indexzoo.create("btree", device="cpu", node_width=8).save(tmp_path / "b.izo")
    index = indexzoo.load(tmp_path / "b.izo")
    assert not index.is_built and index.params.node_width == 8


def test_a_file_saved_from_the_gpu_loads_onto_the_gpu_or_without_one_onto_the_cpu(
        tmp_path: Path) -> None:
    # a GPU's file differs only in its metadata's device (arrays are saved from the host)
    src = saved_index(tmp_path)
    rewrite_meta(src, tmp_path / "gpu.izo", lambda m: m.update(device="cuda"))
    index = indexzoo.load(tmp_path / "gpu.izo")
    expected = "cuda" if cuda_status()[0] else "cpu"
    assert index.device == expected and counts(index) == [2, 0, 1, 1, 1]


def test_views_stay_views_and_are_saved_once(tmp_path: Path) -> None:
    index = indexzoo.create("warpcore-hash", device="cpu", layout="aos").build(KEYS)
    index.save(tmp_path / "h.izo")
    st = indexzoo.load(tmp_path / "h.izo").state
    ht = st.ht
    assert np.shares_memory(ht.tkeys, ht.table) and np.shares_memory(ht.tvals, ht.table)
    held = ht.table.nbytes + ht.overflow.nbytes + st.oob.nbytes
    assert sum(a.nbytes for a in persist.read(tmp_path / "h.izo").arrays.values()) == held


def test_save_replaces_the_file_in_one_rename_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = saved_index(tmp_path)
    indexzoo.create("btree", device="cpu").build(KEYS[:2]).save(path)
    assert indexzoo.load(path).name == "btree"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.izo"]


def _child_counts(index: GpuIndex) -> list[int]:
    return counts(index)


def test_an_index_travels_to_a_spawned_process_and_answers_there() -> None:
    index = indexzoo.create("lightweight", device="cpu").build(KEYS)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_child_counts, (index,)) == [2, 0, 1, 1, 1]


def test_lightweight_presets_are_importable_classes_that_pickle() -> None:
    from indexzoo.plugins.lightweight import PRESETS

    for name, cls in PRESETS.items():
        index = indexzoo.create(name, device="cpu")
        assert type(index) is cls and cls.name == name
        assert type(pickle.loads(pickle.dumps(index))) is cls


# ---------------------------------------------------------------------- refused files
def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    path = saved_index(tmp_path)
    data = path.read_bytes()
    for keep in (len(data) - 10, len(data) // 2, 40):
        cut = tmp_path / "cut.izo"
        cut.write_bytes(data[:keep])
        with pytest.raises(IndexFileError, match="truncated or damaged"):
            indexzoo.load(cut)


def test_a_corrupted_array_is_refused_by_its_checksum(tmp_path: Path) -> None:
    path = saved_index(tmp_path)
    data = bytearray(path.read_bytes())
    at = bytes(data).index(np.sort(KEYS).tobytes())  # the sorted keys' bytes
    data[at + 3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="checksum mismatch"):
        indexzoo.load(path)


def test_a_newer_format_version_is_refused_naming_both_versions(tmp_path: Path) -> None:
    newer = tmp_path / "newer.izo"
    rewrite_meta(saved_index(tmp_path), newer,
                 lambda m: m.update(format_version=persist.FORMAT_VERSION + 1))
    with pytest.raises(IndexFileError, match=f"format version {persist.FORMAT_VERSION + 1}.*"
                                             "upgrade indexzoo"):
        indexzoo.load(newer)


def test_another_state_layout_of_the_plugin_is_refused(tmp_path: Path) -> None:
    older = tmp_path / "older.izo"
    rewrite_meta(saved_index(tmp_path), older, lambda m: m.update(state_version=0))
    with pytest.raises(IndexFileError, match=r"layout version 0.*build the index again"):
        indexzoo.load(older)


def test_an_index_that_is_not_installed_is_a_config_error_naming_the_file(tmp_path: Path
                                                                           ) -> None:
    other = tmp_path / "other.izo"
    rewrite_meta(saved_index(tmp_path), other, lambda m: m.update(index="no-such-index"))
    with pytest.raises(ConfigError, match=r"other\.izo: holds index 'no-such-index'"):
        indexzoo.load(other)


@pytest.mark.parametrize("content", [b"hello, world\n", b""])
def test_a_file_that_is_no_saved_index_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.izo"
    path.write_bytes(content)
    with pytest.raises(IndexFileError, match="not a saved indexzoo index"):
        indexzoo.load(path)


@pytest.mark.parametrize("path", [None, 0, b"x.izo"])
def test_load_and_save_of_anything_but_a_path_are_config_errors(path: Any) -> None:
    """An int is never taken as an open file descriptor (0: standard input)."""
    with pytest.raises(ConfigError, match=r"^indexzoo.load: expected a path \(str or os.PathLike\)"):
        indexzoo.load(path)
    index = indexzoo.create("sorted-array", device="cpu").build(KEYS)
    with pytest.raises(ConfigError, match=r"^index.save: expected a path \(str or os.PathLike\)"):
        index.save(path)


def test_a_plain_npz_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "x.npz", keys=KEYS)
    with pytest.raises(IndexFileError, match="not a saved indexzoo index"):
        indexzoo.load(tmp_path / "x.npz")


class Planted:
    """Unpickling this writes a file: the test shows it never happens."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.write_text, (Path(self.marker), "executed"))


def test_a_pickled_object_in_a_file_is_never_executed(tmp_path: Path) -> None:
    src = saved_index(tmp_path)
    marker = tmp_path / "marker"
    bad = tmp_path / "bad.izo"
    planted = np.array([Planted(str(marker))], dtype=object)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if info.filename.endswith(".npy"):
                with zout.open(info.filename, "w") as member:
                    np.lib.format.write_array(member, planted, allow_pickle=True)
            else:
                zout.writestr(info.filename, zin.read(info.filename))
    with pytest.raises(IndexFileError, match="refused"):
        indexzoo.load(bad)
    assert not marker.exists()


# ---------------------------------------------------------------------- the plugin hooks
class HookState(BuildState):
    keys: Any
    square: Any  # a function: not saved, made again on load


def _square(x: Any) -> Any:
    return x * x


class HookIndex(GpuIndex[HookState]):
    """A plugin whose state holds a function: saved through its hooks."""

    name: ClassVar[str] = "hook-test"
    Params: ClassVar[type[IndexParams]] = IndexParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True,
                                                        out_modes=("count",))
    plugin_api: ClassVar[str] = "2.0"
    points_as_ranges: ClassVar[bool] = True

    def _build(self, st: HookState, keys: Any) -> None:
        st.keys, st.square = keys, _square

    def _footprint(self, st: HookState) -> Footprint:
        return Footprint(breakdown={"keys": int(st.keys.nbytes)})

    def _range_count(self, st: HookState, lo: Any, hi: Any) -> Any:
        k = st.keys
        return ((k[None, :] >= lo[:, None]) & (k[None, :] <= hi[:, None])).sum(1).astype(
            st.rowid_dtype)


class HookedIndex(HookIndex):
    #: its files load: what it saves is declared (docs/plugin-authors.md, "Saved state")
    state_schema: ClassVar[persist.StateSchema] = persist.StateSchema(
        persist.Array("keys", dtype="native", shape=("n",)))

    def _save_state(self, st: HookState) -> dict[str, Any]:
        return {"keys": st.keys}

    def _load_state(self, st: HookState, saved: dict[str, Any]) -> None:
        st.keys, st.square = saved["keys"], _square


def test_a_state_the_format_cannot_hold_is_refused_at_save_naming_the_hooks(tmp_path: Path
                                                                            ) -> None:
    index = HookIndex(device="cpu").build(KEYS)
    with pytest.raises(IndexFileError, match=r"state\.square: it holds a function.*_save_state"):
        index.save(tmp_path / "h.izo")
    assert list(tmp_path.iterdir()) == []


def test_the_hooks_save_and_rebuild_what_the_format_cannot_hold(tmp_path: Path) -> None:
    index = HookedIndex(device="cpu").build(KEYS)
    index.save(tmp_path / "h.izo")
    back = HookedIndex.from_saved(persist.read(tmp_path / "h.izo"))
    assert back.state.square is _square and counts(back) == counts(index)
    assert counts(pickle.loads(pickle.dumps(index))) == counts(index)


@pytest.mark.gpu
def test_a_gpu_index_loads_onto_the_cpu_and_back(tmp_path: Path) -> None:
    gpu = indexzoo.create("sorted-array", device="cuda").build(KEYS)
    gpu.save(tmp_path / "g.izo")
    host = indexzoo.load(tmp_path / "g.izo", device="cpu")
    assert host.device == "cpu" and counts(host) == counts(gpu)
    host.save(tmp_path / "c.izo")
    again = indexzoo.load(tmp_path / "c.izo", device="cuda")
    assert again.device == "cuda" and counts(again) == counts(gpu)
    assert indexzoo.load(tmp_path / "g.izo").device == "cuda"  # the saved device by default


@pytest.mark.gpu
def test_a_load_onto_the_gpu_streams_many_chunks_into_device_arrays(tmp_path: Path) -> None:
    # 2^22 keys: 32 MiB of keys, more chunks than the pinned staging buffers, each reused
    keys = np.random.default_rng(5).permutation(1 << 22).astype(np.uint64) * np.uint64(7)
    host = indexzoo.create("sorted-array", device="cpu").build(keys)
    host.save(tmp_path / "big.izo")
    saved = persist.read(tmp_path / "big.izo", "cuda")
    assert all(type(a).__module__.startswith("cupy") for a in saved.arrays.values())
    assert all(np.array_equal(a.get(), b) for a, b in zip(
        saved.arrays.values(), persist.read(tmp_path / "big.izo").arrays.values(), strict=True))
    gpu = indexzoo.load(tmp_path / "big.izo", device="cuda")
    probe = np.concatenate([keys[::4097], keys[::8191] + np.uint64(1)])
    assert np.array_equal(gpu.point(probe, out="count").to_host().count,
                          host.point(probe, out="count").to_host().count)


@pytest.mark.gpu
def test_a_damaged_file_is_refused_on_the_way_to_the_gpu(tmp_path: Path) -> None:
    path = saved_index(tmp_path)
    data = bytearray(path.read_bytes())
    (tmp_path / "cut.izo").write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(IndexFileError, match="truncated or damaged"):
        indexzoo.load(tmp_path / "cut.izo", device="cuda")
    at = bytes(data).index(np.sort(KEYS).tobytes())  # the sorted keys' bytes
    data[at + 3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="checksum mismatch"):
        indexzoo.load(path, device="cuda")


def test_a_value_kind_named_by_a_string_is_the_class_it_names() -> None:
    """``Value(path, "module:Class")``: the class is imported when a file is checked (an index
    declares its schema without importing the module of its records)."""
    import datetime

    schema = persist.StateSchema(persist.Value("when", "datetime:date"))
    ctx = persist.LoadContext(source="f.izo", n=0, n_rows=0, dims=1, native=np.dtype("u4"),
                              rowid=np.dtype("u4"), params=None, device="cpu")
    schema.check({"when": datetime.date(2026, 1, 1)}, ctx)
    with pytest.raises(IndexFileError, match=r"state\.when: is a int \(3\), not a date"):
        schema.check({"when": 3}, ctx)
    with pytest.raises(ValueError, match="'module:Class'"):
        persist.Value("when", "datetime.date")
