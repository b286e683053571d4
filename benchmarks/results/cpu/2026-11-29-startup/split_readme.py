"""Where the CPU time of the README's Python example goes: the example, statement by statement
as benchmarks/startup.py runs it, with the CPU seconds of this process (user + system,
getrusage) taken between the steps and printed on stderr. numba is imported at its own mark
(the example imports it through the first index kernel it runs)."""

import resource
import sys

import numpy as np


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


marks = [("interpreter start, import numpy", cpu())]
import indexzoo  # noqa: E402
import indexzoo.registry  # noqa: E402

marks.append(("import registry (pydantic, core)", cpu()))
indexzoo.registry.available()
marks.append(("load the 14 plugins, check classes", cpu()))
import numba  # noqa: E402, F401

marks.append(("import numba", cpu()))
keys = np.random.default_rng(0).integers(0, 2**40, 1_000_000, dtype=np.uint64)
index = indexzoo.create("sorted-array", device="auto").build(keys)
marks.append(("build (sort 1M keys)", cpu()))
hits = index.point(keys[:5])
marks.append(("first point (numba CPU target init, kernel loads)", cpu()))
print(hits.rowid, index.miss)
counts = index.range(np.array([0, 2**39]), np.array([2**30, 2**40]), out="count").count
rows = index.point(keys[:3], out="rowids")
print(rows.matches(0))
print(index.memory_footprint())
marks.append(("rest of the example", cpu()))
prev = 0.0
for name, t in marks:
    print(f"{name:55s} {t - prev:6.3f}", file=sys.stderr)
    prev = t
print(f"{'total':55s} {prev:6.3f}", file=sys.stderr)
