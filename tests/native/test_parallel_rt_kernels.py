"""The ray-tracing indexes' CPU kernels on numba's thread pool, at the production thresholds
(from 1024 rays): one index of each family, as ``test_parallel_kernels.py`` does for the
others (``tests/support/parallel.py``)."""

from __future__ import annotations

from support.parallel import RT_FAMILIES, run_check

import indexzoo


def test_one_ray_tracing_index_of_each_family_answers_right_on_the_thread_pool() -> None:
    assert set(RT_FAMILIES) <= set(indexzoo.available())
    run_check(RT_FAMILIES)
