"""The prepared path of ``GpuIndex.range``: bounds that every check of the general path would
pass unchanged (two C-contiguous arrays of the device's type and the native dtype, (Q,) for a
one-column index or (Q, d) for a multi-column one, one chunk, bitmaps too small for the memory
check) go to the plugin's hook, or its prepared form (``_prepared_range``), without the
general path's steps; every other call takes the general path; both give the same answers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from support.helpers import general_path_calls

import indexzoo
from indexzoo import Operation
from indexzoo.devices import array_module, to_device, to_numpy
from indexzoo.operations import operation

ORDERED = ["sorted-array", "btree", "searchsorted", "lightweight", "rx"]
MULTI = ["fused-scan", "rtscan", "rtscan-direct"]


def _keys(n: int = 1500, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 1 << 40, n).astype(np.uint64)
    keys[10:20] = keys[0]  # duplicates
    return keys


def _bounds(keys: np.ndarray, n: int = 40, seed: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lo = rng.choice(keys, n)
    hi = lo + rng.integers(0, 1 << 38, n).astype(np.uint64)
    hi[::7] = lo[::7] - np.uint64(1)  # empty ranges: lo > hi
    return lo, hi


def _table(n: int = 700, d: int = 3, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 50, (n, d)).astype(np.uint32)


def _boxes(d: int = 3, n: int = 9, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lo = rng.integers(0, 30, (n, d)).astype(np.uint32)
    hi = (lo + rng.integers(0, 25, (n, d))).astype(np.uint32)
    hi[2, 1] = lo[2, 1] - 1  # an empty range in one column
    return lo, hi


def _count(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.array([int(((keys >= a) & (keys <= b)).sum()) for a, b in zip(lo, hi, strict=True)])


def _bitmap(table: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    match = ((table[None] >= lo[:, None]) & (table[None] <= hi[:, None])).all(axis=2)
    bits = np.zeros((lo.shape[0], -(-table.shape[0] // 32) * 32), bool)
    bits[:, :table.shape[0]] = match
    return np.packbits(bits, axis=1, bitorder="little").view("<u4")


def _general_only(monkeypatch: pytest.MonkeyPatch, ix: Any) -> list[str]:
    """Record every call that reaches the general path (``_lookup``, the pipeline)."""
    return general_path_calls(monkeypatch, ix, with_out=True)


@pytest.mark.parametrize("name", ORDERED)
def test_native_one_column_bounds_skip_the_general_path_in_the_modes_the_plugin_answers(
        name: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, ix = _keys(), indexzoo.create(name, device=device)
    ix.build(to_device(keys, device))
    lo, hi = _bounds(keys)
    want = _count(keys, lo, hi)
    seen = _general_only(monkeypatch, ix)
    routes = ix._resolution.routes
    own = {m for m in ("rowid", "count", "sum") if m in ix.capabilities.out_modes
           and not routes[operation("range", m)].derived}
    dlo, dhi = to_device(lo, device), to_device(hi, device)
    got = ix.range(dlo, dhi, out="count")
    np.testing.assert_array_equal(to_numpy(got.count).astype(np.int64), want)
    rowid = to_numpy(ix.range(dlo, dhi, out="rowid").rowid).astype(np.int64)
    hit = want > 0
    assert (rowid[~hit] == int(ix.miss)).all()
    assert ((keys[rowid[hit]] >= lo[hit]) & (keys[rowid[hit]] <= hi[hit])).all()
    ix.range(dlo, dhi, out="sum")
    asked = ["count", "rowid", "sum"]
    assert seen == [f"range {m}" for m in asked if m not in own], name
    assert "count" in own and ix.state._prepared["range count"] is not None


@pytest.mark.parametrize("name", MULTI)
def test_native_boxes_skip_the_general_path_and_equal_it(
        name: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table()
    ix = indexzoo.create(name, device=device).build(to_device(table, device))
    lo, hi = _boxes()
    general = ix.range(lo.astype(np.int64), hi.astype(np.int64), out="bitmap")  # key map
    seen = _general_only(monkeypatch, ix)
    got = ix.range(to_device(lo, device), to_device(hi, device), out="bitmap")
    assert seen == [] and got.out == "bitmap" and got.device == device
    want = _bitmap(table, lo, hi)
    np.testing.assert_array_equal(to_numpy(got.bitmap), want)
    np.testing.assert_array_equal(to_numpy(general.bitmap), want)
    assert got.count is None and got.rowids is None


@pytest.mark.parametrize("bounds", ["list", "int64", "uint64", "strided", "fortran", "fortran-lo",
                                    "one-d",
                                    "empty", "other-shapes", "host-on-gpu"])
def test_other_bounds_take_the_general_path_with_the_same_answers(
        bounds: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table()
    ix = indexzoo.create("fused-scan", device=device).build(to_device(table, device))
    lo, hi = _boxes()
    seen = _general_only(monkeypatch, ix)
    if bounds in ("other-shapes", "one-d"):  # the general path's errors
        a, b = (lo, hi[:4]) if bounds == "other-shapes" else (lo[0], hi[0])
        with pytest.raises(indexzoo.InvalidInput, match=r"length|column"):
            ix.range(to_device(a, device), to_device(b, device), out="bitmap")
        assert seen == ["range bitmap"]
        return
    xp = array_module(device)
    dlo, dhi = to_device(lo, device), to_device(hi, device)
    given: Any = {  # (the layouts made where the bounds are: a copy to the GPU is contiguous)
        "list": (lo.T.tolist(), hi.T.tolist()), "int64": (lo.astype(np.int64), hi.astype(np.int64)),
        "uint64": (lo.astype(np.uint64), hi.astype(np.uint64)),
        "strided": (xp.repeat(dlo, 2, axis=0)[::2], xp.repeat(dhi, 2, axis=0)[::2]),
        "fortran": (xp.asfortranarray(dlo), xp.asfortranarray(dhi)),
        "fortran-lo": (xp.asfortranarray(dlo), dhi),
        "empty": (lo[:0], hi[:0]), "host-on-gpu": (lo, hi),
    }[bounds]
    if bounds in ("int64", "uint64", "empty"):
        given = tuple(to_device(b, device) for b in given)
    want = _bitmap(table, lo, hi)
    if bounds == "empty":
        want = want[:0]
    got = ix.range(*given, out="bitmap")
    np.testing.assert_array_equal(to_numpy(got.bitmap).reshape(want.shape), want)
    general = not (bounds == "host-on-gpu" and device == "cpu")
    assert seen == (["range bitmap"] if general else [])


def test_more_ranges_than_max_batch_take_the_general_path(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _keys()
    ix = indexzoo.create("sorted-array", params={"max_batch": 16}, device=device)
    ix.build(to_device(keys, device))
    lo, hi = _bounds(keys)
    seen = _general_only(monkeypatch, ix)
    for n in (16, 17):
        got = ix.range(to_device(lo[:n], device), to_device(hi[:n], device), out="count")
        np.testing.assert_array_equal(to_numpy(got.count).astype(np.int64),
                                      _count(keys, lo[:n], hi[:n]))
    assert seen == ["range count"]


def test_bitmaps_that_need_the_memory_check_take_the_general_path(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prepared path takes only bitmaps below ``BITMAP_CHECK_FROM`` bytes: a larger
    request is checked against the free memory (and refused) before any work."""
    table = _table()
    ix = indexzoo.create("fused-scan", device=device).build(to_device(table, device))
    words = -(-table.shape[0] // 32)
    monkeypatch.setattr("indexzoo.lookup.BITMAP_CHECK_FROM", 4 * words * 5)  # 5 queries
    lo, hi = _boxes()
    seen = _general_only(monkeypatch, ix)
    for n in (4, 5):
        got = ix.range(to_device(lo[:n], device), to_device(hi[:n], device), out="bitmap")
        np.testing.assert_array_equal(to_numpy(got.bitmap), _bitmap(table, lo[:n], hi[:n]))
    assert seen == ["range bitmap"]


def test_a_rebuild_and_new_params_prepare_again(device: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _keys(seed=1), _keys(seed=2)
    ix = indexzoo.create("sorted-array", device=device)
    ix.build(to_device(first, device))
    lo, hi = _bounds(second)
    dlo, dhi = to_device(lo, device), to_device(hi, device)
    ix.range(dlo, dhi)
    ix.build(to_device(second, device))
    np.testing.assert_array_equal(to_numpy(ix.range(dlo, dhi).count).astype(np.int64),
                                  _count(second, lo, hi))
    ix.params = ix.params.model_copy(update={"max_batch": 8})
    seen = _general_only(monkeypatch, ix)
    np.testing.assert_array_equal(to_numpy(ix.range(dlo, dhi).count).astype(np.int64),
                                  _count(second, lo, hi))
    assert seen == ["range count"]


def test_keys_that_need_the_key_map_are_never_prepared(device: str) -> None:
    keys = np.arange(-50, 50, dtype=np.int64)
    ix = indexzoo.create("sorted-array", device=device).build(to_device(keys, device))
    lo, hi = np.array([-10, 5], np.int64), np.array([-1, 4], np.int64)
    got = ix.range(to_device(lo, device), to_device(hi, device))
    np.testing.assert_array_equal(to_numpy(got.count).astype(np.int64), [10, 0])
    assert ix.state._prepared["range count"] is None


def test_an_empty_build_answers_from_the_general_path(device: str) -> None:
    ix = indexzoo.create("sorted-array", device=device)
    ix.build(to_device(np.zeros(0, np.uint64), device))
    got = ix.range(to_device(np.zeros(3, np.uint64), device),
                   to_device(np.ones(3, np.uint64), device))
    assert (to_numpy(got.count) == 0).all()
    assert ix.state._prepared["range count"] is None


class _Counting(indexzoo.GpuIndex[indexzoo.BuildState]):
    """A one-column index whose range count is a scan, with a prepared form that counts its
    own calls (a subclass below overrides the hook and not the prepared form)."""

    name: ClassVar[str] = "test-prepared-range"
    Params: ClassVar[type[indexzoo.IndexParams]] = indexzoo.IndexParams
    capabilities: ClassVar[indexzoo.Capabilities] = indexzoo.Capabilities(
        point=False, range=True, out_modes=("count",))
    plugin_api: ClassVar[str] = "2.1"
    prepared_calls: ClassVar[list[int]] = []

    def _build(self, st: Any, keys: Any) -> None:
        st.keys = keys

    def _footprint(self, st: Any) -> indexzoo.Footprint:
        return indexzoo.Footprint(breakdown={"keys": int(st.keys.nbytes)})

    def _range_count(self, st: Any, lo: Any, hi: Any) -> Any:
        k = st.keys
        return ((k[None] >= lo[:, None]) & (k[None] <= hi[:, None])).sum(axis=1)

    def _prepared_range(self, st: Any, op: Operation) -> Any:
        def answer(lo: Any, hi: Any) -> Any:
            type(self).prepared_calls.append(int(lo.shape[0]))
            return self._range_count(st, lo, hi)

        return answer


class _Overriding(_Counting):
    name: ClassVar[str] = "test-prepared-range-override"

    def _range_count(self, st: Any, lo: Any, hi: Any) -> Any:
        return super()._range_count(st, lo, hi) * 0 + 7


def test_the_plugins_prepared_form_answers_and_an_overriding_subclass_gets_its_hook() -> None:
    keys = np.arange(100, dtype=np.uint64)
    lo, hi = np.array([3, 50], np.uint64), np.array([9, 40], np.uint64)
    _Counting.prepared_calls.clear()
    got = _Counting(device="cpu").build(keys).range(lo, hi)
    np.testing.assert_array_equal(got.count, [7, 0])
    assert _Counting.prepared_calls == [2]
    got = _Overriding(device="cpu").build(keys).range(lo, hi)
    np.testing.assert_array_equal(got.count, [7, 7])
    assert _Counting.prepared_calls == [2]
