"""The plugin contract as the registry checks it: hooks against the operation table (names,
signatures, capabilities, coverage), the plugin API version, and how the base answers each
operation (own hook, points as ranges, a method marked with ``answers``, derived)."""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import ValidationError
from support.toy_index import Brute, KeysState, csr

import indexzoo
from indexzoo import (
    PLUGIN_API,
    Capabilities,
    Footprint,
    GpuIndex,
    Operation,
    PluginError,
    answers,
    registry,
)
from indexzoo.conformance import make_context, run_checks
from indexzoo.contract import check_plugin_class
from indexzoo.operations import OPERATIONS, operation
from indexzoo.plugin_hooks import module_problem
from indexzoo.tools.cli import main


def _variant(name: str, body: dict[str, Any], base: type = Brute) -> type:
    return type(name, (base,), {"name": f"test-{name.lower()}", "__module__": __name__, **body})


def _problems(cls: type) -> str:
    with pytest.raises(PluginError) as err:
        check_plugin_class(cls)
    return str(err.value)


KEYS = np.array([5, 1, 9, 5, 2**40], dtype=np.uint64)


# ---------------------------------------------------------------- hook names and signatures
def test_a_misspelled_hook_is_an_error_naming_it_and_the_hook_meant() -> None:
    def _point_cnt(self: Any, st: Any, q: Any) -> Any:
        return None

    text = _problems(_variant("Misspelled", {"_point_cnt": _point_cnt}))
    assert "_point_cnt is not an operation hook" in text
    assert "did you mean _point_count?" in text
    assert "test-misspelled" in text and "Misspelled" in text


def test_a_misspelled_kind_is_an_error_too() -> None:
    def _pont_count(self: Any, st: Any, q: Any) -> Any:
        return None

    text = _problems(_variant("BadKind", {"_pont_count": _pont_count}))
    assert "_pont_count looks like a misspelled hook; did you mean _point_count?" in text


def test_a_hook_with_a_wrong_signature_is_an_error_naming_the_expected_one() -> None:
    def _range_count(self: Any, st: Any, lo: Any) -> Any:  # hi missing
        return None

    text = _problems(_variant("WrongSignature", {"_range_count": _range_count}))
    assert "_range_count(self, st, lo) cannot be called as _range_count(self, st, lo, hi)" in text
    assert "expected def _range_count(self, st, lo, hi)" in text


def test_a_hook_that_is_not_a_method_is_an_error() -> None:
    text = _problems(_variant("Static", {"_point_count": staticmethod(lambda st, q: None)}))
    assert "_point_count is a staticmethod; expected a method: def _point_count(self, st, q)" \
        in text


def test_a_hook_for_an_operation_the_capabilities_do_not_declare_is_an_error() -> None:
    def _point_sum(self: Any, st: Any, q: Any) -> Any:
        return None

    caps = Capabilities(point=True, range=True, out_modes=("rowid", "count", "rowids"))
    text = _problems(_variant("Undeclared", {"_point_sum": _point_sum, "capabilities": caps}))
    assert "_point_sum answers point lookups with out='sum', which the capabilities of " \
           "Undeclared do not declare" in text


def test_a_hook_inherited_for_an_operation_the_class_does_not_declare_is_an_error() -> None:
    caps = Capabilities(point=True, range=False)
    text = _problems(_variant("NoRanges", {"capabilities": caps}))
    assert "_range_rowids (inherited from Brute) answers range lookups with out='rowids', " \
           "which the capabilities of NoRanges do not declare (range=False); declare it, or " \
           "set narrows = True in NoRanges" in text


def test_a_class_that_narrows_its_parent_on_purpose_is_taken_and_refuses_what_it_dropped(
) -> None:
    caps = Capabilities(point=True, range=False)
    cls = _variant("Narrowed", {"capabilities": caps, "narrows": True})
    check_plugin_class(cls)
    index = cls(device="cpu").build(KEYS)
    assert index.point(KEYS, out="count").count.tolist() == [2, 1, 1, 2, 1]
    with pytest.raises(indexzoo.Unsupported):
        index.range(KEYS, KEYS)
    assert "narrows must be True or False" in _problems(_variant("Vague", {"narrows": "yes"}))


def test_capabilities_refused_in_a_class_body_refuse_that_class_naming_the_field() -> None:
    with pytest.raises(ValidationError):  # outside a class body: refused at once
        Capabilities(point="maybe")  # type: ignore[arg-type]

    class Maybe(Brute):
        name: ClassVar[str] = "test-maybe"
        capabilities: ClassVar[Capabilities] = Capabilities(
            point="maybe", ranges=True)  # type: ignore[arg-type, call-arg]

    text = _problems(Maybe)
    assert "the capabilities declared in " in text and ".Maybe are invalid: field 'point' = " \
        "'maybe': Input should be a valid boolean" in text
    assert "field 'ranges' = True: Extra inputs are not permitted (did you mean 'range'?)" \
        in text
    with pytest.raises(PluginError, match="field 'point'"):
        Maybe(device="cpu")


def test_a_declared_operation_that_nothing_answers_is_an_error() -> None:
    class Nothing(GpuIndex[KeysState]):
        """Declares range lookups but has no hook at all."""

        name: ClassVar[str] = "test-nothing"
        capabilities: ClassVar[Capabilities] = Capabilities(point=False, range=True)
        plugin_api: ClassVar[str] = "2.0"

        def _build(self, st: KeysState, keys: Any) -> None:
            st.keys = keys

        def _footprint(self, st: KeysState) -> Footprint:
            return Footprint()

    text = _problems(Nothing)
    assert "range lookups with out='count' are declared but nothing answers them: define " \
           "_range_count(self, st, lo, hi) or _range_rowids(self, st, lo, hi)" in text


def test_a_missing_build_hook_names_its_signature() -> None:
    class NoBuild(GpuIndex[KeysState]):
        """No _build."""

        name: ClassVar[str] = "test-no-build"
        capabilities: ClassVar[Capabilities] = Capabilities(point=True)
        plugin_api: ClassVar[str] = "2.0"

        def _footprint(self, st: KeysState) -> Footprint:
            return Footprint()

        def _point_rowids(self, st: KeysState, q: Any) -> Any:
            return None

    assert "_build is not implemented; expected def _build(self, st, keys)" in _problems(NoBuild)


def test_replacing_a_method_of_the_base_class_is_an_error() -> None:
    def _lookup(self: Any, st: Any, q: Any) -> Any:
        return None

    text = _problems(_variant("Shadow", {"_lookup": _lookup}))
    assert "Shadow._lookup replaces the base class's own _lookup (not a hook)" in text


def test_every_problem_is_named_at_once() -> None:
    def _point_cnt(self: Any, st: Any, q: Any) -> Any:
        return None

    def _range_sum(self: Any, st: Any) -> Any:
        return None

    text = _problems(_variant("Two", {"_point_cnt": _point_cnt, "_range_sum": _range_sum}))
    assert "_point_cnt" in text and "_range_sum" in text


def test_an_index_that_breaks_the_contract_cannot_be_made() -> None:
    def _point_cnt(self: Any, st: Any, q: Any) -> Any:
        return None

    with pytest.raises(PluginError, match="did you mean _point_count"):
        _variant("MadeAnyway", {"_point_cnt": _point_cnt})(device="cpu")


def test_the_conformance_suite_checks_the_hooks_too() -> None:
    def _point_cnt(self: Any, st: Any, q: Any) -> Any:
        return None

    bad = _variant("Certified", {"_point_cnt": _point_cnt})
    results = {r.label: r for r in run_checks(make_context(bad), groups=["contract"])}
    got = results["contract/hooks_match_the_operation_table"]
    assert got.status == "failed" and "did you mean _point_count?" in got.message
    good = {r.label: r for r in run_checks(make_context(Brute), groups=["contract"])}
    assert good["contract/hooks_match_the_operation_table"].status == "passed"


# ---------------------------------------------------------------- how operations are answered
def test_points_as_ranges_answer_every_point_mode_through_the_range_hook() -> None:
    routes = check_plugin_class(Brute).routes
    assert routes[operation("point", "rowids")].describe() == \
        "point rowids: _range_rowids(st, q, q)"
    assert routes[operation("point", "count")].describe() == \
        "point count: derived from _range_rowids(st, q, q)"
    index = Brute(device="cpu").build(KEYS)
    assert index.point(np.array([5, 7, 2**40], np.uint64), out="count").count.tolist() == [2, 0, 1]
    assert index.point(np.array([1], np.uint64), out="rowid").rowid.tolist() == [1]


class Marked(GpuIndex[KeysState]):
    """One method answers every range mode, marked with ``answers``."""

    name: ClassVar[str] = "test-marked"
    capabilities: ClassVar[Capabilities] = Capabilities(
        point=True, range=True, out_modes=("rowid", "count", "rowids"))
    plugin_api: ClassVar[str] = "2.0"
    points_as_ranges: ClassVar[bool] = True

    def _build(self, st: KeysState, keys: Any) -> None:
        st.keys = keys

    def _footprint(self, st: KeysState) -> Footprint:
        return Footprint()

    @answers(kinds=("range",), outs=("count", "rowids"))
    def _answer(self, st: KeysState, op: Operation, lo: Any, hi: Any) -> Any:
        hit = (st.keys[None, :] >= lo[:, None]) & (st.keys[None, :] <= hi[:, None])
        if op.out == "count":
            return hit.sum(axis=1).astype(st.rowid_dtype)
        return csr(st, hit)


def test_a_marked_method_answers_its_operations_and_the_base_derives_the_rest() -> None:
    routes = check_plugin_class(Marked).routes
    assert routes[operation("range", "count")].describe() == \
        "range count: _answer(st, range/count, lo, hi)"
    assert routes[operation("point", "count")].describe() == \
        "point count: _answer(st, range/count, q, q)"
    assert routes[operation("range", "rowid")].describe() == \
        "range rowid: derived from _answer(st, range/rowids, lo, hi)"
    index = Marked(device="cpu").build(KEYS)
    assert index.range(np.array([0], np.uint64), np.array([5], np.uint64)).count.tolist() == [3]
    assert index.point(np.array([9], np.uint64), out="rowid").rowid.tolist() == [2]


def test_an_override_of_a_marked_method_keeps_its_operations() -> None:
    calls: list[str] = []

    class Traced(Marked):
        """Marked, counting its calls."""

        name: ClassVar[str] = "test-traced"

        def _answer(self, st: KeysState, op: Operation, lo: Any, hi: Any) -> Any:
            calls.append(op.out)
            return super()._answer(st, op, lo, hi)

    Traced(device="cpu").build(KEYS).point(np.array([5], np.uint64), out="count")
    assert calls == ["count"]


def test_answers_rejects_names_outside_the_table_at_once() -> None:
    with pytest.raises(ValueError, match="'cnt' is not an out mode; the modes are rowid"):
        answers(kinds=("range",), outs=("cnt",))
    with pytest.raises(ValueError, match="'ranges' is not a lookup kind"):
        answers(kinds=("ranges",), outs=("count",))


def test_an_operation_answered_twice_is_an_error() -> None:
    def _range_count(self: Any, st: Any, lo: Any, hi: Any) -> Any:
        return None

    text = _problems(_variant("Twice", {"_range_count": _range_count}, base=Marked))
    assert "range lookups with out='count' are answered twice, by _range_count and by _answer" \
        in text


def test_the_table_has_every_kind_and_mode_with_one_hook_each() -> None:
    assert len(OPERATIONS) == 10 and len({op.hook for op in OPERATIONS}) == 10
    assert operation("range", "sum").signature == "_range_sum(self, st, lo, hi)"
    assert operation("point", "bitmap").signature == "_point_bitmap(self, st, q)"


# ---------------------------------------------------------------- plugin API versions
@pytest.mark.parametrize("declared,why", [
    ("2.6", "it targets indexzoo plugin API 2.6, newer than this indexzoo's 2.5"),
    ("3.0", "it targets indexzoo plugin API 3.0, newer than this indexzoo's 2.5"),
    ("1.0", "it targets indexzoo plugin API 1.0, which this indexzoo (2.5) no longer supports"),
    ("0.9", "it targets indexzoo plugin API 0.9, which this indexzoo (2.5) no longer supports"),
    ("two", "plugin_api must be a 'MAJOR.MINOR' string such as '2.5', got 'two'"),
])
def test_an_incompatible_plugin_api_is_refused_naming_both_versions(declared: str,
                                                                    why: str) -> None:
    assert PLUGIN_API == "2.5"
    text = _problems(_variant(f"Api{declared.replace('.', '_')}", {"plugin_api": declared}))
    assert why in text


class Undeclared(GpuIndex[KeysState]):
    """Declares no plugin_api."""

    name: ClassVar[str] = "test-undeclared"
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=False,
                                                        out_modes=("count",))

    def _build(self, st: KeysState, keys: Any) -> None:
        st.keys = keys

    def _footprint(self, st: KeysState) -> Footprint:
        return Footprint()

    def _point_count(self, st: KeysState, q: Any) -> Any:
        return (st.keys[None, :] == q[:, None]).sum(axis=1).astype(st.rowid_dtype)


def test_a_class_that_declares_no_plugin_api_is_refused_saying_what_to_declare() -> None:
    text = _problems(Undeclared)
    assert "it declares no plugin_api; declare plugin_api: ClassVar[str] = '2.5'" in text
    with pytest.raises(PluginError, match="declares no plugin_api"):
        Undeclared(device="cpu")


@pytest.mark.parametrize("declared", ["2.0", "2.1", "2.2", "2.3", "2.4", "2.5"])
def test_every_minor_version_of_the_current_major_loads(declared: str) -> None:
    cls = _variant(f"Minor{declared.replace('.', '_')}", {"plugin_api": declared})
    assert check_plugin_class(cls).api == declared


def test_a_helper_named_like_a_hook_is_an_error() -> None:
    def _point_hits(self: Any, st: Any, q: Any) -> Any:
        return st.keys[None, :] == q[:, None]

    text = _problems(_variant("Helper", {"_point_hits": _point_hits}))
    assert "_point_hits is not an operation hook" in text


def test_a_2_0_prepared_point_hook_receives_the_operation() -> None:
    seen: list[Any] = []

    def _prepared_point(self: Any, st: Any, op: Any) -> Any:
        seen.append(op)
        return None

    def _point_count(self: Any, st: Any, q: Any) -> Any:
        return (st.keys[None, :] == q[:, None]).sum(axis=1).astype(st.rowid_dtype)

    cls = _variant("Prepared", {"_prepared_point": _prepared_point, "_point_count": _point_count})
    cls(device="cpu").build(KEYS).point(np.array([5], np.uint64), out="count")
    assert seen == [Operation("point", "count")]


# ---------------------------------------------------------------- at registration
@pytest.fixture
def clean_registry() -> Iterator[None]:
    registry.reset()
    yield
    registry.reset()


def _plugin(*classes: type) -> Any:
    mod = type(indexzoo)("fake_plugin")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        for cls in classes:
            register(cls)

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    return mod


def _misspelled() -> type:
    def _point_cnt(self: Any, st: Any, q: Any) -> Any:
        return None

    return _variant("Registered", {"_point_cnt": _point_cnt})


def _wrong_signature() -> type:
    def _range_rowids(self: Any, st: Any, lo: Any) -> Any:
        return None

    return _variant("WrongRowids", {"_range_rowids": _range_rowids})


def test_registering_a_misspelled_hook_makes_only_that_name_unusable(
        clean_registry: None) -> None:
    indexzoo.register_plugin(_plugin(_misspelled(), _wrong_signature(), Brute), name="mixed")
    assert "test-brute" in indexzoo.available() and "sorted-array" in indexzoo.available()
    assert "test-registered" not in indexzoo.available()
    errors = indexzoo.load_errors()
    assert "did you mean _point_count?" in errors["test-registered"]
    assert "expected def _range_rowids(self, st, lo, hi)" in errors["test-wrongrowids"]
    with pytest.raises(PluginError, match=r"index 'test-registered' of plugin 'mixed' .* "
                                          r"did you mean _point_count\?"):
        indexzoo.create("test-registered")
    indexzoo.create("test-brute", device="cpu").build(KEYS)


def test_list_and_check_name_the_broken_hooks(clean_registry: None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    indexzoo.register_plugin(_plugin(_misspelled(), _wrong_signature()), name="mixed")
    out = io.StringIO()
    assert main(["list"], out=out) == 0
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.strip()}
    assert "(unusable)" in rows["test-registered"] and "_point_cnt" in rows["test-registered"]
    assert "cannot be called as _range_rowids(self, st, lo, hi)" in rows["test-wrongrowids"]
    assert "sorted-array" in rows
    assert main(["check", "test-wrongrowids"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "expected def _range_rowids(self, st, lo, hi)" in err


def test_a_register_hook_that_fails_loses_only_its_own_plugin(clean_registry: None) -> None:
    mod = type(indexzoo)("failing_plugin")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        register(Brute)
        raise RuntimeError("the plugin's own bug")

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    indexzoo.register_plugin(mod, name="failing")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        names = indexzoo.available()
    assert "test-brute" not in names and "sorted-array" in names
    assert "RuntimeError: the plugin's own bug" in indexzoo.load_errors()["failing"]


def test_registering_something_that_is_not_an_index_breaks_that_plugin_only(
        clean_registry: None) -> None:
    indexzoo.register_plugin(_plugin(dict), name="bogus")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert "sorted-array" in indexzoo.available()
    assert "register() expects a GpuIndex subclass" in indexzoo.load_errors()["bogus"]


def test_a_plugin_without_plugin_api_is_unusable_and_named(clean_registry: None) -> None:
    indexzoo.register_plugin(_plugin(Undeclared), name="undeclared")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert "sorted-array" in indexzoo.available()
    assert "declares no plugin_api" in indexzoo.load_errors()["test-undeclared"]


def test_info_shows_the_plugin_api_and_the_routes(clean_registry: None) -> None:
    indexzoo.register_plugin(_plugin(Brute), name="brute")
    info = io.StringIO()
    assert main(["info", "test-brute"], out=info) == 0
    assert "plugin API:   2.0" in info.getvalue()
    assert "point count: derived from _range_rowids(st, q, q)" in info.getvalue()


# ---------------------------------------------------------------- a plugin module's hooks
def _module(**functions: Any) -> Any:
    mod = type(indexzoo)("plugin_module")
    for name, fn in functions.items():
        setattr(mod, name, fn)
    return mod


def test_a_plugin_module_that_marks_a_hook_of_a_newer_indexzoo_optional_is_taken() -> None:
    @indexzoo.hookimpl(optionalhook=True)
    def indexzoo_register_widgets(register: Any) -> None:
        """A hook this indexzoo does not have."""

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        register(Brute)

    mod = _module(indexzoo_register_widgets=indexzoo_register_widgets,
                  indexzoo_register_indexes=indexzoo_register_indexes)
    assert module_problem(registry.plugin_manager(), mod) is None


def test_a_plugin_module_without_hooks_is_named_only_beside_a_hook_like_function() -> None:
    def helper(register: Any) -> None:
        """A function named like no hook."""

    def indexzoo_setup() -> None:
        """Named like indexzoo's hooks, close to none of them."""

    def indexzoo_register_engines(register: Any) -> None:
        """Close to indexzoo_register_query_engines."""

    pm = registry.plugin_manager()
    assert module_problem(pm, _module(helper=helper)) is None
    assert "its function indexzoo_setup (the hooks are indexzoo_register_indexes" \
        in str(module_problem(pm, _module(indexzoo_setup=indexzoo_setup)))
    assert "its function indexzoo_register_engines (did you mean " \
        "indexzoo_register_query_engines?) is not marked with @indexzoo.hookimpl" \
        in str(module_problem(pm, _module(indexzoo_register_engines=indexzoo_register_engines)))
