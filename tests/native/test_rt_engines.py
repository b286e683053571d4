"""Every ray-tracing index on both engines (``engine="software" | "optix" | "auto"``).

* Everywhere (CI): every RT index and preset takes rx's ``engine`` parameter, builds on the
  software engine, refuses ``optix`` on the CPU with DeviceUnavailable saying what is missing,
  and picks the software engine for ``auto`` there; the ``auto`` rule (RT cores, OptiX usable,
  the configuration taken) and the RT-core table; and the query-launch paths that OptiX takes
  (rx-opt's and cgRX's rays as query launches, RTScan's refine as BITMAP launches), run here on
  the software engine told to behave like OptiX (no in-kernel queries, unordered closest-hit
  ties, no numba programs), answer exactly as the software engine's own paths.
* With OptiX (the GPU machine; tests marked ``optix``, skipped elsewhere with what is
  missing): the conformance suite with ``engine="optix"`` for rx-opt, cgrx-5x4, cgrx-8x4 and
  every rtscan preset (run with ``--indexzoo-device cuda``), and identical answers on both
  engines over a differential workload for each.
"""

from __future__ import annotations

import typing
from typing import Any

import numpy as np
import pytest
from support.rx_cases import _same

import indexzoo
from indexzoo import OUT_MODES, ConfigError, DeviceUnavailable
from indexzoo.conformance import ConformanceSuite
from indexzoo.native import rt
from indexzoo.native.rt import optix

#: Every RT index the project registers, with its presets.
RX_FAMILY = ["rx", "rx-opt", "cgrx", "cgrx-5x4", "cgrx-8x4"]
RTSCAN = ["rtscan", "rtscan-rt", "rtc1", "rtc3", "rtscan-noenc", "rtscan-nosieve",
          "rtscan-direct", "rtscan-paper"]
RT_INDEXES = RX_FAMILY + RTSCAN


def _keys(name: str, n: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name in RTSCAN:
        return rng.integers(0, 300, (n, 3)).astype(np.uint32)
    keys = rng.integers(0, 1 << 40, n, dtype=np.uint64)
    return np.concatenate([keys, keys[: n // 8]])  # duplicates


def _lookups(name: str, keys: np.ndarray, q: int = 150, seed: int = 1) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    if name in RTSCAN:
        lo = rng.integers(0, 250, (q, keys.shape[1])).astype(np.uint32)
        return lo, lo + rng.integers(0, 120, lo.shape).astype(np.uint32)
    lo = np.concatenate([rng.choice(keys, q // 2), rng.integers(0, 1 << 40, q - q // 2,
                                                                   dtype=np.uint64)])
    return lo, lo + rng.integers(0, 1 << 34, q, dtype=np.uint64)


def _answers(index: Any, lo: Any, hi: Any, outs: tuple[str, ...] = OUT_MODES) -> dict[str, Any]:
    got = {f"range {m}": index.range(lo, hi, out=m) for m in outs}
    if lo.ndim == 1:
        got.update({f"point {m}": index.point(lo, out=m) for m in outs})
    return got


def _agree(a: dict[str, Any], b: dict[str, Any], label: str) -> None:
    for k in a:
        _same(a[k], b[k], f"{label} {k}")


# ============================================================================ everywhere
def test_the_rt_indexes_are_every_registered_index_with_an_engine() -> None:
    with_engine = {n for n, cls in indexzoo.available().items()
                   if "engine" in cls.Params.model_fields}
    assert with_engine == set(RT_INDEXES)


@pytest.mark.parametrize("name", RT_INDEXES)
def test_every_rt_index_takes_the_engine_parameter_of_rx(name: str) -> None:
    field = indexzoo.available()[name].Params.model_fields["engine"]
    rx_field = indexzoo.available()["rx"].Params.model_fields["engine"]
    assert field.default == "auto"
    assert set(typing.get_args(field.annotation)) == {"auto", "software", "optix"}
    assert field.annotation == rx_field.annotation
    with pytest.raises(ConfigError, match="engine"):
        indexzoo.create(name, engine="embree")


@pytest.mark.parametrize("name", RT_INDEXES)
def test_every_rt_index_answers_the_same_on_software_and_auto_on_the_cpu(name: str) -> None:
    keys = _keys(name)
    lo, hi = _lookups(name, keys)
    ix = {e: indexzoo.create(name, device="cpu", engine=e).build(keys)
          for e in ("software", "auto")}
    outs = ("count", "rowids")
    _agree(_answers(ix["software"], lo, hi, outs), _answers(ix["auto"], lo, hi, outs), name)


@pytest.mark.parametrize("name", RT_INDEXES)
def test_optix_on_the_cpu_raises_device_unavailable_saying_it_runs_on_the_gpu_only(
        name: str) -> None:
    index = indexzoo.create(name, device="cpu", engine="optix")
    with pytest.raises(DeviceUnavailable, match="GPU only"):
        index.build(_keys(name))


def test_optix_without_its_bindings_says_what_is_missing(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'optix'", name="optix")

    monkeypatch.setattr(optix, "import_optix", missing)
    why = rt.engine_named("optix").unavailable("cuda")
    assert why is not None and "pyoptix is not installed" in why
    with pytest.raises(DeviceUnavailable, match="engine='optix' cannot run here: pyoptix"):
        rt.engine_named("optix").require("cuda")


@pytest.mark.parametrize("name, params, fragment", [
    ("rx", dict(geometry="generated"), "geometry='stored'"),
    ("rx-opt", dict(geometry="generated"), "geometry='stored'"),
    ("rx-opt", dict(primitive="sphere", partitions=4), "partitions=1"),
])
def test_what_optix_cannot_express_is_a_config_error(name: str, params: dict[str, Any],
                                                     fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        indexzoo.create(name, engine="optix", **params)


def test_a_scene_carries_its_engine() -> None:
    index = indexzoo.create("rx", device="cpu", engine="software").build(_keys("rx"))
    assert index.state.gas.engine is rt.engine_named("software")
    assert rt.engine_named("software").name == "software"


@pytest.mark.parametrize("cc, name, generation", [
    ((7, 5), "NVIDIA GeForce RTX 2080", "1st (Turing)"),
    ((7, 5), "Tesla T4", "1st (Turing)"),
    ((7, 5), "NVIDIA GeForce GTX 1660 Ti", "none"),      # Turing without RT cores
    ((8, 6), "NVIDIA RTX A6000", "2nd (Ampere)"),
    ("86", "NVIDIA A40", "2nd (Ampere)"),
    ((8, 9), "NVIDIA GeForce RTX 4090", "3rd (Ada)"),
    ((8, 9), "NVIDIA L40S", "3rd (Ada)"),
    ((12, 0), "NVIDIA GeForce RTX 5090", "4th (Blackwell)"),
    ((7, 0), "Tesla V100-SXM2-32GB", "none"),
    ((8, 0), "NVIDIA A100-SXM4-80GB", "none"),
    ((8, 7), "Orin", "none"),
    ((9, 0), "NVIDIA H100 80GB HBM3", "none"),
    ("90", "NVIDIA H200", "none"),
    ((10, 0), "NVIDIA B200", "none"),
    (None, "", "none"),
])
def test_the_rt_core_generation_follows_from_compute_capability_and_name(
        cc: Any, name: str, generation: str) -> None:
    assert rt.rt_core_generation(cc, name) == generation


def _gpu(monkeypatch: pytest.MonkeyPatch, name: str, cc: tuple[int, int], usable: bool) -> None:
    from indexzoo.native.rt import select

    monkeypatch.setattr(select, "current_gpu", lambda: (name, cc))
    monkeypatch.setattr(optix, "status", lambda probe_device=True: optix.OptixStatus(
        usable, "OptiX 9.0" if usable else "pyoptix is not installed"))


def test_auto_is_the_software_engine_off_the_gpu() -> None:
    got = rt.auto_engine("cpu")
    assert got.engine == "software" and "GPU only" in got.reason


def test_auto_is_the_software_engine_on_a_gpu_without_rt_cores(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    _gpu(monkeypatch, "NVIDIA H100 80GB HBM3", (9, 0), usable=True)
    got = rt.auto_engine("cuda")
    assert got.engine == "software" and "no RT cores" in got.reason


def test_auto_is_optix_on_a_gpu_with_rt_cores_where_optix_is_usable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu(monkeypatch, "NVIDIA GeForce RTX 4090", (8, 9), usable=True)
    got = rt.auto_engine("cuda")
    assert got.engine == "optix" and "3rd (Ada)" in got.reason
    assert rt.auto_engine("cuda", optix_takes="generated geometry").engine == "software"
    _gpu(monkeypatch, "NVIDIA GeForce RTX 4090", (8, 9), usable=False)
    got = rt.auto_engine("cuda")
    assert got.engine == "software" and "not usable: pyoptix" in got.reason


# ------------------------------------------------------- OptiX's paths, on the software engine
@pytest.fixture
def like_optix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The software engine, told to do without what OptiX lacks: no in-kernel queries, no
    ordered closest-hit ties, no numba programs (so the indexes take OptiX's paths)."""
    engine = type(rt.engine_named("software"))
    monkeypatch.setattr(engine, "in_kernel_queries", False)
    monkeypatch.setattr(engine, "ordered_ties", False)
    monkeypatch.setattr(engine, "numba_programs", False)


#: A sample that covers each path once (the GPU's parity tests cover every configuration).
LAUNCHED = [
    ("rx-opt", {}),
    ("rx-opt", dict(compress_duplicates=False, partitions=7)),  # unordered ties within runs
    ("rx-opt", dict(primitive="aabb", inverse_mapping="on", key_mode="extended",
                    range_ray="zero")),
    ("cgrx-5x4", {}), ("cgrx", dict(bucket_log=0, geometry="stored")),
    ("rtscan", {}), ("rtc3", {}),
]


def _limited(name: str, params: dict[str, Any], keys: np.ndarray) -> np.ndarray:
    mode = params.get("key_mode")
    if mode in ("naive", "extended"):
        return keys % np.uint64(1 << 23)
    return keys


@pytest.mark.parametrize("name, params", LAUNCHED, ids=lambda v: str(v))
def test_optix_s_query_launch_paths_answer_as_the_software_engine_s_own(
        name: str, params: dict[str, Any], request: pytest.FixtureRequest) -> None:
    keys = _limited(name, params, _keys(name, 600, seed=2))
    lo, hi = _lookups(name, keys, seed=3)
    if lo.ndim == 1:
        lo, hi = _limited(name, params, lo), _limited(name, params, hi)
        hi = np.maximum(lo, hi)
    own = _answers(indexzoo.create(name, device="cpu", engine="software", **params).build(keys),
                   lo, hi)
    request.getfixturevalue("like_optix")
    launched = _answers(indexzoo.create(name, device="cpu", engine="software", **params)
                        .build(keys), lo, hi)
    _agree(own, launched, f"{name} {params}")


def test_the_launch_paths_are_the_ones_taken(like_optix: None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo.plugins.cgrx import launched as cg_launched
    from indexzoo.plugins.rtscan import refine
    from indexzoo.plugins.rx_opt import launched as opt_launched

    calls: list[str] = []

    def spy(name: str, real: Any) -> Any:
        def called(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)
        return called

    for module, name in ((opt_launched, "runs_from_hits"), (cg_launched, "runs"),
                         (refine, "mark_plan")):
        monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    # rtscan's default refines directly here; rtscan-rt with one sieve level, since the two
    # levels' 1,024 bins would decide every row of these 400 and leave no ray to trace
    extra: dict[str, dict[str, Any]] = {"rtscan-rt": {"sieve_fine": 0}}
    for name in ("rx-opt", "cgrx", "rtscan-rt"):
        keys = _keys(name)
        lo, hi = _lookups(name, keys)
        indexzoo.create(name, device="cpu", engine="software", **extra.get(name, {})) \
            .build(keys).range(lo, hi)
    assert set(calls) == {"runs_from_hits", "runs", "mark_plan"}


def _engine_of(index: Any) -> str | None:
    """The name of the engine an index's scene is on (None: it holds no scene)."""
    st = index.state
    if hasattr(st, "groups"):  # rtscan: one scene per column group (none: direct refine)
        scene = st.groups[0].gas
    elif hasattr(st, "gas"):  # rx
        scene = st.gas
    else:  # rx-opt, cgrx
        scene = getattr(st.scene, "gas", st.scene)
    return None if scene is None else scene.engine.name


def test_the_engine_of_an_index_built_with_software_is_software() -> None:
    for name in ("rx", "rx-opt", "cgrx", "rtscan-rt"):
        keys = _keys(name)
        index = indexzoo.create(name, device="cpu", engine="software").build(keys)
        assert _engine_of(index) == "software", name
    for name in ("rtscan-direct", "rtscan"):  # the direct refine (rtscan's on this engine)
        assert _engine_of(indexzoo.create(name, device="cpu").build(_keys("rtscan"))) is None


# ============================================================================ with OptiX
#: The conformance suite on OptiX for every RT index the acceptance names (rx has its own,
#: tests/plugins/rx/test_rx_optix.py).
OPTIX_SUITES = ["rx-opt", "cgrx-5x4", "cgrx-8x4", *RTSCAN]

for _name in OPTIX_SUITES:
    _cls = type(f"TestConformance_{_name.replace('-', '_')}_optix", (ConformanceSuite,),
                {"index": _name, "params": {"engine": "optix"}, "__module__": __name__,
                 "pytestmark": [pytest.mark.optix, pytest.mark.gpu]})
    globals()[_cls.__name__] = _cls

#: The parity workloads: every RT index, rx-opt with each optimization and its partitioned
#: IAS, every key mode's far boxes.
PARITY = [
    ("rx", {}), ("rx", dict(primitive="aabb", key_mode="extended", range_ray="zero")),
    ("rx-opt", {}), ("rx-opt", dict(compress_duplicates=False, partitions=7)),
    ("rx-opt", dict(primitive="aabb")), ("rx-opt", dict(primitive="sphere", partitions=1)),
    ("rx-opt", dict(primitive="aabb", key_mode="extended", range_ray="zero", partitions=5)),
    ("rx-opt", dict(inverse_mapping="on")), ("rx-opt", dict(range_method="anyhit")),
    ("cgrx", {}), ("cgrx-5x4", {}), ("cgrx-8x4", {}),
    *[(n, {}) for n in RTSCAN],
]


@pytest.mark.optix
@pytest.mark.gpu
@pytest.mark.parametrize("name, params", PARITY, ids=lambda v: str(v))
def test_optix_answers_exactly_as_the_software_engine(name: str, params: dict[str, Any]
                                                      ) -> None:
    keys = _limited(name, params, _keys(name, 5000, seed=7))
    lo, hi = _lookups(name, keys, q=2000, seed=8)
    if lo.ndim == 1:
        lo, hi = _limited(name, params, lo), _limited(name, params, hi)
        hi = np.maximum(lo, hi)
    ix = {e: indexzoo.create(name, device="cuda", engine=e, **params).build(keys)
          for e in ("optix", "software")}
    assert _engine_of(ix["optix"]) in ("optix", None)
    _agree(_answers(ix["optix"], lo, hi), _answers(ix["software"], lo, hi), f"{name} {params}")


@pytest.mark.parametrize("name", RT_INDEXES)
def test_an_index_saved_with_optix_loads_onto_the_cpu_with_engine_auto(
        name: str, tmp_path: Any) -> None:
    """engine="optix" runs on the GPU only: saved or pickled with it (on a GPU), an index
    loaded onto the CPU takes engine="auto" there and answers as before."""
    import json
    import pickle
    import zipfile

    from indexzoo import persist

    keys = _keys(name)
    index = indexzoo.create(name, device="cpu", engine="software").build(keys)
    index.save(tmp_path / "s.izo")
    with zipfile.ZipFile(tmp_path / "s.izo") as zin, \
            zipfile.ZipFile(tmp_path / "o.izo", "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():  # the same file as one saved from an OptiX index
            data = zin.read(info.filename)
            if info.filename == persist.META_MEMBER:
                meta = json.loads(data)
                meta["params"]["engine"] = "optix"
                data = json.dumps(meta).encode()
            zout.writestr(info.filename, data)
    loaded = indexzoo.load(tmp_path / "o.izo", device="cpu")
    assert loaded.params.engine == "auto" and loaded.device == "cpu"
    lo, hi = _lookups(name, keys)
    _agree(_answers(loaded, lo, hi, ("count",)), _answers(index, lo, hi, ("count",)), name)
    state = index.__getstate__()
    state["meta"]["params"]["engine"] = "optix"
    again = type(index).__new__(type(index))
    again.__setstate__(pickle.loads(pickle.dumps(state)))
    assert again.params.engine == "auto"
    assert type(index)._params_for_load({"engine": "optix"}, "cuda") == {"engine": "optix"}


#: Configurations whose scenes are saved as they are on the software engine; with OptiX's
#: ``saves_scenes=False`` each is saved without its scene and builds it again on load.
SCENE_CASES = [
    ("rx", {}), ("rx", dict(key_mode="3d", primitive="aabb")),
    ("rx-opt", {}), ("rx-opt", dict(partitions=1)), ("rx-opt", dict(primitive="sphere")),
    ("cgrx", {}), ("rtscan", {}),
]


def _scenes_in(value: Any) -> list[Any]:
    """The software engine's scenes anywhere in a saved state (dicts, tuples, dataclasses)."""
    import dataclasses

    from indexzoo.native.rt import trace

    if isinstance(value, (trace.Gas, trace.Ias)):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _scenes_in(v)]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in _scenes_in(v)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _scenes_in(getattr(value, f.name))]
    return []


@pytest.mark.parametrize("name, params", SCENE_CASES, ids=lambda v: str(v))
def test_an_index_whose_engine_saves_no_scene_builds_it_again_on_load(
        name: str, params: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """OptiX's scenes are handles on one GPU: an RT index saves its state without them and
    builds them again on load, answering and holding exactly as before."""
    engine = type(rt.engine_named("software"))
    monkeypatch.setattr(engine, "saves_scenes", False)
    keys = _limited(name, params, _keys(name))
    lo, hi = _lookups(name, keys)
    if lo.ndim == 1:
        hi = np.maximum(lo, hi)
    index = indexzoo.create(name, device="cpu", engine="software", **params).build(keys)
    assert not _scenes_in(index._save_state(index.state)), \
        "a scene of an engine that saves none was saved"
    index.save(tmp_path / "i.izo")
    loaded = indexzoo.load(tmp_path / "i.izo")
    assert loaded.memory_footprint().breakdown == index.memory_footprint().breakdown
    _agree(_answers(loaded, lo, hi), _answers(index, lo, hi), f"{name} {params}")


@pytest.mark.parametrize("partitions", [1, 16])
def test_rx_opt_with_generated_geometry_saves_and_loads(partitions: int, tmp_path: Any
                                                        ) -> None:
    """Generated geometry's scene holds a function: it is built again on load."""
    keys = _keys("rx-opt")
    lo, hi = _lookups("rx-opt", keys)
    index = indexzoo.create("rx-opt", device="cpu", geometry="generated",
                            partitions=partitions).build(keys)
    index.save(tmp_path / "g.izo")
    loaded = indexzoo.load(tmp_path / "g.izo")
    assert loaded.memory_footprint().breakdown == index.memory_footprint().breakdown
    _agree(_answers(loaded, lo, hi), _answers(index, lo, hi), f"generated, {partitions}")
