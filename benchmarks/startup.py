"""Start-up cost of a short script, with an empty kernel cache and with the cache its first run
filled: the README's Python example (build and look up), the query API example of
docs/plugins/rtcudb.md and ``indexzoo list``, each run in a fresh interpreter (and, asked for
by name, ``indexzoo recommend`` on 2^20 uint64 keys on the CPU).

    python benchmarks/startup.py                 # readme, rtcudb and list, 3 rounds
    python benchmarks/startup.py --rounds 1 --only recommend
    python benchmarks/startup.py --rounds 5 --only readme --off

Each round makes a new empty kernel cache (``INDEXZOO_KERNEL_CACHE`` set to a temporary
folder, and ``INDEXZOO_CACHE_DIR`` to another, where ``indexzoo list`` keeps its listing) and
runs each example twice in a subprocess: ``first`` (every CPU kernel compiled and written, the
plugins imported and listed) and ``second`` (every kernel loaded, the listing read); ``--off``
adds a run with the cache off, to show what writing the cache costs. A run's wall time is the
subprocess's, from start to exit; its CPU time is its user plus system time (``getrusage`` of
the children). The table shows the median of the rounds and the ratio second/first, which is
what to compare across machines and loads (the seconds depend on both). Before the rounds one
unmeasured interpreter imports indexzoo and its plugins, so Python's own bytecode cache and
the page cache are warm for every run (where ``PYTHONDONTWRITEBYTECODE`` is set, every run
compiles indexzoo's Python modules again; the header says so). The examples are read from the
documents themselves.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The examples: a name, and the document and the heading whose first Python block it is, or
#: the script itself (a command as the console runs it).
EXAMPLES: dict[str, tuple[Path, str] | str] = {
    "readme": (ROOT / "README.md", "## In Python"),
    "rtcudb": (ROOT / "docs" / "plugins" / "rtcudb.md", "## The query API"),
    "list": "from indexzoo.tools.cli import main\nraise SystemExit(main(['list']))\n",
    "recommend": ("import numpy as np\nfrom indexzoo.tools.cli import main\n"
                  "keys = np.random.default_rng(1).integers(0, 2**40, 1 << 20, dtype=np.uint64)\n"
                  "np.save('keys.npy', keys)\n"
                  "raise SystemExit(main(['recommend', 'keys.npy', '--device', 'cpu', '--force']))\n"),
}
#: What runs when --only is not given (recommend takes minutes: asked for by name).
DEFAULT = ("readme", "rtcudb", "list")

FENCE = re.compile(r"^```python\s*$(?P<code>.*?)^```\s*$", re.M | re.S)


def example(name: str) -> str:
    """The example's script: the first Python block under its heading, or the script given."""
    got = EXAMPLES[name]
    if isinstance(got, str):
        return got
    path, heading = got
    text = path.read_text(encoding="utf-8")
    start = text.index(heading + "\n")
    m = FENCE.search(text, start)
    if m is None:
        raise SystemExit(f"{path}: no Python block under {heading!r}")
    return m.group("code")


def run(script: Path, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``script`` in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, str(script)], env=env, cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{script.name} failed ({res.returncode}):\n{res.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _kept(folder: Path) -> tuple[int, int]:
    files = list(folder.glob("*.nbk")) if folder.is_dir() else []
    return len(files), sum(f.stat().st_size for f in files)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds of first and second runs")
    p.add_argument("--only", default=",".join(DEFAULT),
                   help=f"examples to run, comma-separated: {', '.join(EXAMPLES)}")
    p.add_argument("--off", action="store_true", help="add a run with the kernel cache off")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(EXAMPLES))
    if unknown or args.rounds < 1:
        p.error(f"unknown example(s) {unknown}" if unknown else "--rounds must be at least 1")

    import numba

    work = Path(tempfile.mkdtemp(prefix="indexzoo-startup-"))
    try:
        base = {k: v for k, v in os.environ.items() if k != "INDEXZOO_KERNEL_CACHE"}
        scripts = {}
        for name in names:
            scripts[name] = work / f"{name}.py"
            scripts[name].write_text(example(name), encoding="utf-8")
        warm = work / "warm.py"
        warm.write_text("import indexzoo, numba\nindexzoo.available()\n")
        run(warm, {**base, "INDEXZOO_KERNEL_CACHE": "off"}, work)

        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"commit {_commit()}; Python {platform.python_version()}, numba "
              f"{numba.__version__}; {os.cpu_count()} CPUs, load average {load:.2f}; "
              f"PYTHONDONTWRITEBYTECODE {'set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'unset'}"
              f"; {args.rounds} round(s), medians")
        runs = ["first", "second"] + (["off"] if args.off else [])
        rows = []
        for name in names:
            got: dict[str, list[tuple[float, float]]] = {r: [] for r in runs}
            kept = (0, 0)
            for i in range(args.rounds):
                cache = work / f"kernels-{name}-{i}"
                env = {**base, "INDEXZOO_KERNEL_CACHE": str(cache),
                       "INDEXZOO_CACHE_DIR": str(work / f"cache-{name}-{i}")}
                got["first"].append(run(scripts[name], env, work))
                kept = _kept(cache)
                got["second"].append(run(scripts[name], env, work))
                if args.off:
                    got["off"].append(run(scripts[name], {**base, "INDEXZOO_KERNEL_CACHE": "off"},
                                          work))
                shutil.rmtree(cache, ignore_errors=True)
            med = {r: (statistics.median(w for w, _ in got[r]), statistics.median(c for _, c in got[r]))
                   for r in runs}
            for r in runs:
                rows.append((name, r, f"{med[r][0]:.2f}", f"{med[r][1]:.2f}",
                             f"{kept[0]} kernels, {kept[1] / 1e6:.2f} MB written" if r == "first"
                             else ""))
            rows.append((name, "second/first", f"{med['second'][0] / med['first'][0]:.2f}",
                         f"{med['second'][1] / med['first'][1]:.2f}", ""))
        head = ("example", "run", "wall s", "CPU s", "")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for row in [head, *rows]:
            print("  ".join(c.ljust(w) if i < 2 or i == 4 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
