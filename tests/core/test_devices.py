"""Device selection (auto, explicit, INDEXZOO_DEVICE) and inputs from any array producer."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

import indexzoo
from indexzoo import ConfigError, DeviceUnavailable, devices
from indexzoo.devices import resolve_device


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "cuda_status", lambda: (False, "no CUDA GPU is visible (test)"))
    monkeypatch.delenv(devices.ENV_VAR, raising=False)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "cuda_status", lambda: (True, "1 fake GPU"))
    monkeypatch.delenv(devices.ENV_VAR, raising=False)


def test_auto_picks_cpu_without_a_gpu(no_gpu: None) -> None:
    assert resolve_device("auto") == "cpu"
    assert indexzoo.create("sorted-array").device == "cpu"


def test_auto_picks_cuda_with_a_gpu(fake_gpu: None) -> None:
    assert resolve_device("auto") == "cuda"


def test_environment_variable_steers_auto(no_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(devices.ENV_VAR, "cpu")
    assert resolve_device("auto") == "cpu"
    monkeypatch.setenv(devices.ENV_VAR, "cuda")
    with pytest.raises(DeviceUnavailable, match=r"environment variable INDEXZOO_DEVICE.*test"):
        resolve_device("auto")


def test_explicit_device_wins_over_the_environment(fake_gpu: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(devices.ENV_VAR, "cuda")
    assert resolve_device("cpu") == "cpu"


def test_bad_environment_value_is_a_config_error(no_gpu: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(devices.ENV_VAR, "tpu")
    with pytest.raises(ConfigError, match=r"^environment variable INDEXZOO_DEVICE='tpu' must be "
                                          r"'auto', 'cpu' or 'cuda'$"):
        resolve_device("auto")


@pytest.mark.parametrize("bad", ["gpu0", "", 3, None])
def test_unknown_device_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match="device"):
        resolve_device(bad)


def test_cuda_without_a_gpu_says_why(no_gpu: None) -> None:
    with pytest.raises(DeviceUnavailable, match=r"device 'cuda' was asked for.*no CUDA GPU"):
        indexzoo.create("sorted-array", device="cuda")


@pytest.mark.skipif(devices.cuda_status()[0], reason="CuPy is installed here")
def test_missing_cupy_names_the_extra_to_install() -> None:
    usable, reason = devices.cuda_status()
    assert not usable and INSTALL["cuda12"] in reason
    with pytest.raises(DeviceUnavailable, match=r"'cupy-cuda12x\[ctk\]>=14' 'numba-cuda\[cu12\]>=0.20'"):
        indexzoo.create("sorted-array", device="cuda")


class DLPackOnly:
    """An array producer that only speaks DLPack (like a CPU torch tensor)."""

    def __init__(self, arr: np.ndarray):
        self._arr = arr

    def __dlpack__(self, **kw: Any) -> Any:
        return self._arr.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._arr.__dlpack_device__()


def test_dlpack_inputs_are_accepted(device: str) -> None:
    keys = np.array([5, 1, 5, 9], dtype=np.uint64)
    idx = indexzoo.create("sorted-array", device=device).build(DLPackOnly(keys))
    res = idx.point(DLPackOnly(np.array([5, 2], dtype=np.uint64)), out="count").to_host()
    np.testing.assert_array_equal(res.count, [2, 0])


def test_lists_are_accepted_and_results_are_on_the_index_device(device: str) -> None:
    idx = indexzoo.create("sorted-array", device=device).build([3, 1, 2])
    res = idx.point([2, 7])
    assert res.device == device
    assert isinstance(res.rowid, np.ndarray) == (device == "cpu")


class CudaArrayLike:
    __cuda_array_interface__: ClassVar[dict[str, Any]] = {"shape": (3,), "typestr": "<u8", "data": (0, False),
                                "version": 3}


@pytest.mark.skipif(devices.cuda_status()[0], reason="CuPy is installed here")
def test_gpu_array_input_without_cupy_names_the_extra() -> None:
    idx = indexzoo.create("sorted-array", device="cpu")
    with pytest.raises(DeviceUnavailable, match=r"__cuda_array_interface__.*'cupy-cuda12x\[ctk\]>=14'"):
        idx.build(CudaArrayLike())


@pytest.mark.gpu
def test_cuda_array_interface_producers_are_accepted() -> None:
    from numba import cuda

    keys = cuda.to_device(np.array([4, 2, 4], dtype=np.uint64))
    idx = indexzoo.create("sorted-array", device="cuda").build(keys)
    res = idx.point(cuda.to_device(np.array([4, 3], dtype=np.uint64)), out="count").to_host()
    np.testing.assert_array_equal(res.count, [2, 0])
    on_cpu = indexzoo.create("sorted-array", device="cpu").build(keys)
    assert on_cpu.point([4]).device == "cpu"


# ---------------------------------------------------------------------- GPU set-up hints
SMI_12 = """\
Mon Nov 23 12:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""
SMI_13 = SMI_12.replace("550.54.14", "580.65.06").replace("CUDA Version: 12.4",
                                                           "CUDA Version: 13.0")
PROC_575 = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  "
            "(dvs-builder@U16-I2-C03-12-4)  Sat May 24 00:00:00 UTC 2025\nGCC version:  gcc 12\n")


def fake_machine(monkeypatch: pytest.MonkeyPatch, *, smi: str | None = None,
                 proc: str | None = None, libcuda: int | None = None,
                 usable: tuple[bool, str] | None = None) -> None:
    """Replace the driver probes (and, if given, cuda_status) with a made-up machine."""
    def nvidia_smi(*args: str) -> str | None:
        if smi is None:
            return None
        return "NVIDIA H100 80GB HBM3\n" if args else smi

    monkeypatch.setattr(devices, "_nvidia_smi_on_path", lambda: smi is not None)
    monkeypatch.setattr(devices, "_nvidia_smi", nvidia_smi)
    monkeypatch.setattr(devices, "_proc_driver_version", lambda: proc)
    monkeypatch.setattr(devices, "_libcuda_version", lambda: libcuda)
    if usable is not None:
        monkeypatch.setattr(devices, "cuda_status", lambda: usable)
    monkeypatch.setattr(devices, "_hint_given", [])
    monkeypatch.delenv(devices.ENV_VAR, raising=False)
    devices.nvidia_driver.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_driver_cache() -> Any:
    devices.nvidia_driver.cache_clear()
    yield
    devices.nvidia_driver.cache_clear()


#: What a user is told to run for each GPU extra: its packages (indexzoo is on no registry).
INSTALL = {"cuda12": "pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'",
           "cuda13": "pip install 'cupy-cuda13x[ctk]>=14' 'numba-cuda[cu13]>=0.20'"}
NO_CUPY = (False, "CuPy is not installed; pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'")


@pytest.mark.parametrize("smi, extra, cuda", [(SMI_12, "cuda12", "12.4"), (SMI_13, "cuda13", "13.0")])
def test_driver_cuda_version_comes_from_nvidia_smi(monkeypatch: pytest.MonkeyPatch, smi: str,
                                                   extra: str, cuda: str) -> None:
    fake_machine(monkeypatch, smi=smi, usable=NO_CUPY)
    info = devices.nvidia_driver()
    assert info.found and info.cuda_text == cuda and info.cuda_source == "nvidia-smi"
    assert info.gpus == ("NVIDIA H100 80GB HBM3",)
    assert devices.install_command() == INSTALL[extra]
    hint = devices.gpu_setup_hint()
    assert hint is not None and "\n" not in hint
    assert "an NVIDIA driver is installed (nvidia-smi on the PATH" in hint
    assert f"CUDA {cuda} per nvidia-smi" in hint and "CuPy is not installed" in hint
    assert hint.endswith(f"running on the CPU. Fix: {INSTALL[extra]}")


def test_driver_version_maps_to_cuda_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, proc=PROC_575, usable=NO_CUPY)
    info = devices.nvidia_driver()
    assert info.evidence == ("/proc/driver/nvidia/version",)
    assert info.driver_version == "575.57.08" and info.cuda_version == (12, 0)
    assert "compatibility table" in info.cuda_source
    assert devices.install_command() == "pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'"
    assert devices.cuda_for_driver("580.65.06") == (13, 0)
    assert devices.cuda_for_driver("470.1") == (11, 0) and devices.cuda_for_driver("x") is None


def test_libcuda_alone_gives_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, libcuda=13010, usable=NO_CUPY)
    info = devices.nvidia_driver()
    assert info.evidence == ("libcuda.so.1 loadable",) and info.cuda_version == (13, 1)
    assert devices.install_command() == "pip install 'cupy-cuda13x[ctk]>=14' 'numba-cuda[cu13]>=0.20'"


def test_an_old_driver_is_told_to_upgrade(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, proc=PROC_575.replace("575.57.08", "470.256.02"), usable=NO_CUPY)
    assert "driver >= 525 (CUDA 12)" in devices.install_command()


def test_no_driver_no_hint_and_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    fake_machine(monkeypatch, usable=NO_CUPY)
    assert not devices.nvidia_driver().found and devices.gpu_setup_hint() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("auto") == "cpu"


def test_usable_gpu_needs_no_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, smi=SMI_12, usable=(True, "1 fake GPU"))
    assert devices.gpu_setup_hint() is None


def test_auto_warns_once_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    fake_machine(monkeypatch, smi=SMI_13, usable=NO_CUPY)
    with pytest.warns(devices.GpuSetupWarning,
                      match=r"Fix: pip install 'cupy-cuda13x\[ctk\]>=14' 'numba-cuda\[cu13\]>=0.20'"):
        assert resolve_device("auto") == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("auto") == "cpu"  # once per process
        assert resolve_device("cpu") == "cpu"


def test_explicit_cpu_never_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    fake_machine(monkeypatch, smi=SMI_12, usable=NO_CUPY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("cpu") == "cpu"
        monkeypatch.setenv(devices.ENV_VAR, "cpu")
        assert resolve_device("auto") == "cpu"


class _FailingImport:
    """A meta-path finder that makes one module fail to import as a broken install would."""

    def __init__(self, name: str, exc: Exception):
        self.name, self.exc = name, exc

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == self.name:
            raise self.exc
        return None


@pytest.mark.parametrize("exc, says", [
    (ModuleNotFoundError("No module named 'cupy'", name="cupy"), "CuPy is not installed"),
    (ImportError("libcudart.so.12: cannot open shared object file"),
     "CuPy cannot be imported (ImportError: libcudart.so.12: cannot open shared object file)"),
])
def test_cupy_import_failing_is_explained(monkeypatch: pytest.MonkeyPatch, exc: Exception,
                                          says: str) -> None:
    import sys

    fake_machine(monkeypatch, smi=SMI_12)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_FailingImport("cupy", exc), *sys.meta_path])
    usable, reason = devices.cuda_status.__wrapped__()
    assert not usable and reason == f"{says}; pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'"
    monkeypatch.setattr(devices, "cuda_status", lambda: (usable, reason))
    hint = devices.gpu_setup_hint()
    assert hint is not None and f"cannot use the GPU: {says}; running on the CPU" in hint


def test_cuda_asked_for_names_the_matching_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, smi=SMI_13)
    monkeypatch.setattr(devices, "cuda_status", lambda: (
        False, f"CuPy is not installed; {devices.install_command()}"))
    with pytest.raises(DeviceUnavailable, match=r"'cupy-cuda13x\[ctk\]>=14' 'numba-cuda\[cu13\]>=0.20'$"):
        resolve_device("cuda")


def test_cli_says_it_once_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from indexzoo.tools.cli import main

    fake_machine(monkeypatch, smi=SMI_12, usable=NO_CUPY)
    spec = tmp_path / "run.yaml"
    spec.write_text("index: sorted-array\ndevice: auto\nworkload: {n_keys: 256, n_lookups: 64}\n"
                    "repeats: 1\n")
    assert main(["run", str(spec)], out=io.StringIO()) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("indexzoo: GpuSetupWarning: an NVIDIA driver")
    assert err[0].endswith("Fix: pip install 'cupy-cuda12x[ctk]>=14' 'numba-cuda[cu12]>=0.20'")
