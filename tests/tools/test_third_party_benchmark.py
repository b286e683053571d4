"""A plugin author times their index against the built-ins in their own pytest run, with only
what installing indexzoo gives them: the fixtures and ``--indexzoo-bench-*`` options of its pytest
plugin (``indexzoo.tools.pytest_bench``) and pytest-benchmark. The author's file is
docs/examples/test_linear_scan_speed.py, shown in docs/benchmarks.md; it times linear-scan
(tests/example_plugin, installed as ``indexzoo_example``) against sorted-array. Each run is a
pytest process of its own, as the author's would be (and an in-process run would unload numba
modules that cannot be loaded twice)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).parents[2] / "docs"
EXAMPLE = DOCS / "examples" / "test_linear_scan_speed.py"


@pytest.mark.usefixtures("own_pytest_run")
def test_a_plugin_author_times_their_index_against_a_builtin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_linear_scan_speed=EXAMPLE.read_text(encoding="utf-8"))
    out = pytester.path / "out.json"
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--indexzoo-bench-presets",
                                        "tiny", "--indexzoo-bench-device", "cpu",
                                        "--benchmark-min-rounds=1", f"--benchmark-json={out}",
                                        timeout=300)
    res.assert_outcomes(passed=2)
    runs = {b["extra_info"]["index"]: b for b in json.loads(out.read_text())["benchmarks"]}
    assert set(runs) == {"linear-scan", "sorted-array"}
    for b in runs.values():
        info = b["extra_info"]
        assert (info["preset"], info["device"], info["n_lookups"]) == ("tiny", "cpu", 4096)
        assert info["agrees_with_peer"] is True
        # lookups per second: every round does all 4096 lookups of the preset
        assert info["lookups_per_s"] > 0
        assert info["lookups_per_s"] == pytest.approx(4096 / b["stats"]["median"])
        assert b["group"] == "tiny (point, cpu)"  # one table compares them


def test_the_benchmark_guide_shows_the_authors_file_and_its_command() -> None:
    guide = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.S)
    body = EXAMPLE.read_text(encoding="utf-8").split('"""', 2)[2].lstrip("\n")
    assert any(b.strip() == body.strip() for b in blocks), \
        "docs/benchmarks.md must show docs/examples/test_linear_scan_speed.py (after its docstring)"
    assert "pytest test_linear_scan_speed.py --indexzoo-bench-presets tiny" in guide


PLAIN_AND_TIMED = """
def test_plain():
    assert True


def test_timed(indexzoo_bench_lookups):
    indexzoo_bench_lookups("sorted-array", "tiny")
"""


def test_without_pytest_benchmark_only_the_tests_that_time_fail_and_say_why(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mixed=PLAIN_AND_TIMED)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark")
    res.assert_outcomes(passed=1, errors=1)
    res.stdout.fnmatch_lines(["*indexzoo_bench_lookups needs pytest-benchmark's `benchmark` "
                              "fixture: pip install 'pytest-benchmark*"])


@pytest.mark.parametrize("options, error", [
    (["--indexzoo-bench-presets", "tiny,huge"],
     "ERROR: --indexzoo-bench-presets: unknown presets ['huge']; allowed: quick, paper, "),
    (["--indexzoo-bench-indexes", "sorted-array,nonesuch"],
     "ERROR: --indexzoo-bench-indexes: unknown index 'nonesuch'"),
])
def test_an_unknown_preset_or_index_is_a_usage_error_before_any_test(
        pytester: pytest.Pytester, options: list[str], error: str) -> None:
    pytester.makepyfile(test_any="def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", *options)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert err.startswith(error) and "Traceback" not in err, err


def test_the_earlier_option_names_still_work_with_a_deprecation_warning(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_presets="def test_p(indexzoo_preset, indexzoo_bench_device):\n"
                                     "    assert indexzoo_bench_device == 'cpu'\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "--bench-presets",
                                        "tiny,quick", "--bench-device", "cpu")
    res.assert_outcomes(passed=2, warnings=2)
    res.stdout.fnmatch_lines_random([
        "*test_p?tiny? PASSED*", "*test_p?quick? PASSED*",
        "*PytestDeprecationWarning: --bench-presets is deprecated and will be removed in the "
        "next release of indexzoo; use --indexzoo-bench-presets*",
        "*PytestDeprecationWarning: --bench-device is deprecated*use --indexzoo-bench-device*"])


def test_the_new_option_names_warn_of_nothing_and_only_they_are_in_the_help(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_presets="def test_p(indexzoo_preset):\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--indexzoo-bench-presets",
                                        "tiny", "--indexzoo-bench-indexes", "sorted-array")
    res.assert_outcomes(passed=1)
    assert "Deprecation" not in res.stdout.str()
    helped = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--indexzoo-bench-device" in helped and "--bench-device" not in helped
