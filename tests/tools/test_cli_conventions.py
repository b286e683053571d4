"""The command line's conventions: ``--version``, ``python -m indexzoo``, and ``--json`` on
``info``, ``doctor``, ``check`` and ``recommend`` (one JSON object with the fields the text
shows). No timing is asserted."""

from __future__ import annotations

import importlib.metadata
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
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
                         capture_output=True, text=True, timeout=600)
    assert (got.returncode, got.stdout) == (0, f"indexzoo {indexzoo.__version__}\n")
    bad = subprocess.run([sys.executable, "-m", "indexzoo", "no-such-command"],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and bad.stderr.startswith("indexzoo: error: ")


def test_info_json_holds_what_info_prints() -> None:
    code, text = run("info", "sorted-array", "--json")
    assert code == 0
    got = json.loads(text)
    assert set(got) == {"name", "description", "provider", "class", "capabilities",
                        "plugin_api", "operations", "parameters", "presets"}
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


def test_recommend_json_gives_the_table_the_pick_and_the_file_written(tmp_path: Path) -> None:
    keys = tmp_path / "keys.npy"
    np.save(keys, np.random.default_rng(3).integers(0, 1 << 40, 5_000, dtype=np.uint64))
    wl = tmp_path / "ranges.json"
    wl.write_text(json.dumps({"n_lookups": 1024, "range_hits": 4}))
    target = tmp_path / "pick.json"
    code, text = run("recommend", str(keys), "--workload", str(wl), "--indexes",
                     "warpcore-hash,sorted-array", "--device", "cpu", "--repeats", "2",
                     "--out", str(target), "--json")
    assert code == 0
    got = json.loads(text)
    assert {"device", "keys_measured", "keys_total", "lookups", "kind", "ranked", "not_ranked",
            "pick", "why", "spec", "written"} <= set(got)
    assert (got["device"], got["kind"], got["range_hits"], got["keys_total"]) == (
        "cpu", "range", 4, 5_000)
    assert [r["index"] for r in got["ranked"]] == ["sorted-array"]
    assert got["ranked"][0]["lookups_per_second"] > 0 and len(got["ranked"][0]["lookup_seconds"]) >= 2
    assert got["not_ranked"] == [{"index": "warpcore-hash", "params": {}, "note": "",
                                  "status": "skipped",
                                  "reason": "no range lookups (the workload asks for ranges)"}]
    assert got["pick"]["index"] == "sorted-array" and got["written"] == str(target)
    assert json.loads(target.read_text()) == {"index": "sorted-array", "params": {},
                                              "device": "cpu"} == {
        k: got["spec"][k] for k in ("index", "params", "device")}


def test_recommend_json_without_a_pick_exits_1_with_pick_null(tmp_path: Path) -> None:
    keys = tmp_path / "keys.npy"
    np.save(keys, np.arange(1000, dtype=np.uint64))
    wl = tmp_path / "ranges.json"
    wl.write_text(json.dumps({"n_lookups": 256, "range_hits": 4}))
    code, text = run("recommend", str(keys), "--workload", str(wl), "--indexes", "warpcore-hash",
                     "--device", "cpu", "--out", str(tmp_path / "none.yaml"), "--json")
    got = json.loads(text)
    assert code == 1 and got["pick"] is None and got["written"] is None and got["ranked"] == []
    assert not (tmp_path / "none.yaml").exists()
