"""Where a ``warpcore-hash`` build's time goes, on the GPU: the whole ``build`` for group sizes
and layouts, each step of the default build alone, and the device's floors for the same
table (one random 8-byte read, one random 8-byte write per key).

    python benchmarks/studies/hash_build_parts.py hash_build.json [--keys 26]
    ncu --profile-from-start off ... python benchmarks/studies/hash_build_parts.py x.json --ncu

Unique uniform uint64 keys, load factor 0.8; CUDA-event medians of 5 after a warm-up. Prints
one line per step (ms, and G keys/s for the builds) and writes the figures as JSON. With
``--ncu`` only one insert pass of the default table runs inside a CUDA profiler range.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import indexzoo
from indexzoo.plugins.warpcore_hash.index import BuildPasses, _empty_table
from indexzoo.tools.timing import time_call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("--keys", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--ncu", action="store_true")
    args = ap.parse_args(argv)
    import cupy as cp

    n = 1 << args.keys
    rng = np.random.default_rng(5)
    host = np.unique(rng.integers(0, 2**64 - 2, int(n * 1.01), dtype=np.uint64))[:n]
    rng.shuffle(host)
    keys = cp.asarray(host)
    n = int(keys.shape[0])
    rowids = cp.arange(n, dtype=np.uint32)
    passes = BuildPasses("cuda")

    def table(group: int = 4, layout: str = "soa") -> Any:
        return _empty_table(cp, n, 0.8, group, layout, np.dtype(np.uint64),
                            np.dtype(np.uint64 if layout == "aos" else np.uint32),
                            cp.empty(0, np.uint32))

    if args.ncu:
        tab, counts = table(), cp.zeros(table().capacity, np.uint32)
        passes.insert(tab, counts, keys, rowids)  # compiled and warm
        tab, counts = table(), cp.zeros(tab.capacity, np.uint32)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.start()
        passes.insert(tab, counts, keys, rowids)
        cp.cuda.Device().synchronize()
        cp.cuda.profiler.stop()
        return 0

    out: dict[str, float] = {}

    def t(name: str, fn: Callable[[], Any], per_key: bool = False) -> float:
        ms = statistics.median(time_call(fn, "cuda", repeats=5).seconds) * 1e3
        out[name] = ms
        rate = f"  {n / ms / 1e6:6.2f} G keys/s" if per_key else ""
        print(f"  {name:<52} {ms:8.3f} ms{rate}", flush=True)
        return ms

    print(f"warpcore-hash build parts: {n} unique uint64 keys, load factor 0.8")
    for layout in ("soa", "aos"):
        for g in (1, 2, 4, 8):
            ix = indexzoo.create("warpcore-hash", params={"group_size": g, "layout": layout},
                                 device="cuda")
            t(f"build (index.build) G={g} {layout}", lambda ix=ix: ix.build(keys), per_key=True)
    cap = table().capacity
    t("step: key copy (the base's own copy)", lambda: keys.copy())
    t("step: rowids = arange(n)", lambda: cp.arange(n, dtype=np.uint32))
    t("step: empty-key check (== max, sum)", lambda: int((keys == np.uint64(2**64 - 1)).sum()))
    t("step: empty table (G=4 soa)", table)
    t("step: counts = zeros(capacity)", lambda: cp.zeros(cap, np.uint32))
    counts = cp.zeros(cap, np.uint32)
    t("step: counts.max()", lambda: int(counts.max()))
    for layout in ("soa", "aos"):
        for g in (1, 2, 4, 8):
            def fresh(g: int = g, layout: str = layout) -> Any:
                tab = table(g, layout)
                return tab, cp.zeros(tab.capacity, np.uint32)

            base = t(f"step: fresh table and counts G={g} {layout}", fresh)

            def insert(g: int = g, layout: str = layout) -> None:
                tab, c = fresh(g, layout)
                passes.insert(tab, c, keys, rowids)

            whole = t(f"step: fresh table, counts and insert pass G={g} {layout}", insert)
            out[f"insert pass alone G={g} {layout}"] = whole - base
            print(f"  {'= insert pass alone G=' + str(g) + ' ' + layout:<52} "
                  f"{whole - base:8.3f} ms  {n / (whole - base) / 1e6:6.2f} G keys/s")
    pos = cp.asarray(rng.integers(0, cap, n))
    target = cp.empty(cap, np.uint64)
    t("floor: random 8-byte write into the table's size", lambda: target.__setitem__(pos, keys))
    t("floor: random 8-byte read from the table's size", lambda: target[pos])
    with open(args.json, "w") as f:
        json.dump({"keys": n, "capacity": cap, "ms": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
