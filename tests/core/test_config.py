"""Configuration errors name the field, the value and what is allowed; spec files in YAML,
TOML and JSON select and configure an index."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pydantic
import pytest

import indexzoo
from indexzoo import ConfigError, IndexParams, IndexSpec
from indexzoo.config import spec_from_data, validate_params


def test_unknown_index_names_the_alternatives() -> None:
    with pytest.raises(ConfigError, match=r"unknown index 'sorted-arry'.*did you mean 'sorted-array'"):
        indexzoo.create("sorted-arry", device="cpu")


def test_unknown_parameter_names_it_and_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown parameter 'blocksize' \(value 64\); known: "
                                          r"max_batch, probe_sort_bits, sort_probes, threads_per_block"):
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


class TextPath:
    """An os.PathLike that is not a pathlib.Path."""

    def __init__(self, path: Path | bytes) -> None:
        self.path = path

    def __fspath__(self) -> Any:
        return self.path if isinstance(self.path, bytes) else str(self.path)


def test_load_spec_takes_a_str_or_any_path_like(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    assert indexzoo.load_spec(str(path)) == indexzoo.load_spec(TextPath(path))


@pytest.mark.parametrize("given, shown", [
    (None, "NoneType None"), (3, "int 3"), (b"spec.yaml", "bytes b'spec.yaml'"),
    (TextPath(b"spec.yaml"), "TextPath <"),
])
def test_load_spec_of_anything_but_a_path_is_a_config_error(given: Any, shown: str) -> None:
    with pytest.raises(ConfigError, match="^spec file: expected a path \\(str or os.PathLike\\), "
                                          f"got {re.escape(shown)}"):
        indexzoo.load_spec(given)


def test_spec_without_index_name_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"params": {}}))
    with pytest.raises(ConfigError, match=r"index: missing \(required\)"):
        indexzoo.load_spec(path)


# ---------------------------------------------------------------------- hostile spec files
LAUGHS = "".join(
    ['a: &a ["x","x","x","x","x","x","x","x","x"]\n']
    + [f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in itertools.pairwise("abcdefghi")]
)


def test_yaml_aliases_are_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    with pytest.raises(ConfigError, match=r"line 2: YAML aliases \(\*name\) are not allowed in spec "
                                          r"files \(found \*a\)"):
        indexzoo.load_spec(path)


def test_yaml_merge_keys_are_aliases_too(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("base: &base {device: cpu}\nindex: sorted-array\nparams:\n  <<: *base\n")
    with pytest.raises(ConfigError, match="line 4: YAML aliases"):
        indexzoo.load_spec(path)


def test_spec_size_is_bounded_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({**SPEC, "pad": "x" * (2 << 20)}))
    with pytest.raises(ConfigError, match=r"is 2\.0 MiB \(\d+ bytes\); the limit is 1 MiB "
                                          r"\(1048576 bytes\)"):
        indexzoo.load_spec(path)


def test_spec_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(b'index = "sorted-array"\ndevice = "\xff"\n')
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte 0xff at offset 33\)"):
        indexzoo.load_spec(path)


def test_spec_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        indexzoo.load_spec(tmp_path)


def test_values_in_messages_are_shortened() -> None:
    with pytest.raises(ConfigError) as err:
        indexzoo.create("sorted-array", device="cpu", threads_per_block="9" * 1_000_000)
    assert len(str(err.value)) < 300
    nested: Any = ["x"] * 9
    for _ in range(8):
        nested = [nested] * 9  # 9^9 strings in 9 x 9 list objects
    with pytest.raises(ConfigError) as err:
        indexzoo.create("sorted-array", device="cpu", max_batch=nested)
    assert len(str(err.value)) < 300
    with pytest.raises(ConfigError) as err:
        spec_from_data(nested)
    assert len(str(err.value)) < 300


# ---------------------------------------------------------------------- strict parameter types
class StrictParams(IndexParams):
    count: int = 4
    share: float = 0.5
    flag: bool = True
    fill: Literal[0.5, 1.0] = 1.0
    width: Literal[8, 16, 32] = 16
    levels: int | None = None
    mode: Literal["a", "b"] = "a"


@pytest.mark.parametrize("field, value, message", [
    ("max_batch", True, "expected an integer, got bool"),
    ("count", False, "expected an integer, got bool"),
    ("count", "4", "expected an integer, got str"),
    ("count", 4.0, "expected an integer, got float"),
    ("share", True, "expected a number, got bool"),
    ("share", "0.5", "expected a number, got str"),
    ("flag", 1, "expected a boolean (true or false), got int"),
    ("flag", "yes", "expected a boolean (true or false), got str"),
    ("fill", True, "expected one of 0.5, 1.0, got bool"),
    ("width", True, "expected one of 8, 16, 32, got bool"),
    ("width", "16", "expected one of 8, 16, 32, got str"),
    ("levels", True, "expected an integer or null, got bool"),
])
def test_parameters_have_strict_types(field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"parameter '{field}' = {value!r} is invalid: "
                                                     f"{message}")):
        validate_params(StrictParams, {field: value}, "strict")


@pytest.mark.parametrize("field, value, stored", [
    ("count", 7, 7), ("count", np.int64(7), 7), ("share", 1, 1.0), ("share", np.float32(0.25), 0.25),
    ("flag", False, False), ("flag", np.bool_(False), False), ("fill", 1, 1.0), ("fill", 0.5, 0.5),
    ("width", 8, 8), ("levels", None, None), ("levels", -3, -3), ("mode", "b", "b"),
])
def test_strict_types_keep_what_is_right(field: str, value: Any, stored: Any) -> None:
    assert getattr(validate_params(StrictParams, {field: value}, "strict"), field) == stored


def test_every_plugin_validates_its_defaults() -> None:
    for name, cls in indexzoo.available().items():
        assert cls.Params() is not None, name


def test_misspelt_parameter_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown parameter 'thread_per_block' \(value 64\); did "
                                          r"you mean 'threads_per_block'\?"):
        indexzoo.create("sorted-array", device="cpu", thread_per_block=64)


# ---------------------------------------------------------------------- finite floats
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_float_parameters_must_be_finite(value: float) -> None:
    # a float parameter without bounds (a third-party plugin's, say) took inf and NaN, and a
    # bounded one refused NaN as "less than or equal to 1": every float parameter is finite
    with pytest.raises(ConfigError, match=re.escape(f"parameter 'share' = {value!r} is invalid: "
                                                    "Input should be a finite number")):
        validate_params(StrictParams, {"share": value}, "strict")
    with pytest.raises(ConfigError, match=re.escape(
            f"parameter 'ray_interval' = {value!r} is invalid: Input should be a finite number "
            "(allowed: > 0.0, <= 1.0)")):
        indexzoo.create("rtscan", device="cpu", ray_interval=value)


DUPLICATES = {
    "yaml top level": (".yaml", "index: btree\nparams: {}\nindex: sorted-array\n", 3, "'index'"),
    "yaml nested": (".yaml", "index: btree\nparams:\n  node_width: 8\n  node_width: 16\n", 4,
                    "'node_width'"),
    "yaml flow": (".yml", "index: btree\nparams: {node_width: 8, node_width: 16}\n", 2,
                  "'node_width'"),
    "json top level": (".json", '{"index": "btree",\n "index": "sorted-array"}', 2, "'index'"),
    "json nested": (".json", '{"index": "btree",\n "params": {"node_width": 8,\n'
                    '   "node_width": 16}}', 3, "'node_width'"),
    "json escaped": (".json", '{"index": "btree",\n\n "\\u0069ndex": "x"}', 3, "'index'"),
    "toml top level": (".toml", 'index = "btree"\nindex = "sorted-array"\n', 2, "'index'"),
    "toml table": (".toml", 'index = "btree"\n[params]\nnode_width = 8\nnode_width = 16\n', 4,
                   "'node_width'"),
    "toml table twice": (".toml", 'index = "btree"\n[params]\nnode_width = 8\n[params]\n', 4,
                         "'params'"),
}


@pytest.mark.parametrize("case", list(DUPLICATES))
def test_a_key_given_twice_names_the_key_and_its_line(tmp_path: Path, case: str) -> None:
    suffix, text, line, key = DUPLICATES[case]
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError) as got:
        indexzoo.load_spec(path)
    assert f"line {line}: the key {key} is given twice in one mapping" in str(got.value)


def test_keys_repeated_in_different_mappings_are_fine(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"index": "btree", "params": {"index": 1}, "x": [{"a": 1},'
                                     ' {"a": 2}]}')
    with pytest.raises(ConfigError, match="unknown top-level entries"):  # not a duplicate
        indexzoo.load_spec(tmp_path / "s.json")
    (tmp_path / "s.yaml").write_text("index: btree\nparams: {node_width: 8}\n")
    assert indexzoo.load_spec(tmp_path / "s.yaml").params == {"node_width": 8}
