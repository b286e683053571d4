"""`indexzoo doctor` (= `indexzoo info --system`) on made-up machines: every probe is replaced,
so no test needs a GPU, a driver, CuPy or OptiX."""

from __future__ import annotations

import importlib.metadata
import io
import os
from typing import Any

import pytest

from indexzoo import devices
from indexzoo.tools import doctor
from indexzoo.tools.cli import main

SMI = """\
| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |
"""


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A machine with an NVIDIA driver (CUDA 12.4) but no CuPy; OptiX dir set, no pyoptix;
    numba on its workqueue layer."""
    def setup(*, driver: bool = True, usable: bool = False,
              layer: str = "workqueue") -> None:
        monkeypatch.setattr(devices, "_nvidia_smi_on_path", lambda: driver)
        monkeypatch.setattr(devices, "_nvidia_smi", lambda *a: (
            None if not driver else "NVIDIA H100 80GB HBM3\n" if a else SMI))
        monkeypatch.setattr(devices, "_proc_driver_version", lambda: None)
        monkeypatch.setattr(devices, "_libcuda_version", lambda: None)
        monkeypatch.setattr(devices, "cuda_status", lambda: (
            (True, "1 CUDA GPU(s) visible; using device 0, NVIDIA H100 80GB HBM3") if usable
            else (False, f"CuPy is not installed; {devices.install_command()}")))
        monkeypatch.setattr(doctor, "threading_layer", lambda: (layer, "default"))
        monkeypatch.setenv("OptiX_INSTALL_DIR", "/nonexistent/optix")
        monkeypatch.delenv(devices.ENV_VAR, raising=False)
        devices.nvidia_driver.cache_clear()

    yield setup
    devices.nvidia_driver.cache_clear()


def report() -> str:
    out = io.StringIO()
    assert main(["doctor"], out=out) == 0
    return out.getvalue()


def test_driver_without_cupy(machine: Any) -> None:
    machine()
    text = report()
    assert ("cuda  not usable: CuPy is not installed; pip install 'cupy-cuda12x[ctk]>=14' "
            "'numba-cuda[cu12]>=0.20'") in text
    assert "auto  means cpu (INDEXZOO_DEVICE is not set)" in text
    assert "found   nvidia-smi on the PATH" in text
    assert "driver  550.54.14" in text and "CUDA    12.4 (from nvidia-smi)" in text
    assert "GPUs    NVIDIA H100 80GB HBM3" in text
    assert "CuPy        not installed" in text
    assert "install     pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'" in text
    assert "pyoptix            not importable (not installed)" in text
    assert "OptiX_INSTALL_DIR  /nonexistent/optix (not a directory)" in text
    assert "threading layer  workqueue (NUMBA_THREADING_LAYER=default)" in text
    assert "WORKQUEUE_LOCK" in text and "serialises concurrent CPU lookups" in text
    rows = {line.split()[0]: line for line in text.split("indexes (devices")[1].splitlines()[1:]}
    assert rows["sorted-array"].split()[1:] == ["cpu", "cuda", "cpu", "(not", "cuda:",
                                               "unusable", "here)"]
    assert "numba-cuda" in text


def test_no_driver_and_a_thread_safe_layer(machine: Any) -> None:
    machine(driver=False, layer="tbb")
    text = report()
    assert "not found  no nvidia-smi on the PATH" in text
    assert "threading layer  tbb" in text and "WORKQUEUE_LOCK" not in text


def test_usable_gpu(machine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    machine(usable=True)
    monkeypatch.setattr(doctor, "package_version", lambda *d: (d[0], "13.6.0"))
    text = report()
    assert "cuda  usable: 1 CUDA GPU(s) visible" in text and "  install  " not in text
    assert "CuPy        13.6.0 (cupy-cuda13x)" in text
    rows = {line.split()[0]: line for line in text.split("indexes (devices")[1].splitlines()[1:]}
    assert rows["sorted-array"].split()[1:] == ["cpu", "cuda", "cpu", "cuda"]


def test_malformed_variables_are_reported_and_the_report_goes_on(
        machine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    machine()
    monkeypatch.setenv("INDEXZOO_DEVICE", "gpu")
    monkeypatch.setenv("INDEXZOO_MEMORY_CHECK", "0")
    text = report()
    assert "auto  means nothing: environment variable INDEXZOO_DEVICE='gpu' must be" in text
    section = text.split("environment variables (docs/cli.md)\n")[1].split("\n\n")[0]
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in section.splitlines()}
    assert rows["INDEXZOO_DEVICE"] == "'gpu': malformed, must be 'auto', 'cpu' or 'cuda'"
    assert rows["INDEXZOO_MEMORY_CHECK"] == "'0'"
    assert "sorted-array" in text.split("indexes (devices")[1]


def test_info_system_is_the_same_report(machine: Any) -> None:
    machine()
    out = io.StringIO()
    assert main(["info", "--system"], out=out) == 0
    assert out.getvalue() == report()


def test_info_needs_a_name_or_system(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"], out=io.StringIO()) == 2
    assert "give an index NAME" in capsys.readouterr().err
    assert main(["info", "sorted-array", "--system"], out=io.StringIO()) == 2


def test_probes_without_fakes_work_here() -> None:
    ok, why, _where = doctor.optix_status()
    assert isinstance(ok, bool) and why
    found = doctor.package_version("numpy")
    assert found is not None and found[1] == importlib.metadata.version("numpy")
    assert doctor.package_version("no-such-dist-xyz") is None
    assert os.environ.get("OptiX_INSTALL_DIR") != "/nonexistent/optix"  # noqa: SIM112


@pytest.mark.parametrize("usable", [False, True])
def test_doctor_probes_the_optix_engine_and_info_and_list_say_whether_it_is_installed(
        machine: Any, monkeypatch: pytest.MonkeyPatch, usable: bool) -> None:
    from indexzoo.native.rt import optix

    machine(usable=usable)
    reason = ("OptiX 9.0.0, no RT cores: the driver traverses in software" if usable else
              "pyoptix is not installed; install NVIDIA's OptiX Python bindings")
    monkeypatch.setattr(optix, "status", lambda probe_device=True: optix.OptixStatus(usable,
                                                                                     reason))
    found = ("pyoptix and the OptiX SDK headers are installed; `indexzoo doctor` checks the GPU"
             if usable else reason)
    monkeypatch.setattr(optix, "installed", lambda: optix.OptixStatus(usable, found))
    word = "usable: " if usable else "not usable: "
    assert f"engine             {word}{reason}" in report()
    said = "installed: " if usable else "not usable: "
    out = io.StringIO()
    assert main(["info", "rx"], out=out) == 0
    assert f"  optix: {said}{found}" in out.getvalue()
    assert "  software: usable" in out.getvalue()
    out = io.StringIO()
    assert main(["list"], out=out) == 0
    assert f"optix: {said}{found.split(';')[0]}" in out.getvalue().splitlines()[-1]
    out = io.StringIO()
    assert main(["info", "sorted-array"], out=out) == 0
    assert "engines:" not in out.getvalue()  # only indexes with an engine parameter


def test_list_and_info_find_optix_without_importing_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """What list and info say of OptiX comes from the files installed, not from importing the
    bindings (which would import CuPy and numba and open the GPU)."""
    import importlib.util

    from indexzoo.native.rt import optix

    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "optix" else None)
    monkeypatch.setattr(optix, "import_optix", lambda: pytest.fail("the bindings were imported"))
    monkeypatch.delenv("OptiX_INSTALL_DIR", raising=False)
    assert "OptiX_INSTALL_DIR is not set" in optix.installed().reason
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "optix.h").write_text("")
    monkeypatch.setenv("OptiX_INSTALL_DIR", str(tmp_path))
    assert optix.installed().usable


def test_the_optix_section_shows_the_rt_cores_and_what_auto_picks(machine: Any) -> None:
    import re

    machine()
    text = report()
    assert re.search(r"RT cores +none \(no usable CUDA GPU\)", text)
    assert re.search(r"\n  auto +software \(the index is on 'cpu'; OptiX runs on the GPU only\)",
                     text)
    assert "every ray-tracing index (rx, rx-opt, cgrx, rtscan) takes engine=" in text
