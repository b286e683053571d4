"""What a user reads when something is missing or mistyped: each message names the real cause
first, in the user's own terms (their arguments, their files), and tables fit the terminal."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo import Capabilities, ConfigError, InvalidInput, devices
from indexzoo.plugins.sorted_array import SortedArrayIndex
from indexzoo.tools.cli import main

pytest_plugins = ["pytester"]

NO_DRIVER = ("no NVIDIA driver or GPU found (no nvidia-smi on the PATH, no "
             "/proc/driver/nvidia/version, libcuda.so.1 not loadable)")


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


# ---------------------------------------------------------------------- doctor, no driver
@pytest.fixture
def no_driver_no_cupy(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A machine as CI's: no NVIDIA driver by any probe, and CuPy not installed."""
    monkeypatch.setattr(devices, "_nvidia_smi_on_path", lambda: False)
    monkeypatch.setattr(devices, "_nvidia_smi", lambda *a: None)
    monkeypatch.setattr(devices, "_proc_driver_version", lambda: None)
    monkeypatch.setattr(devices, "_libcuda_version", lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ModuleNotFoundError
    monkeypatch.delenv(devices.ENV_VAR, raising=False)
    devices.nvidia_driver.cache_clear()
    status = devices.cuda_status.__wrapped__()
    monkeypatch.setattr(devices, "cuda_status", lambda: status)
    yield status
    devices.nvidia_driver.cache_clear()


def test_without_a_driver_the_missing_driver_is_the_cause_and_cupy_the_next_step(
        no_driver_no_cupy: tuple[bool, str]) -> None:
    usable, reason = no_driver_no_cupy
    assert not usable
    assert reason == (f"{NO_DRIVER}; with an NVIDIA GPU, install its driver, then CuPy: pip "
                      "install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20' (CUDA 12 drivers) or "
                      "pip install 'cupy-cuda13x[ctk]>=14' 'numba-cuda[cu13]>=0.20' (CUDA 13 drivers)")
    assert not reason.startswith("CuPy")


def test_doctor_without_a_driver_leads_with_it(no_driver_no_cupy: tuple[bool, str]) -> None:
    code, text = run("doctor")
    assert code == 0
    assert f"  cuda  not usable: {NO_DRIVER}; with an NVIDIA GPU, install its driver" in text
    assert "cuda  not usable: CuPy is not installed" not in text
    assert ("  install     an NVIDIA driver first (none found), then pip install "
            "'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'") in text


def test_asking_for_cuda_without_a_driver_says_there_is_no_gpu(
        no_driver_no_cupy: tuple[bool, str]) -> None:
    with pytest.raises(indexzoo.DeviceUnavailable) as err:
        indexzoo.create("sorted-array", device="cuda")
    assert str(err.value).startswith(
        f"device 'cuda' was asked for (argument 'device') but {NO_DRIVER}; ")


# ---------------------------------------------------------------------- list
def listed(monkeypatch: pytest.MonkeyPatch, columns: int) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, text = run("list")
    assert code == 0
    return text.split("\n\nray-tracing engines")[0].splitlines()


def descriptions(lines: list[str], start: int) -> dict[str, str]:
    """Each row's description in a listing: its text from column ``start`` on, over the row's
    line and the indented lines after it (asserted blank before ``start``)."""
    rows: dict[str, str] = {}
    name = ""
    for line in lines:
        if line[0] != " ":
            name = line.split()[0]
            rows[name] = line[start:].strip()
        else:
            assert line[:start].strip() == "", line
            rows[name] = f"{rows[name]} {line[start:]}".strip()
    return rows


def first_paragraph(name: str) -> str:
    doc = indexzoo.available()[name].__doc__ or ""
    return " ".join(doc.split("\n\n")[0].split())


def test_list_wraps_descriptions_under_their_column_instead_of_cutting_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = listed(monkeypatch, 130)
    start = lines[0].index("description")
    assert all(len(line) <= 130 for line in lines), max(lines, key=len)
    rows = descriptions(lines[1:], start)
    assert any(line.startswith(" ") for line in lines)  # something did wrap
    assert rows["fused-scan"] == first_paragraph("fused-scan")  # whole: not cut at a line end
    assert rows["ao-pb-bs"].endswith("(chunks of one 128-byte line), AoS.")
    assert all(text.endswith((".", ")")) for text in rows.values()), rows


def test_list_on_a_narrow_terminal_puts_descriptions_under_their_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = listed(monkeypatch, 100)
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    assert lines[0].split() == ["name", "capabilities"] and lines[1].split() == ["description"]
    under = lines[0].index("capabilities")
    rows = descriptions(lines[2:], under)  # capabilities, then the description under them
    assert rows["fused-scan"].startswith("point range dup")
    assert rows["fused-scan"].endswith(f"| 64-d {first_paragraph('fused-scan')}")


def test_list_keeps_the_capability_parts_aligned_with_and_without_64_d(
        monkeypatch: pytest.MonkeyPatch) -> None:
    lines = listed(monkeypatch, 200)
    rows = {line.split()[0]: line for line in lines[1:] if line[0] != " "}
    one_column, many = rows["sorted-array"], rows["fused-scan"]
    assert "| 64-d" in many and "64-d" not in one_column
    assert one_column.index("| uint32") == many.index("| uint32") == rows["rx"].index("| uint32")
    assert one_column.index("| cpu cuda") == many.index("| cpu cuda")
    assert one_column.index("Sorted (key, rowID)") == many.index("Full scan per lookup")
    assert "point range dup update | uint32 uint64 | cpu cuda" in rows["rx"]


# ---------------------------------------------------------------------- join
def test_a_join_of_float64_and_uint64_keys_works_whichever_side_is_indexed() -> None:
    floats = np.array([1.0, 2.5, 3.0, 2**64 - 2048.0])
    ints = np.array([3, 1, 7, 2**64 - 2048], dtype=np.uint64)
    for build in ("left", "right"):
        pairs = indexzoo.join(floats, ints, build=build).to_host()
        assert sorted(zip(pairs.left.tolist(), pairs.right.tolist(), strict=True)) == \
            [(0, 1), (2, 0), (3, 3)]


@pytest.mark.parametrize("build", ["left", "right"])
def test_a_join_of_incomparable_columns_names_both_arguments(build: str) -> None:
    with pytest.raises(InvalidInput) as err:
        indexzoo.join(np.array(["a", "b"]), np.array([1, 2, 3], dtype=np.uint64), build=build)
    assert str(err.value) == (
        "arguments 'left_keys' and 'right_keys' cannot be joined: left_keys holds text (dtype "
        "<U1), right_keys holds numbers (dtype uint64); a join on equality needs key columns "
        "of one kind (numbers with numbers, timestamps with timestamps, text with text, byte "
        "strings with byte strings)")
    assert "queries" not in str(err.value)


def test_a_join_error_from_the_key_map_names_the_probing_argument() -> None:
    seconds = np.array([1, 2], dtype="datetime64[s]")
    nanoseconds = np.array([1, 2, 3], dtype="datetime64[ns]")
    with pytest.raises(InvalidInput) as err:
        indexzoo.join(seconds, nanoseconds, build="left")
    assert str(err.value).startswith("argument 'right_keys' (probing left_keys): dtype "
                                     "datetime64[ns] cannot be compared with keys of dtype "
                                     "datetime64[s]")


# ---------------------------------------------------------------------- create
def test_an_unknown_index_is_one_sentence_then_the_list() -> None:
    with pytest.raises(ConfigError) as err:
        indexzoo.create("quux")
    assert str(err.value).startswith("unknown index 'quux'. Available: ao-bs, ao-pb-bs, ")


def test_an_unknown_index_suggests_the_name_that_contains_it() -> None:
    with pytest.raises(ConfigError) as err:
        indexzoo.create("hash")
    assert str(err.value).startswith(
        "unknown index 'hash'; did you mean 'warpcore-hash'? Available: ao-bs, ")


class CpuOnlySorted(SortedArrayIndex):
    """A sorted array that declares the CPU only (an unregistered test index)."""

    name = "cpu-only-sorted"
    capabilities = Capabilities(point=True, range=True, devices=("cpu",))


def test_create_takes_an_index_class_as_the_conformance_suite_does() -> None:
    index = indexzoo.create(CpuOnlySorted, device="cpu", threads_per_block=512)
    assert type(index) is CpuOnlySorted and index.params.threads_per_block == 512
    index.build(np.array([5, 1, 5], dtype=np.uint64))
    assert index.point(np.array([5, 2], dtype=np.uint64), out="count").count.tolist() == [2, 0]
    spec_shaped = indexzoo.create(SortedArrayIndex, params={"threads_per_block": 64})
    assert spec_shaped.params.threads_per_block == 64


def test_create_refuses_a_class_that_is_not_an_index() -> None:
    with pytest.raises(ConfigError, match=r"builtins\.dict is not a GpuIndex subclass"):
        indexzoo.create(dict)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'threads_per_block' = 7"):
        indexzoo.create(SortedArrayIndex, threads_per_block=7)


# ---------------------------------------------------------------------- run, recommend
@pytest.mark.parametrize("spec", ["index: sorted-array\ndevice: cpu\n",
                                  "index: sorted-array\nkeys: null\n"])
def test_run_without_keys_or_workload_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str) -> None:
    path = tmp_path / "index.yaml"
    path.write_text(spec)
    code, text = run("run", str(path))
    assert code == 2 and text == ""
    err = capsys.readouterr().err.strip()
    assert err == (f"indexzoo: error: {path}: nothing to run: give `keys` (a key file) or "
                   "`workload` (n_keys, n_lookups, ...), or both; see docs/cli.md")


def test_recommend_names_a_missing_key_file_before_an_existing_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "index.yaml").write_text("index: btree\n")
    code, _ = run("recommend", "nokeys.npy")
    assert code == 2
    assert capsys.readouterr().err.strip() == "indexzoo: error: key file 'nokeys.npy' does not exist"


# ---------------------------------------------------------------------- conformance
CPU_ONLY_SUITE = """
from indexzoo import Capabilities
from indexzoo.conformance import ConformanceSuite
from indexzoo.plugins.sorted_array import SortedArrayIndex


class CpuOnly(SortedArrayIndex):
    \"\"\"A sorted array that declares the CPU only.\"\"\"

    name = "cpu-only"
    capabilities = Capabilities(point=True, range=True, devices=("cpu",))


class TestCpuOnly(ConformanceSuite):
    index = CpuOnly
"""


def test_the_suite_on_a_device_the_plugin_does_not_declare_skips_every_check(
        pytester: pytest.Pytester) -> None:
    from indexzoo.conformance.catalog import CHECKS

    pytester.makepyfile(test_cpu_only=CPU_ONLY_SUITE)
    res = pytester.runpytest("-rs", "-p", "no:cacheprovider", "--indexzoo-device=cuda")
    res.assert_outcomes(skipped=len(CHECKS))
    res.stdout.fnmatch_lines(["*SKIPPED*index 'cpu-only' does not run on 'cuda': its "
                              "capabilities list the devices cpu*"])
    assert "error" not in res.stdout.str().lower().split("short test summary")[-1]


def test_check_on_a_device_the_plugin_does_not_declare_says_so_without_a_gpu() -> None:
    from indexzoo.conformance import make_context

    with pytest.raises(indexzoo.Unsupported, match="index 'cpu-only-sorted' does not run on "
                                                   "'cuda': its capabilities list the devices cpu"):
        make_context(CpuOnlySorted, device="cuda")


# ---------------------------------------------------------------------- did you mean
def test_a_misspelt_workload_field_gets_a_did_you_mean(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from indexzoo.tools.options import load_workload

    path = tmp_path / "w.json"
    path.write_text('{"n_key": 4096}')
    with pytest.raises(ConfigError, match=r"n_key: unknown entry \(value 4096\); did you mean "
                                          r"'n_keys'\?"):
        load_workload(str(path))
    spec = tmp_path / "run.json"
    spec.write_text('{"index": "sorted-array", "workload": {"n_key": 4096, "hit_rat": 1}}')
    assert run("run", str(spec))[0] == 2
    err = capsys.readouterr().err
    assert "workload.n_key: unknown entry (value 4096); did you mean 'n_keys'?" in err
    assert "workload.hit_rat: unknown entry (value 1); did you mean 'hit_rate'?" in err
    spec.write_text('{"index": "sorted-array", "workload": {"zzzz": 1}}')
    assert run("run", str(spec))[0] == 2
    assert "did you mean" not in capsys.readouterr().err  # nothing close: no guess


def test_a_misspelt_query_column_gets_a_did_you_mean() -> None:
    from indexzoo import query as q

    table = {"c_region": np.array([1, 2, 3]), "lo_revenue": np.array([4, 5, 6])}
    spec = q.Query(where=[q.col("c_regin").eq(1)], select=[q.sum("lo_revenue")])
    with pytest.raises(InvalidInput, match=r"unknown column 'c_regin' \(did you mean "
                                           r"'c_region'\?\); the table has c_region, lo_revenue"):
        q.reference(table, spec)


def test_building_a_one_column_index_from_a_table_names_columns() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"id": np.arange(5, dtype=np.uint64), "qty": np.arange(5)})
    index = indexzoo.create("sorted-array", device="cpu")
    with pytest.raises(InvalidInput, match=r"a table of 2 column\(s\) \('id', 'qty'\); .*"
                                           r"columns=\[\.\.\.\], e\.g\. build\(keys, "
                                           r"columns=\['id'\]\)"):
        index.build(frame)
    assert index.build(frame, columns=["id"]).column_names == ("id",)


def test_recommend_says_what_its_pick_cannot_do() -> None:
    from types import SimpleNamespace

    from indexzoo.tools.recommend import Candidate, Outcome, cannot, format_report
    from indexzoo.tools.timing import Timing

    assert cannot("warpcore-hash") == ["answer range lookups", "take updates"]
    pick = Outcome(Candidate("warpcore-hash"), "measured", timing=Timing((1.0, 1.1)),
                   throughput=1000.0, resident_bytes=100)
    sample = SimpleNamespace(n=10, n_total=10, point=True, n_lookups=5, duplicates=False,
                             workload=SimpleNamespace(hit_rate=1.0, range_hits=None))
    rec = SimpleNamespace(sample=sample, device="cpu", out="rowid", repeats=2, ranked=[pick],
                          outcomes=[pick], suggestions=[], pick=pick, why="the only index")
    lines = format_report(rec).splitlines()  # type: ignore[arg-type]
    assert lines[-2] == "pick: warpcore-hash on cpu: the only index"
    assert lines[-1] == "note: warpcore-hash cannot answer range lookups or take updates"
