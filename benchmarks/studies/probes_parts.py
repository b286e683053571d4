"""Where a sorted-probe call's time goes, on the GPU: the whole call with and without
``sort_probes`` for ``sorted-array`` and ``btree``, the lookups of an already grouped (and a
fully sorted) batch, and each step of the order and the two permutations, CuPy's array
expressions beside what ``indexzoo.probes`` runs (a fused elementwise kernel for the bucket
ids, ``take`` and an indexed assignment for the permutations).

    python benchmarks/studies/probes_parts.py probes_parts.json [--keys 26 --lookups 27]

Uniform uint64 keys, random hits; CUDA-event medians of 5 after a warm-up. Prints one line
per step and writes the figures (ms) as JSON.
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
from indexzoo import probes
from indexzoo.probes import probe_order
from indexzoo.tools.timing import time_call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("--keys", type=int, default=26, help="log2 of the number of keys")
    ap.add_argument("--lookups", type=int, default=27, help="log2 of the lookups")
    args = ap.parse_args(argv)
    import cupy as cp

    out: dict[str, float] = {}

    def t(name: str, fn: Callable[[], Any]) -> None:
        out[name] = statistics.median(time_call(fn, "cuda", repeats=5).seconds) * 1e3
        print(f"{name:<48} {out[name]:9.3f} ms", flush=True)

    rng = np.random.default_rng(1)
    n, m = 1 << args.keys, 1 << args.lookups
    keys = cp.asarray(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))
    q = keys[cp.asarray(rng.integers(0, n, m))]
    order = probe_order(q, cp)
    def one_index(name: str) -> None:
        plain = indexzoo.create(name, device="cuda").build(keys)
        grouped = indexzoo.create(name, device="cuda", sort_probes=True).build(keys)
        qs, full = q[order], cp.sort(q)
        t(f"{name}: unsorted call", lambda: plain.point(q, out="rowid"))
        t(f"{name}: sort_probes call", lambda: grouped.point(q, out="rowid"))
        t(f"{name}: lookups of the grouped batch", lambda: plain.point(qs, out="rowid"))
        t(f"{name}: lookups of a fully sorted batch", lambda: plain.point(full, out="rowid"))

    for name in ("sorted-array", "btree"):
        one_index(name)
    lo = int(q.min())
    b = ((q - np.uint64(lo)) >> np.uint64(48)).astype(np.uint16)
    res = cp.empty(m, np.uint32)

    def unpermute() -> None:
        back = cp.empty_like(res)
        back[order] = res

    t("probe_order (16 bits)", lambda: probe_order(q, cp))
    t("  min+max", lambda: (q.min(), q.max()))
    t("  bucket ids (CuPy: sub, shift, astype)",
      lambda: ((q - np.uint64(lo)) >> np.uint64(48)).astype(np.uint16))
    t("  bucket ids (probes.bucket_ids)", lambda: probes.bucket_ids(q, lo, 48, np.uint16, cp))
    t("  argsort uint16", lambda: cp.argsort(b))
    t("gather q[order] (CuPy)", lambda: q[order])
    t("gather (probes.gather)", lambda: probes.gather(q, order, cp))
    t("unpermute back[order] = res (CuPy, uint32)", unpermute)
    t("unpermute (probes.scatter, uint32)", lambda: probes.scatter(res, order, cp))
    t("cp.sort(q) (full 64-bit)", lambda: cp.sort(q))
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
