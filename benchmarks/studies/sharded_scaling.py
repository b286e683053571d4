"""The sharded index on 1, 2 and 4 workers, and the parts its cost model is made of.

For each worker count W a local cluster of W worker processes (one thread each; numba's
kernels on one thread per worker) holds a ``sharded`` index of W shards over ``--inner``;
timed (median of ``--repeats``, after a warm-up) on the same keys and lookups:

* build; point lookups (``out=count``) and ranges (``out=count``) of one batch;
* a call of one lookup (the fixed cost of a call: routing, one task per shard, gathering);
* the inner index alone in this process on all of the keys, its kernels on one thread (what
  one shard would cost if it held everything), and on one W-th of the keys;
* the client's parts per lookup: routing a batch (``partition.route_points``) and combining
  the shards' answers (``_combine``), measured apart from the cluster; and shipping: each
  shard's part of the batch sent to a worker and one uint64 per lookup sent back, with no
  index work.

Writes ``scaling.md`` (the table) and ``scaling.json`` under ``--output``.

    python benchmarks/studies/sharded_scaling.py --keys 22 --lookups 21 --output benchmarks/results/cpu/X
    python benchmarks/studies/sharded_scaling.py --device cuda --workers 1,2,4,8 --keys 30 --lookups 27 \
        --output benchmarks/results/h100/X      # on a multi-GPU machine (pip install dask-cuda)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import indexzoo
from indexzoo.plugins.sharded import ShardedIndex, partition
from indexzoo.plugins.sharded.index import _combine


def _median(fn: Any, repeats: int) -> float:
    fn()  # warm-up (and the kernels' compilation on every worker)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _cluster(workers: int, device: str) -> Any:
    """W worker processes on the CPU, or dask-cuda's LocalCUDACluster on the first W GPUs
    (one worker each; untested where this script was written, a machine without GPU)."""
    if device == "cuda":
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(n_workers=workers, dashboard_address=":0")
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        dashboard_address=":0", env={"NUMBA_NUM_THREADS": "1"})


def measure(workers: int, inner: str, keys: np.ndarray, q: np.ndarray, lo: np.ndarray,
            hi: np.ndarray, repeats: int, device: str = "cpu") -> dict[str, Any]:
    from distributed import Client

    cluster = _cluster(workers, device)
    client = Client(cluster, set_as_default=False)
    try:
        index = ShardedIndex({"inner": inner, "shards": workers}, device=device, client=client)
        t0 = time.perf_counter()
        index.build(keys)
        build = time.perf_counter() - t0
        points = _median(lambda: index.point(q, out="count"), repeats)
        ranges = _median(lambda: index.range(lo, hi, out="count"), repeats)
        one = _median(lambda: index.point(q[:1], out="count"), max(repeats, 20))
        st = index.state
        routes = partition.route_points(st.scheme, q, workers, st.lo, st.hi, st.heavy)
        route = _median(lambda: partition.route_points(st.scheme, q, workers, st.lo, st.hi,
                                                       st.heavy), repeats)
        asked = [(s, r) for s, r in enumerate(routes) if r.shape[0]]
        parts = [np.ones(r.shape[0], dtype=np.uint64) for _, r in asked]
        combine = _median(lambda: _combine("count", q.shape[0], asked, parts,
                                           np.dtype(np.uint32)), repeats)
        sizes = index.shard_sizes()
        ship = _median(lambda: client.gather([client.submit(_echo_counts, q[r], pure=False)
                                              for _, r in asked]), repeats)
    finally:
        client.close()
        cluster.close()
    return {"workers": workers, "shards": workers, "build_s": build, "point_s": points,
            "range_s": ranges, "one_lookup_s": one, "route_s": route, "combine_s": combine,
            "ship_s": ship, "shard_sizes": sizes}


def _echo_counts(q: np.ndarray) -> np.ndarray:
    """A shard's reply without the index: what sending its part of a batch and bringing
    back one uint64 per lookup costs."""
    return np.zeros(q.shape[0], dtype=np.uint64)


def inner_alone(inner: str, keys: np.ndarray, q: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                repeats: int, device: str = "cpu") -> dict[str, float]:
    index = indexzoo.create(inner, device=device).build(keys)
    return {"point_s": _median(lambda: index.point(q, out="count"), repeats),
            "range_s": _median(lambda: index.range(lo, hi, out="count"), repeats)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inner", default="sorted-array")
    ap.add_argument("--keys", type=int, default=22, help="log2 of the number of keys")
    ap.add_argument("--lookups", type=int, default=21, help="log2 of the lookups per batch")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cuda: a LocalCUDACluster over the first W GPUs (needs dask-cuda)")
    ap.add_argument("--output", type=Path, required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, nq = 1 << args.keys, 1 << args.lookups
    keys = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    q = keys[rng.integers(0, n, nq)]
    lo = q
    hi = (q.astype(np.uint64) + (1 << 12)).clip(max=(1 << 32) - 1).astype(np.uint32)
    whole = inner_alone(args.inner, keys, q, lo, hi, args.repeats, args.device)
    rows = []
    for w in [int(x) for x in args.workers.split(",")]:
        got = measure(w, args.inner, keys, q, lo, hi, args.repeats, args.device)
        got["inner_part"] = inner_alone(args.inner, keys[: n // w], q, lo, hi, args.repeats,
                                        args.device)
        rows.append(got)
        print(json.dumps(got), flush=True)
    from indexzoo.tools.environment import git_commit

    commit = git_commit()  # INDEXZOO_COMMIT, else the git of this tree, not of the cwd
    meta = {"commit": commit, "device": args.device, "inner": args.inner, "keys": n,
            "lookups": nq,
            "range_width": 1 << 12, "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(), "machine": platform.processor()
            or platform.machine(), "python": platform.python_version(),
            "inner_alone": whole}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "scaling.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                         indent=2) + "\n")
    lines = [f"`sharded` over `{args.inner}`, 2^{args.keys} uint32 keys, batches of "
             f"2^{args.lookups} lookups (`out=count`; ranges of width 4096), commit {commit}, "
             f"on {args.device}, "
             f"{os.cpu_count()} CPUs, one thread per worker. Times are medians of "
             f"{args.repeats} runs, in ms.",
             "",
             f"The inner index alone in one process (one thread): points "
             f"{whole['point_s'] * 1e3:.1f} ms, ranges {whole['range_s'] * 1e3:.1f} ms.",
             "",
             "| workers = shards | build | points | Mlookups/s | ranges | one lookup | "
             "routing (client) | combining (client) | shipping | inner on N/W keys: points |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['workers']} | {r['build_s'] * 1e3:.0f} | {r['point_s'] * 1e3:.1f} | "
            f"{nq / r['point_s'] / 1e6:.2f} | {r['range_s'] * 1e3:.1f} | "
            f"{r['one_lookup_s'] * 1e3:.2f} | {r['route_s'] * 1e3:.1f} | "
            f"{r['combine_s'] * 1e3:.1f} | {r['ship_s'] * 1e3:.1f} | "
            f"{r['inner_part']['point_s'] * 1e3:.1f} |")
    (args.output / "scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
