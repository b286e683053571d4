"""``indexzoo.native.targets.Kernel``: a per-item body runs once per item on the CPU, whatever
the body is called; a bound kernel (``Kernel.bind``) runs like the ordinary call with its open
arguments filled in, on either device."""

from __future__ import annotations

import typing

import numpy as np
import pytest
from numba.extending import register_jitable

from indexzoo.native.targets import Kernel


@register_jitable
def body(i, x, out):  # type: ignore[no-untyped-def]
    out[i] = x[i] * 2


@register_jitable
def double_item(i, x, out):  # type: ignore[no-untyped-def]
    out[i] = x[i] * 2


def test_a_body_named_like_the_generated_loop_still_runs() -> None:
    """The generated loop takes its name from the body (``body`` here): it must not shadow the
    body it calls."""
    x = np.arange(10, dtype=np.int64)
    for fn in (body, double_item):
        out = np.zeros_like(x)
        Kernel(fn)("cpu", 10, x, out)
        np.testing.assert_array_equal(out, 2 * x)


@register_jitable
def scaled_item(i, x, factor, out):  # type: ignore[no-untyped-def]
    out[i] = x[i] * factor


def test_a_bound_kernel_takes_its_open_arguments_in_order(device: str) -> None:
    from indexzoo.devices import to_device, to_numpy
    from indexzoo.native.targets import Slot

    k = Kernel(scaled_item)
    launch = k.bind(device, Slot(np.dtype(np.int64)), np.int64(3), Slot(np.dtype(np.int64)))
    x = to_device(np.arange(10, dtype=np.int64), device)
    for n in (10, 4, 0):
        out = to_device(np.full(10, -1, np.int64), device)
        launch(n, x, out)
        want = np.where(np.arange(10) < n, 3 * np.arange(10), -1)
        np.testing.assert_array_equal(to_numpy(out), want)
    if device == "cpu":  # the GPU's bound call takes exactly its open arguments
        with pytest.raises(TypeError, match="2 open arguments, got 1"):
            launch(3, x)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k.bind(device, Slot(np.dtype(np.int64)))


def test_a_bound_kernel_takes_arrays_unlike_its_slots_through_the_ordinary_call(
        device: str) -> None:
    # a strided view or another dtype than the slot's cannot use the prepared buffer (the
    # kernel was compiled for C-contiguous arrays of the slot's dtype): the ordinary call
    # compiles or picks the matching specialisation
    from indexzoo.devices import to_device, to_numpy
    from indexzoo.native.targets import Slot

    launch = Kernel(scaled_item).bind(device, Slot(np.dtype(np.int64)), np.int64(2),
                                      Slot(np.dtype(np.int64)))
    x = to_device(np.arange(20, dtype=np.int64), device)
    out = to_device(np.zeros(10, np.int64), device)
    launch(10, x[::2], out)
    np.testing.assert_array_equal(to_numpy(out), 2 * np.arange(0, 20, 2))
    out32 = to_device(np.zeros(10, np.int32), device)
    launch(10, x, out32)
    np.testing.assert_array_equal(to_numpy(out32), 2 * np.arange(10))


def test_the_packed_offsets_are_where_the_packer_writes_each_argument() -> None:
    import struct

    from numba import typeof

    from indexzoo.native.cudalaunch import _flat_plan, _pack_format
    from indexzoo.native.cudalaunch import leaf_offsets as _leaf_offsets

    args = (np.int64(5), np.bool_(True), (np.zeros(5, np.uint64), np.int32(-7)),
            np.zeros((4, 3), np.uint32), np.float32(1.5), np.uint8(1), np.zeros(2, np.int64))
    plans = [_flat_plan(typeof(a)) for a in args]
    # int64 at 0, bool at 8, the tuple's array at 16 (7 words), its int32 at 72, the 2-D
    # array at 80 (9 words), float32 at 152, uint8 at 156, the last array at 160
    assert _leaf_offsets(plans) == {(0,): 0, (1,): 8, (2, 0): 16, (2, 1): 72, (3,): 80,
                                    (4,): 152, (5,): 156, (6,): 160}
    fmt = "@" + "".join(_pack_format(p) for p in plans)
    assert struct.calcsize(fmt) == 160 + 7 * 8


class Record(typing.NamedTuple):
    factor: np.int64
    x: typing.Any


@register_jitable
def record_item(i, rec, out):  # type: ignore[no-untyped-def]
    out[i] = rec.x[i] * rec.factor


def test_a_slot_may_stand_for_a_field_of_a_record_argument(device: str) -> None:
    """A launch record whose lookups change per call (the RT layer's ``ray_data``): the slot
    inside it is filled like a top-level one, and the record keeps its fixed fields."""
    from indexzoo.devices import to_device, to_numpy
    from indexzoo.native.targets import Slot

    launch = Kernel(record_item).bind(device, Record(np.int64(5), Slot(np.dtype(np.int64))),
                                      Slot(np.dtype(np.int64)))
    for n in (7, 3):
        x = to_device(np.arange(n, dtype=np.int64) + n, device)
        out = to_device(np.zeros(n, np.int64), device)
        launch(n, x, out)
        np.testing.assert_array_equal(to_numpy(out), 5 * (np.arange(n) + n))


def test_a_block_kernels_resident_blocks_count_shared_memory_beyond_the_opt_in() -> None:
    """Up to 48 KiB of dynamic shared memory the driver's count for the compiled kernel is the
    answer. Beyond it the driver counts no block for numba's copy of the kernel (the launch
    opts in on its own copy), so the count without dynamic shared memory is capped by what the
    multiprocessors' shared memory holds, never dropping to one block."""
    from indexzoo.native.targets import (
        SHARED_WITHOUT_OPT_IN,
        BlockKernel,
        shared_memory_per_sm,
        sm_count,
    )

    class Compiled:  # numba's compiled kernel, as the driver answers for it
        shared_mem_per_block = 0

        def max_cooperative_grid_blocks(self, threads: int, shared: int) -> int:
            return 0 if shared > SHARED_WITHOUT_OPT_IN else 5 * sm_count()

    class Dispatcher:
        def __init__(self) -> None:
            self.overloads = {"sig": Compiled()}

    k = BlockKernel("k", "", {})
    assert k.resident_blocks(256, 70_000) is None  # not compiled yet
    k._fn = Dispatcher()
    per_sm, reserved = shared_memory_per_sm()
    assert k.resident_blocks(256, 0) == k.resident_blocks(256, 40_000) == 5 * sm_count()
    assert k.resident_blocks(256, 70_000) == min(5, per_sm // (70_000 + reserved)) * sm_count()
    assert k.resident_blocks(256, 112_000) == (per_sm // (112_000 + reserved)) * sm_count() > 1


def test_a_block_kernel_loaded_from_the_cache_counts_by_the_launcher_that_runs_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that found the kernel in the kernel cache has its CuPy launcher and nothing
    numba compiled: the count is the launcher's (the driver's, for the function loaded), one
    launcher of the current GPU; with several specialisations on it, unknown as before."""
    import types

    import indexzoo.native.targets as targets
    from indexzoo.native.targets import BlockKernel

    class Launcher:
        def __init__(self, device: int, count: int) -> None:
            self._device, self.count = device, count

        def resident_blocks(self, threads: int, shared: int = 0) -> int:
            return self.count

    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    monkeypatch.setattr(targets, "cupy_module",
                        lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    k = BlockKernel("k", "", {})
    assert k.resident_blocks(256) is None  # neither compiled nor loaded
    k._fast[(0, "argument types")] = Launcher(0, 660)  # type: ignore[assignment]
    assert k.resident_blocks(256) == 660
    k._fast[(1, "argument types")] = Launcher(1, 7)  # type: ignore[assignment]  # another GPU
    k._fast[(0, "no launcher")] = None  # types only numba's own launch takes
    assert k.resident_blocks(256) == 660
    k._fast[(0, "other argument types")] = Launcher(0, 500)  # type: ignore[assignment]
    assert k.resident_blocks(256) is None


RESIDENT_PROGRAM = '''
import cupy
import numpy as np
from indexzoo.native.targets import BlockKernel

SOURCE = """
def busy(n, x, out):
    i = cuda.grid(1)
    if i < n:
        a = x[i]
        b = a * np.uint64(0x9E3779B97F4A7C15)
        c = b ^ (a >> np.uint64(7))
        d = c * b + a
        out[i] = a + b + c + d
"""
k = BlockKernel("busy", SOURCE, {"np": np})
x = cupy.arange(1000, dtype=cupy.uint64)
out = cupy.empty_like(x)
k(4, 256, 1000, x, out)
cupy.cuda.Device().synchronize()
compiled = list(k._get().overloads.values())
numba_count = compiled[0].max_cooperative_grid_blocks(256, 0) if compiled else -1
print(len(compiled), k.resident_blocks(256), numba_count)
'''


@pytest.mark.gpu
def test_a_block_kernel_loaded_from_the_cache_is_counted_as_the_one_compiled(
        tmp_path: typing.Any) -> None:
    """The first process compiles the kernel and keeps it; the second loads it, compiling
    nothing: both count the blocks the GPU holds alike (the driver's count for numba's compiled
    copy), where the second used to answer None and a grid sized without the kernel's
    registers could run in two waves."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "INDEXZOO_KERNEL_CACHE": str(tmp_path)}
    runs = []
    for _ in range(2):
        res = subprocess.run([sys.executable, "-c", RESIDENT_PROGRAM], capture_output=True,
                             text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        runs.append([int(w) for w in res.stdout.split()])
    (compiled, first, numba_count), (loaded, second, _) = runs
    assert compiled == 1 and first == numba_count > 0
    assert loaded == 0  # the second process compiled nothing
    assert second == first


@pytest.mark.gpu
def test_one_process_answers_on_two_gpus_with_the_same_kernels() -> None:
    """An index on each of two GPUs of one process, the same kernel and argument types on
    both: each launch runs in its own GPU's context (a launcher loaded on the first GPU and
    used on the second failed with CUDA_ERROR_INVALID_HANDLE)."""
    import cupy

    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs in one process")
    import indexzoo

    rng = np.random.default_rng(4)
    keys = rng.integers(0, 1 << 40, 100_000, dtype=np.uint64)
    q = np.concatenate([keys[:500], rng.integers(0, 1 << 40, 500, dtype=np.uint64)])
    want = indexzoo.create("btree", device="cpu").build(keys).point(q, out="count").count
    for name in ("btree", "sorted-array", "warpcore-hash"):
        for d in (0, 1, 0):
            with cupy.cuda.Device(d):
                index = indexzoo.create(name, device="cuda").build(cupy.asarray(keys))
                got = index.point(cupy.asarray(q), out="count").count
                assert got.device.id == d
                assert np.array_equal(cupy.asnumpy(got), want), (name, d)
