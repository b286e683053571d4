"""The registry: built-in and third-party plugins found through the same entry-point group,
duplicate names rejected with both providers named, broken plugins isolated."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import add_broken_entry_point

import indexzoo
from indexzoo import registry
from indexzoo.errors import ConfigError, DuplicatePlugin


@pytest.fixture
def clean_registry() -> Iterator[None]:
    registry.reset()
    yield
    registry.reset()


def test_builtin_indexes_are_registered() -> None:
    names = indexzoo.available()
    assert {"sorted-array", "searchsorted"} <= set(names)
    assert {"searchsorted", "sorted-array", "warpcore-hash"} <= set(registry.builtin())
    assert "linear-scan" not in registry.builtin()
    for cls in names.values():
        assert cls.capabilities.point


def test_builtin_indexes_come_through_the_entry_point_group() -> None:
    prov = indexzoo.providers()
    assert "entry point 'sorted-array' = indexzoo.plugins.sorted_array" in prov["sorted-array"]


def test_third_party_plugin_package_is_found_through_its_entry_point() -> None:
    assert "linear-scan" in indexzoo.available(), (
        "the example plugin in tests/example_plugin is not installed; "
        "the README's test command installs it"
    )
    assert "distribution indexzoo-example" in indexzoo.providers()["linear-scan"]


def _plugin(cls: type) -> Any:
    mod = types.ModuleType("fake_plugin")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        register(cls)

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    return mod


def test_duplicate_name_is_an_error_naming_both_providers(clean_registry: None) -> None:
    existing = indexzoo.available()["sorted-array"]
    impostor = type("Impostor", (existing,), {"__module__": "somewhere.else"})
    indexzoo.register_plugin(_plugin(impostor), name="impostor-plugin")
    with pytest.raises(DuplicatePlugin) as err:
        indexzoo.available()
    msg = str(err.value)
    assert "'sorted-array' is registered twice" in msg
    assert "indexzoo.plugins.sorted_array" in msg and "impostor-plugin" in msg
    assert "somewhere.else.Impostor" in msg


def test_runtime_plugin_registers_and_unregisters(clean_registry: None) -> None:
    base = indexzoo.available()["sorted-array"]
    extra = type("Extra", (base,), {"name": "extra-sorted"})
    indexzoo.register_plugin(_plugin(extra), name="extra")
    assert indexzoo.available()["extra-sorted"] is extra
    registry.unregister_plugin("extra")
    assert "extra-sorted" not in indexzoo.available()
    with pytest.raises(ConfigError, match="no plugin named 'extra'"):
        registry.unregister_plugin("extra")


def test_registering_something_that_is_not_an_index_fails(clean_registry: None) -> None:
    indexzoo.register_plugin(_plugin(dict), name="bogus")
    with pytest.raises(TypeError, match="expects a GpuIndex subclass"):
        indexzoo.available()


def test_broken_entry_point_does_not_hide_the_others(clean_registry: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    add_broken_entry_point(monkeypatch)
    with pytest.warns(UserWarning, match="'broken' failed to load"):
        names = indexzoo.available()
    assert "sorted-array" in names
    assert "no_such_module_xyz" in indexzoo.load_errors()["broken"]
    with pytest.raises(ConfigError, match="'broken' could not be loaded"):
        indexzoo.create("broken")


def test_create_takes_params_as_in_a_spec_file() -> None:
    index = indexzoo.create("sorted-array", params={"threads_per_block": 128}, device="cpu")
    assert index.params.threads_per_block == 128
    both = indexzoo.create("sorted-array", params={"threads_per_block": 128, "max_batch": 64},
                           device="cpu", threads_per_block=512)
    assert (both.params.threads_per_block, both.params.max_batch) == (512, 64)
    spec = indexzoo.IndexSpec(index="sorted-array", params={"max_batch": 32}, device="cpu")
    merged = indexzoo.create(spec, params={"threads_per_block": 64})
    assert (merged.params.threads_per_block, merged.params.max_batch) == (64, 32)


def test_create_with_params_that_are_not_a_mapping_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"params must be a mapping of parameter names to values, "
                                          r"got list \[256\]"):
        indexzoo.create("sorted-array", params=[256], device="cpu")


def test_unknown_index_name_is_shortened_in_the_message() -> None:
    with pytest.raises(ConfigError) as err:
        indexzoo.create("x" * 1_000_000, device="cpu")
    assert len(str(err.value)) < 400
