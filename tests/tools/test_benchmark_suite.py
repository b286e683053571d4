"""The pytest-benchmark suite in benchmarks/ runs on the fixtures and options of indexzoo's
installed pytest plugin, saves JSON with the promised extra_info, and `pytest-benchmark compare`
and `--histogram` work on that JSON. (A smoke test on a tiny preset: no timing is asserted.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("own_pytest_run")
def test_benchmark_suite_saves_json_that_compare_and_histogram_read(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "benchmarks"), "-q", "-p", "no:cacheprovider",
         "--indexzoo-bench-presets", "tiny", "--indexzoo-bench-device", "cpu",
         "--indexzoo-bench-indexes", "sorted-array,searchsorted,btree", f"--benchmark-json={out}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads(out.read_text())
    throughput = [b for b in data["benchmarks"] if "test_lookup_throughput" in b["name"]]
    assert {b["extra_info"]["index"] for b in throughput} == {"sorted-array", "searchsorted",
                                                             "btree"}
    for b in throughput:
        info = b["extra_info"]
        for key in ("lookups_per_s", "n_lookups", "preset", "device", "build_s",
                    "resident_bytes", "peak_build_bytes", "throughput_per_byte", "device_name",
                    "commit", "workload"):
            assert info.get(key) is not None, key
        assert info["lookups_per_s"] == info["n_lookups"] / b["stats"]["median"]
    latency = [b for b in data["benchmarks"] if "test_small_batch_latency" in b["name"]]
    assert len(latency) == 3 * 4 and all(b["extra_info"]["batch"] for b in latency)
    exe = Path(sys.executable).parent / "pytest-benchmark"
    cmp = subprocess.run([str(exe), "compare", str(out)], capture_output=True, text=True,
                         timeout=600)
    assert cmp.returncode == 0 and "test_lookup_throughput" in cmp.stdout, cmp.stderr
    hist = subprocess.run([str(exe), "compare", str(out), "--histogram", str(tmp_path / "h")],
                          capture_output=True, text=True, timeout=600)
    assert hist.returncode == 0, hist.stdout[-2000:] + hist.stderr[-2000:]
    assert list(tmp_path.glob("h*.svg"))


def _bench(tmp_path: Path, workload: dict, *args: str) -> tuple[int, str, Path]:
    """Run `indexzoo bench` on a small CPU workload written to tmp_path/w.json."""
    import io

    from indexzoo.tools.cli import main

    wl = tmp_path / "w.json"
    wl.write_text(json.dumps(workload))
    out = io.StringIO()
    code = main(["bench", "--workload", str(wl), "--device", "cpu", "--repeats", "1",
                 "--output", str(tmp_path), *args], out=out)
    return code, out.getvalue(), wl


def test_bench_sweep_writes_a_line_plot(tmp_path: Path) -> None:
    code, text, _ = _bench(tmp_path, {"name": "sweep", "n_keys": 1024, "n_lookups": 1024},
                           "--sweep", "hit_rate")
    assert code == 0, text
    data = json.loads(next(tmp_path.glob("w-hit_rate-cpu-*.json")).read_text())
    values = sorted({r["sweep_value"] for r in data["records"]})
    assert values == [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    assert all(r["generate_s"] is not None for r in data["records"])
    assert len(list(tmp_path.glob("w-hit_rate-cpu-*.png"))) == 2  # lines, and the last Pareto
    assert list(tmp_path.glob("w-hit_rate-cpu-*-pareto.png"))


def test_bench_param_sweep_and_set(tmp_path: Path) -> None:
    import io

    from indexzoo.tools.cli import main

    code, text, wl = _bench(tmp_path, {"name": "ps", "n_keys": 2048, "n_lookups": 2048},
                            "--indexes", "sorted-array", "--set", "sorted-array.threads_per_block=64",
                            "--param-sweep", "warpcore-hash.load_factor=0.5,0.9")
    assert code == 0, text
    data = json.loads(next(tmp_path.glob("w-warpcore-hash-load_factor-cpu-*.json")).read_text())
    by_label = {r["label"]: r for r in data["records"]}
    assert by_label["warpcore-hash load_factor=0.9"]["index"] == "warpcore-hash"
    assert by_label["sorted-array"]["params"]["threads_per_block"] == 64
    assert by_label["warpcore-hash load_factor=0.9"]["param_value"] == 0.9
    assert by_label["warpcore-hash load_factor=0.5"]["agrees_with_peer"] is True
    assert len(list(tmp_path.glob("w-warpcore-hash-load_factor-cpu-*.png"))) == 2
    assert main(["bench", "--workload", str(wl), "--set", "sorted-array.bogus=1"],
                out=io.StringIO()) == 2
    assert main(["bench", "--workload", str(wl), "--set", "nodot=1"], out=io.StringIO()) == 2


def test_the_call_profiler_reports_wall_device_time_and_launches(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile_calls.py"),
                          "--device", "cpu", "--indexes", "sorted-array", "--keys", "10",
                          "--lookups", "8", "--repeats", "2", "--top", "3", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    row = json.loads(out.read_text())["rows"][0]
    assert row["index"] == "sorted-array" and row["launch_total"] >= 1
    assert row["wall_s"] > 0 and row["device_events_s"] > 0
    assert "sorted-array" in res.stdout and "launches" in res.stdout
