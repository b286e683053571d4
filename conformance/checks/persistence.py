"""The ``persistence`` conformance checks."""

from __future__ import annotations

import copy
import pickle
import tempfile

import numpy as np

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges
from .common import load_index, snapshot


# ====================================================================== persistence
def _persisted_keys(ctx: Context) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray],
                                           np.ndarray]:
    """Keys with duplicates (where allowed), lookups, ranges and custom values."""
    keys = make_keys("duplicates" if ctx.caps.duplicates else "clustered", 1500, 21,
                     duplicates=ctx.caps.duplicates).keys
    keys = keys if ctx.wide else keys.astype(np.uint32)
    values = np.asarray(np.random.default_rng(21).integers(0, 2**64 - 1, int(keys.shape[0]),
                                                          dtype=np.uint64))
    return keys, lookups(keys, 400, 21), ranges(keys, 200, 21), values


def _same_snapshots(a: list[np.ndarray], b: list[np.ndarray], what: str) -> None:
    assert len(a) == len(b), f"{what}: {len(b)} result arrays, expected {len(a)}"
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y, err_msg=f"{what} answers otherwise than the original")


@check("persistence")
def check_save_and_load_answer_identically(ctx: Context) -> None:
    """An index saved and loaded on its device answers bit for bit as before, in every out
    mode, with custom values and keys through a key map (int32); when the index runs on the CPU
    too, a GPU index loaded onto the CPU answers right, and saved from there and loaded back
    answers as before: bit for bit, or right where the load changed its params
    (``_params_for_load``, e.g. an engine that runs on the GPU only)."""
    keys, q, r, values = _persisted_keys(ctx)
    signed = (keys.astype(np.int64) - (1 << 20)).astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        for label, k, vals in (("uint keys", keys, None), ("int32 keys with values", signed,
                                                            values)):
            index = ctx.new().build(k, vals)
            qk, rk = q.astype(np.int64) - (1 << 20), (r[0].astype(np.int64) - (1 << 20),
                                                       r[1].astype(np.int64) - (1 << 20))
            qq, rr = (q, r) if k is keys else (qk.astype(np.int32),
                                               (rk[0].astype(np.int32), rk[1].astype(np.int32)))
            path = f"{tmp}/index.izo"
            index.save(path)
            loaded = load_index(index, path, ctx.device)
            assert loaded.device == ctx.device and len(loaded) == len(index)
            assert loaded.key_dtype == index.key_dtype, (loaded.key_dtype, index.key_dtype)
            assert loaded.memory_footprint().breakdown == index.memory_footprint().breakdown, (
                "the loaded index holds other buffers: "
                f"{loaded.memory_footprint().breakdown} vs {index.memory_footprint().breakdown}")
            _same_snapshots(snapshot(index, qq, rr), snapshot(loaded, qq, rr),
                            f"{label}: the loaded index")
            if ctx.device != "cpu" and "cpu" in ctx.caps.devices:
                host = load_index(index, path, "cpu")
                verify(ctx, host, k, values=vals, points=qq, rng=rr,
                       label=f"{label}: loaded from {ctx.device} onto the cpu")
                host.save(f"{tmp}/host.izo")
                back = load_index(index, f"{tmp}/host.izo", ctx.device)
                what = f"{label}: saved from the cpu, loaded onto {ctx.device}"
                if back.params == index.params:
                    _same_snapshots(snapshot(index, qq, rr), snapshot(back, qq, rr), what)
                else:  # the load changed the configuration (_params_for_load: e.g. an
                    # engine that runs on the GPU only): right answers, not the same bits
                    verify(ctx, back, k, values=vals, points=qq, rng=rr,
                           label=f"{what} (params {back.params} after the load)")


@check("persistence", needs=("updates",))
def check_a_loaded_index_takes_updates(ctx: Context) -> None:
    """Updates of a loaded index answer like a fresh build over the updated keys."""
    keys, q, r, _ = _persisted_keys(ctx)
    index = ctx.new().build(keys)
    with tempfile.TemporaryDirectory() as tmp:
        index.save(f"{tmp}/index.izo")
        loaded = load_index(index, f"{tmp}/index.izo", ctx.device)
    pos = np.arange(0, keys.shape[0], 7, dtype=np.int64)
    new = keys[pos][::-1].copy()
    loaded.update(pos, new)
    final = keys.copy()
    final[pos] = new
    verify(ctx, loaded, final, points=q, rng=r, label="updated after loading")


@check("persistence")
def check_pickle_round_trip_of_built_and_unbuilt_indexes(ctx: Context) -> None:
    """``pickle.loads(pickle.dumps(index))`` gives an index of the same class, params and
    device: unbuilt if it was, answering bit for bit as the original if built; an unpickled
    unbuilt index builds and answers right."""
    keys, q, r, values = _persisted_keys(ctx)
    fresh = ctx.new()
    empty = pickle.loads(pickle.dumps(fresh))
    assert type(empty) is type(fresh) and not empty.is_built, "an unbuilt index came back built"
    assert empty.params == fresh.params and empty.device == fresh.device
    index = ctx.new().build(keys, values)
    back = pickle.loads(pickle.dumps(index))
    assert type(back) is type(index) and back.device == index.device
    _same_snapshots(snapshot(index, q, r), snapshot(back, q, r), "the unpickled index")
    empty.build(keys, values)  # a build of its own: right answers (a GPU hash table's rowid
    # among duplicates may differ from another build's)
    verify(ctx, empty, keys, values=values, points=q, rng=r,
           label="an unpickled unbuilt index, built")


@check("persistence")
def check_a_deep_copy_is_independent(ctx: Context) -> None:
    """``copy.deepcopy(index)`` answers as the original; building the copy again changes no
    answer of the original (and the other way round)."""
    keys, q, r, _ = _persisted_keys(ctx)
    index = ctx.new().build(keys)
    before = snapshot(index, q, r)
    dup = copy.deepcopy(index)
    _same_snapshots(before, snapshot(dup, q, r), "the deep copy")
    other = make_keys("uniform32", 700, 22, duplicates=ctx.caps.duplicates).keys
    other = other if ctx.wide else other.astype(np.uint32)
    dup.build(other)
    _same_snapshots(before, snapshot(index, q, r), "the original after its copy was rebuilt")
    verify(ctx, dup, other, points=q, rng=r, label="the rebuilt copy")
