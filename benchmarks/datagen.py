"""Seconds of the workload generator on the CPU (``indexzoo.tools.workloads.generate``): this
tree's, and with ``--against COMMIT`` another commit's too, in alternating rounds.

    python benchmarks/datagen.py                                  # 2^22 keys, 2^23 lookups
    python benchmarks/datagen.py --against dc56c57 --rounds 3
    python benchmarks/datagen.py --keys 20 --lookups 21 --set hit_rate=0.9 --set distribution=dense \\
        --set out_of_range_share=1

Each round runs every tree in a fresh interpreter (the other commit's sources taken with
``git archive`` into a temporary folder laid out as the installed package, on ``PYTHONPATH``).
It first starts numba the way any CPU index of indexzoo does (one small parallel kernel of
``indexzoo.native``: importing numba, its CPU target, its threads; ``numba`` in the lines,
not counted in the generator's time; ``--cold-numba`` leaves that to the first call). Then
``first`` is the first call, which loads the generator's own kernels from the kernel cache,
and ``--calls`` more calls of the same workload, whose median is ``warm``. The table shows the
median over the rounds of each, and old / new. The workload is checked to give the same data
in every tree (a digest of its arrays), unless ``--no-digest``. Other jobs on the machine
change the seconds more than the ratios: note the load average (printed) beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Where the source folders go in the installed package (pyproject's package-dir).
PACKAGE_DIRS = {"core": "indexzoo", "native": "indexzoo/native", "plugins": "indexzoo/plugins",
                "conformance": "indexzoo/conformance"}

#: What each interpreter runs: argv[1] the workload (JSON), argv[2] the calls after the first,
#: argv[3] "1" to start numba first (one small parallel kernel of indexzoo.native).
CHILD = r"""
import hashlib, json, sys, time
import numpy as np
t0 = time.perf_counter()
from indexzoo.tools.workloads import Workload, generate
w = Workload(**json.loads(sys.argv[1]))
t1 = time.perf_counter()
numba_s = 0.0
if sys.argv[3] == "1":  # what any CPU index makes the process pay: numba, its threads
    from indexzoo.native.csr import gather_runs
    n = 1 << 16
    gather_runs("cpu", np.arange(n), np.arange(n), np.ones(n, dtype=np.int64))
    numba_s = time.perf_counter() - t1
    t1 = time.perf_counter()
data = generate(w, "cpu")
first = time.perf_counter() - t1
warm = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    generate(w, "cpu")
    warm.append(time.perf_counter() - t)
h = hashlib.sha256()
for a in (data.keys, data.queries, data.lo, data.hi):
    if a is not None:
        h.update(np.ascontiguousarray(a).tobytes())
print(json.dumps({"import": t1 - t0, "numba": numba_s, "first": first, "warm": warm,
                  "digest": h.hexdigest()[:16], "n_hits": data.n_hits}))
"""


def unpack(commit: str, into: Path) -> Path:
    """The sources of ``commit``, laid out as the installed package under ``into``."""
    src = into / "src"
    src.mkdir()
    archive = into / "src.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    pkg = into / "pkg"
    pkg.mkdir()
    for folder, target in PACKAGE_DIRS.items():  # "core" first: the others go inside it
        (src / folder).rename(pkg / target)
    return pkg


def one_run(pythonpath: Path | None, workload: dict[str, object], calls: int,
            numba_first: bool) -> dict:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(workload), str(calls),
                          "1" if numba_first else "0"], env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"the generator failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=22, help="log2 of the keys (default 22)")
    p.add_argument("--lookups", type=int, default=23, help="log2 of the lookups (default 23)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="another field of the workload (repeatable), e.g. hit_rate=0.9")
    p.add_argument("--against", metavar="COMMIT", help="also measure this commit's generator")
    p.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--calls", type=int, default=3, help="calls after the first, per run")
    p.add_argument("--no-digest", action="store_true",
                   help="do not require the same data from both trees")
    p.add_argument("--cold-numba", action="store_true",
                   help="let the first call start numba too (by default a small kernel of "
                   "indexzoo.native starts it before, as any CPU index does)")
    p.add_argument("--json", type=Path, help="also write every run here")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        p.error("--rounds and --calls must be at least 1")
    workload: dict[str, object] = {"n_keys": 1 << args.keys, "n_lookups": 1 << args.lookups}
    for item in args.set:
        field, sep, value = item.partition("=")
        if not sep:
            p.error(f"--set {item!r}: expected FIELD=VALUE")
        workload[field] = _value(value)

    with tempfile.TemporaryDirectory(prefix="indexzoo-datagen-") as tmp:
        trees: dict[str, Path | None] = {}
        if args.against:
            trees[args.against] = unpack(args.against, Path(tmp))
        trees["this tree"] = None
        print(f"workload {json.dumps(workload)}; load average {os.getloadavg()[0]:.2f} "
              f"{os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} at the start", flush=True)
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for r in range(1, args.rounds + 1):
            for name, path in trees.items():
                got = one_run(path, workload, args.calls, not args.cold_numba)
                runs[name].append(got)
                print(f"round {r}  {name:>12}: numba {got['numba']:5.2f} s, first "
                      f"{got['first']:7.3f} s, warm "
                      f"{', '.join(f'{s:.3f}' for s in got['warm'])} s  (digest "
                      f"{got['digest']}, load {os.getloadavg()[0]:.2f})", flush=True)
        digests = {g["digest"] for rs in runs.values() for g in rs}
        if len(digests) > 1 and not args.no_digest:
            print(f"the trees generate different data: digests {sorted(digests)}")
            return 1
        print(f"\n{'tree':>12}  {'first s':>8}  {'warm s':>8}   (medians of {args.rounds} "
              f"rounds; warm: of {args.calls} calls each)")
        med = {}
        for name, rs in runs.items():
            first = statistics.median(g["first"] for g in rs)
            warm = statistics.median(statistics.median(g["warm"]) for g in rs)
            med[name] = (first, warm)
            print(f"{name:>12}  {first:8.3f}  {warm:8.3f}")
        if args.against:
            (of, ow), (nf, nw) = med[args.against], med["this tree"]
            print(f"{'old / new':>12}  {of / nf:7.1f}x  {ow / nw:7.1f}x")
        print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
              f"{os.getloadavg()[2]:.2f} at the end")
        if args.json:
            args.json.write_text(json.dumps({"workload": workload, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
