"""The sharded index on one and on two GPUs against the inner index alone in one process.

For each inner index (``--inner``, e.g. ``btree,warpcore-hash``) on the same keys
(``2^--keys`` random uint32) and the same batch of point lookups (``2^--lookups``, drawn
from the keys, ``out=count``), every time the median of ``--repeats`` runs after a warm-up:

* **alone**: the inner index in this process on GPU 0: its build from NumPy keys, the keys'
  own host -> GPU copy, a batch of lookups already on the GPU (CuPy), and the round trip of a
  NumPy batch (host -> GPU, lookups, answers -> host);
* **sharded** on a ``LocalCUDACluster`` of ``W`` GPUs (``--gpus``, one worker and one shard
  per GPU): the build from NumPy keys; the batch resident on the workers as a Dask array
  of CuPy chunks, persisted (``--chunks-per-gpu`` chunks on each worker; timed from the
  call until every chunk of the answer is computed, on the workers, its GPU work done), one
  call at a time, and ``--in-flight`` calls issued back to back and waited for together
  (the time per call: throughput, Dask's latencies overlapping other calls' GPU work; the
  inner index alone likewise, its calls synchronised once); the same batch as NumPy from this
  process (answers back here as NumPy).

Every answer is checked against the inner index alone (``wrong`` counts the lookups that
differ). Writes ``targets.json`` and ``targets.md`` under ``--output``.

    python benchmarks/studies/sharded_targets.py --keys 28 --lookups 26 --gpus 1,2 \\
        --inner btree,warpcore-hash --output benchmarks/results/h200-x2/X   # needs dask-cuda
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


def _sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def _median(fn: Any, repeats: int) -> float:
    fn()
    _sync()
    times = []
    for _ in range(repeats):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _to_host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def alone(inner: str, keys: np.ndarray, q: np.ndarray, repeats: int, in_flight: int
          ) -> tuple[dict[str, Any], np.ndarray]:
    import cupy

    import indexzoo

    transfer = _median(lambda: cupy.asarray(keys), repeats)
    builds = []
    for _ in range(max(2, repeats // 2)):
        _sync()
        t0 = time.perf_counter()
        index = indexzoo.create(inner, device="cuda").build(keys)
        _sync()
        builds.append(time.perf_counter() - t0)
    build = statistics.median(builds[1:])  # the first compiles
    qd = cupy.asarray(q)
    resident = _median(lambda: index.point(qd, out="count"), repeats)
    streamed = _median(lambda: [index.point(qd, out="count") for _ in range(in_flight)],
                       repeats) / in_flight
    trip = _median(lambda: _to_host(index.point(cupy.asarray(q), out="count").count), repeats)
    truth = _to_host(index.point(qd, out="count").count)
    index = qd = None  # freed before the cluster's workers need GPU 0
    cupy.get_default_memory_pool().free_all_blocks()
    return {"build_s": build, "keys_to_gpu_s": transfer, "resident_s": resident,
            "streamed_s": streamed, "round_trip_s": trip}, truth


def _chunk_on_gpu(part: np.ndarray) -> Any:
    import cupy

    return cupy.asarray(part)


def sharded(inner: str, gpus: int, keys: np.ndarray, q: np.ndarray, truth: np.ndarray,
            repeats: int, chunks_per_gpu: int, in_flight: int, threads: int = 1,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    import dask.array as da
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait

    from indexzoo.plugins.sharded import ShardedIndex

    cluster = LocalCUDACluster(n_workers=gpus, CUDA_VISIBLE_DEVICES=list(range(gpus)),
                               threads_per_worker=threads, dashboard_address=":0",
                               **({"env": env} if env else {}))
    client = Client(cluster)  # the default client: distributed.wait uses it
    try:
        workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
        builds = []
        for _ in range(2):  # the first compiles on every worker
            index = ShardedIndex({"inner": inner, "shards": gpus}, device="cuda",
                                 client=client)
            t0 = time.perf_counter()
            index.build(keys)
            builds.append(time.perf_counter() - t0)
        n_chunks = gpus * chunks_per_gpu
        cuts = (np.arange(n_chunks + 1) * q.shape[0]) // n_chunks
        futures = []
        for i in range(n_chunks):
            at = [workers[i % gpus]]
            host = client.scatter(q[cuts[i]:cuts[i + 1]], workers=at)
            futures.append(client.submit(_chunk_on_gpu, host, workers=at, pure=False))
        wait(futures)
        import cupy

        meta = cupy.empty(0, dtype=q.dtype)
        lookups = da.concatenate([da.from_delayed(f, shape=(int(cuts[i + 1] - cuts[i]),),
                                                  dtype=q.dtype, meta=meta)
                                  for i, f in enumerate(futures)])
        lookups = client.persist(lookups)  # resident: each chunk a future on its worker
        wait(lookups)

        def resident_call() -> Any:
            answer = index.point(lookups, out="count").count
            done = client.persist(answer)
            wait(done)
            return done

        times, calls = [], []
        resident_call()
        for _ in range(repeats):
            t0 = time.perf_counter()
            answer = index.point(lookups, out="count").count
            t1 = time.perf_counter()
            done = client.persist(answer)
            wait(done)
            times.append(time.perf_counter() - t0)
            calls.append(t1 - t0)
        streamed = []
        for _ in range(repeats + 1):  # calls issued back to back, then waited for together
            t0 = time.perf_counter()
            answers = [index.point(lookups, out="count").count for _ in range(in_flight)]
            wait(client.persist(answers))
            streamed.append((time.perf_counter() - t0) / in_flight)
            answers = None
        from distributed import get_task_stream

        with get_task_stream(client) as stream:
            t0 = time.perf_counter()
            profiled = resident_call()
            span = time.perf_counter() - t0
        tasks = _task_summary(stream.data)
        got = _to_host(profiled.compute(scheduler=client))
        wrong_resident = int((got.astype(np.int64) != truth.astype(np.int64)).sum())
        batch = []
        client_answer = None
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            client_answer = _to_host(index.point(q, out="count").count)
            batch.append(time.perf_counter() - t0)
        wrong_batch = int((client_answer.astype(np.int64) != truth.astype(np.int64)).sum())
        sizes = index.shard_sizes()
    finally:
        client.close()
        cluster.close()
    return {"gpus": gpus, "build_s": builds[-1], "first_build_s": builds[0],
            "resident_s": statistics.median(times), "resident_call_s": statistics.median(calls),
            "streamed_s": statistics.median(streamed[1:]),
            "client_batch_s": statistics.median(batch[1:]), "wrong_resident": wrong_resident,
            "wrong_batch": wrong_batch, "shard_sizes": sizes, "chunks": n_chunks,
            "profiled_s": span, "tasks": tasks}


def _task_summary(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dask's task stream of one call: each task's name, worker and what it spent (compute,
    transfer of its inputs), in ms from the first task's start."""
    from dask.utils import key_split

    rows = []
    for rec in data:
        for ss in rec.get("startstops", ()):
            rows.append({"task": key_split(rec["key"]), "worker": rec.get("worker", ""),
                         "action": ss["action"], "start": ss["start"], "stop": ss["stop"]})
    if not rows:
        return []
    first = min(r["start"] for r in rows)
    for r in rows:
        r["start_ms"] = round((r.pop("start") - first) * 1e3, 2)
        r["ms"] = round((r.pop("stop") - first) * 1e3 - r["start_ms"], 2)
    return sorted(rows, key=lambda r: r["start_ms"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inner", default="btree,warpcore-hash")
    ap.add_argument("--keys", type=int, default=28, help="log2 of the number of keys")
    ap.add_argument("--lookups", type=int, default=26, help="log2 of the lookups per batch")
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--chunks-per-gpu", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads-per-worker", type=int, default=1)
    ap.add_argument("--worker-env", action="append", default=[],
                    help="NAME=VALUE set in each worker's environment (repeatable)")
    ap.add_argument("--in-flight", type=int, default=4,
                    help="calls issued back to back for the streamed figure")
    ap.add_argument("--commit", default=None,
                    help="the commit measured (default: INDEXZOO_COMMIT, else this tree's git)")
    ap.add_argument("--output", type=Path, required=True)
    args = ap.parse_args()
    if args.commit is None:
        from indexzoo.tools.environment import git_commit

        args.commit = git_commit()
    rng = np.random.default_rng(0)
    n, nq = 1 << args.keys, 1 << args.lookups
    keys = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    q = keys[rng.integers(0, n, nq)]
    results: dict[str, Any] = {}
    for inner in args.inner.split(","):
        one, truth = alone(inner, keys, q, args.repeats, args.in_flight)
        print(inner, "alone", json.dumps(one), flush=True)
        rows = []
        for g in [int(x) for x in args.gpus.split(",")]:
            row = sharded(inner, g, keys, q, truth, args.repeats, args.chunks_per_gpu,
                          args.in_flight, args.threads_per_worker,
                          dict(e.split("=", 1) for e in args.worker_env))
            print(inner, json.dumps({k: v for k, v in row.items() if k != "tasks"}), flush=True)
            for t in row["tasks"]:
                print("   ", json.dumps(t), flush=True)
            rows.append(row)
        results[inner] = {"alone": one, "sharded": rows}
    meta = {"commit": args.commit, "keys": n, "lookups": nq, "key_dtype": "uint32",
            "out": "count", "repeats": args.repeats, "chunks_per_gpu": args.chunks_per_gpu,
            "in_flight": args.in_flight, "threads_per_worker": args.threads_per_worker,
            "worker_env": args.worker_env,
            "cpus": os.cpu_count(), "python": platform.python_version()}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "targets.json").write_text(json.dumps({"meta": meta, "results": results},
                                                         indent=2) + "\n")
    lines = [f"`sharded` on 1 and 2 GPUs, 2^{args.keys} uint32 keys, batches of "
             f"2^{args.lookups} point lookups (`out=count`), commit {args.commit}; medians "
             f"of {args.repeats} runs, ms.", ""]
    for inner, got in results.items():
        one = got["alone"]
        lines += [f"**{inner}** alone in one process: build {one['build_s'] * 1e3:.0f} "
                  f"(keys to the GPU {one['keys_to_gpu_s'] * 1e3:.0f}), lookups on the GPU "
                  f"{one['resident_s'] * 1e3:.1f} a call ({one['streamed_s'] * 1e3:.1f} with "
                  f"{args.in_flight} in flight), NumPy round trip "
                  f"{one['round_trip_s'] * 1e3:.1f}.", "",
                  "| GPUs | build | x (alone + keys) | resident lookups, one at a time | x alone "
                  f"| resident, {args.in_flight} in flight | x alone | "
                  "client NumPy batch | x round trip | wrong |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        base = streamed = None
        for r in got["sharded"]:
            base = base or r["resident_s"]
            streamed = streamed or r["streamed_s"]
            lines.append(
                f"| {r['gpus']} | {r['build_s'] * 1e3:.0f} | "
                f"{r['build_s'] / (one['build_s'] + one['keys_to_gpu_s']):.2f} | "
                f"{r['resident_s'] * 1e3:.1f} ({base / r['resident_s']:.2f}x 1 GPU) | "
                f"{one['resident_s'] / r['resident_s']:.2f} | "
                f"{r['streamed_s'] * 1e3:.1f} ({streamed / r['streamed_s']:.2f}x 1 GPU) | "
                f"{one['streamed_s'] / r['streamed_s']:.2f} | "
                f"{r['client_batch_s'] * 1e3:.1f} | "
                f"{r['client_batch_s'] / one['round_trip_s']:.2f} | "
                f"{r['wrong_resident'] + r['wrong_batch']} |")
        lines.append("")
    (args.output / "targets.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
