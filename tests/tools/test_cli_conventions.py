"""The command line's conventions: ``--version``, ``python -m indexzoo``, and ``--json`` on
``info`` and ``doctor`` (one JSON object with the fields the text shows)."""

from __future__ import annotations

import importlib.metadata
import io
import json
import subprocess
import sys

import pytest

import indexzoo
from indexzoo.tools import doctor
from indexzoo.tools.cli import main


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    printed = capsys.readouterr().out
    assert printed == f"indexzoo {indexzoo.__version__}\n"
    assert printed.split()[1] == importlib.metadata.version("indexzoo")


def test_python_dash_m_indexzoo_is_the_command() -> None:
    got = subprocess.run([sys.executable, "-m", "indexzoo", "--version"],
                         capture_output=True, text=True, timeout=120)
    assert (got.returncode, got.stdout) == (0, f"indexzoo {indexzoo.__version__}\n")
    bad = subprocess.run([sys.executable, "-m", "indexzoo", "no-such-command"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("indexzoo: error: ")


def test_info_json_holds_what_info_prints() -> None:
    code, text = run("info", "sorted-array", "--json")
    assert code == 0
    got = json.loads(text)
    assert set(got) == {"name", "description", "provider", "class", "capabilities",
                        "plugin_api", "operations", "parameters"}
    assert got["name"] == "sorted-array"
    assert got["class"] == "indexzoo.plugins.sorted_array.index.SortedArrayIndex"
    assert got["capabilities"]["devices"] == ["cpu", "cuda"]
    assert "point rowid: _point_rowid(st, q)" in got["operations"]
    params = indexzoo.available()["sorted-array"].Params.model_fields
    assert set(got["parameters"]) == set(params)
    for field in got["parameters"].values():
        assert set(field) == {"type", "default", "bounds", "description"}
    _, plain_text = run("info", "sorted-array")
    for name in got["parameters"]:
        assert f"  {name}: " in plain_text


def test_info_json_of_a_ray_tracing_index_names_its_engines() -> None:
    code, text = run("info", "rx", "--json")
    assert code == 0
    assert set(json.loads(text)["engines"]) == {"software", "optix"}


def test_info_json_of_an_unknown_index_is_a_usage_error() -> None:
    code, text = run("info", "no-such-index", "--json")
    assert (code, text) == (2, "")


def test_doctor_json_has_every_section_the_text_shows() -> None:
    code, text = run("doctor", "--json")
    assert code == 0
    got = json.loads(text)
    sections = [key for key, _ in doctor.SECTIONS]
    assert set(got) == {"indexzoo", "python", "numpy", "numba", "platform", "cuda_usable",
                        *sections, "indexes", "unusable_indexes"}
    assert got["indexzoo"] == indexzoo.__version__
    assert set(got["devices"]) == {"cpu", "cuda", "auto"}
    assert isinstance(got["cuda_usable"], bool)
    assert got["indexes"]["sorted-array"]["devices"] == ["cpu", "cuda"]
    assert "cpu" in got["indexes"]["sorted-array"]["usable_here"]
    _, plain_text = run("doctor")
    for key, heading in doctor.SECTIONS:
        assert f"\n{heading}\n" in plain_text
        for row in got[key]:
            assert f"  {row} " in plain_text, (key, row)


def test_info_system_json_is_doctor_json() -> None:
    code, text = run("info", "--system", "--json")
    assert code == 0
    assert set(json.loads(text)) == set(json.loads(run("doctor", "--json")[1]))


def test_check_json_gives_every_check_and_the_counts_per_group() -> None:
    code, text = run("check", "sorted-array", "--group", "capabilities", "--group", "contract",
                     "--json")
    got = json.loads(text)
    assert set(got) == {"index", "params", "device", "size", "commit", "ok", "seconds",
                        "groups", "checks"}
    assert (got["index"], got["device"], got["size"], got["params"]) == (
        "sorted-array", "cpu", "small", {})
    assert set(got["groups"]) == {"capabilities", "contract"}
    for group, counts in got["groups"].items():
        mine = [c for c in got["checks"] if c["group"] == group]
        assert counts["run"] + counts["skipped"] == len(mine) > 0
        assert counts["passed"] == sum(c["status"] == "passed" for c in mine)
    assert got["ok"] is True and code == 0
    assert all(c["label"].startswith(c["group"] + "/") for c in got["checks"])


def test_check_json_with_params_names_them() -> None:
    code, text = run("check", "sorted-array", "--group", "capabilities", "--set",
                     "threads_per_block=128", "--json")
    assert code == 0 and json.loads(text)["params"] == {"threads_per_block": 128}
