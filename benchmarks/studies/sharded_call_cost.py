"""The fixed cost of a sharded lookup given as a Dask array, on a local CPU cluster.

Two worker processes (one thread each); ``sharded`` over ``sorted-array`` on 2^16 uint32
keys with 1 and with 2 shards; lookups: a Dask array of two chunks of 1,000 keys, one on
each worker. Timed, median of ``--repeats`` calls after three: the call itself (what the
caller waits for before it gets the Dask array of answers) and the call plus computing the
answer on the workers (``client.persist`` and ``wait``). The lookups are few, so the times
are what Dask and the index spend around them, not the search.

    python benchmarks/studies/sharded_call_cost.py --output benchmarks/results/cpu/X
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--commit", default=None,
                    help="the commit measured (default: INDEXZOO_COMMIT, else this tree's git)")
    ap.add_argument("--output", type=Path, required=True)
    args = ap.parse_args()
    if args.commit is None:
        from indexzoo.tools.environment import git_commit

        args.commit = git_commit()
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    from indexzoo.plugins.sharded import ShardedIndex

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    client = Client(cluster)
    keys = np.random.default_rng(0).integers(0, 1 << 32, 1 << 16,
                                             dtype=np.uint64).astype(np.uint32)
    rows: list[dict[str, Any]] = []
    try:
        workers = sorted(client.scheduler_info()["workers"])
        for shards in (1, 2):
            index = ShardedIndex({"inner": "sorted-array", "shards": shards}, device="cpu",
                                 client=client).build(keys)
            chunks = [client.submit(np.copy, keys[i * 1000:(i + 1) * 1000],
                                    workers=[workers[i % 2]], pure=False) for i in range(2)]
            wait(chunks)
            lookups = da.concatenate([da.from_delayed(f, shape=(1000,), dtype=keys.dtype)
                                      for f in chunks])

            def call() -> tuple[float, float]:
                t0 = time.perf_counter()
                answer = index.point(lookups, out="count").count  # noqa: B023
                t1 = time.perf_counter()
                wait(client.persist(answer))
                return t1 - t0, time.perf_counter() - t0

            for _ in range(3):
                call()
            got = [call() for _ in range(args.repeats)]
            rows.append({"shards": shards,
                         "call_ms": statistics.median(g[0] for g in got) * 1e3,
                         "with_answer_ms": statistics.median(g[1] for g in got) * 1e3})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        client.close()
        cluster.close()
    args.output.mkdir(parents=True, exist_ok=True)
    meta = {"commit": args.commit, "cpus": os.cpu_count(), "load_average_at_end":
            os.getloadavg(), "repeats": args.repeats}
    (args.output / "call_cost.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                           indent=2) + "\n")


if __name__ == "__main__":
    main()
