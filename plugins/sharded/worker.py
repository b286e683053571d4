"""What runs on the Dask workers: building a shard's inner index, answering its part of a
lookup batch, saving and loading it, and cutting a partition of a distributed column into
the pieces each shard takes.

A shard is a :class:`Shard`: the inner index built over the shard's keys (local rowIDs
0..n-1), and ``rows``, the global rowID of each local one. Answers leave the worker with
global rowIDs, on the host.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.contract import Footprint, GpuIndex
from indexzoo.devices import to_numpy
from indexzoo.keys import KeyMap
from indexzoo.results import Out

from . import partition

__all__ = ["Shard", "ShardSummary", "build_shard", "encode_part", "load_shard",
           "lookup_scattered", "lookup_shard", "pack_shard", "save_shard", "split_part",
           "summarise", "unpack_shard"]


@dataclass
class Shard:
    """One shard, resident on its worker."""

    index: GpuIndex
    rows: np.ndarray  # int64: global rowID of each local rowID
    bounds: tuple[int, int] | None  # smallest and largest native key (one-column keys)


@dataclass(frozen=True)
class ShardSummary:
    """What the client keeps of a shard: its size, key bounds and footprint."""

    n: int
    bounds: tuple[int, int] | None
    footprint: Footprint
    worker: str


def _inner(spec: dict[str, Any], device: str) -> GpuIndex:
    from indexzoo.registry import create

    return create(spec, device=device)


def build_shard(spec: dict[str, Any], device: str, *pieces: tuple[Any, Any, Any]) -> Shard:
    """The shard over ``pieces`` (keys, global rowIDs, values or None), joined in order.

    The inner index's values are the global values, or the global rowIDs where the build had
    none, so that its sums are the sharded index's sums."""
    keys = np.concatenate([p[0] for p in pieces])
    rows = np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False)
    if any(p[2] is not None for p in pieces):
        values = np.concatenate([p[2] for p in pieces])
    else:
        values = rows.astype(np.uint64)
    bounds = None
    if keys.ndim == 2:
        keys = np.asfortranarray(keys)
    elif keys.shape[0]:
        bounds = (int(keys.min()), int(keys.max()))
    inner = _inner(spec, device)
    inner.build(keys, values)
    return Shard(inner, np.ascontiguousarray(rows), bounds)


def pack_shard(shard: Shard) -> bytes:
    """``shard`` as bytes, on its own worker, for :func:`unpack_shard` on another: the bytes
    travel, never the shard's own key (a key fetched by another worker would have a replica
    there, which Dask may keep instead of the original)."""
    return pickle.dumps(shard, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_shard(packed: bytes) -> Shard:
    """A new copy of the shard :func:`pack_shard` packed, on the worker this runs on (the
    bytes came from a worker of the same cluster, never from a file)."""
    return pickle.loads(packed)  # bytes one of this cluster's workers made: no file


def summarise(shard: Shard) -> ShardSummary:
    """The shard's size, key bounds, footprint (its global rowIDs included) and worker."""
    from distributed import get_worker

    fp = shard.index.memory_footprint()
    held = int(shard.rows.nbytes)
    return ShardSummary(int(shard.rows.shape[0]), shard.bounds,
                        Footprint(breakdown={**fp.breakdown, "global_rowids": held},
                                  peak_build_bytes=fp.peak_build_bytes + held),
                        get_worker().address)


def lookup_shard(shard: Shard, kind: str, out: Out, rowid_dtype: str, *arrays: Any) -> Any:
    """The shard's answers to its part of a batch, with global rowIDs, on the host:
    ``rowid``: rowIDs or the global miss; ``count``/``sum``: uint64; ``rowids``: (offsets,
    rowids)."""
    index = shard.index
    res = index.point(arrays[0], out=out) if kind == "point" else \
        index.range(arrays[0], arrays[1], out=out)
    dt = np.dtype(rowid_dtype)
    if out == "rowid":
        local = to_numpy(res.rowid)
        hit = local != index.miss
        got = np.full(local.shape[0], np.iinfo(dt).max, dtype=dt)
        got[hit] = shard.rows[local[hit].astype(np.int64)].astype(dt)
        return got
    if out == "count":
        return to_numpy(res.count).astype(np.uint64)
    if out == "sum":
        return to_numpy(res.sum).astype(np.uint64)
    offsets = to_numpy(res.offsets).astype(np.int64)
    rowids = shard.rows[to_numpy(res.rowids).astype(np.int64)].astype(dt)
    return offsets, rowids


def lookup_scattered(shard: Shard, kind: str, out: Out, rowid_dtype: str,
                     arrays: tuple[Any, ...]) -> Any:
    """:func:`lookup_shard` over lookups that reached the worker as one scattered tuple."""
    return lookup_shard(shard, kind, out, rowid_dtype, *arrays)


def save_shard(shard: Shard) -> tuple[str, dict[str, np.ndarray], np.ndarray, Any]:
    """The shard in saved form: the inner index's metadata (JSON), its arrays, the global
    rowIDs and the key bounds."""
    saved = shard.index.to_saved()
    return json.dumps(saved.meta), dict(saved.arrays), shard.rows, shard.bounds


def load_shard(meta: str, arrays: dict[str, np.ndarray], rows: np.ndarray, bounds: Any,
               device: str) -> Shard:
    """The shard :func:`save_shard` returned, on ``device``."""
    from indexzoo.persist import SavedIndex
    from indexzoo.registry import lookup

    got = json.loads(meta)
    inner = lookup(got["index"]).from_saved(SavedIndex(got, dict(arrays)), device)
    return Shard(inner, np.asarray(rows, dtype=np.int64),
                 None if bounds is None else (int(bounds[0]), int(bounds[1])))


# ---------------------------------------------------------------------- distributed builds
def encode_part(part: Any, keymap: KeyMap, name: str) -> np.ndarray:
    """A partition of a distributed key column as native keys (NumPy), on its worker."""
    from indexzoo.errors import InvalidInput
    from indexzoo.validation import read_1d

    arr, null = read_1d(part, name)
    if null is not None and bool(np.asarray(null).any()):
        raise InvalidInput(f"argument {name!r}: a partition holds null keys; a sharded build "
                           "from a distributed column refuses nulls")
    return np.asarray(keymap.encode(arr, name=name, copy=True))


def values_part(part: Any) -> np.ndarray:
    """A partition of a distributed values column as uint64."""
    arr = np.asarray(part.to_numpy() if hasattr(part, "to_numpy") else part)
    return arr.astype(np.uint64)


def sample_part(keys: np.ndarray, size: int, seed: int) -> np.ndarray:
    return partition.sample_keys(keys, size, seed)


def split_part(keys: np.ndarray, values: Any, offset: int, scheme: str, shards: int,
               sample: np.ndarray, heavy: np.ndarray) -> list[tuple[Any, Any, Any]]:
    """One partition cut into one piece (keys, global rowIDs, values) per shard (``sample``:
    the sorted sample of the range scheme)."""
    rows = offset + np.arange(keys.shape[0], dtype=np.int64)
    if scheme == "range":
        where = partition.range_shard(keys, rows, sample, shards)
    else:
        where = partition.hash_shard(keys, rows, shards, heavy)
    pieces = []
    for part_rows in partition.shard_rows(where, shards):
        pieces.append((keys[part_rows], rows[part_rows],
                       None if values is None else values[part_rows]))
    return pieces


def piece(pieces: list[tuple[Any, Any, Any]], s: int) -> tuple[Any, Any, Any]:
    return pieces[s]
