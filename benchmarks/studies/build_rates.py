"""Keys a second each index family builds, for the ``build_rate`` figures of its index class
(:mod:`indexzoo.buildtime`: the line a long build writes before it starts).

    python benchmarks/studies/build_rates.py [--device cpu] [--keys 22,24]
        [--indexes sorted-array,rx,...] [--columns 3]

Per index and key count (``--keys``: log2 of the counts): one build on 2^17 uniform keys first,
untimed (it compiles the kernels, the parallel ones included: smaller builds run serial
kernels on the CPU), then one timed build over fresh uniform uint64 keys (uint32 columns for a
multi-column index, ``--columns`` of them). Prints ``index, keys, seconds, keys/s``, one line
each.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import indexzoo
from indexzoo.tools.timing import synchronize

WARM_UP_KEYS = 1 << 17


def _keys(rng: np.random.Generator, n: int, columns: int, device: str) -> object:
    if columns == 1:
        keys = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    else:
        keys = rng.integers(0, 2**32 - 1, (n, columns), dtype=np.uint32)
    if device == "cuda":
        import cupy

        return cupy.asarray(keys)
    return keys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--keys", default="22", help="log2 of the key counts, comma-separated")
    ap.add_argument("--indexes", default="sorted-array,searchsorted,warpcore-hash,btree,"
                    "lightweight,cgrx,rx,rx-opt")
    ap.add_argument("--columns", type=int, default=1, help="key columns (multi-column indexes)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for name in args.indexes.split(","):
        index = indexzoo.create(name, device=args.device)
        index.build(_keys(rng, WARM_UP_KEYS, args.columns, args.device))
        for log2 in (int(k) for k in args.keys.split(",")):
            keys = _keys(rng, 1 << log2, args.columns, args.device)
            synchronize(args.device)
            t0 = time.perf_counter()
            index.build(keys)
            synchronize(args.device)
            took = time.perf_counter() - t0
            print(f"{name:<14} 2^{log2} x {args.columns}  {took:8.2f} s  "
                  f"{(1 << log2) / took:14,.0f} keys/s", flush=True)


if __name__ == "__main__":
    main()
