"""The CPU trace kernels at the production threshold (1024 rays, ``RAYS_SERIAL_BELOW``): the
same bodies under ``prange`` answer exactly as the serial loop and the sorted array do. The
rest of the suite traces serially below 2^15 rays (see ``conftest.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np
    import indexzoo
    from indexzoo.native.rt import trace
    assert trace.RAYS_SERIAL_BELOW == 1024
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 2**40, 20000, dtype=np.uint64)
    keys[:2000] = keys[2000:4000]  # duplicate runs
    q = np.concatenate([keys[rng.integers(0, 20000, 3000)],
                        rng.integers(0, 2**40, 1000, dtype=np.uint64)])
    want = indexzoo.create("sorted-array", device="cpu").build(keys).point(q, out="count").count
    for name in ("rx", "rx-opt"):
        got = indexzoo.create(name, device="cpu").build(keys).point(q, out="count").count
        assert np.array_equal(got, want), name
    print("parallel traces agree")
""")


def test_trace_kernels_on_the_thread_pool_answer_like_the_sorted_array() -> None:
    env = {**os.environ, "INDEXZOO_CPU_SERIAL_BELOW_RAYS": "1024"}
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "parallel traces agree" in res.stdout
