"""The ``indexzoo`` command: list, info, run, bench, and its exit codes
(0 ok, 2 usage or configuration error, 1 other error)."""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.helpers import add_broken_entry_point

import indexzoo
from indexzoo import devices
from indexzoo.tools.cli import main


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_list_shows_builtin_and_third_party_indexes() -> None:
    code, text = run("list")
    assert code == 0
    for name in ("sorted-array", "searchsorted", "linear-scan"):
        assert name in text
    assert "| uint32 uint64 | cpu cuda" in text  # the capability parts, aligned in columns


def test_list_json_is_machine_readable() -> None:
    code, text = run("list", "--json")
    data = json.loads(text)
    assert code == 0 and data["sorted-array"]["capabilities"]["range"] is True


def test_installed_console_script_lists_the_plugins() -> None:
    exe = shutil.which("indexzoo") or str(Path(sys.executable).parent / "indexzoo")
    res = subprocess.run([exe, "list"], capture_output=True, text=True, timeout=600)
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
    assert run("recommend")[0] == 2
    assert run("recommend", "keys.npy", "--memory-budget", "a lot")[0] == 2
    assert run("info")[0] == 2


@pytest.mark.parametrize("argv", [["frobnicate" * 10_000], [], ["bench", "--preset", "nope"],
                                  ["bench", "--repeats", "many"], ["run"]])
def test_usage_errors_are_one_shortened_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(*argv)[0] == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("indexzoo: error: ") and "--help" in line and len(line) < 400


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
    assert "x peer" in text and "sorted-array" in text
    assert "note: one timed repetition per figure, so no spread is stated" in text
    jsons = list((tmp_path / "out").glob("small-cpu-*.json"))
    pngs = list((tmp_path / "out").glob("small-cpu-*.png"))
    assert len(jsons) == 1 and len(pngs) == 1
    data = json.loads(jsons[0].read_text())
    one_column, multi = indexzoo.registry.selection("builtin")
    assert {r["index"] for r in data["records"]} == set(one_column)
    assert multi and "note: left out the multi-column indexes" in text
    assert all(r["agrees_with_peer"] for r in data["records"])
    assert all(len(r["lookup_seconds"]) == 1 for r in data["records"])
    assert data["environment"]["device"] == "cpu"


# ---------------------------------------------------------------------- hostile or broken input
def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("indexzoo: "), err
    assert "Traceback" not in err
    return lines[0]


def laughs() -> str:
    """The "billion laughs": 9 levels of 9 aliases each stand for 9^9 strings."""
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, cur in itertools.pairwise("abcdefghi"):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


_LAUGHS_CHILD = """
import sys, indexzoo
from indexzoo.tools.cli import main
print("ready", flush=True)
try:
    indexzoo.load_spec(sys.argv[1])
    print("load_spec: no error", flush=True)
except indexzoo.ConfigError as exc:
    print("load_spec: ConfigError:", exc, flush=True)
print("run:", main(["run", sys.argv[1]]), flush=True)
"""


#: A hang guard, not a timing check: expanding the aliases (9^9 strings) would run far longer.
LAUGHS_LIMIT_S = 300


def test_billion_laughs_spec_fails_without_expanding_it(tmp_path: Path) -> None:
    spec = tmp_path / "laughs.yaml"
    spec.write_text(laughs())
    assert len(spec.read_bytes()) < 400
    child = subprocess.Popen([sys.executable, "-c", _LAUGHS_CHILD, str(spec)], bufsize=0,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # unbuffered
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"  # imports done: the clock starts
        raw_out, raw_err = child.communicate(timeout=LAUGHS_LIMIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"the billion-laughs spec did not fail within {LAUGHS_LIMIT_S} s")
    out, err = raw_out.decode(), raw_err.decode()
    assert "load_spec: ConfigError:" in out and "YAML aliases (*name) are not allowed" in out
    assert "line 2" in out  # the first alias
    assert "run: 2" in out
    assert "YAML aliases" in _one_error_line(err)


def test_yaml_anchors_without_aliases_are_fine(tmp_path: Path) -> None:
    spec = tmp_path / "a.yaml"
    spec.write_text("index: &name sorted-array\ndevice: cpu\n")
    assert indexzoo.load_spec(spec).index == "sorted-array"


def test_spec_files_over_the_size_limit_are_refused_unread(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text("index: sorted-array\n# " + "x" * (1 << 20) + "\n")
    assert run("run", str(spec))[0] == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "big.yaml' is 1.0 MiB (1048599 bytes); the limit is 1 MiB (1048576 bytes)" in line


def test_spec_file_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(b"index: caf\xe9\n")
    assert run("run", str(spec))[0] == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.endswith("latin1.yaml' is not UTF-8 text (byte 0xe9 at offset 10)")


@pytest.mark.parametrize("data", [
    {"index": "q" * 100_000, "device": "cpu"},
    {"index": "sorted-array", "device": "cpu", "params": {"threads_per_block": "7" * 100_000}},
    {"index": "sorted-array", "device": "cpu", "params": {"k" * 100_000: 1}},
    {"index": "sorted-array", "z" * 100_000: 1},
    {"index": "sorted-array", "device": "d" * 100_000},
    {"index": "sorted-array", "workload": {"n_keys": [[1] * 1000] * 100}},
    list(range(100_000)),
])
def test_error_messages_show_user_data_shortened(tmp_path: Path, data: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(data))
    assert run("run", str(spec))[0] == 2
    line = _one_error_line(capsys.readouterr().err)
    assert len(line) < 600, line[:300]


def test_yaml_syntax_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("index: sorted-array\n  params: [1\n")
    assert run("run", str(spec))[0] == 2
    assert "is not valid YAML" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("make", ["directory", "device"])
def test_spec_path_that_is_no_regular_file(tmp_path: Path, make: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    if make == "directory":
        path, why = tmp_path / "dir.yaml", "is a directory"
        path.mkdir()
    else:
        path, why = Path("/dev/null"), "is not a regular file"
        if not path.exists():
            pytest.skip("no /dev/null here")
    assert run("run", str(path))[0] == 2
    assert why in _one_error_line(capsys.readouterr().err)


ESCAPES = "\x1b[2J\x1b[31mred\r\u202e"  # clear screen, colour, carriage return, RTL override
ESCAPED = "\\x1b[2J\\x1b[31mred\\r\\u202e"


def test_names_and_paths_from_a_spec_are_printed_with_control_characters_escaped(
        tmp_path: Path) -> None:
    spec = tmp_path / "run.json"
    spec.write_text(json.dumps({"index": "sorted-array", "device": "cpu", "repeats": 1,
                                "workload": {"name": ESCAPES, "n_keys": 64, "n_lookups": 8}}))
    code, text = run("run", str(spec))
    assert code == 0 and f"({ESCAPED}: 2^6 uniform" in text and "\x1b" not in text
    keys = tmp_path / f"keys{ESCAPES}.npy"
    np.save(keys, np.arange(10, dtype=np.uint64))
    spec.write_text(json.dumps({"index": "sorted-array", "device": "cpu", "repeats": 1,
                                "keys": str(keys), "workload": {"n_lookups": 8}}))
    code, text = run("run", str(spec))
    assert code == 0 and f"keys{ESCAPED}.npy" in text and "\x1b" not in text


def test_index_names_and_descriptions_from_plugins_are_printed_escaped() -> None:
    from indexzoo import registry

    base = indexzoo.available()["sorted-array"]
    evil = type("Evil", (base,), {"name": f"evil{ESCAPES}", "__doc__": "Looks\x1b[31m odd."})
    module = type(sys)("evil_plugin")
    module.indexzoo_register_indexes = indexzoo.hookimpl(  # type: ignore[attr-defined]
        lambda register: register(evil))
    registry.register_plugin(module, name="evil")
    try:
        listed, info = run("list")[1], run("info", f"evil{ESCAPES}")[1]
    finally:
        registry.unregister_plugin("evil")
    assert f"evil{ESCAPED}" in listed and "Looks\\x1b[31m odd." in listed
    assert info.startswith(f"evil{ESCAPED}: Looks\\x1b[31m odd.")
    assert "\x1b" not in listed + info and "\r" not in listed + info


# ---------------------------------------------------------------------- memory
def _tiny_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo import resources

    monkeypatch.setattr(resources, "available_memory", lambda device: (1 << 30, "a test's 1 GiB"))


def _forbid(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    def fail(*a: Any, **k: Any) -> Any:
        raise AssertionError(f"{name} ran although the run was to be refused first")

    monkeypatch.setattr(module, name, fail)


def test_run_that_cannot_fit_is_refused_before_allocating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import runner

    _tiny_memory(monkeypatch)
    _forbid(monkeypatch, runner, "generate_keys")
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\nworkload: {n_keys: 33554432, n_lookups: 1024}\n")
    assert run("run", str(spec))[0] == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("indexzoo: ResourceError: this run")
    assert "needs about 3.5 GB of host memory" in line and "only 1.1 GB is available" in line
    assert "index allowance 2.1 GB" in line


def test_a_malformed_memory_check_variable_stops_the_run_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import runner

    _forbid(monkeypatch, runner, "generate_keys")
    monkeypatch.setenv("INDEXZOO_MEMORY_CHECK", "maybe")
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\nworkload: {n_keys: 1024, n_lookups: 16}\n")
    assert run("run", str(spec))[0] == 2
    assert _one_error_line(capsys.readouterr().err) == (
        "indexzoo: error: environment variable INDEXZOO_MEMORY_CHECK='maybe' must be "
        "1/yes/on/true or 0/no/off/false")


def test_run_with_more_batches_than_lookups_is_a_config_error_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import runner

    _forbid(monkeypatch, runner, "generate_keys")
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\n"
                    "workload: {n_keys: 1024, n_lookups: 10, batches: 16777216}\n")
    assert run("run", str(spec))[0] == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "invalid run spec" in line and "batches=16777216 exceeds n_lookups=10" in line


def test_run_of_bitmaps_that_cannot_fit_is_refused_before_building(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import runner

    _tiny_memory(monkeypatch)
    _forbid(monkeypatch, runner, "generate_keys")
    spec = tmp_path / "run.yaml"  # 2^15 lookups x 2^20 keys / 8 bits a byte: 4.3 GB of bitmaps
    spec.write_text("index: sorted-array\ndevice: cpu\nout: bitmap\n"
                    "workload: {n_keys: 1048576, n_lookups: 32768}\n")
    assert run("run", str(spec))[0] == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("indexzoo: ResourceError: this run") and "bitmaps 4.3 GB" in line


def test_the_memory_estimate_counts_every_batch() -> None:
    from indexzoo.resources import estimate_workload
    from indexzoo.tools.workloads import Workload

    one = estimate_workload(Workload(n_keys=1024, n_lookups=1 << 24))
    many = estimate_workload(Workload(n_keys=1024, n_lookups=1 << 24, batches=1 << 24))
    assert many.total - one.total >= (1 << 24) * 500  # a batch and its answer: 500 B measured
    assert "batches 17.2 GB" in many.describe()


def test_run_at_the_documented_maxima_is_refused_not_a_memory_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.resources import available_memory

    avail = available_memory("cpu")
    if avail is None or avail[0] > 1 << 40:
        pytest.skip("this host's free memory is unknown or above 1 TiB")
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\n"
                    "workload: {n_keys: 8589934592, n_lookups: 17179869184}\n")
    assert run("run", str(spec))[0] == 1
    assert "ResourceError" in _one_error_line(capsys.readouterr().err)


def test_bench_that_cannot_fit_is_refused_before_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import bench

    _tiny_memory(monkeypatch)
    _forbid(monkeypatch, bench, "run_bench")
    out = tmp_path / "out"
    assert run("bench", "--preset", "paper", "--device", "cpu", "--output", str(out))[0] == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "ResourceError: the benchmark's largest workload (paper:" in line
    assert not out.exists()


def test_memory_error_anywhere_is_one_line_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import runner

    def boom(*a: Any, **k: Any) -> int:
        raise MemoryError("Unable to allocate 64.0 GiB for an array with shape (8589934592,)")

    monkeypatch.setattr(runner, "run_spec", boom)
    assert run("run", "whatever.yaml")[0] == 1
    assert _one_error_line(capsys.readouterr().err) == (
        "indexzoo: out of memory: Unable to allocate 64.0 GiB for an array with shape (8589934592,)")


def test_cupy_out_of_memory_is_one_line_exit_1(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import types

    from indexzoo.tools import runner

    class OutOfMemoryError(Exception):  # CuPy's, looked up in sys.modules: cupy is not imported
        pass

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError)))
    monkeypatch.setitem(sys.modules, "cupy", fake)

    def boom(*a: Any, **k: Any) -> int:
        raise OutOfMemoryError("Out of memory allocating 8,589,934,592 bytes")

    monkeypatch.setattr(runner, "run_spec", boom)
    assert run("run", "whatever.yaml")[0] == 1
    assert _one_error_line(capsys.readouterr().err) == (
        "indexzoo: out of memory: Out of memory allocating 8,589,934,592 bytes")


# ---------------------------------------------------------------------- bench --output
@pytest.mark.parametrize("case", ["file", "under-a-file", "read-only"])
def test_unusable_bench_output_fails_before_any_work(tmp_path: Path, case: str,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import bench

    _forbid(monkeypatch, bench, "run_bench")
    blocker = tmp_path / "taken"
    blocker.write_text("not a directory")
    if case == "file":
        target, why = blocker, "exists and is not a directory"
    elif case == "under-a-file":
        target, why = blocker / "results", "the directory cannot be created"
    else:
        if os.geteuid() == 0:
            pytest.skip("root may write into read-only directories")
        target, why = tmp_path / "ro", "files cannot be written there"
        target.mkdir()
        target.chmod(0o500)
    assert run("bench", "--preset", "tiny", "--device", "cpu", "--output", str(target))[0] == 2
    assert why in _one_error_line(capsys.readouterr().err)


# ---------------------------------------------------------------------- key files
def test_text_key_file_error_says_where_without_the_content(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "passwd"
    keys.write_text("root:x:0:0:root:/root:/bin/bash\nsecret-user:x:1000:1000::/home:/bin/sh\n")
    spec = tmp_path / "run.yaml"
    spec.write_text(f"index: sorted-array\ndevice: cpu\nkeys: {keys}\n")
    assert run("run", str(spec))[0] == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == (f"indexzoo: error: key file {str(keys)!r} is not a text file of uint64 keys "
                    "(one integer per line): line 1 is not an integer")


@pytest.mark.parametrize("text, why", [
    ("1\n2\n-3\n", "line 3 is outside the range of uint64 [0, 18446744073709551615]"),
    ("1\n\n# a comment\n2.5\n", "line 4 is not an integer"),
])
def test_text_key_file_errors_name_the_line(tmp_path: Path, text: str, why: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text(text)
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: cpu\nkeys: keys.txt\n")
    assert run("run", str(spec))[0] == 2
    assert _one_error_line(capsys.readouterr().err).endswith(why)


@pytest.mark.parametrize("case", ["directory", "device", "empty-text", "empty-npy"])
def test_key_file_that_is_no_file_or_holds_no_keys(tmp_path: Path, case: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys.txt"
    why = "holds no keys"
    if case == "directory":
        path.mkdir()
        why = "is a directory"
    elif case == "device":
        path = Path("/dev/zero")
        if not path.exists():
            pytest.skip("no /dev/zero here")
        why = "is not a regular file"
    elif case == "empty-text":
        path.write_text("# no keys, only a comment\n\n")
    else:
        path = tmp_path / "keys.npy"
        np.save(path, np.zeros(0, np.uint64))
    spec = tmp_path / "run.yaml"
    spec.write_text(f"index: sorted-array\ndevice: cpu\nkeys: {path}\n")
    assert run("run", str(spec))[0] == 2
    assert _one_error_line(capsys.readouterr().err).startswith(
        f"indexzoo: error: key file {str(path)!r} {why}")


# ---------------------------------------------------------------------- bench selections
def test_bench_set_for_an_index_not_selected_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import bench

    _forbid(monkeypatch, bench, "run_bench")
    code, _ = run("bench", "--preset", "tiny", "--device", "cpu", "--indexes", "sorted-array",
                  "--set", "btree.node_width=8", "--output", str(tmp_path / "out"))
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--set 'btree.node_width=8': index 'btree' is not among the selected indexes " \
           "(sorted-array)" in line


@pytest.mark.parametrize("selection", ["", " , "])
def test_bench_with_no_index_selected_is_an_error(tmp_path: Path, selection: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import bench

    _forbid(monkeypatch, bench, "run_bench")
    code, _ = run("bench", "--preset", "tiny", "--device", "cpu", "--indexes", selection,
                  "--output", str(tmp_path / "out"))
    assert code == 2
    assert "no index selected" in _one_error_line(capsys.readouterr().err)


def test_bench_set_with_a_bool_for_an_integer_is_an_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("bench", "--preset", "tiny", "--device", "cpu", "--indexes", "sorted-array",
                  "--set", "sorted-array.max_batch=true", "--output", str(tmp_path / "out"))
    assert code == 2
    assert "'max_batch' = True is invalid: expected an integer, got bool" in \
        _one_error_line(capsys.readouterr().err)


def test_list_and_info_render_docstring_literals_plainly() -> None:
    code, text = run("list")
    assert code == 0 and "``" not in text
    assert "numpy/cupy `searchsorted` over sorted" in text
    for name in indexzoo.available():
        assert "``" not in run("info", name)[1]


def test_a_plugin_that_fails_to_load_is_one_warning_line(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo import registry

    add_broken_entry_point(monkeypatch)
    registry.reset()
    try:
        code, text = run("list")
    finally:
        registry.reset()
    assert code == 0 and "(unusable)" in text
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("indexzoo: UserWarning: indexzoo plugin 'broken' failed to load")


# ---------------------------------------------------------------------- bounds before any work
def test_an_infinite_float_parameter_is_one_line_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools import bench, runner

    _forbid(monkeypatch, bench, "run_bench")
    _forbid(monkeypatch, runner, "generate_keys")
    code, _ = run("bench", "--preset", "tiny", "--device", "cpu", "--indexes", "rtscan",
                  "--set", "rtscan.ray_length=Infinity", "--output", str(tmp_path / "out"))
    assert code == 2
    assert "parameter 'ray_length' = inf is invalid: Input should be a finite number" in \
        _one_error_line(capsys.readouterr().err)
    spec = tmp_path / "run.yaml"
    spec.write_text("index: rtscan\ndevice: cpu\nparams: {ray_spacing: .nan}\n")
    assert run("run", str(spec))[0] == 2
    assert "parameter 'ray_spacing' = nan is invalid: Input should be a finite number" in \
        _one_error_line(capsys.readouterr().err)
