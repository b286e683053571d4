"""Configuration errors name the field, the value and what is allowed; spec files in YAML,
TOML and JSON select and configure an index."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

import indexzoo
from indexzoo import ConfigError, IndexSpec


def test_unknown_index_names_the_alternatives() -> None:
    with pytest.raises(ConfigError, match=r"unknown index 'sorted-arry'.*did you mean 'sorted-array'"):
        indexzoo.create("sorted-arry", device="cpu")


def test_unknown_parameter_names_it_and_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown parameter 'blocksize' \(value 64\); known: "
                                          r"max_batch, threads_per_block"):
        indexzoo.create("sorted-array", device="cpu", blocksize=64)


@pytest.mark.parametrize("value, bound", [(16, ">= 32"), (2048, "<= 1024"), (100, "multiple of 32")])
def test_out_of_range_value_names_field_value_and_bounds(value: int, bound: str) -> None:
    with pytest.raises(ConfigError) as err:
        indexzoo.create("sorted-array", device="cpu", threads_per_block=value)
    msg = str(err.value)
    assert "'threads_per_block'" in msg and repr(value) in msg and bound in msg


def test_wrong_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"'max_batch' = 'lots'"):
        indexzoo.create("sorted-array", device="cpu", max_batch="lots")


def test_config_errors_come_before_any_device_work() -> None:
    # a bad parameter is reported even when the device asked for does not exist here
    with pytest.raises(ConfigError, match="threads_per_block"):
        indexzoo.create("sorted-array", device="cuda", threads_per_block=1)


def test_params_are_frozen_and_visible() -> None:
    idx = indexzoo.create("sorted-array", device="cpu", threads_per_block=512)
    assert idx.params.threads_per_block == 512
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        idx.params.threads_per_block = 64  # type: ignore[misc]


def test_create_from_spec_and_from_dict() -> None:
    spec = IndexSpec(index="sorted-array", params={"threads_per_block": 128}, device="cpu")
    a = indexzoo.create(spec)
    b = indexzoo.create({"index": "sorted-array", "params": {"threads_per_block": 128},
                         "device": "cpu"})
    assert a.params == b.params and a.device == b.device == "cpu"


def test_keyword_params_override_the_spec() -> None:
    spec = IndexSpec(index="sorted-array", params={"threads_per_block": 128}, device="cpu")
    assert indexzoo.create(spec, threads_per_block=64).params.threads_per_block == 64


SPEC = {"index": "sorted-array", "params": {"threads_per_block": 64}, "device": "cpu"}


@pytest.mark.parametrize("suffix, text", [
    (".json", json.dumps(SPEC)),
    (".yaml", "index: sorted-array\nparams:\n  threads_per_block: 64\ndevice: cpu\n"),
    (".toml", 'index = "sorted-array"\ndevice = "cpu"\n[params]\nthreads_per_block = 64\n'),
])
def test_load_spec_reads_every_format(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    spec = indexzoo.load_spec(path)
    assert spec == IndexSpec.model_validate(SPEC)
    assert indexzoo.create(spec).params.threads_per_block == 64


def test_load_spec_rejects_unknown_sections(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**SPEC, "parmas": {}}))
    with pytest.raises(ConfigError, match=r"unknown top-level entries \['parmas'\]"):
        indexzoo.load_spec(path)


def test_load_spec_reports_syntax_errors_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("index = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        indexzoo.load_spec(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        indexzoo.load_spec(tmp_path / "nope.yaml")
    other = tmp_path / "spec.ini"
    other.write_text("[x]")
    with pytest.raises(ConfigError, match=r"unknown format '\.ini'"):
        indexzoo.load_spec(other)


def test_spec_without_index_name_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"params": {}}))
    with pytest.raises(ConfigError, match=r"index: missing \(required\)"):
        indexzoo.load_spec(path)
