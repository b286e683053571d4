"""Fixed cost per call: small batches of lookups, back to back, on one device.

    python benchmarks/host_overhead.py --device cuda --lookups 1024 --indexes sorted-array,rx
    python benchmarks/host_overhead.py --device cpu --lookups 4096 --peer

Each index is built on ``--keys`` uniform uint64 keys and answers ``--calls`` batches of
``--lookups`` hits, one call after another; the figure is the wall time of the whole loop over
the number of calls (on the GPU the loop ends with a synchronisation), after a warm-up loop,
and beside it the host time per call: the loop up to the last call's return, before that
synchronisation. On the GPU a call that never waits for the device returns before its kernels
end, so the host time is what one call costs the host (validation, the key map, dispatch,
launches) even where the device work of a call takes longer. ``--peer`` adds NumPy's or
CuPy's ``searchsorted`` over the sorted keys (positions only) in the same run. Prints one line
per index, and writes JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np

import indexzoo
from indexzoo.tools.timing import synchronize


def per_call(fn: Any, device: str, calls: int, rounds: int = 5) -> dict[str, list[float]]:
    """Seconds per call of ``calls`` back-to-back calls, for each of ``rounds`` rounds, up to
    the synchronisation that ends each round (``seconds``), and the host's part alone (the loop
    up to its last return, before that synchronisation: ``host_seconds``). On
    the GPU a call that never waits for the device returns before its kernels finish, so the
    loop's own time is the host time per call while the launch queue has room."""
    for _ in range(max(calls // 10, 3)):
        fn()
    synchronize(device)
    out, host = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        synchronize(device)
        out.append((time.perf_counter() - t0) / calls)
        host.append((t1 - t0) / calls)
    return {"seconds": out, "host_seconds": host}


def set_launch_mode(mode: str | None) -> None:
    """Route GPU kernel launches through ``mode``: ``numba`` (numba-cuda's own launch), or
    ``packed`` or None (the default path)."""
    from indexzoo.native import cudalaunch

    if mode not in (None, "packed", "numba"):
        raise SystemExit(f"unknown launch mode {mode!r}; one of packed, numba")
    cudalaunch._FAST_LAUNCH = mode != "numba"


def stages(xp: Any, keys: Any, q: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The pieces of one sorted-array call, each timed alone the same way as whole calls."""
    from indexzoo.plugins.sorted_array import kernels

    index = indexzoo.create("sorted-array", device=args.device).build(keys)
    st = index._live()
    n = int(q.shape[0])
    out = xp.empty(n, dtype=st.rowid_dtype)
    pieces: dict[str, Any] = {
        "stage: empty(n)": lambda: xp.empty(n, dtype=st.rowid_dtype),
        "stage: q[0:n]": lambda: q[0:n],
        "stage: q.astype(same, copy=False)": lambda: q.astype(q.dtype, copy=False),
        "stage: index._live()": index._live,
        "stage: keymap.encode_points(q)": lambda: st.keymap.encode_points(q, name="queries"),
    }
    if args.device == "cuda":
        import cupy

        from indexzoo.native.cudalaunch import _arg_key

        launch_args = (np.int64(n), st.pairs.keys, st.pairs.rowids, q, out, st.miss)
        pieces.update({
            "stage: launch cache key (_arg_key)": lambda: _arg_key(launch_args, cupy.ndarray),
            "stage: cupy.cuda.get_current_stream()": cupy.cuda.get_current_stream,
            "stage: q.flags.c_contiguous": lambda: q.flags.c_contiguous,
        })
        try:  # the prepared path (absent from trees before it, e.g. a `before` tree)
            from indexzoo.native.targets import Slot
        except ImportError:
            pass
        else:
            bound = kernels.POINT_ROWID.bind(args.device, st.pairs.keys, st.pairs.rowids,
                                             Slot(q.dtype), Slot(st.rowid_dtype), st.miss)
            index.point(q)
            prepared = st._prepared["rowid"]
            pieces.update({
                "stage: cupy.ndarray((n,), dtype)": lambda: cupy.ndarray((n,), st.rowid_dtype),
                "stage: one bound launch (Kernel.bind)": lambda: bound(n, q, out),
                "stage: the prepared answer (no checks)": lambda: prepared.answer(q),
            })
    for mode in ("packed", "numba") if args.device == "cuda" else ():
        def launch(mode: str = mode) -> None:
            set_launch_mode(mode)
            kernels.POINT_ROWID(args.device, n, st.pairs.keys, st.pairs.rowids, q, out, st.miss)
        pieces[f"stage: one bare launch [{mode}]"] = launch
    rows = [{"index": k, **per_call(f, args.device, args.calls)}
            for k, f in pieces.items()]
    set_launch_mode(None)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--keys", type=int, default=1 << 20)
    ap.add_argument("--lookups", type=int, default=1 << 12)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--indexes", default="sorted-array,btree,ao-bs,eo-bs,ao-pb-bs,eo-ks,ao-pb-ks,"
                                         "warpcore-hash,searchsorted,rx,rx-opt")
    ap.add_argument("--out", default="rowid")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--launch-modes", default=None,
                    help="on cuda, comma-separated kernel launch paths to compare in this run: "
                         "packed (the default path), numba (numba-cuda's own launch)")
    ap.add_argument("--stages", action="store_true",
                    help="also time the pieces of a call: allocation, slicing, one bare launch")
    args = ap.parse_args(argv)
    xp: Any = np
    if args.device == "cuda":
        import cupy

        xp = cupy
    rng = np.random.default_rng(7)
    host_keys = rng.integers(0, 2**64 - 1, args.keys, dtype=np.uint64, endpoint=True)
    keys = xp.asarray(host_keys)
    q = xp.asarray(host_keys[rng.integers(0, args.keys, args.lookups)])
    rows = []
    if args.peer:
        sk = xp.sort(keys)
        t = per_call(lambda: xp.searchsorted(sk, q), args.device, args.calls)
        rows.append({"index": f"{xp.__name__}.searchsorted (positions)", **t})
    if args.stages:
        rows += stages(xp, keys, q, args)
    modes = args.launch_modes.split(",") if args.launch_modes else [None]
    for name in args.indexes.split(","):
        index = indexzoo.create(name, device=args.device).build(keys)
        for mode in modes:
            set_launch_mode(mode)
            t = per_call(lambda index=index: index.point(q, out=args.out), args.device,
                         args.calls)
            rows.append({"index": name if mode is None else f"{name} [{mode}]", **t})
    set_launch_mode(None)
    base = statistics.median(rows[0]["seconds"]) if args.peer else None
    print(f"device {args.device}, {args.keys} keys, {args.lookups} lookups per call, "
          f"out={args.out}, median of 5 rounds of {args.calls} calls")
    for r in rows:
        med = statistics.median(r["seconds"])
        ratio = f"  {med / base:6.2f}x the peer" if base else ""
        print(f"  {r['index']:<34} {med * 1e6:10.1f} us/call  (rounds {min(r['seconds']) * 1e6:.1f}"
              f"..{max(r['seconds']) * 1e6:.1f}){ratio}"
              f"  host {statistics.median(r['host_seconds']) * 1e6:.1f} us/call")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
