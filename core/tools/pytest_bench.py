"""indexzoo's pytest-benchmark fixtures and options, installed with indexzoo (entry point
``pytest11``: ``indexzoo-bench``): time any registered index, a plugin's own or a built-in,
on the workload presets of ``indexzoo bench``, in your own pytest run.

A plugin author's test file (``docs/benchmarks.md``, "Timing your plugin against the
built-ins")::

    @pytest.mark.parametrize("index", ["linear-scan", "sorted-array"])
    def test_lookups(indexzoo_bench_lookups, indexzoo_preset, index):
        indexzoo_bench_lookups(index, indexzoo_preset)

    pytest test_mine.py --indexzoo-bench-presets tiny --indexzoo-bench-device cpu --benchmark-json out.json

Options (always there; they act only on tests that use the fixtures below):

* ``--indexzoo-bench-device auto|cpu|cuda`` (default ``auto``): the device every index is
  built on.
* ``--indexzoo-bench-presets NAMES``: comma-separated presets of ``indexzoo bench`` (default
  ``quick``); a test that uses ``indexzoo_preset`` runs once per preset.
* ``--indexzoo-bench-indexes NAMES``: comma-separated index names, ``builtin`` (default: the
  one-column indexes shipped with indexzoo) or ``all``; a test that uses ``indexzoo_index``
  runs once per index.

The earlier names, ``--bench-device``, ``--bench-presets`` and ``--bench-indexes``, still work
in this release, with a deprecation warning; they go in the next.

Fixtures:

* ``indexzoo_bench_lookups``: ``(index, preset, *, out=None, rounds=5, **params) -> dict``.
  Builds ``index`` (a registered name, or an index object) on the preset's data, checks its
  answers against the ``searchsorted`` peer on the same data (the test fails if they differ),
  times the lookups with ``benchmark.pedantic`` (``rounds`` rounds after one warm-up; each
  round does all the preset's lookups and, on the GPU, ends with a device synchronisation)
  and returns what it puts in ``benchmark.extra_info``: ``lookups_per_s`` (the preset's
  lookups divided by the median round, where pytest-benchmark's OPS column counts rounds),
  ``n_lookups``, ``device``, ``preset``, ``index``, the build time, the footprint, the
  device's name and the commit. Needs pytest-benchmark (its ``benchmark`` fixture).
* ``indexzoo_bench_data``: ``(preset) -> Dataset``, the preset's keys and lookups generated on
  the device (one preset's data kept at a time; generating is never timed).
* ``indexzoo_preset``, ``indexzoo_index``: one preset of ``--indexzoo-bench-presets``, one
  index of ``--indexzoo-bench-indexes`` (tests that use them are parametrized over the lists).
* ``indexzoo_bench_device``, ``indexzoo_bench_environment``: the device, and where the figures
  were measured (:func:`indexzoo.tools.environment.environment`).

The plugin imports nothing of indexzoo's until a test uses it (``import indexzoo`` itself
imports none of its modules), and prints nothing, so it costs other pytest runs nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import numpy as np

    from indexzoo.tools.workloads import Dataset, Workload

__all__ = ["time_lookups"]

ROUNDS = 5
_NEEDS_BENCHMARK = "indexzoo_bench_lookups"
_BENCHMARK_MISSING = ("indexzoo_bench_lookups needs pytest-benchmark's `benchmark` fixture: "
                      "pip install 'pytest-benchmark[histogram]>=4', and do not disable it "
                      "with -p no:benchmark")


# ---------------------------------------------------------------------- options
#: The options: name (after ``--indexzoo-bench-``), then their argparse settings.
_OPTIONS: dict[str, dict[str, Any]] = {
    "device": dict(default="auto", choices=("auto", "cpu", "cuda"),
                   help="device the indexzoo_bench_* fixtures build on (default auto)"),
    "presets": dict(default="quick",
                    help="comma-separated presets of `indexzoo bench` that indexzoo_preset runs "
                    "over (default quick; tiny, paper, l2, ...: see docs/benchmarks.md)"),
    "indexes": dict(default="builtin",
                    help="comma-separated index names that indexzoo_index runs over, 'builtin' "
                    "(default) or 'all'"),
}
#: Where the deprecated spellings used in a run are noted (on pytest's option namespace).
_OLD_USED = "indexzoo_bench_old_options"


class _OldSpelling(argparse.Action):
    """``--bench-NAME``, the deprecated spelling of ``--indexzoo-bench-NAME``: stores the value
    as the new one does, and notes the use for :func:`pytest_configure` to warn about."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        used = getattr(namespace, _OLD_USED, None) or []
        if option_string not in used:  # pytest may parse the command line more than once
            setattr(namespace, _OLD_USED, [*used, option_string])


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("indexzoo-bench", "indexzoo benchmarks (fixtures indexzoo_bench_*)")
    for name, settings in _OPTIONS.items():
        g.addoption(f"--indexzoo-bench-{name}", dest=f"bench_{name}", **settings)
        # the earlier spelling, kept for one release (hidden from --help)
        g.addoption(f"--bench-{name}", dest=f"bench_{name}", action=_OldSpelling,
                    choices=settings.get("choices"), default=argparse.SUPPRESS,
                    help=argparse.SUPPRESS)


def _presets(config: pytest.Config) -> list[str]:
    from indexzoo.tools.bench import PRESETS

    names = [p.strip() for p in config.getoption("bench_presets").split(",") if p.strip()]
    unknown = [p for p in names if p not in PRESETS]
    if unknown or not names:
        raise pytest.UsageError(f"--indexzoo-bench-presets: unknown presets {unknown or names}; "
                                f"allowed: {', '.join(PRESETS)}")
    return names


def _indexes(config: pytest.Config) -> list[str]:
    from indexzoo.errors import IndexZooError
    from indexzoo.registry import named

    try:
        names = named(config.getoption("bench_indexes"))
    except IndexZooError as exc:
        raise pytest.UsageError(f"--indexzoo-bench-indexes: {exc}") from None
    if not names:
        raise pytest.UsageError("--indexzoo-bench-indexes: no index selected")
    return names


def _parametrized(metafunc: pytest.Metafunc, name: str) -> bool:
    """Whether the test parametrizes ``name`` itself."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if name in names:
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    """Presets and indexes given on the command line are checked before anything runs; a
    deprecated spelling of an option is warned about."""
    for old in getattr(config.option, _OLD_USED, None) or ():
        new = "--indexzoo-bench-" + old.removeprefix("--bench-")
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(
            f"{old} is deprecated and will be removed in the next release of indexzoo; use "
            f"{new}"), stacklevel=2)
    if config.getoption("bench_presets", "quick") != "quick":
        _presets(config)
    if config.getoption("bench_indexes", "builtin") != "builtin":
        _indexes(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, values in (("indexzoo_index", _indexes), ("indexzoo_preset", _presets)):
        if name in metafunc.fixturenames and not _parametrized(metafunc, name):
            metafunc.parametrize(name, values(metafunc.config))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that times lookups without pytest-benchmark fails with what to install."""
    if (_NEEDS_BENCHMARK in getattr(item, "fixturenames", ())
            and not item.config.pluginmanager.hasplugin("benchmark")):
        pytest.fail(_BENCHMARK_MISSING, pytrace=False)


# ---------------------------------------------------------------------- data
@dataclass
class _Cache:
    """The data of one preset on one device, and the peer's answers on it."""

    key: tuple[str, str] | None = None
    data: Any = None
    peer: dict[str, Any] = field(default_factory=dict)  # out mode -> counts (or None)


_CACHE = pytest.StashKey[_Cache]()


def _workload(preset: str | Workload) -> Workload:
    from indexzoo.tools.bench import PRESETS

    if isinstance(preset, str):
        if preset not in PRESETS:
            raise pytest.UsageError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
        return PRESETS[preset]
    return preset


def _cached(config: pytest.Config, preset: str | Workload, device: str) -> _Cache:
    """The data of ``preset`` on ``device``, generated once and kept until another is asked
    for (a paper-sized preset takes gigabytes)."""
    from indexzoo.tools.workloads import generate

    w = _workload(preset)
    cache = config.stash.setdefault(_CACHE, _Cache())
    key = (w.model_dump_json(), device)
    if cache.key != key:
        cache.key = cache.data = None
        cache.peer.clear()
        cache.data, cache.key = generate(w, device), key
    return cache


def _preset_name(preset: str | Workload) -> str:
    return preset if isinstance(preset, str) else preset.name


# ---------------------------------------------------------------------- timing
def _lookups(index: Any, data: Dataset, out: str) -> Callable[[], list[Any]]:
    batches = data.batches()
    if data.queries is not None:
        return lambda: [index.point(b[0], out=out) for b in batches]
    return lambda: [index.range(b[0], b[1], out=out) for b in batches]


def _counts(index: Any, data: Dataset) -> np.ndarray | None:
    """How many keys each lookup matches (untimed), to compare answers with the peer."""
    import numpy as np

    from indexzoo.devices import to_numpy

    if "count" not in index.capabilities.out_modes:
        return None
    parts = _lookups(index, data, "count")()
    return np.concatenate([to_numpy(p.count).astype(np.int64) for p in parts])


def _peer_counts(cache: _Cache, device: str) -> np.ndarray | None:
    from indexzoo.registry import create
    from indexzoo.tools.bench import PEER

    if "counts" not in cache.peer:
        cache.peer["counts"] = _counts(create(PEER, device=device).build(cache.data.keys),
                                       cache.data)
    return cache.peer["counts"]


def _index(index: Any, device: str, params: Mapping[str, Any]) -> tuple[Any, str]:
    """The index to time and its label: a registered name (or spec) is created on ``device``
    with ``params``; an index object is used as it is."""
    from indexzoo import GpuIndex
    from indexzoo.registry import create

    if isinstance(index, GpuIndex):
        if params:
            raise TypeError("parameters go with an index name, not with an index object")
        return index, index.name
    made = create(index, device=device, **params)
    label = " ".join([made.name, *(f"{k}={v}" for k, v in params.items())])
    return made, label


def _check_agreement(label: str, counts: np.ndarray | None, peer: np.ndarray | None,
                     preset: str) -> bool | None:
    if counts is None or peer is None:
        return None
    if counts.shape != peer.shape or (counts != peer).any():
        wrong = int((counts != peer).sum()) if counts.shape == peer.shape else len(counts)
        pytest.fail(f"{label} answers {wrong} of {len(peer)} lookups of preset {preset} "
                    "differently from the searchsorted peer", pytrace=False)
    return True


def time_lookups(benchmark: Any, index: Any, preset: str | Workload, device: str,
                 config: pytest.Config, env: Mapping[str, Any], *, out: str | None = None,
                 rounds: int = ROUNDS, **params: Any) -> dict[str, Any]:
    """What ``indexzoo_bench_lookups`` does (see the module docstring)."""
    from indexzoo.tools.timing import synchronize, time_call

    cache = _cached(config, preset, device)
    data, name = cache.data, _preset_name(preset)
    idx, label = _index(index, device, params)
    point = data.queries is not None
    if not point and not idx.capabilities.range:
        pytest.skip(f"{label} has no range lookups")
    mode = out or ("rowid" if point else "count")
    if mode not in idx.capabilities.out_modes:
        pytest.skip(f"{label} has no out={mode!r}")
    build = time_call(lambda: idx.build(data.keys), device, repeats=3)
    agrees = _check_agreement(label, _counts(idx, data), _peer_counts(cache, device), name)
    fp = idx.memory_footprint()
    work = _lookups(idx, data, mode)
    events = time_call(work, device, repeats=rounds).median if device == "cuda" else None

    def timed() -> None:
        work()
        synchronize(device)

    benchmark.group = f"{name} ({'point' if point else 'range'}, {device})"
    benchmark.pedantic(timed, rounds=rounds, warmup_rounds=1, iterations=1)
    stats = getattr(benchmark, "stats", None)  # None with --benchmark-disable
    median = stats.stats.median if stats is not None else None
    per_s = data.n_lookups / median if median else None
    info = {
        "index": label, "preset": name, "device": device, "n_lookups": data.n_lookups,
        "lookups_per_s": per_s, "out": mode, "workload": data.workload.model_dump(),
        "lookup_s_cuda_events_median": events, "build_s": build.median,
        "resident_bytes": fp.resident_bytes, "peak_build_bytes": fp.peak_build_bytes,
        "throughput_per_byte": per_s / fp.resident_bytes if per_s and fp.resident_bytes
        else None,
        "footprint": fp.breakdown, "agrees_with_peer": agrees,
        "device_name": env.get("device_name"), "commit": env.get("commit"),
    }
    benchmark.extra_info.update(info)
    return info


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def indexzoo_bench_device(pytestconfig: pytest.Config) -> str:
    """The device of ``--indexzoo-bench-device`` (``auto`` resolved)."""
    from indexzoo.devices import resolve_device

    return resolve_device(pytestconfig.getoption("bench_device"))


@pytest.fixture(scope="session")
def indexzoo_bench_environment(indexzoo_bench_device: str) -> dict[str, Any]:
    """Where the figures are measured: commit, device name, library versions, GPU state."""
    from indexzoo.tools.environment import environment

    return environment(indexzoo_bench_device)


@pytest.fixture
def indexzoo_preset(request: pytest.FixtureRequest) -> str:
    """One preset of ``--indexzoo-bench-presets`` (the test is parametrized over them)."""
    return str(request.param)


@pytest.fixture
def indexzoo_index(request: pytest.FixtureRequest) -> str:
    """One index name of ``--indexzoo-bench-indexes`` (the test is parametrized over them)."""
    return str(request.param)


@pytest.fixture
def indexzoo_bench_data(pytestconfig: pytest.Config,
                        indexzoo_bench_device: str) -> Callable[[str | Workload], Dataset]:
    """``(preset) -> Dataset``: a preset's (or workload's) data on the bench device."""
    return lambda preset: _cached(pytestconfig, preset, indexzoo_bench_device).data


@pytest.fixture
def indexzoo_bench_lookups(benchmark: Any, pytestconfig: pytest.Config,
                           indexzoo_bench_device: str,
                           indexzoo_bench_environment: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """``(index, preset, *, out=None, rounds=5, **params) -> extra_info``: build, check and
    time one index's lookups on a preset (see the module docstring)."""

    def run(index: Any, preset: str | Workload, *, out: str | None = None,
            rounds: int = ROUNDS, **params: Any) -> dict[str, Any]:
        return time_lookups(benchmark, index, preset, indexzoo_bench_device, pytestconfig,
                            indexzoo_bench_environment, out=out, rounds=rounds, **params)

    return run
