"""``rx`` on the OptiX engine (``engine="optix"``): what it must do everywhere, and, where OptiX
runs (tests marked ``optix``, skipped elsewhere with what is missing), that it answers exactly as
the software engine does.

* Without OptiX (CI): asking for it raises DeviceUnavailable naming what is missing and how to
  install it; ``auto`` falls back to the software engine; the launch struct is written from the
  launch record with C's layout; the program source assembles.
* With OptiX (the GPU machine): the conformance suite for every rx configuration the software
  engine's suite runs (every key mode, primitive and ray kind), identical answers to the software
  engine in every out mode before and after updates, compaction, empty builds, footprints.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from support.rx_cases import LIMIT, SUITE_CONFIGS, VALID, InDomain, _label, _same, _workload

import indexzoo
from indexzoo import OUT_MODES, ConfigError, DeviceUnavailable
from indexzoo.conformance import ConformanceSuite
from indexzoo.native.rt import optix
from indexzoo.native.rt.optix import record
from indexzoo.native.rt.query import QueryParams, launch_record
from indexzoo.plugins.rx.programs import CUDA, PROGRAMS, RxRecord


# ============================================================================ everywhere
def test_optix_on_the_cpu_raises_device_unavailable_saying_it_runs_on_the_gpu_only() -> None:
    index = indexzoo.create("rx", device="cpu", engine="optix")
    with pytest.raises(DeviceUnavailable, match="GPU only"):
        index.build(np.arange(10, dtype=np.uint64))


def test_auto_on_the_cpu_is_the_software_engine() -> None:
    index = indexzoo.create("rx", device="cpu").build(np.arange(10, dtype=np.uint64))
    assert index.params.engine == "auto"
    assert index._state.gas.engine.name == "software"


def test_optix_with_generated_geometry_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="geometry='stored'"):
        indexzoo.create("rx", engine="optix", geometry="generated")


def test_optix_takes_every_key_mode_and_primitive_the_software_engine_takes() -> None:
    # extended mode's AABBs lie beyond OptiX's reach (x up to 1.7e38) and are built scaled
    # under one instance (native/rt/optix/accel.py): a configuration like any other
    for mode, prim in itertools.product(["3d", "naive", "extended"],
                                        ["triangle", "sphere", "aabb"]):
        if (mode, prim) == ("extended", "sphere"):  # refused on both engines (Table 1)
            continue
        indexzoo.create("rx", engine="optix", key_mode=mode, primitive=prim,
                        range_ray="zero" if mode == "extended" else "offset")


def test_status_names_the_missing_bindings_and_how_to_install(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'optix'", name="optix")

    monkeypatch.setattr(optix, "import_optix", missing)
    got = optix.status()
    assert not got.usable
    assert "pyoptix is not installed" in got.reason
    assert "pip install pyoptix" in got.reason and "OptiX_INSTALL_DIR" in got.reason
    with pytest.raises(DeviceUnavailable, match="pyoptix is not installed"):
        optix.require()


@pytest.mark.parametrize("where, fragment", [(None, "is not set"),
                                             ("/nonexistent", "holds no include/optix.h")])
def test_status_names_missing_headers(monkeypatch: pytest.MonkeyPatch, where: str | None,
                                      fragment: str) -> None:
    monkeypatch.setattr(optix, "import_optix", lambda: object())
    if where is None:
        monkeypatch.delenv("OptiX_INSTALL_DIR", raising=False)
    else:
        monkeypatch.setenv("OptiX_INSTALL_DIR", where)
    got = optix.status()
    assert not got.usable and fragment in got.reason and "OptiX SDK headers" in got.reason


def test_the_launch_struct_has_c_layout_and_the_records_names() -> None:
    keys = np.zeros(4, np.uint64)
    rec = RxRecord(keys, np.int64(0), np.int64(23), np.int64(23), keys, keys, np.bool_(True))
    params = launch_record(RxRecord)(np.int64(1), keys, np.bool_(False), np.zeros(1, np.int64),
                                     np.zeros(1, np.uint32), keys, *rec)
    lay = record.layout(("iz_handle", "iz_radius", *params._fields),
                        (np.uint64(7), np.float32(0.25), *tuple(params)))
    assert lay.names[:2] == ("iz_handle", "iz_radius")
    assert "  unsigned long long iz_handle;" in lay.declaration
    assert "  float iz_radius;" in lay.declaration
    assert "  unsigned int* out;" in lay.declaration  # arrays: pointers to their element type
    assert "  unsigned long long* keys;" in lay.declaration
    assert "  bool confirm;" in lay.declaration and "  long long op;" in lay.declaration
    # C's natural alignment: the pointer after the float starts at the next multiple of 8
    assert lay.dtype.fields["op"][1] == 16
    assert set(QueryParams._fields) <= set(lay.names)


def test_the_launch_struct_refuses_types_without_a_c_twin() -> None:
    with pytest.raises(TypeError, match="no C type"):
        record.layout(("x",), (np.zeros(2, np.complex64),))


def test_rx_programs_define_what_the_layer_calls() -> None:
    for name in ("iz_match", "__intersection__iz"):
        assert name in CUDA
    for kind, programs in PROGRAMS.items():  # with the family's perpendicular ray generation
        assert programs.cuda is not None and programs.cuda.startswith(CUDA), kind
        for name in ("iz_raygen", "IZ_HAS_RAYGEN"):
            assert name in programs.cuda, (kind, name)


# ============================================================================ with OptiX
def _optix_takes(cfg: dict[str, Any]) -> bool:
    return cfg.get("geometry") != "generated"


OPTIX_CONFIGS = [cfg for cfg in SUITE_CONFIGS if _optix_takes(cfg)]

for _cfg in [{}, *OPTIX_CONFIGS]:
    _params = {**_cfg, "engine": "optix"}
    _cls = type(f"TestConformance_rx_optix_{_label(_cfg) or 'paper'}", (ConformanceSuite,),
                {"index": InDomain if _cfg.get("key_mode") in LIMIT else "rx",
                 "params": _params, "__module__": __name__,
                 "pytestmark": [pytest.mark.optix, pytest.mark.gpu]})
    globals()[_cls.__name__] = _cls


UPDATES = [dict(compact=True, update="rebuild"), dict(compact=False, update="refit")]


@pytest.mark.optix
@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [c for c in VALID if _optix_takes(c)],
                         ids=lambda c: "-".join(c.values()))
def test_optix_answers_exactly_as_the_software_engine(cfg: dict[str, str]) -> None:
    keys, q, lo, hi = _workload(cfg["key_mode"], 3000, seed=len(str(cfg)))
    rng = np.random.default_rng(5)
    for upd in UPDATES:
        ix = {e: indexzoo.create("rx", device="cuda", engine=e, **cfg, **upd).build(keys)
              for e in ("optix", "software")}
        assert ix["optix"]._state.gas.engine.name == "optix"
        pos = rng.integers(0, keys.shape[0], 100)
        new = rng.choice(keys, 100)
        for step in ("built", "updated"):
            for m in OUT_MODES:
                label = f"{cfg} {upd} {step}"
                _same(ix["optix"].point(q, out=m), ix["software"].point(q, out=m), f"{label} {m}")
                _same(ix["optix"].range(lo, hi, out=m), ix["software"].range(lo, hi, out=m),
                      f"{label} range {m}")
            for e in ix:
                ix[e].update(pos, new)


@pytest.mark.optix
@pytest.mark.gpu
@pytest.mark.parametrize("primitive", ["triangle", "sphere", "aabb"])
def test_compaction_shrinks_the_gas_and_the_footprint_counts_it(primitive: str) -> None:
    keys = np.random.default_rng(1).integers(0, 2**40, 20000, dtype=np.uint64)
    fp = {c: indexzoo.create("rx", device="cuda", engine="optix", primitive=primitive,
                             compact=c).build(keys).memory_footprint() for c in (False, True)}
    assert 0 < fp[True].breakdown["gas"] < fp[False].breakdown["gas"]
    assert ("sphere_centres" in fp[True].breakdown) == (primitive == "sphere")
    for f in fp.values():
        assert f.peak_build_bytes >= f.resident_bytes


@pytest.mark.optix
@pytest.mark.gpu
def test_an_empty_build_misses_everything() -> None:
    ix = indexzoo.create("rx", device="cuda", engine="optix").build(np.zeros(0, np.uint64))
    q = np.arange(5, dtype=np.uint64)
    assert int(ix.point(q, out="count").count.sum()) == 0
    assert int(ix.range(q, q + np.uint64(9), out="count").count.sum()) == 0


@pytest.mark.optix
@pytest.mark.gpu
def test_launches_of_at_most_max_rays_give_the_same_answers() -> None:
    keys, q, lo, hi = _workload("3d", 2000, seed=4)
    small = indexzoo.create("rx", device="cuda", engine="optix", max_rays=7).build(keys)
    big = indexzoo.create("rx", device="cuda", engine="optix").build(keys)
    for m, (a, b) in itertools.product(OUT_MODES, [(q, q), (lo, hi)]):
        _same(small.range(a, b, out=m), big.range(a, b, out=m), f"max_rays {m}")
