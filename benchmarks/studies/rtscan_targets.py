"""RTScan's measurements (the RTScan paper's §5) on one GPU, in one run: the best
``rtscan`` variants against the fused CUDA-core scan, every answer checked against NumPy.

    python benchmarks/studies/rtscan_targets.py --device cuda --out rtscan.json [--rows 100000000]
        [--repeats 5] [--only uniform,skew,small,selection,vectors,spacing,predicates,tpch]
        [--tpch /data/sf10/lineitem.parquet]
    python benchmarks/studies/rtscan_targets.py --small            # tiny sizes on the CPU (the test)

Sections (``--only``):

* ``uniform``: 3 uniform uint32 columns, ``x_j < c`` at per-predicate selectivity 0.0 .. 1.0
  (Figs. 15, 19): ``rtscan``, ``rtscan-direct``, ``rtscan-noenc`` (the artifact's main
  uniform run), ``rtc3`` (to selectivity 0.4), ``rtc1`` (to 0.2) and the fused
  scan; stage shares of ``rtscan`` at 0.9 (Fig. 17).
* ``skew``: Zipf 1.1 / 1.3 / 1.5 and normal(2^31, 1) at 0.9 (Figs. 20, 25): encoding on and
  off, the direct refine, the fused scan.
* ``small``: values in [0, 2^6) with 16 vectors, encoding on and off (Fig. 26).
* ``selection``: between two borders of column 0 (K = 128, F_110 .. F_111 as Fig. 27), auto
  against forced positive selection.
* ``vectors``: K in 16, 32, 64, 128 at 0.2 and 0.4: time and resident bytes (Fig. 28, §5.4).
* ``spacing``: ray interval 0.25w .. w against spacing 0 .. w at 0.45 (Fig. 29; 0.5 would
  fall on a sieve border, leaving nothing to refine).
* ``predicates``: 1, 2 and 4 columns, the last as (3+1) and (2+2) groups (Figs. 22-24).
* ``tpch``: TPC-H Q6's predicates on lineitem (``--tpch``; ``--small`` writes a tiny file).
* ``build``: build seconds, stage shares and footprint of each index built (Fig. 18).

Times are medians of ``--repeats`` runs after a warm-up (CUDA events on the GPU, as
``indexzoo.tools.timing``), one query per call (the paper's latency), and again with the bitmap
copied to the host (the paper's "with transfer"; ``--no-transfer`` skips it). Each index is
built once per table and dropped before the next. Prints a table; writes JSON with every
repetition.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import rtscan_workloads as wl

import indexzoo
from indexzoo.devices import to_device, to_numpy
from indexzoo.plugins.fused_scan.kernels import ITEMS, scan_bitmaps
from indexzoo.plugins.rtscan import StageTimes
from indexzoo.tools.timing import synchronize, time_call

SECTIONS = ("uniform", "skew", "small", "selection", "vectors", "spacing", "predicates",
            "tpch")


def oracle(cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(ceil(N/32),) uint32: the bitmap of one query, by NumPy."""
    mask = np.ones(cols[0].shape[0], dtype=bool)
    for j, c in enumerate(cols):
        mask &= (c >= lo[0, j]) & (c <= hi[0, j])
    words = (mask.shape[0] + 31) // 32
    padded = np.zeros(words * 32, dtype=bool)
    padded[:mask.shape[0]] = mask
    return np.packbits(padded, bitorder="little").view("<u4").astype(np.uint32)


class Run:
    """One benchmark run: the device, repeats, results and failed checks."""

    def __init__(self, device: str, repeats: int, transfer: bool,
                 out: str | None = None) -> None:
        self.device = device
        self.repeats = repeats
        self.transfer = transfer
        self.results: list[dict[str, Any]] = []
        self.failed = 0
        self.out = out
        self.header: dict[str, Any] = {}
        self.warmed: set[tuple[str, tuple[tuple[str, Any], ...], int]] = set()
        self.skip_variants: set[str] = set()
        self.peer_items: list[int] = [ITEMS]
        self.workloads: set[str] | None = None  # None: every workload of a section

    def save(self) -> None:
        """Write the JSON report so far: a run cut short by a time limit keeps every figure
        measured before the cut."""
        if self.out:
            report = {**self.header, "checks_failed": self.failed, "results": self.results}
            Path(self.out).write_text(json.dumps(report, indent=1, default=float))

    def time(self, fn: Callable[[], Any]) -> list[float]:
        return list(time_call(fn, self.device, repeats=self.repeats).seconds)

    def record(self, **entry: Any) -> None:
        sec = entry.get("seconds")
        if sec:
            entry["median_s"] = float(np.median(sec))
        self.results.append(entry)
        ok = entry.get("check", "ok")
        if ok != "ok":
            self.failed += 1
        med = entry.get("median_s", entry.get("build_seconds"))
        shown = f"{med * 1e3:10.3f} ms" if med is not None else " " * 13
        print(f"{entry['section']:<10} {entry['workload']:<13} {entry['variant']:<26} "
              f"{entry.get('x', ''):<14} {shown}  {ok}", flush=True)
        self.save()


_HOST: dict[tuple[Any, ...], tuple[list[np.ndarray], list[np.ndarray]]] = {}


def host_columns(kind: str, n: int, d: int, seed: int) -> list[np.ndarray]:
    """Generated once per run (the sections share their tables)."""
    key = (kind, n, d, seed)
    if key not in _HOST:
        cols = wl.columns(kind, n, d, seed=seed)
        _HOST[key] = (cols, [np.sort(c) for c in cols])
    return _HOST[key][0]


class Table:
    """The columns of one workload on the device and their oracle answers."""

    def __init__(self, run: Run, name: str, cols: list[np.ndarray]) -> None:
        self.run = run
        self.name = name
        self.cols = cols
        cached = [v for v in _HOST.values() if v[0] is cols]
        self.sorted = cached[0][1] if cached else [np.sort(c) for c in cols]
        self.on_device = to_device(np.asfortranarray(np.column_stack(cols)), run.device)
        self._want: dict[tuple[int, ...], np.ndarray] = {}

    def want(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        key = (*lo.ravel().tolist(), *hi.ravel().tolist())
        if key not in self._want:
            self._want[key] = oracle(self.cols, lo, hi)
        return self._want[key]


def build(run: Run, table: Table, name: str, **params: Any) -> tuple[Any, dict[str, Any]]:
    """An index over the table, with its build time, stage shares and footprint."""
    key = (name, tuple(sorted(params.items())), int(table.on_device.shape[1]))
    if key not in run.warmed:
        # compile the build's kernels outside the timed build (the first build in a process
        # pays the JIT): one untimed build of the same variant on a small slice
        warm = indexzoo.create(name, device=run.device, **params)
        warm.build(table.on_device[: min(1 << 16, table.on_device.shape[0])])
        del warm
        run.warmed.add(key)
    index = indexzoo.create(name, device=run.device, **params)
    timer = StageTimes(run.device)
    index.stage_timer = timer
    synchronize(run.device)
    t = time.perf_counter()
    index.build(table.on_device)
    synchronize(run.device)
    seconds = time.perf_counter() - t
    index.stage_timer = None
    fp = index.memory_footprint()
    info = {"build_seconds": seconds, "build_stages": timer.seconds(),
            "resident_bytes": fp.resident_bytes, "peak_build_bytes": fp.peak_build_bytes,
            "footprint": fp.breakdown}
    return index, info


def measure(run: Run, table: Table, section: str, variant: str, index: Any, lo: np.ndarray,
            hi: np.ndarray, x: Any = "", profile: bool = False, items: int | None = None,
            **extra: Any) -> None:
    """Time one query on an index (or the fused scan when ``index`` is None, with ``items``
    words per warp on the GPU) and check it."""
    dlo, dhi = to_device(lo, run.device), to_device(hi, run.device)
    if index is None:
        def call() -> Any:
            return scan_bitmaps(table.on_device, dlo, dhi, items=items)
    else:
        def call() -> Any:
            return index.range(dlo, dhi, out="bitmap").bitmap
    got = to_numpy(call()).reshape(-1)
    check = "ok" if np.array_equal(got, table.want(lo, hi)) else "FAILED"
    entry: dict[str, Any] = {
        "section": section, "workload": table.name, "variant": variant, "x": x,
        "rows": int(table.cols[0].shape[0]), "check": check,
        "matches": int(np.unpackbits(got.view(np.uint8)).sum()),
        "selectivity": wl.achieved(table.cols, lo, hi), "seconds": run.time(call), **extra}
    if run.transfer:
        entry["seconds_with_transfer"] = run.time(lambda: to_numpy(call()))
    if profile and index is not None:
        timer = StageTimes(run.device)
        index.stage_timer = timer
        for _ in range(run.repeats):
            call()
        synchronize(run.device)
        index.stage_timer = None
        entry["stage_seconds"] = {k: v / run.repeats for k, v in timer.seconds().items()}
        entry["stage_shares"] = timer.shares()
        entry["counts"] = {k: v // run.repeats for k, v in timer.counts.items()}
    run.record(**entry)


def lt(table: Table, sel: float) -> tuple[np.ndarray, np.ndarray]:
    return wl.lt_query(table.cols, sel, table.sorted)


def each_variant(run: Run, table: Table, section: str, variants: list[tuple[str, str, dict]],
                 queries: list[tuple[Any, np.ndarray, np.ndarray]], profile_at: Any = None,
                 skip: Callable[[str, Any], bool] | None = None) -> None:
    """Build each variant once, time every query on it; the fused scan last."""
    if run.workloads is not None and table.name not in run.workloads:
        return
    for label, name, params in variants:
        if label in run.skip_variants:
            continue
        index, info = build(run, table, name, **params)
        run.record(section="build", workload=table.name, variant=label, x="", **info)
        for x, lo, hi in queries:
            if skip is not None and skip(label, x):
                continue
            measure(run, table, section, label, index, lo, hi, x=x,
                    profile=profile_at is not None and x == profile_at,
                    resident_bytes=info["resident_bytes"])
        del index
    for x, lo, hi in queries:
        measure(run, table, section, "fused-scan", None, lo, hi, x=x)
    if run.device == "cuda":
        for k in run.peer_items:  # the fused scan's other warp bodies, for comparison
            if k != ITEMS:
                for x, lo, hi in queries:
                    measure(run, table, section, f"fused-scan-items{k}", None, lo, hi, x=x,
                            items=k)


# ---------------------------------------------------------------------- sections
def uniform(run: Run, n: int, small: bool) -> None:
    table = Table(run, "uniform", host_columns("uniform", n, 3, 1))
    sels = wl.SELECTIVITIES if not small else (0.0, 0.5, 1.0)
    queries = [(s, *lt(table, s)) for s in sels]
    limit = {"rtc3": 0.4, "rtc1": 0.2}  # the slow baselines at low selectivity only
    each_variant(run, table, "uniform",
                 [("rtscan", "rtscan", {}), ("rtscan-direct", "rtscan-direct", {}),
                  ("rtscan-noenc", "rtscan-noenc", {}), ("rtc3", "rtc3", {}),
                  ("rtc1", "rtc1", {})],
                 queries, profile_at=0.9 if not small else 0.5,
                 skip=lambda label, s: not small and s > limit.get(label, 1.0))


def skew(run: Run, n: int, small: bool) -> None:
    for kind in ("zipf1.1", "zipf1.3", "zipf1.5", "normal"):
        if (small and kind not in ("zipf1.3",)) or (run.workloads is not None
                                                      and kind not in run.workloads):
            continue
        table = Table(run, kind, host_columns(kind, n, 3, 2))
        each_variant(run, table, "skew",
                     [("rtscan", "rtscan", {}), ("rtscan-noenc", "rtscan-noenc", {}),
                      ("rtscan-direct", "rtscan-direct", {})],
                     [(0.9, *lt(table, 0.9))], profile_at=0.9)


def small_domain(run: Run, n: int, small: bool) -> None:
    table = Table(run, "small_domain", host_columns("small_domain", n, 3, 3))
    sels = (0.2, 0.5, 0.8) if not small else (0.5,)
    each_variant(run, table, "small",
                 [("rtscan K=16", "rtscan", {"sieve_vectors": 16}),
                  ("rtscan-noenc K=16", "rtscan-noenc", {"sieve_vectors": 16})],
                 [(s, *lt(table, s)) for s in sels])


def selection(run: Run, n: int, small: bool) -> None:
    table = Table(run, "uniform", host_columns("uniform", n, 3, 1))
    k = 128 if not small else 16
    lo_b = 110 if not small else 10  # between F_lo_b and F_lo_b+1
    queries = []
    for t in range(6):  # F_110 .. F_111 in five steps (Fig. 27)
        rank = int(n * (lo_b + t / 5) / k)
        c = int(table.sorted[0][min(rank, n - 1)])
        queries.append((round(lo_b + t / 5, 1), np.array([[0, 0, 0]], np.uint32),
                        np.array([[max(c - 1, 0), wl.TOP32, wl.TOP32]], np.uint32)))
    each_variant(run, table, "selection",
                 [("auto", "rtscan", {"sieve_vectors": k}),
                  ("positive only", "rtscan", {"sieve_vectors": k, "selection": "positive"})],
                 queries)


def vectors(run: Run, n: int, small: bool) -> None:
    table = Table(run, "uniform", host_columns("uniform", n, 3, 1))
    ks = (16, 32, 64, 128) if not small else (16, 32)
    each_variant(run, table, "vectors",
                 [(f"rtscan K={k}", "rtscan", {"sieve_vectors": k}) for k in ks],
                 [(s, *lt(table, s)) for s in (0.2, 0.4)])


def spacing(run: Run, n: int, small: bool) -> None:
    table = Table(run, "uniform", host_columns("uniform", n, 3, 1))
    grid = [(i, s) for i in (0.25, 0.5, 0.75, 1.0) for s in (0.0, 0.25, 0.5, 0.75, 1.0)]
    if small:
        grid = [(0.5, 0.0), (1.0, 1.0)]
    each_variant(run, table, "spacing",
                 [(f"I={i}w S={s}w", "rtscan", {"ray_interval": i, "ray_spacing": s})
                  for i, s in grid], [(0.45, *lt(table, 0.45))], profile_at=0.45)


def predicates(run: Run, n: int, small: bool) -> None:
    cols = host_columns("uniform", n, 4, 4)
    for d in (1, 2):
        table = Table(run, f"uniform d={d}", cols[:d])
        each_variant(run, table, "predicates", [("rtscan", "rtscan", {})],
                     [(s, *lt(table, s)) for s in (0.2, 0.45, 0.8)])
    table = Table(run, "uniform d=4", cols)
    each_variant(run, table, "predicates",
                 [("rtscan (3+1)", "rtscan", {"group_size": 3}),
                  ("rtscan (2+2)", "rtscan", {"group_size": 2})],
                 [(s, *lt(table, s)) for s in (0.2, 0.45, 0.8)])


def tpch(run: Run, path: str | None, small: bool) -> None:
    if path is None:
        if not small:
            print("tpch: skipped (no --tpch lineitem file)", flush=True)
            return
        path = str(wl.write_lineitem_sample(Path(tempfile.mkdtemp()) / "lineitem.tbl", 3000))
    cols, lo, hi = wl.tpch_q6(path)
    table = Table(run, "tpch-q6", cols)
    each_variant(run, table, "tpch",
                 [("rtscan", "rtscan", {}), ("rtscan-direct", "rtscan-direct", {})],
                 [("Q6", lo, hi)], profile_at="Q6")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--tpch", default=None, help="lineitem file of tpchgen-cli (SF 10)")
    ap.add_argument("--no-transfer", dest="transfer", action="store_false",
                    help="skip the second timing of each query with the bitmap copied to "
                         "the host (the paper's 'with transfer')")
    ap.add_argument("--small", action="store_true",
                    help="tiny sizes on the CPU, every section once (a smoke test)")
    ap.add_argument("--out", default=None, help="JSON file to write")
    ap.add_argument("--peer-items", default=str(ITEMS),
                    help="on the GPU, the fused scan's words per warp to time, comma-separated "
                         f"({ITEMS}: the default body; 1: the one-word body, labelled "
                         "fused-scan-items1)")
    ap.add_argument("--skip-variants", default="",
                    help="comma-separated variant labels to leave out (e.g. rtscan-noenc)")
    ap.add_argument("--workloads", default="",
                    help="comma-separated workload names to keep (e.g. zipf1.3); default all")
    args = ap.parse_args(argv)
    device = indexzoo.resolve_device("cpu" if args.small and args.device == "auto"
                                     else args.device)
    n = 4096 if args.small else args.rows
    run = Run(device, 2 if args.small else args.repeats, args.transfer, args.out)
    run.skip_variants = {v for v in args.skip_variants.split(",") if v}
    run.peer_items = [int(v) for v in args.peer_items.split(",") if v]
    run.workloads = {w for w in args.workloads.split(",") if w} or None
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    print(f"device {device}, {n} rows, {run.repeats} repeats", flush=True)
    sections: dict[str, Callable[[], None]] = {
        "uniform": lambda: uniform(run, n, args.small),
        "skew": lambda: skew(run, n, args.small),
        "small": lambda: small_domain(run, n, args.small),
        "selection": lambda: selection(run, n, args.small),
        "vectors": lambda: vectors(run, n, args.small),
        "spacing": lambda: spacing(run, n, args.small),
        "predicates": lambda: predicates(run, n, args.small),
        "tpch": lambda: tpch(run, args.tpch, args.small),
    }
    run.header = {"device": device, "rows": n, "repeats": run.repeats, "small": args.small,
                  "host": platform.node()}
    if device == "cuda":
        import cupy

        run.header["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    for name in only:
        sections[name]()
    run.save()
    print(f"{run.failed} failed checks", flush=True)
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
