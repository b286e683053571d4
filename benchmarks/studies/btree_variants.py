"""``btree``'s leaf layouts (and other node widths or traversals) against the default and the raw
``searchsorted``, in one run on one device (the B+-tree's target: point lookups >= 2.0x the
raw ``cupy.searchsorted``).

    python benchmarks/studies/btree_variants.py --device cuda [--preset paper] [--repeats 7]
        [--variants default,interleaved,paired]
        [--out-mode rowid] [--json out.json]

Every variant is built once on the preset's keys (``paper``: 2^26 uniform uint64 keys, 2^27
random hit lookups), checked against the default (identical ``rowid`` answers, identical
counts), then all variants and the raw ``searchsorted`` (``indexzoo.tools.references``) are timed in
interleaved rounds: round r times each of them once, so drifts of clock and temperature touch
all alike. Reported per variant: median lookups/s, its spread, the ratio to the raw
``searchsorted`` and to the default, resident bytes.

Variant names: ``default``, a leaf layout (``interleaved``, ``paired``), or several joined by
``+``; ``coop`` adds ``cooperative=True``; ``w8``/``w32`` set the node width.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import indexzoo
from indexzoo.devices import to_numpy
from indexzoo.tools.bench import PRESETS
from indexzoo.tools.references import RAW, reference_calls
from indexzoo.tools.timing import synchronize, time_once
from indexzoo.tools.workloads import generate

_PARTS: dict[str, dict[str, Any]] = {
    "default": {},
    "split": {"leaf_layout": "split"},
    "interleaved": {"leaf_layout": "interleaved"},
    "paired": {"leaf_layout": "paired"},
    "coop": {"cooperative": True},
    "w8": {"node_width": 8},
    "w32": {"node_width": 32},
}


def params_of(variant: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in variant.split("+"):
        if part not in _PARTS:
            raise SystemExit(f"unknown variant part {part!r}; one of {sorted(_PARTS)}")
        out.update(_PARTS[part])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--preset", default="paper", choices=sorted(PRESETS))
    ap.add_argument("--variants", default="default,interleaved,paired")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out-mode", default="rowid", choices=("rowid", "count", "sum", "rowids"))
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    w = PRESETS[args.preset]
    d = generate(w, args.device)
    if d.queries is None:
        raise SystemExit("a point-lookup preset is needed (the raw searchsorted is the yardstick)")
    variants = ["default", *[v for v in args.variants.split(",") if v and v != "default"]]
    indexes = {}
    for v in variants:
        ix = indexzoo.create("btree", device=args.device, **params_of(v)).build(d.keys)
        indexes[v] = ix
    base = indexes["default"]
    want_rowid = to_numpy(base.point(d.queries, out="rowid").to_host().rowid)
    want_count = to_numpy(base.point(d.queries, out="count").to_host().count)
    for v, ix in indexes.items():
        got = ix.point(d.queries, out="rowid").to_host().rowid
        cnt = ix.point(d.queries, out="count").to_host().count
        if not ((to_numpy(got) == want_rowid).all() and (to_numpy(cnt) == want_count).all()):
            print(f"{v}: WRONG ANSWERS (differs from the default)", file=sys.stderr)
            return 1

    calls: dict[str, Any] = {RAW: reference_calls(d, args.device)[RAW]}
    for v, ix in indexes.items():
        calls[v] = lambda ix=ix: ix.point(d.queries, out=args.out_mode)
    for fn in calls.values():  # warm-up: compile, allocate
        fn()
    synchronize(args.device)
    seconds: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(args.repeats):
        for k, fn in calls.items():
            seconds[k].append(time_once(fn, args.device))

    n = d.n_lookups
    raw = statistics.median(seconds[RAW])
    default = statistics.median(seconds["default"])
    rows: dict[str, Any] = {"workload": w.describe(), "device": args.device,
                            "out_mode": args.out_mode, "repeats": args.repeats}
    print(f"{w.describe()}, out={args.out_mode}, {args.repeats} interleaved rounds")
    print(f"{'variant':<28}{'G lookups/s':>12}{'spread':>8}{'x raw':>8}{'x default':>10}"
          f"{'resident MB':>13}")
    for k, s in seconds.items():
        med = statistics.median(s)
        spread = (max(s) - min(s)) / med / 2
        resident = (indexes[k].memory_footprint().resident_bytes if k in indexes else None)
        rows[k] = {"params": params_of(k) if k in indexes else None, "seconds": s,
                   "lookups_per_s": n / med, "ratio_to_raw": raw / med,
                   "ratio_to_default": default / med, "resident_bytes": resident}
        mb = f"{resident / 1e6:13.0f}" if resident is not None else f"{'-':>13}"
        print(f"{k:<28}{n / med / 1e9:12.3f}{spread:8.1%}{raw / med:8.2f}{default / med:10.2f}{mb}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
