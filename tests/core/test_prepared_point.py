"""The prepared path of ``GpuIndex.point``: a batch that every check of the general path would
pass unchanged (the device's array type, 1-D, keys of the index's native dtype, one chunk) is
answered by the plugin's hook, or its prepared form, without the general path's steps; every
other batch takes the general path; both give the same answers, and a rebuild prepares again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.helpers import general_path_calls

import indexzoo
from indexzoo import InvalidInput, NotBuilt
from indexzoo.devices import to_device, to_numpy
from indexzoo.operations import operation

INDEXES = ["sorted-array", "warpcore-hash", "btree", "searchsorted", "lightweight", "rx"]
MODES = ["rowid", "count", "sum"]


def _keys(n: int = 1500, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 1 << 40, n).astype(np.uint64)
    keys[10:20] = keys[0]  # duplicates
    return keys


def _lookups(keys: np.ndarray, n: int = 300, seed: int = 8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rng.choice(keys, n)
    q[::5] = rng.integers(0, 1 << 40, q[::5].shape[0]).astype(np.uint64)  # mostly misses
    return q


def _expected(keys: np.ndarray, q: np.ndarray, out: str, miss: int) -> np.ndarray:
    """What each mode must answer (rowid: any matching rowID is checked separately)."""
    hits = [np.nonzero(keys == x)[0] for x in q]
    if out == "count":
        return np.array([len(h) for h in hits])
    if out == "sum":
        return np.array([h.astype(np.uint64).sum(dtype=np.uint64) for h in hits], np.uint64)
    return np.array([miss if len(h) == 0 else -1 for h in hits], dtype=np.int64)


def _check(keys: np.ndarray, q: np.ndarray, res: Any, out: str, miss: int) -> None:
    got = to_numpy(getattr(res, out))
    want = _expected(keys, q, out, miss)
    if out != "rowid":
        np.testing.assert_array_equal(got.astype(want.dtype), want)
        return
    found = want != miss
    np.testing.assert_array_equal(got[~found], miss)
    np.testing.assert_array_equal(keys[got[found].astype(np.int64)], q[found])


def _general_only(monkeypatch: pytest.MonkeyPatch, ix: Any) -> list[str]:
    """Record every batch that reaches the general path (``_lookup``, the pipeline)."""
    return general_path_calls(monkeypatch, ix)


@pytest.mark.parametrize("name", INDEXES)
def test_a_native_batch_skips_the_general_path_and_answers_every_mode(
        name: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, ix = _keys(), indexzoo.create(name, device=device)
    ix.build(to_device(keys, device))
    q = _lookups(keys)
    seen = _general_only(monkeypatch, ix)
    routes = ix._resolution.routes
    fused = [m for m in MODES if m in ix.capabilities.out_modes
             and not routes[operation("point", m)].derived]
    for out in MODES:  # a mode the plugin derives from rowids needs the general path
        _check(keys, q, ix.point(to_device(q, device), out=out), out, int(ix.miss))
    assert "rowid" in fused and seen == ["point"] * (len(MODES) - len(fused)), name
    assert ix.state._prepared["rowid"] is not None


@pytest.mark.parametrize("batch", ["list", "int64", "uint32", "strided", "one", "two-d",
                                   "empty", "host-on-gpu"])
def test_other_batches_take_the_general_path_with_the_same_answers(
        batch: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, ix = _keys(), indexzoo.create("sorted-array", device=device)
    ix.build(to_device(keys, device))
    q = _lookups(keys)
    seen = _general_only(monkeypatch, ix)
    if batch == "two-d":
        with pytest.raises(InvalidInput, match="1-D"):
            ix.point(to_device(q.reshape(15, 20), device))
        return
    given: Any = {
        "list": [int(x) for x in q], "int64": q.astype(np.int64), "uint32": q.astype(np.uint32),
        "strided": np.repeat(q, 2)[::2], "one": q[:1], "empty": q[:0], "host-on-gpu": q,
    }[batch]
    if batch == "uint32":
        q = q.astype(np.uint32).astype(np.uint64)
    if batch == "one":
        q = q[:1]
    if batch == "empty":
        q = q[:0]
    if batch not in ("list", "host-on-gpu"):
        given = to_device(given, device)
    res = ix.point(given)
    _check(keys, q, res, "rowid", int(ix.miss))
    assert res.device == device
    # a strided view or a single lookup is still a native 1-D batch: the prepared path
    # takes it (its kernels read strides); the rest need the general path's work
    general = batch not in ("strided", "one") and not (batch == "host-on-gpu" and device == "cpu")
    assert seen == (["point"] if general else [])


def test_batches_over_max_batch_take_the_general_path(
        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _keys()
    q = _lookups(keys)
    ix = indexzoo.create("sorted-array", params={"max_batch": 64}, device=device)
    ix.build(to_device(keys, device))
    seen = _general_only(monkeypatch, ix)
    _check(keys, q, ix.point(to_device(q, device)), "rowid", int(ix.miss))
    assert seen == ["point"]


@pytest.mark.parametrize("name", ["sorted-array", "rx-opt", "cgrx"])
def test_with_sorted_probes_only_small_batches_go_unsorted(
        name: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordering a few thousand lookups costs more than it brings: such a batch takes the
    prepared path in the caller's order; a larger one is sorted by the general path."""
    from indexzoo.lookup import PREPARED_UNSORTED_UP_TO as most

    keys = _keys()
    ix = indexzoo.create(name, params={"sort_probes": True}, device=device)
    ix.build(to_device(keys, device))
    seen = _general_only(monkeypatch, ix)
    for n in (300, most, most + 1):
        q = _lookups(keys, n)
        _check(keys, q, ix.point(to_device(q, device)), "rowid", int(ix.miss))
    assert seen == ["point"], name
    described = type(ix.params).model_fields["sort_probes"].description or ""
    assert f"at most {most} lookups" in " ".join(described.split()), name


def test_replaced_params_are_honoured(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _keys()
    q = _lookups(keys)
    ix = indexzoo.create("sorted-array", device=device)
    ix.build(to_device(keys, device))
    ix.point(to_device(q, device))  # prepared under the default params
    ix.params = ix.params.model_copy(update={"max_batch": 64})
    seen = _general_only(monkeypatch, ix)
    _check(keys, q, ix.point(to_device(q, device)), "rowid", int(ix.miss))
    assert seen == ["point"]


@pytest.mark.parametrize("name", ["sorted-array", "warpcore-hash", "btree"])
def test_a_rebuild_answers_from_the_new_keys(name: str, device: str) -> None:
    first, second = _keys(seed=1), _keys(seed=2)
    ix = indexzoo.create(name, device=device)
    ix.build(to_device(first, device))
    q = _lookups(second)
    ix.point(to_device(_lookups(first), device))
    ix.build(to_device(second, device))
    _check(second, q, ix.point(to_device(q, device)), "rowid", int(ix.miss))


def test_errors_are_the_general_paths(device: str) -> None:
    ix = indexzoo.create("sorted-array", device=device)
    with pytest.raises(NotBuilt):
        ix.point(np.zeros(3, np.uint64))
    ix.build(to_device(_keys(), device))
    q = to_device(np.zeros(3, np.uint64), device)
    for bad in ("bogus", ["rowid"], None):
        with pytest.raises(InvalidInput, match="out mode"):
            ix.point(q, out=bad)  # type: ignore[arg-type]


def test_an_empty_build_answers_misses(device: str) -> None:
    ix = indexzoo.create("sorted-array", device=device)
    ix.build(to_device(np.zeros(0, np.uint64), device))
    res = ix.point(to_device(np.arange(4, dtype=np.uint64), device))
    assert (to_numpy(res.rowid) == ix.miss).all()
    assert ix.state._prepared["rowid"] is None


@pytest.mark.parametrize("params", [{"cooperative": True}, {"leaf_layout": "paired"}])
def test_the_b_tree_s_prepared_lookups_answer_in_every_layout(params: dict[str, Any],
                                                              device: str) -> None:
    keys, ix = _keys(), indexzoo.create("btree", params=params, device=device)
    ix.build(to_device(keys, device))
    q = _lookups(keys)
    _check(keys, q, ix.point(to_device(q, device)), "rowid", int(ix.miss))
    assert ix.state._prepared["rowid"] is not None


def test_a_subclass_that_overrides_a_hook_is_answered_by_it_on_every_path() -> None:
    """sorted-array prepares its rowid lookups with its own kernel bound; a subclass that
    overrides ``_point_rowid`` (and not ``_prepared_point``) must be answered by its override
    for a native batch (the prepared path) as for any other (the pipeline)."""
    from indexzoo.plugins.sorted_array import SortedArrayIndex

    class MissIsZero(SortedArrayIndex):
        name = "test-miss-is-zero"

        def _point_rowid(self, st: Any, q: Any) -> Any:
            r = super()._point_rowid(st, q)
            return st.xp.where(r == st.miss, st.rowid_dtype.type(0), r)

    keys = np.array([5, 9, 11], dtype=np.uint64)
    index = MissIsZero(device="cpu").build(keys)
    native = index.point(np.array([9, 7], dtype=np.uint64)).rowid.tolist()
    other = index.point(np.array([9, 7], dtype=np.int64)).rowid.tolist()
    assert native == other == [1, 0]


# every family whose point lookups have a bound launch (the small-batch path: a call writes
# only the lookups' and the answer's pointers into a prepared parameter buffer on the GPU; the
# RT family's calls make two or three such launches)
BOUND = ["sorted-array", "btree", "warpcore-hash", "lightweight", "ao-bs", "eo-bs", "eo-ks",
         "ao-pb-bs", "ao-pb-ks", "rx", "rx-opt", "cgrx", "cgrx-5x4"]


@pytest.mark.parametrize("name", BOUND)
def test_each_family_prepares_its_point_lookups_as_bound_launches(
        name: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo.native import targets

    keys, ix = _keys(), indexzoo.create(name, device=device)
    ix.build(to_device(keys, device))
    prepared = ix._prepared_point(ix.state, operation("point", "rowid"))
    assert callable(prepared), name
    q = to_device(_lookups(keys), device)
    prepared(q)  # compiled; now count what one call launches
    launched: list[str] = []
    for cls in (targets.Kernel, targets.BlockKernel):
        def counted(kernel: Any, *args: Any, __call: Any = cls.__call__, **kw: Any) -> Any:
            launched.append(kernel.name)
            return __call(kernel, *args, **kw)
        monkeypatch.setattr(cls, "__call__", counted)
    seen = _general_only(monkeypatch, ix)
    res = ix.point(q)
    _check(keys, to_numpy(q), res, "rowid", int(ix.miss))
    assert seen == [], name  # the index's own point() took the prepared path
    # one launch, or the RT family's two (the rays' runs or matches, then the rowIDs); on the
    # GPU a bound launch writes its parameter buffer and launches without the kernel's call
    if device == "cpu":
        assert 1 <= len(launched) <= 2, (name, launched)
    else:
        assert launched == [], (name, launched)


def test_rx_traces_at_most_its_scratch_through_the_bound_launch(device: str) -> None:
    """rx's bound launch writes per-ray hits to scratch arrays of PREPARED_RAYS rays: a larger
    batch is answered by the hook, as right."""
    from indexzoo.plugins.rx.index import PREPARED_RAYS

    keys, ix = _keys(), indexzoo.create("rx", device=device)
    ix.build(to_device(keys, device))
    for n in (PREPARED_RAYS, PREPARED_RAYS + 1):
        q = _lookups(keys, n)
        _check(keys, q, ix.point(to_device(q, device)), "rowid", int(ix.miss))
