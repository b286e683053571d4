"""The CPU kernels' parallel loop (``prange`` on numba's thread pool), at the production
thresholds: from 2^15 lookups (``INDEXZOO_CPU_SERIAL_BELOW``) and 1024 rays
(``INDEXZOO_CPU_SERIAL_BELOW_RAYS``). The same bodies run under it as under the serial loop.

The rest of the default tier runs every kernel serially (``tests/conftest.py`` sets both
thresholds beyond any batch): compiling the parallel variant of each kernel costs more than
the rest of its tests. Here, in a process with the production thresholds, the conformance
check of one batch above every threshold runs on one index of each family (the sorted and
hashed ones here, the ray-tracing ones in ``test_parallel_rt_kernels.py``), and in the
exhaustive tier on every built-in index.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.parallel import FAMILIES, QUERY, RT_FAMILIES, production_env, run_check

import indexzoo
from indexzoo.registry import builtin


def test_the_default_tier_runs_kernels_serially() -> None:
    from indexzoo.native import targets
    from indexzoo.native.rt import trace

    assert targets.SERIAL_BELOW > 1 << 30 and trace.RAYS_SERIAL_BELOW > 1 << 30


def test_one_sorted_or_hashed_index_of_each_family_answers_right_on_the_thread_pool() -> None:
    assert set(FAMILIES) <= set(indexzoo.available())
    run_check(FAMILIES)


def test_the_query_engines_answer_right_on_the_thread_pool() -> None:
    res = subprocess.run([sys.executable, "-c", QUERY], capture_output=True, text=True,
                         env=production_env(), timeout=1800)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "engines agree" in res.stdout


@pytest.mark.exhaustive
def test_every_builtin_index_answers_right_on_the_thread_pool() -> None:
    run_check([n for n in builtin() if n not in FAMILIES + RT_FAMILIES and n != "sharded"])
