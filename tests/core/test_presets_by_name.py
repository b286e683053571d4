"""Every family's named presets are selected by the parameter ``preset``: from Python, from a
spec file (``params: {preset: lean}``) and from the command line (``--set preset=lean``); the
parameters given beside it override the preset's values, an unknown name is a ConfigError that
says which preset was meant and lists them, and ``indexzoo info`` lists them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import indexzoo
from indexzoo import ConfigError
from indexzoo.tools.cli import main

#: Families whose presets are parameter sets of the family's own index (rx, rx-opt) or also
#: registered as indexes of their own (cgrx, rtscan, lightweight).
FAMILIES = ("rx", "rx-opt", "cgrx", "rtscan", "lightweight")


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


def test_a_preset_gives_its_values_and_the_rest_stay_defaults() -> None:
    lean = indexzoo.create("rx", device="cpu", preset="lean").params
    assert (lean.geometry, lean.leaf_size) == ("generated", 24)
    assert lean.key_mode == indexzoo.create("rx", device="cpu").params.key_mode


def test_parameters_given_beside_a_preset_override_its_values() -> None:
    params = indexzoo.create("rx", device="cpu", preset="lean", leaf_size=16).params
    assert (params.geometry, params.leaf_size) == ("generated", 16)


def test_a_spec_file_selects_a_preset_in_its_params(tmp_path: Path) -> None:
    yaml = tmp_path / "index.yaml"
    yaml.write_text("index: rx-opt\nparams: {preset: rx-like, partitions: 4}\n")
    toml = tmp_path / "index.toml"
    toml.write_text('index = "rx-opt"\n[params]\npreset = "rx-like"\npartitions = 4\n')
    for path in (yaml, toml):
        params = indexzoo.create(indexzoo.load_spec(path), device="cpu").params
        assert (params.range_method, params.compress_duplicates) == ("anyhit", False)
        assert params.partitions == 4, "given beside the preset, over its partitions=1"


def test_keyword_params_override_a_preset_named_in_a_spec() -> None:
    spec = {"index": "rx", "params": {"preset": "lean"}}
    assert indexzoo.create(spec, device="cpu", leaf_size=8).params.leaf_size == 8


def test_an_unknown_preset_says_which_was_meant_and_lists_them() -> None:
    with pytest.raises(ConfigError, match=r"^index 'rx': unknown preset 'laen'; did you mean "
                                          r"'lean'\? \(its presets: paper, naive, .*, lean\)$"):
        indexzoo.create("rx", device="cpu", preset="laen")


def test_a_preset_of_a_family_without_presets_says_it_has_none() -> None:
    with pytest.raises(ConfigError, match=r"index 'btree': unknown preset 'lean' \(it has no "
                                          r"presets\)"):
        indexzoo.create("btree", device="cpu", preset="lean")


def test_a_preset_that_is_not_a_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"preset must be a preset's name, got int 3; its "
                                          r"presets: "):
        indexzoo.create("rx-opt", device="cpu", preset=3)


def test_preset_none_is_no_preset() -> None:
    assert indexzoo.create("rx", device="cpu", preset=None).params == \
        indexzoo.create("rx", device="cpu").params


def test_the_params_model_takes_a_preset_too() -> None:
    params_cls = indexzoo.available()["rx"].Params
    assert params_cls(preset="lean", leaf_size=12).leaf_size == 12
    assert params_cls.model_validate({"preset": "lean"}).geometry == "generated"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_preset_of_every_family_is_a_valid_configuration(family: str) -> None:
    presets = indexzoo.available()[family].Params.presets
    assert presets, f"{family} declares its presets"
    for name in presets:
        indexzoo.create(family, device="cpu", preset=name)


@pytest.mark.parametrize("family", ["cgrx", "rtscan", "lightweight"])
def test_a_family_preset_is_the_index_registered_under_its_name(family: str) -> None:
    for name in indexzoo.available()[family].Params.presets:
        by_param = indexzoo.create(family, device="cpu", preset=name).params.model_dump()
        assert by_param == indexzoo.create(name, device="cpu").params.model_dump(), name


def test_a_registered_preset_has_no_presets_of_its_own() -> None:
    with pytest.raises(ConfigError, match=r"index 'cgrx-5x4': unknown preset 'cgrx-8x4' \(it "
                                          r"has no presets\)"):
        indexzoo.create("cgrx-5x4", device="cpu", preset="cgrx-8x4")


def test_info_lists_the_presets_with_their_values() -> None:
    code, text = _run("info", "rx")
    assert code == 0
    lines = text.splitlines()
    head = lines.index("presets (params: {preset: NAME}, or --set preset=NAME; the parameters "
                       "given beside it win):")
    assert "  lean: geometry='generated', leaf_size=24" in lines[head:]
    code, text = _run("info", "cgrx")
    assert "  cgrx-5x4: bucket_log=5, scan_group_log=4, leaf_size=8  (also the index " \
           "cgrx-5x4)" in text.splitlines()
    code, text = _run("info", "rx-opt", "--json")
    presets = json.loads(text)["presets"]
    assert presets["optimized"] == {} and presets["lean"] == {"geometry": "generated",
                                                              "leaf_size": 24}


def test_info_of_an_index_without_presets_has_no_presets_section() -> None:
    assert "presets" not in _run("info", "btree")[1]
    assert json.loads(_run("info", "btree", "--json")[1])["presets"] == {}


def test_check_and_bench_take_a_preset_by_set_and_refuse_an_unknown_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("hypothesis")
    code, _ = _run("check", "rx", "--set", "preset=laen")
    assert code == 2
    assert "index 'rx': unknown preset 'laen'; did you mean 'lean'?" in capsys.readouterr().err
    code, _ = _run("bench", "--preset", "tiny", "--indexes", "rx", "--set", "rx.preset=laen",
                   "--output", str(tmp_path / "out"))
    assert code == 2
    assert "index 'rx': unknown preset 'laen'; did you mean 'lean'?" in capsys.readouterr().err


def test_run_builds_the_preset_a_spec_file_names(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text("index: lightweight\nparams: {preset: eo-bs}\ndevice: cpu\n"
                    "workload: {n_keys: 256, n_lookups: 256}\nrepeats: 1\n")
    code, text = _run("run", str(spec))
    assert code == 0, text
    assert "'layout': 'eo'" in text and "'configuration': 'given'" in text
