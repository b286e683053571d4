"""The CPU kernels' parallel loop (``prange`` on numba's thread pool) at the production
thresholds, in a process of its own: the conformance check of one batch above every threshold
(``tests/native/test_parallel_kernels.py`` and ``test_parallel_rt_kernels.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

#: One index of each family that has CPU kernels (sharded: its inner index's kernels), in two
#: test files of about the same time (about 35 s each on the 2-core machine, nearly all
#: compiling), so that the test processes share them out: the sorted and hashed ones, and the
#: ray-tracing ones.
FAMILIES = ["btree", "sorted-array", "lightweight", "eo-ks", "warpcore-hash", "fused-scan"]
RT_FAMILIES = ["rtscan", "rx", "rx-opt", "cgrx"]
LABEL = "sizes/batches_above_every_threshold_answer_right"

SCRIPT = textwrap.dedent("""
    import json, sys
    from indexzoo.conformance.runner import make_context, run_checks
    from indexzoo.native import targets
    from indexzoo.native.rt import trace
    assert (targets.SERIAL_BELOW, trace.RAYS_SERIAL_BELOW) == (1 << 15, 1024)
    got = {}
    for name in sys.argv[1:]:
        [res] = run_checks(make_context(name, device="cpu"), labels=[LABEL])
        got[name] = [res.status, res.message]
    print(json.dumps(got))
""").replace("LABEL", repr(LABEL))

QUERY = textwrap.dedent("""
    import numpy as np
    import indexzoo
    from indexzoo.native import targets
    assert targets.SERIAL_BELOW == 1 << 15
    rng = np.random.default_rng(5)
    n = 100_000  # rows: the engines' kernels run their parallel loop
    t = {"a": rng.integers(0, 50, n), "b": rng.integers(-1000, 1000, n),
         "g": rng.integers(0, 7, n)}
    sql = "SELECT g, SUM(b) AS s, COUNT(*) AS c FROM t WHERE a < 20 GROUP BY g ORDER BY g"
    keep = t["a"] < 20
    want = [(g, int(t["b"][keep & (t["g"] == g)].sum()), int((keep & (t["g"] == g)).sum()))
            for g in range(7)]
    for engine in ("crystal", "rtcudb"):
        rows = indexzoo.query_engine(engine, device="cpu").sql(sql, t=t).rows()
        assert [tuple(int(v) for v in r) for r in rows] == want, (engine, rows, want)
    print("engines agree")
""")


def production_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("INDEXZOO_CPU_SERIAL_BELOW", "INDEXZOO_CPU_SERIAL_BELOW_RAYS")}


def run_check(names: list[str]) -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT, *names], capture_output=True,
                         text=True, env=production_env(), timeout=1800)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    failed = {n: msg for n, (status, msg) in got.items() if status != "passed"}
    assert not failed, failed
    assert set(got) == set(names)
