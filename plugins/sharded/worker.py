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
from indexzoo.devices import array_module, to_device, to_numpy
from indexzoo.keys import KeyMap
from indexzoo.results import Out

from . import partition
from .handoff import Handoff

__all__ = ["Shard", "ShardSummary", "build_shard", "encode_part", "load_shard",
           "lookup_scattered", "lookup_shard", "pack_shard", "save_shard", "split_part",
           "summarise", "unpack_shard"]


@dataclass
class Shard:
    """One shard, resident on its worker."""

    index: GpuIndex
    rows: Any  # int64: global rowID of each local rowID (NumPy; CuPy for a GPU build's shard)
    bounds: tuple[int, int] | None  # smallest and largest native key (one-column keys)
    device_rows: Any = None  # ``rows`` on the GPU, made by the first lookup there to need it

    def __getstate__(self) -> dict[str, Any]:
        return {"index": self.index, "rows": self.rows, "bounds": self.bounds}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, device_rows=None)


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


def build_shard(spec: dict[str, Any], device: str, *pieces: Any) -> Shard:
    """The shard over ``pieces`` (keys, global rowIDs, values or None; each a tuple or a
    :class:`~.handoff.Handoff` of one), joined in order, on ``device`` (the rowIDs too: a
    GPU shard keeps them on its GPU).

    The inner index's values are the global values, or the global rowIDs where the build had
    none, so that its sums are the sharded index's sums."""
    got = [p.local() if isinstance(p, Handoff) else tuple(p) for p in pieces]
    xp = array_module(device) if any(not isinstance(p[0], np.ndarray) for p in got) else np
    keys = xp.concatenate([xp.asarray(p[0]) for p in got])
    rows = xp.concatenate([xp.asarray(p[1]) for p in got]).astype(np.int64, copy=False)
    if any(p[2] is not None for p in got):
        values = xp.concatenate([xp.asarray(p[2]) for p in got])
    else:
        values = rows.astype(np.uint64)
    bounds = None
    if keys.ndim == 2:
        keys = np.asfortranarray(keys)
    elif keys.shape[0]:
        bounds = (int(keys.min()), int(keys.max()))
    inner = _inner(spec, device)
    inner.build(keys, values)
    return Shard(inner, xp.ascontiguousarray(rows), bounds)


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
    """The shard's answers to its part of a batch, with global rowIDs: ``rowid``: rowIDs or
    the global miss; ``count``: uint64 (in ``rowid_dtype`` for lookups on the GPU);
    ``sum``: uint64; ``rowids``: (offsets, rowids). On the host, except for lookups given
    on the GPU (CuPy), whose answers stay there."""
    index = shard.index
    res = index.point(arrays[0], out=out) if kind == "point" else \
        index.range(arrays[0], arrays[1], out=out)
    dt = np.dtype(rowid_dtype)
    if arrays and not isinstance(arrays[0], np.ndarray):
        return _on_device(shard, out, dt, res)
    if out == "rowid":
        local = to_numpy(res.rowid)
        hit = local != index.miss
        got = np.full(local.shape[0], np.iinfo(dt).max, dtype=dt)
        got[hit] = _global_rows(shard, local[hit]).astype(dt)
        return got
    if out == "count":
        return to_numpy(res.count).astype(np.uint64)
    if out == "sum":
        return to_numpy(res.sum).astype(np.uint64)
    offsets = to_numpy(res.offsets).astype(np.int64)
    rowids = _global_rows(shard, to_numpy(res.rowids)).astype(dt)
    return offsets, rowids


def _global_rows(shard: Shard, local: np.ndarray) -> np.ndarray:
    """The global rowIDs of local ones, on the host (gathered on the GPU where the shard
    keeps its rowIDs there)."""
    at = local.astype(np.int64)
    if isinstance(shard.rows, np.ndarray):
        return shard.rows[at]
    return to_numpy(shard.rows[to_device(at, "cuda")])


def _on_device(shard: Shard, out: Out, dt: np.dtype, res: Any) -> Any:
    """:func:`lookup_shard`'s answer for lookups on the GPU, kept there (``rowid``,
    ``count`` or ``sum``: the outs a Dask array of lookups takes)."""
    import cupy

    if out == "count":
        return cupy.asarray(res.count).astype(dt, copy=False)
    if out == "sum":
        return cupy.asarray(res.sum).astype(np.uint64, copy=False)
    if out != "rowid":
        raise ValueError(f"lookups on the GPU are answered here with rowid, count or sum, not "
                         f"{out!r}")
    local = cupy.asarray(res.rowid)
    if shard.device_rows is None:  # rows kept on the host (a shard built from NumPy pieces)
        shard.device_rows = cupy.asarray(shard.rows)
    hit = local != shard.index.miss
    return cupy.where(hit, shard.device_rows[cupy.where(hit, local, 0).astype(np.int64)]
                      .astype(dt), dt.type(np.iinfo(dt).max))


def lookup_scattered(shard: Shard, kind: str, out: Out, rowid_dtype: str,
                     arrays: tuple[Any, ...]) -> Any:
    """:func:`lookup_shard` over lookups that reached the worker as one scattered tuple."""
    return lookup_shard(shard, kind, out, rowid_dtype, *arrays)


def save_shard(shard: Shard) -> tuple[str, dict[str, np.ndarray], np.ndarray, Any]:
    """The shard in saved form: the inner index's metadata (JSON), its arrays, the global
    rowIDs and the key bounds."""
    saved = shard.index.to_saved()
    return json.dumps(saved.meta), dict(saved.arrays), to_numpy(shard.rows), shard.bounds


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
def encode_part(part: Any, keymap: KeyMap, name: str) -> Any:
    """A partition of a distributed key column as native keys, on its worker (NumPy, or
    CuPy for a partition on a GPU, e.g. of a dask-cudf column)."""
    from indexzoo.errors import InvalidInput
    from indexzoo.validation import read_1d

    arr, null = read_1d(part, name)
    if null is not None and bool(null.any()):
        raise InvalidInput(f"argument {name!r}: a partition holds null keys; a sharded build "
                           "from a distributed column refuses nulls")
    got = keymap.encode(arr, name=name, copy=True)
    return np.asarray(got) if isinstance(arr, np.ndarray) else got


def values_part(part: Any) -> np.ndarray:
    """A partition of a distributed values column as uint64."""
    arr = np.asarray(part.to_numpy() if hasattr(part, "to_numpy") else part)
    return arr.astype(np.uint64)


def sample_part(keys: Any, size: int, seed: int) -> np.ndarray:
    """A sample of a partition's native keys, as NumPy (the caller joins the samples)."""
    return np.asarray(to_numpy(partition.sample_keys(keys, size, seed)))


def split_part(keys: Any, values: Any, offset: int, scheme: str, shards: int,
               sample: np.ndarray, heavy: np.ndarray, device: str = "cpu",
               ipc: bool = False) -> list[Handoff]:
    """One partition cut into one piece (keys, global rowIDs, values) per shard (``sample``:
    the sorted sample of the range scheme), on ``device`` (a GPU's pieces cross to their
    shards' workers by CUDA IPC when ``ipc``)."""
    keys = to_device(keys, device)
    values = None if values is None else to_device(values, device)
    xp = array_module(device)
    rows = offset + xp.arange(keys.shape[0], dtype=np.int64)
    if scheme == "range":
        where = partition.range_shard(keys, rows, sample, shards)
    else:
        where = partition.hash_shard(keys, rows, shards, heavy)
    pieces = []
    for part_rows in partition.shard_rows(where, shards):
        pieces.append(Handoff((keys[part_rows], rows[part_rows],
                               None if values is None else values[part_rows]), ipc=ipc))
    return pieces


def piece(pieces: list[Handoff], s: int) -> Handoff:
    return pieces[s]
