"""What ``indexzoo bench`` writes besides its figures: the GPU's clocks, power limit and ECC mode
(read from ``nvidia-smi``, never failing the run), and a JSON that exists from the first
finished workload on, so a run that fails late keeps what it measured."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from indexzoo.tools import bench, benchrun, environment
from indexzoo.tools.cli import main
from indexzoo.tools.environment import gpu_state, parse_gpu_query

# nvidia-smi --query-gpu=<GPU_QUERY> --format=csv,noheader,nounits on a machine with two GPUs
TWO_GPUS = ("00000000:19:00.0, 345, 1980, 2619, 2619, 700.00, Enabled\n"
            "00000000:3B:00.0, 1755, 1980, 2619, 2619, 500.00, Disabled\n")


# ---------------------------------------------------------------------- GPU state
def test_the_gpu_state_is_read_from_the_row_of_the_gpu_in_use() -> None:
    state = parse_gpu_query(TWO_GPUS, "0000:3b:00.0")  # as CUDA writes the address
    assert state == {"gpu_clocks": {"sm_mhz": 1755, "sm_max_mhz": 1980, "mem_mhz": 2619,
                                    "mem_max_mhz": 2619},
                     "power_limit_w": 500.0, "ecc": "disabled"}
    assert parse_gpu_query(TWO_GPUS, "00000000:19:00.0")["ecc"] == "enabled"


def test_what_nvidia_smi_does_not_report_is_none_or_unknown() -> None:
    text = "00000000:01:00.0, 1410, [N/A], 1215, 1215, [Not Supported], [N/A]\n"
    assert parse_gpu_query(text) == {
        "gpu_clocks": {"sm_mhz": 1410, "sm_max_mhz": None, "mem_mhz": 1215,
                       "mem_max_mhz": 1215},
        "power_limit_w": None, "ecc": "unknown"}


@pytest.mark.parametrize("text, bus_id", [
    (TWO_GPUS, None),  # which of two GPUs is not known
    (TWO_GPUS, "0000:AF:00.0"),  # not listed
    ("", None),
    ("Failed to initialize NVML: Driver/library version mismatch\n", None),
])
def test_without_one_matching_row_the_gpu_state_is_unknown(text: str, bus_id: str | None) -> None:
    assert parse_gpu_query(text, bus_id) == {"gpu_clocks": None, "power_limit_w": None,
                                             "ecc": "unknown"}


def test_nvidia_smi_missing_failing_or_hanging_leaves_the_state_unknown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = {"gpu_clocks": None, "power_limit_w": None, "ecc": "unknown"}
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    assert gpu_state() == unknown
    monkeypatch.setattr(environment.shutil, "which", lambda name: "/usr/bin/nvidia-smi")

    def hangs(*a: Any, **k: Any) -> Any:
        raise subprocess.TimeoutExpired("nvidia-smi", k.get("timeout", 0))

    monkeypatch.setattr(environment.subprocess, "run", hangs)
    assert gpu_state() == unknown

    def fails(*a: Any, **k: Any) -> Any:
        return subprocess.CompletedProcess(a[0], 9, stdout="", stderr="No devices were found")

    monkeypatch.setattr(environment.subprocess, "run", fails)
    assert gpu_state() == unknown

    def answers(*a: Any, **k: Any) -> Any:
        assert "--format=csv,noheader,nounits" in a[0] and k["timeout"] <= 10
        return subprocess.CompletedProcess(a[0], 0, stdout=TWO_GPUS.splitlines()[0] + "\n")

    monkeypatch.setattr(environment.subprocess, "run", answers)
    assert gpu_state()["power_limit_w"] == 700.0


def test_a_cpu_run_records_no_gpu_state() -> None:
    env = environment.environment("cpu")
    assert not {"gpu_clocks", "power_limit_w", "ecc"} & set(env)


def test_every_run_records_the_rt_core_generation() -> None:
    assert environment.environment("cpu")["rt_cores"] == "none"


# ---------------------------------------------------------------------- written per workload
@pytest.fixture
def two_workloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``--workload w.json --sweep hit_rate`` runs two workloads, hit rates 1.0 and 0.5."""
    monkeypatch.setitem(bench.SWEEPS, "hit_rate", ("hit_rate", [1.0, 0.5]))
    (tmp_path / "w.json").write_text(json.dumps({"name": "w", "n_keys": 1024,
                                                 "n_lookups": 1024}))
    return ["bench", "--workload", str(tmp_path / "w.json"), "--sweep", "hit_rate", "--device",
            "cpu", "--indexes", "sorted-array", "--repeats", "1", "--no-plot",
            "--output", str(tmp_path / "out")]


def _second_workload_calls(monkeypatch: pytest.MonkeyPatch, action: Any) -> None:
    """Call ``action()`` when the data of the second workload (hit rate 0.5) is generated."""
    real = benchrun.generate

    def generate(w: Any, device: str) -> Any:
        if w.hit_rate == 0.5:
            action()
        return real(w, device)

    monkeypatch.setattr(benchrun, "generate", generate)


def test_the_json_holds_each_workload_as_soon_as_it_is_finished(
        tmp_path: Path, two_workloads: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    out = tmp_path / "out"
    _second_workload_calls(
        monkeypatch, lambda: seen.extend(json.loads(p.read_text()) for p in out.iterdir()))
    assert main(two_workloads, out=io.StringIO()) == 0
    (during,) = {json.dumps(s) for s in seen}  # the same file at each of the calls
    first = json.loads(during)
    assert first["complete"] is False and first["format_version"] == 3
    assert {r["workload"] for r in first["records"]} == {"w:hit_rate=1.0"}
    (path,) = out.iterdir()  # rewritten in place: one file, no temporary
    final = json.loads(path.read_text())
    assert final["complete"] is True
    assert [r["workload"] for r in final["records"]] == ["w:hit_rate=1.0", "w:hit_rate=1.0",
                                                         "w:hit_rate=0.5", "w:hit_rate=0.5"]
    assert final["records"][:2] == first["records"]


def test_a_run_that_fails_in_its_second_workload_keeps_the_first(
        tmp_path: Path, two_workloads: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def fail() -> None:
        raise RuntimeError("planted failure")

    _second_workload_calls(monkeypatch, fail)
    with pytest.raises(RuntimeError, match="planted failure"):
        main(two_workloads, out=io.StringIO())
    (path,) = (tmp_path / "out").iterdir()
    data = json.loads(path.read_text())
    assert data["complete"] is False
    assert {r["workload"] for r in data["records"]} == {"w:hit_rate=1.0"}
    assert {r["index"] for r in data["records"]} == {"sorted-array", "searchsorted"}
    assert f"results so far in {path}" in capsys.readouterr().err


def test_a_taken_plot_name_moves_the_json_to_the_next_free_name_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON is named at the first workload, the PNGs at the end: the name it takes must
    leave the PNGs' names free, or the plots would have nowhere to go."""
    import datetime as dt

    class Clock:  # every run in the same second
        class datetime:
            @staticmethod
            def now() -> dt.datetime:
                return dt.datetime(2024, 5, 6, 7, 8, 9)

    monkeypatch.setattr(bench, "_dt", Clock)
    out = tmp_path / "out"
    out.mkdir()
    (out / "tiny-cpu-20240506-070809.png").write_text("someone else's\n")
    text = io.StringIO()
    assert main(["bench", "--preset", "tiny", "--device", "cpu", "--indexes", "searchsorted",
                 "--repeats", "1", "--output", str(out)], out=text) == 0
    assert [line.split("/")[-1] for line in text.getvalue().splitlines()
            if line.startswith("wrote ")] == ["tiny-cpu-20240506-070809-2.json",
                                              "tiny-cpu-20240506-070809-2.png"]
    assert (out / "tiny-cpu-20240506-070809.png").read_text() == "someone else's\n"
