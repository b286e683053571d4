"""``indexzoo run SPEC_FILE``: build one index from a key file or a generated workload, run
its lookups, and print a summary.

A spec file (YAML, TOML or JSON) holds an index spec and what to run::

    index: sorted-array
    params: {threads_per_block: 256}
    device: auto
    keys: data/keys.npy          # optional: .npy (any key dtype) or .txt/.csv (one per line)
    workload:                    # keys (unless a key file is given) and lookups
      n_keys: 1048576
      n_lookups: 1048576
      hit_rate: 0.9
    out: rowid                   # optional, default rowid (points) or count (ranges)
    repeats: 3
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field

from .config import IndexSpec, format_validation, read_config_file
from .contract import GpuIndex
from .devices import array_module, to_device, to_numpy
from .errors import ConfigError
from .keys import KeyMap
from .registry import create
from .results import LookupResult, Out
from .timing import synchronize, time_call
from .workloads import Dataset, Workload, generate, generate_lookups

__all__ = ["RunSpec", "load_keys", "run_spec"]


class KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str
    dtype: str = Field("uint64", description="dtype of text key files (.npy files carry their own)")


class RunSpec(IndexSpec):
    """An index spec plus what ``indexzoo run`` should do with it."""

    keys: KeyFile | None = None
    workload: Workload = Workload()
    out: Out | None = None
    repeats: int = Field(3, ge=1, le=1000)


def load_run_spec(path: str | Path) -> RunSpec:
    data = read_config_file(path)
    if isinstance(data, dict) and isinstance(data.get("keys"), str):
        data = {**data, "keys": {"path": data["keys"]}}
    try:
        spec = RunSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"{path}: invalid run spec: {format_validation(exc)}") from None
    if spec.keys is not None and not Path(spec.keys.path).is_absolute():
        spec = spec.model_copy(update={"keys": KeyFile(
            path=str(Path(path).parent / spec.keys.path), dtype=spec.keys.dtype)})
    return spec


def load_keys(kf: KeyFile) -> np.ndarray:
    """Keys from a .npy file or a text file with one key per line."""
    p = Path(kf.path)
    if not p.is_file():
        raise ConfigError(f"key file {str(p)!r} does not exist")
    try:
        if p.suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
        else:
            arr = np.loadtxt(p, dtype=np.dtype(kf.dtype), ndmin=1, delimiter=",")
    except Exception as exc:
        raise ConfigError(f"key file {str(p)!r} cannot be read: {exc}") from None
    if arr.ndim != 1:
        raise ConfigError(f"key file {str(p)!r} holds a {arr.ndim}-D array; expected 1-D")
    return arr


def _dataset(spec: RunSpec, device: str) -> tuple[Any, Dataset]:
    """(keys to build on, lookups), on ``device`` where the dtype allows (bytes and datetime
    keys stay on the host); keys keep a key file's dtype."""
    w = spec.workload
    if spec.keys is None:
        data = generate(w, device)
        return data.keys, data
    keys = load_keys(spec.keys)
    km = KeyMap.for_dtype(keys.dtype)
    if not km.invertible:
        raise ConfigError("`indexzoo run` needs keys whose map has an inverse (bytes up to 8)")
    ukeys = to_device(km.encode(keys), device)
    q, lo, hi, n_hit = generate_lookups(w, ukeys, array_module(device))
    def back(a: Any) -> Any:  # lookups in the key file's dtype (host-only dtypes on the host)
        if a is None:
            return None
        return km.decode(to_numpy(a) if km.kind in ("datetime", "bytes") else a)

    data = Dataset(w.model_copy(update={"n_keys": int(keys.shape[0])}), ukeys,
                   back(q), back(lo), back(hi), n_hit)
    if km.kind not in ("datetime", "bytes"):
        keys = to_device(keys, device)
    return keys, data


def _hits(res: LookupResult) -> int:
    host = res.to_host()
    if res.out == "rowid":
        return int((host.rowid != np.iinfo(host.rowid.dtype).max).sum())
    if res.out == "count":
        return int((host.count > 0).sum())
    if res.out == "rowids":
        return int((np.diff(host.offsets) > 0).sum())
    return -1  # sums do not tell hits from misses


def run_spec(path: str | Path, stream: TextIO, device: str | None = None) -> int:
    """Run a spec file and write the summary to ``stream``; returns an exit code."""
    spec = load_run_spec(path)
    index: GpuIndex = create(spec, device=device)
    dev = index.device
    t0 = time.perf_counter()
    keys, data = _dataset(spec, dev)
    synchronize(dev)
    prepare_s = time.perf_counter() - t0
    point = data.queries is not None
    out: Out = spec.out or ("rowid" if point else "count")
    build = time_call(lambda: index.build(keys), dev, repeats=spec.repeats)
    fp = index.memory_footprint()
    batches = data.batches()

    def lookups() -> list[LookupResult]:
        if point:
            return [index.point(b[0], out=out) for b in batches]
        return [index.range(b[0], b[1], out=out) for b in batches]

    t = time_call(lookups, dev, repeats=spec.repeats)
    results = lookups()
    synchronize(dev)
    hits = sum(_hits(r) for r in results)
    n = data.n_lookups
    kind = "point" if point else f"range ({spec.workload.range_hits} keys each)"
    lines = [
        f"index      {index.name}  on {dev}  params {index.params.model_dump()}",
        f"keys       {len(index):,} of dtype {index.key_dtype}"
        + (f" from {spec.keys.path}" if spec.keys else f"  ({spec.workload.describe()})"),
        f"data       {prepare_s * 1e3:.1f} ms to generate or load and move to {dev} (untimed below)",
        f"build      {build.median * 1e3:.3f} ms (median of {spec.repeats})",
        f"footprint  {fp}",
        f"lookups    {n:,} {kind}, out={out}, {spec.workload.batches} batch(es): "
        f"{t.median * 1e3:.3f} ms (median of {spec.repeats}) = "
        f"{n / t.median / 1e6 if t.median > 0 else float('inf'):.1f} M lookups/s",
    ]
    if hits >= 0:
        lines.append(f"hits       {hits:,} of {n:,} (workload built for {data.n_hits:,})")
    stream.write("\n".join(lines) + "\n")
    return 0
