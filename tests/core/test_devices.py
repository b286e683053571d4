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
    with pytest.raises(ConfigError, match=r"INDEXZOO_DEVICE: unknown device 'tpu'"):
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
    assert not usable and "indexzoo[cuda12]" in reason
    with pytest.raises(DeviceUnavailable, match=r"indexzoo\[cuda12\]"):
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
    with pytest.raises(DeviceUnavailable, match=r"__cuda_array_interface__.*indexzoo\[cuda12\]"):
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
