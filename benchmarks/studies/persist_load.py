"""Loading saved indexes: how long ``indexzoo.load`` takes next to reading the same bytes with
NumPy, and next to building the index again.

    python benchmarks/studies/persist_load.py --device cpu|cuda --log2-keys 26 [--json out.json]

1. ``sorted-array`` over 2^k uint64 keys is saved; then, from the same file (in the page cache,
   read once before timing), ``indexzoo.load`` is timed against ``np.fromfile`` of the file's
   array bytes (the keys and rowIDs at their offsets: the same bytes, no checks) and against
   ``np.load`` of the archive's members. The target: load <= 2x NumPy's read.
2. ``rx``, ``rx-opt``, ``btree`` and ``cgrx`` over the same keys: build time against load time,
   twice: in this process, warm (kernels compiled, keys in memory), and in a new process, from
   the moment it has imported indexzoo and made its CUDA context to a ready index (the build
   reads the keys from an ``.npy`` file in the page cache and compiles its kernels; the load
   reads the saved index). The second is what a process that starts and needs the index pays.

Each figure is the best of ``--repeat`` runs; on the GPU the load includes the copy to the
device (synchronised). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import indexzoo
from indexzoo import persist

BUILD_VS_LOAD = ("rx", "rx-opt", "btree", "cgrx")


def best(fn: Callable[[], Any], repeat: int, sync: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return min(times)


def fromfile_arrays(path: Path) -> Callable[[], list[np.ndarray]]:
    """Reads every array member's data bytes with np.fromfile at its offset (no checks)."""
    spans = []
    with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                continue
            raw.seek(info.header_offset + 26)
            name_len, extra_len = np.frombuffer(raw.read(4), dtype="<u2")
            raw.seek(info.header_offset + 30 + int(name_len) + int(extra_len))
            np.lib.format.read_magic(raw)
            shape, _, dtype = np.lib.format.read_array_header_1_0(raw)
            spans.append((raw.tell(), dtype, int(np.prod(shape))))

    def read() -> list[np.ndarray]:
        return [np.fromfile(path, dtype=dt, count=n, offset=off) for off, dt, n in spans]
    return read


_CHILD = """
import sys, time
import numpy as np
import indexzoo
dev, what, name, path = sys.argv[1:5]
sync = lambda: None
if dev == "cuda":
    import cupy
    sync = cupy.cuda.Device().synchronize
    cupy.zeros(1).sum(); sync()  # the CUDA context, made before the clock starts
t = time.perf_counter()
if what == "build":
    indexzoo.create(name, device=dev).build(np.load(path))
else:
    indexzoo.load(path, device=dev)
sync()
print(time.perf_counter() - t)
"""


def fresh(dev: str, what: str, name: str, path: Path, repeat: int) -> float:
    """Seconds to a ready index in a new process (best of ``repeat``), see the docstring."""
    times = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _CHILD, dev, what, name, str(path)],
                             check=True, capture_output=True, text=True)
        times.append(float(out.stdout.split()[-1]))
    return min(times)


def print_row(r: dict[str, Any]) -> None:
    """One line of the table, printed as soon as its index is measured."""
    if "np_fromfile_s" in r:
        print(f"{r['index']:14} file {r['bytes'] / 1e6:9.1f} MB  np.fromfile "
              f"{r['np_fromfile_s']:.3f} s  np.load(npz) {r['np_load_npz_s']:.3f} s  "
              f"persist.read {r['read_checked_s']:.3f} s  indexzoo.load {r['load_s']:.3f} s"
              f"  load/fromfile {r['load_over_fromfile']:.2f}x", flush=True)
    else:
        print(f"{r['index']:14} file {r['bytes'] / 1e6:9.1f} MB  build {r['build_s']:.3f} s  "
              f"load {r['load_s']:.3f} s  build/load {r['build_over_load']:.2f}x   new process: "
              f"build {r['fresh_build_s']:.3f} s  load {r['fresh_load_s']:.3f} s  build/load "
              f"{r['fresh_build_over_load']:.2f}x", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--log2-keys", type=int, default=22)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="persist_load.json")
    ap.add_argument("--indexes", default=",".join(BUILD_VS_LOAD))
    args = ap.parse_args()
    dev = args.device
    sync: Callable[[], None] = lambda: None  # noqa: E731
    if dev == "cuda":
        import cupy

        sync = cupy.cuda.Device().synchronize
    n = 1 << args.log2_keys
    keys = np.random.default_rng(1).permutation(n).astype(np.uint64) * np.uint64(3)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        path = Path(tmp) / "sorted-array.izo"
        indexzoo.create("sorted-array", device=dev).build(keys).save(path)
        path.read_bytes()  # into the page cache: every reader below starts from it
        raw = fromfile_arrays(path)
        t_np = best(raw, args.repeat, sync)
        t_npz = best(lambda: [a for _, a in np.load(path, allow_pickle=False).items()
                              if isinstance(a, np.ndarray)], args.repeat, sync)
        t_load = best(lambda: indexzoo.load(path, device=dev), args.repeat, sync)
        t_read = best(lambda: persist.read(path), args.repeat, sync)
        rows.append({"index": "sorted-array", "bytes": path.stat().st_size,
                     "np_fromfile_s": t_np, "np_load_npz_s": t_npz, "read_checked_s": t_read,
                     "load_s": t_load, "load_over_fromfile": t_load / t_np})
        print(f"device {dev}, 2^{args.log2_keys} uint64 keys, best of {args.repeat}")
        print_row(rows[-1])
        keys_path = Path(tmp) / "keys.npy"
        np.save(keys_path, keys)
        keys_path.read_bytes()
        for name in [s for s in args.indexes.split(",") if s]:
            index = indexzoo.create(name, device=dev)
            t_build = best(lambda index=index: index.build(keys), args.repeat, sync)
            p = Path(tmp) / f"{name}.izo"
            index.save(p)
            p.read_bytes()
            t_load = best(lambda p=p: indexzoo.load(p, device=dev), args.repeat, sync)
            f_build = fresh(dev, "build", name, keys_path, args.repeat)
            f_load = fresh(dev, "load", name, p, args.repeat)
            rows.append({"index": name, "bytes": p.stat().st_size, "build_s": t_build,
                         "load_s": t_load, "build_over_load": t_build / t_load,
                         "fresh_build_s": f_build, "fresh_load_s": f_load,
                         "fresh_build_over_load": f_build / f_load})
            print_row(rows[-1])
            del index
    Path(args.json).write_text(json.dumps({"device": dev, "log2_keys": args.log2_keys,
                                           "repeat": args.repeat, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
