"""The ``concurrency`` conformance checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..context import Context, check, verify
from ..data import lookups, make_keys, ranges
from ..oracle import Oracle, compare

# ====================================================================== concurrency
#: How long the rebuild race may run at most (seconds), and how many rebuilds it wants.
RACE_SECONDS, RACE_REBUILDS, RACE_READERS = 20.0, 24, 3
#: A hang guard, not a time limit: the race goes on past RACE_SECONDS until a lookup has
#: finished, so that a busy machine, where one lookup may take longer, gives the same verdict.
RACE_HANG_SECONDS = 600.0


@check("concurrency")
def check_lookups_racing_rebuilds_answer_from_one_build(ctx: Context) -> None:
    """Threads looking up while another thread rebuilds between two key sets: each answer is
    entirely right for one of the two builds (no crash, no mixture, no error)."""
    rng = np.random.default_rng(23)
    n = 6000 if ctx.size == "small" else 60000
    a_keys = make_keys("uniform32", n, 23, duplicates=ctx.caps.duplicates).keys
    b_keys = a_keys[-(n * 3 // 7):].copy()  # a suffix: the two builds differ in size
    a_vals = rng.integers(0, 2**64 - 1, a_keys.shape[0], dtype=np.uint64, endpoint=True)
    b_vals = rng.integers(0, 2**64 - 1, b_keys.shape[0], dtype=np.uint64, endpoint=True)
    builds = [(a_keys, a_vals), (b_keys, b_vals)]
    oracles = [Oracle(k, v) for k, v in builds]
    q = np.concatenate([b_keys[:200], a_keys[:200], lookups(a_keys, 200, 23)])
    lo, hi = ranges(a_keys, 300, 23)
    calls: list[tuple[str, str, Callable[[], Any]]] = []
    index = ctx.new().build(*builds[0])
    for mode in ctx.modes:
        if ctx.caps.point:
            calls.append(("point", mode, partial(index.point, q, out=mode)))
        if ctx.caps.range:
            calls.append(("range", mode, partial(index.range, lo, hi, out=mode)))
    for b in (1, 0):  # compile and warm up outside the race
        index.build(*builds[b])
        for _, _, call in calls:
            call()

    def right_for_one(kind: str, mode: str, res: Any) -> bool:
        for o in oracles:
            exp = o.point(q) if kind == "point" else o.range(lo, hi)
            if not compare(res, exp, o, mode, index, kind):
                return True
        return False

    stop = threading.Event()
    wrong: list[str] = []
    done = [0] * RACE_READERS

    def reader(r: int) -> None:
        i = r
        while not stop.is_set():
            kind, mode, call = calls[i % len(calls)]
            i += 1
            try:
                res = call()
            except Exception as exc:  # any error under a race is a failure of the plugin
                wrong.append(f"{kind} out={mode!r} raised {type(exc).__name__}: {exc}")
                return
            if not right_for_one(kind, mode, res):
                wrong.append(f"{kind} out={mode!r}: the answer matches neither build")
            done[r] += 1

    threads = [threading.Thread(target=reader, args=(r,), daemon=True)
               for r in range(RACE_READERS)]
    for t in threads:
        t.start()
    t0, rebuilds = time.perf_counter(), 0
    try:
        while not wrong and (
                (time.perf_counter() - t0 < RACE_SECONDS
                 and (rebuilds < RACE_REBUILDS or sum(done) < RACE_REBUILDS))
                or (sum(done) == 0 and time.perf_counter() - t0 < RACE_HANG_SECONDS)):
            rebuilds += 1
            index.build(*builds[rebuilds % 2])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not wrong, (f"{len(wrong)} of {sum(done) + len(wrong)} lookups during {rebuilds} "
                       "rebuilds went wrong; first: " + "; ".join(wrong[:3]))
    assert sum(done) > 0, "no lookup finished while the index was rebuilt"
    last_keys, last_vals = builds[rebuilds % 2]
    verify(ctx, index, last_keys, values=last_vals, points=q, rng=(lo, hi),
           label="after the race")


@check("concurrency", needs=("updates",))
def check_updates_from_several_threads_are_never_lost(ctx: Context) -> None:
    """Threads updating disjoint positions of one index at once: afterwards every position has
    the key its thread set last (no update lost), and answers equal a fresh build's."""
    threads, rounds = 3, 12 if ctx.size == "small" else 40
    n = 900
    keys = ctx.keys(range(0, 7 * n, 7), 64)
    index = ctx.new().build(keys)
    final = keys.copy()
    plans = []
    for t in range(threads):
        mine = np.arange(t, n, threads, dtype=np.int64)
        steps = []
        for r in range(rounds):
            pos = mine[r % 3::3][:20]
            new = (np.uint64(1_000_000) + np.uint64(10_000 * t + 100 * r)
                   + np.arange(pos.shape[0], dtype=np.uint64)).astype(keys.dtype)
            steps.append((pos, new))
            final[pos] = new
        plans.append(steps)
    index.update(*plans[0][0])  # compile outside the race
    failures: list[str] = []

    def updater(steps: list[tuple[np.ndarray, np.ndarray]]) -> None:
        try:
            for pos, new in steps:
                index.update(pos, new)
        except Exception as exc:  # an error under concurrency is a failure of the plugin
            failures.append(f"{type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=updater, args=(plans[t],), daemon=True)
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert not failures, f"updates from {threads} threads raised: {failures[0]}"
    if ctx.caps.point and "rowid" in ctx.modes:  # else verify() below says it less directly
        got = index.point(final, out="rowid").to_host().rowid
        lost = np.flatnonzero(got.astype(np.int64) != np.arange(n))
        assert lost.shape[0] == 0, (
            f"{lost.shape[0]} of {n} positions lost their last update (first at rowIDs "
            f"{lost[:5].tolist()})")
    verify(ctx, index, final, points=final, rng=(final, final + final.dtype.type(9)),
           label="after concurrent updates")
