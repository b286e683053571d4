"""The GpuIndex contract as the base class enforces it for every plugin: validation with the
specific error, nothing damaged after an error, results derived from ``rowids``, chunking,
empty indexes and lookups outside the key dtype."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from support.helpers import assert_matches, reference
from support.toy_index import Brute, KeysState

import indexzoo
from indexzoo import (
    OUT_MODES,
    BuildState,
    Capabilities,
    Footprint,
    GpuIndex,
    InvalidInput,
    NotBuilt,
    Unsupported,
)
from indexzoo.state import rowid_dtype_for

ORDERED = ["sorted-array", "searchsorted"]


class RowidsOnly(Brute):
    """A minimal plugin with only the rowids hooks: the base derives every other mode."""

    name: ClassVar[str] = "rowids-only"
    points_as_ranges: ClassVar[bool] = False

    def _point_rowids(self, st: KeysState, q: Any) -> tuple[Any, Any]:
        return self._range_rowids(st, q, q)


def make(name: str, device: str, **params: Any) -> GpuIndex:
    if name == "rowids-only":
        return RowidsOnly(params, device=device)
    return indexzoo.create(name, device=device, **params)


KEYS = np.array([10, 3, 7, 3, 99, 10, 10, 0, 2**40, 2**64 - 1], dtype=np.uint64)
Q = np.array([10, 3, 4, 0, 2**64 - 1, 2**40, 5, 100, 99], dtype=np.uint64)
LO = np.array([0, 3, 11, 8, 2**64 - 1, 100, 9], dtype=np.uint64)
HI = np.array([10, 3, 2**64 - 1, 7, 2**64 - 1, 99, 2**41], dtype=np.uint64)


def all_modes(index: GpuIndex, kind: str, *args: Any) -> dict[str, Any]:
    fn = index.point if kind == "point" else index.range
    return {m: fn(*args, out=m) for m in OUT_MODES}


def check_answers(index: GpuIndex, keys: np.ndarray = KEYS,
                  values: np.ndarray | None = None) -> None:
    assert_matches(all_modes(index, "point", Q), reference(keys, Q, Q, values), int(index.miss))
    assert_matches(all_modes(index, "range", LO, HI), reference(keys, LO, HI, values),
                   int(index.miss))


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
def test_every_out_mode_matches_the_reference(name: str, device: str) -> None:
    check_answers(make(name, device).build(KEYS))


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
def test_sum_adds_values_modulo_2_64(name: str, device: str) -> None:
    values = np.array([2**64 - 1, 5, 1, 2, 3, 4, 2**63, 6, 7, 8], dtype=np.uint64)
    index = make(name, device).build(KEYS, values)
    check_answers(index, values=values)
    s = index.point(np.array([10], dtype=np.uint64), out="sum").to_host().sum
    assert int(s[0]) == (2**64 - 1 + 4 + 2**63) % 2**64


def test_signed_values_wrap_as_twos_complement(device: str) -> None:
    index = make("sorted-array", device).build([1, 1], values=np.array([-1, 3], dtype=np.int64))
    assert int(index.point([1], out="sum").to_host().sum[0]) == 2


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
def test_chunked_batches_give_the_same_answers(name: str, device: str) -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 50, 300).astype(np.uint32)
    q = rng.integers(0, 60, 101).astype(np.uint32)
    lo = rng.integers(0, 60, 101).astype(np.uint32)
    hi = lo + rng.integers(0, 8, 101).astype(np.uint32)
    whole, chunked = make(name, device).build(keys), make(name, device, max_batch=7).build(keys)
    for m in OUT_MODES:
        a, b = whole.point(q, out=m).to_host(), chunked.point(q, out=m).to_host()
        c, d = whole.range(lo, hi, out=m).to_host(), chunked.range(lo, hi, out=m).to_host()
        for x, y in ((a, b), (c, d)):
            for attr in ("rowid", "count", "sum", "offsets", "rowids"):
                if getattr(x, attr) is not None:
                    np.testing.assert_array_equal(getattr(x, attr), getattr(y, attr))


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
def test_empty_index_misses_everything(name: str, device: str) -> None:
    index = make(name, device).build(np.zeros(0, dtype=np.uint64))
    assert len(index) == 0
    r = index.point(Q, out="rowid").to_host()
    assert (r.rowid == index.miss).all()
    assert (index.range(LO, HI, out="count").to_host().count == 0).all()
    rows = index.point(Q, out="rowids").to_host()
    assert rows.offsets.tolist() == [0] * (len(Q) + 1) and rows.rowids.size == 0


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
@pytest.mark.parametrize("out", OUT_MODES)
def test_empty_lookup_batch_gives_empty_results(name: str, device: str, out: str) -> None:
    index = make(name, device).build(KEYS)
    r = index.point(np.zeros(0, dtype=np.uint64), out=out).to_host()
    assert len(r) == 0
    r = index.range(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64), out=out)
    assert len(r) == 0


def test_rowid_dtype_and_miss() -> None:
    index = make("sorted-array", "cpu").build(KEYS)
    assert index.rowid_dtype == np.uint32 and index.miss == 2**32 - 1
    # the threshold: a rowID could then equal the uint32 miss value
    st = BuildState(keymap=index.state.keymap, n=2**32 - 1, values=None, device="cpu")
    assert st.rowid_dtype == np.uint64 and st.miss == 2**64 - 1
    assert rowid_dtype_for(2**32 - 2) == np.uint32


def test_lookups_before_build_raise_not_built() -> None:
    index = make("sorted-array", "cpu")
    for call in (lambda: index.point(Q), lambda: index.range(LO, HI),
                 index.memory_footprint, lambda: index.key_dtype):
        with pytest.raises(NotBuilt, match="'sorted-array' is not built yet"):
            call()


# ---------------------------------------------------------------- bad input, then still right
BAD_LOOKUPS: list[tuple[str, Callable[[GpuIndex], Any], type, str]] = [
    ("2-D queries", lambda i: i.point(np.zeros((2, 2), np.uint64)), InvalidInput,
     r"'queries': expected a 1-D array, got 2-D with shape \(2, 2\)"),
    ("scalar query", lambda i: i.point(5), InvalidInput, "wrap a single value in a list"),
    ("None queries", lambda i: i.point(None), InvalidInput, "got None"),
    ("object queries", lambda i: i.point(np.array([1, "a"], dtype=object)), InvalidInput,
     "dtype object"),
    ("float queries on int keys", lambda i: i.point(np.array([1.5])), InvalidInput,
     r"'queries': dtype float64 cannot be compared with keys of dtype uint64"),
    ("text queries", lambda i: i.point(["a"]), InvalidInput, "cannot be compared"),
    ("bad out", lambda i: i.point(Q, out="rowidz"), InvalidInput,
     r"'out': 'rowidz' is not an out mode; allowed: 'rowid', 'count', 'sum', 'rowids'"),
    ("lo/hi mismatch", lambda i: i.range(LO, HI[:-1]), InvalidInput,
     r"'lo' and 'hi' must have the same length, got 7 and 6"),
    ("NaN bound", lambda i: i.range([0.0], [np.nan]), InvalidInput, "cannot be compared"),
    ("masked queries", lambda i: i.point(np.ma.masked_array(Q, mask=Q == 3), out="count"),
     InvalidInput, r"'queries': null at position 1; a null lookup"),
    ("masked bound", lambda i: i.range(LO, np.ma.masked_array(HI, mask=HI > 10)), InvalidInput,
     r"'hi': null at position 2; a null lookup"),
]


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
@pytest.mark.parametrize("case", BAD_LOOKUPS, ids=[c[0] for c in BAD_LOOKUPS])
def test_bad_lookup_raises_and_index_still_answers(name: str, device: str, case: Any) -> None:
    _, call, err, msg = case
    index = make(name, device).build(KEYS)
    with pytest.raises(err, match=msg):
        call(index)
    check_answers(index)


BAD_BUILDS: list[tuple[str, Callable[[GpuIndex], Any], str]] = [
    ("2-D keys", lambda i: i.build(np.zeros((3, 2), np.uint64)), r"'keys': expected a 1-D"),
    ("NaN keys", lambda i: i.build(np.array([1.0, np.nan])), r"'keys': NaN at position 1"),
    ("complex keys", lambda i: i.build(np.array([1j])), "complex128 is not supported"),
    ("values length", lambda i: i.build(KEYS, np.arange(3)),
     r"'keys' and 'values' must have the same length, got 10 and 3"),
    ("float values", lambda i: i.build(KEYS, np.ones(10)), r"'values': dtype float64"),
    ("2-D values", lambda i: i.build(KEYS, np.ones((10, 1), np.int64)), r"'values': expected a 1-D"),
    ("masked keys", lambda i: i.build(np.ma.masked_array(KEYS, mask=KEYS == 3)),
     r"'keys': null at position 1; a null key"),
    ("masked values", lambda i: i.build(KEYS, np.ma.masked_array(np.arange(10), mask=KEYS == 3),
                                        nulls="skip"),
     r"'values': null at position 1; a row's value cannot be null under either null policy: "
     r"drop or fill the nulls$"),
]


@pytest.mark.parametrize("name", [*ORDERED, "rowids-only"])
@pytest.mark.parametrize("case", BAD_BUILDS, ids=[c[0] for c in BAD_BUILDS])
def test_bad_build_raises_and_previous_build_survives(name: str, device: str, case: Any) -> None:
    _, call, msg = case
    index = make(name, device).build(KEYS)
    before = index.memory_footprint()
    with pytest.raises(InvalidInput, match=msg):
        call(index)
    assert index.memory_footprint() == before
    check_answers(index)


def test_bad_first_build_leaves_the_index_unbuilt() -> None:
    index = make("sorted-array", "cpu")
    with pytest.raises(InvalidInput):
        index.build(np.array([np.nan]))
    assert not index.is_built
    with pytest.raises(NotBuilt):
        index.point(Q)


class FailsMidBuild(RowidsOnly):
    name: ClassVar[str] = "fails-mid-build"

    def _build(self, st: KeysState, keys: Any) -> None:
        st.keys = keys[:1]  # half-done state...
        if keys.shape[0] > 100:
            raise InvalidInput("argument 'keys': more than 100 keys (test)")
        st.keys = keys


def test_plugin_error_inside_build_restores_the_previous_build() -> None:
    index = FailsMidBuild(device="cpu").build(KEYS)
    with pytest.raises(InvalidInput, match="more than 100"):
        index.build(np.arange(200, dtype=np.uint64))
    assert len(index) == len(KEYS)
    check_answers(index)


# ---------------------------------------------------------------- capabilities
class PointOnly(RowidsOnly):
    name: ClassVar[str] = "point-only"
    narrows: ClassVar[bool] = True  # a narrower RowidsOnly, on purpose
    capabilities: ClassVar[Capabilities] = Capabilities(
        point=True, range=False, out_modes=("rowid", "count"), key_dtypes=("uint64",))


def test_missing_range_capability_raises_unsupported() -> None:
    index = PointOnly(device="cpu").build(KEYS)
    with pytest.raises(Unsupported, match="'point-only' does not support range lookups"):
        index.range(LO, HI)
    check_answers_points = index.point(Q, out="count").to_host().count
    np.testing.assert_array_equal(check_answers_points, reference(KEYS, Q, Q)["count"])


def test_out_mode_not_offered_raises_unsupported() -> None:
    index = PointOnly(device="cpu").build(KEYS)
    with pytest.raises(Unsupported, match=r"does not offer out='sum'; it offers 'rowid', 'count'"):
        index.point(Q, out="sum")


@pytest.mark.parametrize("dtype", ["uint32", "int32", "float32", "int8", "bool"])
def test_narrow_keys_are_widened_for_a_uint64_only_plugin(dtype: str) -> None:
    keys = np.array([5, 1, -2, 0], dtype=np.int64).astype(dtype)
    index = PointOnly(device="cpu").build(keys)
    assert index.native_key_dtype == np.uint64 and index.key_dtype == np.dtype(dtype)
    np.testing.assert_array_equal(index.point(keys, out="count").count,
                                  reference(keys, keys, keys)["count"])


class Uint32Only(RowidsOnly):
    name: ClassVar[str] = "u32-only"
    narrows: ClassVar[bool] = True  # a narrower RowidsOnly, on purpose
    capabilities: ClassVar[Capabilities] = Capabilities(key_dtypes=("uint32",))


def test_wide_keys_on_a_uint32_only_plugin_raise_unsupported() -> None:
    with pytest.raises(Unsupported, match=r"'u32-only' handles uint32 keys; keys of dtype int64"):
        Uint32Only(device="cpu").build(np.array([1, 2], dtype=np.int64))


class NoDuplicates(RowidsOnly):
    name: ClassVar[str] = "no-dup"
    narrows: ClassVar[bool] = True  # a narrower RowidsOnly, on purpose
    capabilities: ClassVar[Capabilities] = Capabilities(duplicates=False)


def test_duplicates_on_a_plugin_without_them_raise_unsupported() -> None:
    with pytest.raises(Unsupported, match="does not support duplicate keys"):
        NoDuplicates(device="cpu").build(np.array([1, 2, 1], dtype=np.uint64))


class CudaOnly(RowidsOnly):
    name: ClassVar[str] = "cuda-only"
    narrows: ClassVar[bool] = True  # a narrower RowidsOnly, on purpose
    capabilities: ClassVar[Capabilities] = Capabilities(devices=("cuda",))


def test_device_the_plugin_lacks_raises_unsupported() -> None:
    with pytest.raises(Unsupported, match="'cuda-only' runs on cuda, not on 'cpu'"):
        CudaOnly(device="cpu")


def test_updates_are_unsupported_unless_declared() -> None:
    index = make("sorted-array", "cpu").build(KEYS)
    with pytest.raises(Unsupported, match="does not support updates"):
        index.update([0], [1])


# ---------------------------------------------------------------- key types end to end
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "float32", "float64", "uint16"])
def test_mapped_key_types_answer_like_the_reference(dtype: str, device: str) -> None:
    rng = np.random.default_rng(11)
    if np.dtype(dtype).kind == "f":
        keys = np.round(rng.standard_normal(200) * 10, 1).astype(dtype)
        keys[:3] = [-0.0, 0.0, -np.inf]
        q = np.concatenate([keys[:50], np.array([0.05, 1e9, -0.0], dtype=dtype)])
    else:
        info = np.iinfo(dtype)
        keys = rng.integers(max(info.min, -100), min(info.max, 100), 200).astype(dtype)
        q = np.concatenate([keys[:50], np.array([info.min, info.max], dtype=dtype)])
    lo, hi = np.sort(np.stack([q[:40], q[10:50]]), axis=0)
    index = make("sorted-array", device).build(keys)
    assert_matches(all_modes(index, "point", q), reference(keys, q, q), int(index.miss))
    assert_matches(all_modes(index, "range", lo, hi), reference(keys, lo, hi), int(index.miss))


def test_int64_lookups_on_uint8_keys_miss_or_clamp_outside_the_dtype(device: str) -> None:
    keys = np.array([0, 5, 255, 255], dtype=np.uint8)
    index = make("sorted-array", device).build(keys)
    q = np.array([-1, 0, 255, 256, 5, -300], dtype=np.int64)
    assert index.point(q, out="count").to_host().count.tolist() == [0, 1, 2, 0, 1, 0]
    lo = np.array([-50, 1, 256, -9], dtype=np.int64)
    hi = np.array([0, 1000, 999, -1], dtype=np.int64)
    assert index.range(lo, hi, out="count").to_host().count.tolist() == [1, 3, 0, 0]
    rows = index.point(q, out="rowids").to_host()
    assert rows.offsets.tolist() == [0, 0, 1, 3, 3, 4, 4]


def test_byte_string_keys(device: str) -> None:
    keys = np.array([b"pear", b"apple", b"fig", b"apple", b"kiwi"], dtype="S5")
    index = make("sorted-array", device).build(keys)
    assert index.point(np.array([b"apple", b"plum"]), out="count").to_host().count.tolist() == [2, 0]
    assert index.range(np.array([b"b"]), np.array([b"l"]), out="count").to_host().count.tolist() == [2]


def test_inverted_range_is_empty_not_an_error(device: str) -> None:
    index = make("sorted-array", device).build(KEYS)
    res = index.range(np.array([50], np.uint64), np.array([10], np.uint64), out="rowids").to_host()
    assert res.offsets.tolist() == [0, 0]


def test_footprint_accounts_keys_rowids_and_values(device: str) -> None:
    n = 1000
    index = make("sorted-array", device).build(np.arange(n, dtype=np.uint64))
    fp = index.memory_footprint()
    assert fp.breakdown == {"keys": 8 * n, "rowids": 4 * n}
    assert fp.resident_bytes == 12 * n and fp.peak_build_bytes >= fp.resident_bytes
    fpv = index.build(np.arange(n, dtype=np.uint64), values=np.arange(n)).memory_footprint()
    assert fpv.breakdown["values"] == 8 * n and fpv.resident_bytes == 20 * n


class KeepsKeys(RowidsOnly):
    """Stores the key array it is given, without copying (allowed: it is the index's own)."""

    name: ClassVar[str] = "keeps-keys"

    def _build(self, st: KeysState, keys: Any) -> None:
        st.keys = keys


@pytest.mark.parametrize("dtype", ["uint64", "uint32", "int64"])
def test_the_index_owns_its_keys_changing_the_input_later_changes_nothing(dtype: str,
                                                                         device: str) -> None:
    xp = np if device == "cpu" else pytest.importorskip("cupy")
    keys = xp.asarray(np.array([5, 1, 9], dtype=dtype))
    index = KeepsKeys(device=device).build(keys)
    keys[:] = 7
    assert index.point([5, 7], out="count").to_host().count.tolist() == [1, 0]


def test_builds_are_told_on_the_indexzoo_logger(caplog: pytest.LogCaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from indexzoo import buildtime
    keys = np.arange(1000, dtype=np.uint64)
    with caplog.at_level(logging.DEBUG, logger="indexzoo"):
        indexzoo.create("sorted-array", device="cpu").build(keys)
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name == "indexzoo"]
    assert said[0] == ("indexzoo", logging.DEBUG, "sorted-array: building on 1,000 keys (cpu)")
    assert said[1][1] == logging.DEBUG and said[1][2].startswith(
        "sorted-array: built on 1,000 keys (cpu) in ")
    caplog.clear()
    monkeypatch.setattr(buildtime, "LONG_BUILD_S", 0.0)  # every build counts as long
    with caplog.at_level(logging.INFO, logger="indexzoo"):
        indexzoo.create("sorted-array", device="cpu").build(keys)
    assert [r.levelno for r in caplog.records if r.name == "indexzoo"] == [logging.INFO]


def test_a_footprint_line_has_one_unit() -> None:
    small = Footprint(breakdown={"keys": 4000, "rowids": 4000}, peak_build_bytes=20_000)
    assert str(small) == "resident 8.00 kB (keys 4.00 kB, rowids 4.00 kB); peak during build 20.00 kB"
    big = Footprint(breakdown={"keys": 8_000_000, "nodes": 12}, peak_build_bytes=32_000_000)
    assert str(big) == "resident 8.00 MB (keys 8.00 MB, nodes 0.00 MB); peak during build 32.00 MB"
    assert str(Footprint(breakdown={"keys": 12})) == "resident 12 B (keys 12 B); peak during build 0 B"
