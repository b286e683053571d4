"""The ``indexzoo`` command: list, info, run, bench, and its exit codes
(0 ok, 2 usage or configuration error, 1 other error)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import indexzoo
from indexzoo import devices
from indexzoo.cli import main


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_list_shows_builtin_and_third_party_indexes() -> None:
    code, text = run("list")
    assert code == 0
    for name in ("sorted-array", "searchsorted", "linear-scan"):
        assert name in text
    assert "point range dup | uint32 uint64 | cpu cuda" in text


def test_list_json_is_machine_readable() -> None:
    code, text = run("list", "--json")
    data = json.loads(text)
    assert code == 0 and data["sorted-array"]["capabilities"]["range"] is True


def test_installed_console_script_lists_the_plugins() -> None:
    exe = shutil.which("indexzoo") or str(Path(sys.executable).parent / "indexzoo")
    res = subprocess.run([exe, "list"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "sorted-array" in res.stdout and "linear-scan" in res.stdout


def test_info_shows_params_with_types_defaults_bounds_and_docs() -> None:
    code, text = run("info", "sorted-array")
    assert code == 0
    assert "threads_per_block: int = 256  (>= 32, <= 1024, a multiple of 32)" in text
    assert "CUDA threads per block" in text
    assert "max_batch: int = 134217728" in text


def test_info_of_unknown_index_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("info", "sorted-arry")
    assert code == 2
    assert "did you mean 'sorted-array'" in capsys.readouterr().err


def test_bad_arguments_exit_2() -> None:
    assert run("frobnicate")[0] == 2
    assert run()[0] == 2
    assert run("bench", "--preset", "nope")[0] == 2


def test_run_with_a_generated_workload(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\nworkload:\n  n_keys: 4096\n"
                    "  n_lookups: 1000\n  hit_rate: 0.75\nrepeats: 1\n")
    code, text = run("run", str(spec))
    assert code == 0
    assert "hits       750 of 1,000 (workload built for 750)" in text
    assert "footprint  resident" in text


def test_run_with_a_key_file_and_ranges(tmp_path: Path) -> None:
    np.save(tmp_path / "keys.npy", np.array([-5, 3, 3, 10, 42, -7], dtype=np.int32))
    spec = tmp_path / "run.json"
    spec.write_text(json.dumps({"index": "searchsorted", "device": "cpu", "keys": "keys.npy",
                                "workload": {"n_lookups": 10, "range_hits": 2},
                                "out": "rowids", "repeats": 1}))
    code, text = run("run", str(spec))
    assert code == 0, text
    assert "6 of dtype int32" in text and "hits       10 of 10" in text


def test_run_with_bad_spec_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\nparams: {threads_per_block: 7}\n")
    assert run("run", str(spec))[0] == 2
    assert "'threads_per_block' = 7" in capsys.readouterr().err
    spec.write_text("index: sorted-array\nworkload: {n_keys: -1}\n")
    assert run("run", str(spec))[0] == 2
    assert run("run", str(tmp_path / "missing.yaml"))[0] == 2


@pytest.mark.skipif(devices.cuda_status()[0], reason="a GPU is usable here")
def test_run_on_missing_gpu_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cuda\n")
    assert run("run", str(spec))[0] == 1
    assert "DeviceUnavailable" in capsys.readouterr().err


def test_bench_writes_table_json_and_plot(tmp_path: Path) -> None:
    wl = tmp_path / "small.yaml"
    wl.write_text("name: small\nn_keys: 2048\nn_lookups: 2048\nhit_rate: 0.5\n")
    code, text = run("bench", "--workload", str(wl), "--device", "cpu", "--repeats", "1",
                     "--output", str(tmp_path / "out"))
    assert code == 0, text
    assert "x searchsorted" in text and "sorted-array" in text
    jsons = list((tmp_path / "out").glob("small-cpu-*.json"))
    pngs = list((tmp_path / "out").glob("small-cpu-*.png"))
    assert len(jsons) == 1 and len(pngs) == 1
    data = json.loads(jsons[0].read_text())
    assert {r["index"] for r in data["records"]} == set(indexzoo.registry.builtin())
    assert all(r["agrees_with_peer"] for r in data["records"])
    assert data["environment"]["device"] == "cpu"
