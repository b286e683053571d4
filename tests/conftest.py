"""Shared fixtures: the devices to test on, hypothesis profiles, a clean registry."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# The CPU kernels run their serial loop in the tests, whatever the batch: compiling the parallel
# variant (prange on numba's thread pool) of every kernel a test meets costs more than the rest
# of its tests. The parallel loop runs the same body; tests/native/test_parallel_kernels.py and
# test_parallel_rt_kernels.py run it at the production thresholds for one index of each family
# (every built-in index in the exhaustive tier). A value set before the run wins
# (e.g. INDEXZOO_CPU_SERIAL_BELOW=32768).
os.environ.setdefault("INDEXZOO_CPU_SERIAL_BELOW", str(1 << 40))
os.environ.setdefault("INDEXZOO_CPU_SERIAL_BELOW_RAYS", str(1 << 40))
# Bench runs in tests time exactly --repeats rounds unless a test asks for more: the extra
# rounds that establish a ranking (tests/tools/test_bench_ranking.py) would only add minutes here.
os.environ.setdefault("INDEXZOO_RANK_BUDGET", "0")

from indexzoo.devices import cuda_status

sys.path.insert(0, str(Path(__file__).parent))  # for `from support.helpers import ...`

settings.register_profile(
    "ci", max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: Devices the project's tests run on: the CPU always, the GPU where one is usable.
DEVICES = ["cpu"] + (["cuda"] if cuda_status()[0] else [])


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def own_pytest_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytest run a test starts is a run of its own, not an xdist worker of this one: it
    must not inherit ``PYTEST_XDIST_*`` (pytest-benchmark turns itself off in a process that
    has ``PYTEST_XDIST_WORKER``, and would write no results)."""
    for name in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(name)


#: (tests left out, why) where the OptiX engine cannot run here
_optix_left_out: list[tuple[int, str]] = []


@pytest.hookimpl(trylast=True)  # after pytest's tmpdir plugin has made its factory
def pytest_configure(config: pytest.Config) -> None:
    """The processes of a run (this one, and the interpreters and Dask workers its tests start)
    share the CPU kernels they compile through one folder, instead of each compiling them again:
    an entry is keyed by everything the kernel is compiled from (indexzoo.native.jitcache).
    Where INDEXZOO_KERNEL_CACHE is unset, that folder is ``indexzoo-kernels`` in pytest's cache
    folder (``.pytest_cache`` of the checkout: the next run of the tests loads what this one
    compiled, as a user's programs do from the user's cache folder), or, with pytest's cache
    switched off (``-p no:cacheprovider``), ``kernels`` in its base temporary folder; never the
    user's own cache. The environment carries it to every process the tests start. CI points
    both of its test tiers at one folder. Kernels are made at first use, after this hook.

    The rest of indexzoo's cache folder (the listing ``indexzoo list`` and the registry keep,
    compiled OptiX programs) goes beside it, ``INDEXZOO_CACHE_DIR`` where unset: the tests
    never write to the user's own cache."""
    if not os.environ.get("INDEXZOO_CACHE_DIR", "").strip():
        os.environ["INDEXZOO_CACHE_DIR"] = str(_run_folder(config, "indexzoo-cache"))
    if os.environ.get("INDEXZOO_KERNEL_CACHE", "").strip():
        return
    os.environ["INDEXZOO_KERNEL_CACHE"] = str(_run_folder(config, "indexzoo-kernels"))


def _run_folder(config: pytest.Config, name: str) -> Any:
    """A folder ``name`` in pytest's cache folder, or in its base temporary folder with the
    cache switched off, or of its own, removed at exit, with neither."""
    cache = getattr(config, "cache", None)  # pytest's cacheprovider
    if cache is not None:
        return cache.mkdir(name)
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's tmp_path_factory
    if factory is None:  # the tmpdir plugin disabled: a folder of our own for the run
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix=f"{name}-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return folder
    return factory.getbasetemp() / name.removeprefix("indexzoo-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("optix" in item.keywords for item in items):
        from indexzoo.native.rt import optix

        got = optix.status()  # says what is missing: bindings, headers, NVRTC, GPU, driver
        if not got.usable:  # left out, not skipped one by one: rx alone has ~1,700 of them
            out = [item for item in items if "optix" in item.keywords]
            items[:] = [item for item in items if "optix" not in item.keywords]
            config.hook.pytest_deselected(items=out)
            _optix_left_out.append((len(out), got.reason))
    if cuda_status()[0]:
        return
    skip = pytest.mark.skip(reason=f"no usable GPU: {cuda_status()[1]}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for count, why in _optix_left_out:
        terminalreporter.write_line(f"{count} tests of the OptiX engine not run: OptiX engine "
                                    f"not usable: {why}")


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A sharded index built without a client starts a local Dask cluster that would live until
    the process ends; idle, its scheduler and worker processes still take several percent of a
    core, for the rest of the run. Close it once the class or module whose tests started it is
    done (a later test that needs one starts its own)."""
    cluster = sys.modules.get("indexzoo.plugins.sharded.cluster")
    if cluster is not None and (nextitem is None or nextitem.parent is not item.parent):
        cluster.close_local()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session's garbage collected here, and what survives frozen (``gc.freeze``), so that
    pytest's own last collection (at unconfigure, where it reports unraisable exceptions,
    these included) has almost nothing to walk. Under pytest-xdist this runs before a worker
    reports that it has finished; once told to stop, a worker whose pytest has not ended
    within 5 s is sent a SIGINT by execnet, and one full collection of a worker's heap (the
    kernels numba compiled) took 1.1-1.4 s on the 2-core machine, so under load the SIGINT
    landed in a garbage collector's callback ("Exception ignored ... KeyboardInterrupt"
    after the last test, in CI)."""
    gc.collect()
    gc.freeze()
