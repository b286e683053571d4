"""How ``v1_*.izx`` were made: run with the rtscan of ebfee87 (state version 1, the paper's
layout, before the ``layout`` and ``sieve_fine`` parameters), ``python make_v1_files.py DIR``.
The current rtscan writes other files; ``test_rtscan.py`` loads these."""

import sys

import numpy as np

import indexzoo

VARIANTS = [("rtscan", {"sieve_vectors": 16}), ("rtscan-direct", {"sieve_vectors": 16}),
            ("rtscan-noenc", {"sieve_vectors": 16, "refine": "direct"}),
            ("rtscan-nosieve", {"refine": "direct"}), ("rtscan-rt", {"sieve_vectors": 16})]

if __name__ == "__main__":
    out = sys.argv[1]
    rng = np.random.default_rng(2024)
    n = 300
    cols = np.column_stack([rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
                            rng.integers(0, 40, n).astype(np.uint32),
                            rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)])
    np.save(f"{out}/v1_keys.npy", cols)
    for name, params in VARIANTS:
        indexzoo.create(name, device="cpu", **params).build(cols).save(f"{out}/v1_{name}.izx")
