"""``GroupKernel``: one operation, a scalar body (the CPU, and the GPU with a group of one) and
a cooperative body for groups of G threads on the GPU. Here the B+-tree's operations: the
cooperative bodies, run under numba's CUDA simulator, answer like the scalar ones."""

from __future__ import annotations

import struct
import textwrap
from typing import Any

import numpy as np
import pytest
from numba.extending import register_jitable
from support.helpers import agrees_in_the_simulator

from indexzoo.native.targets import GroupKernel, Kernel

SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from indexzoo.plugins.btree import kernels as btree
    from indexzoo.native.csr import offsets_from_counts
    from indexzoo.native.sort import sort_pairs

    rng = np.random.default_rng(7)
    for dtype, width in ((np.uint32, 8), (np.uint64, 16)):
        keys = rng.integers(0, 90, 160).astype(dtype)
        pairs = sort_pairs(keys, np.uint32)
        tree = btree.build_btree(pairs.keys, pairs.rowids, width, 1.0).record()
        lo = rng.integers(0, 100, 24).astype(dtype)
        hi = lo + rng.integers(0, 6, 24).astype(dtype)
        values = rng.integers(0, 2**63, 160, dtype=np.uint64)
        miss = np.uint32(2**32 - 1)

        def both(op, *args, out_at):
            outs = []
            for device, group in (("cpu", 1), ("cuda", width)):
                a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
                op(device, 24, *a, group=group, threads_per_block=32)
                outs.append(a[out_at])
            assert np.array_equal(outs[0], outs[1]), (op, dtype, outs)
            return outs[0]

        both(btree.FIND_ROWID, tree, lo, hi, np.empty(24, np.uint32), miss, out_at=3)
        counts = both(btree.COUNT, tree, lo, hi, np.empty(24, np.int64), out_at=3)
        both(btree.SUM, tree, values, np.bool_(True), lo, hi, np.empty(24, np.uint64), out_at=5)
        offsets = offsets_from_counts(counts)
        total = int(offsets[-1])
        sets = []
        for device, group in (("cpu", 1), ("cuda", width)):
            out = np.empty(total, np.uint32)
            btree.FILL(device, 24, tree, lo, hi, offsets, out, group=group, threads_per_block=32)
            sets.append([sorted(out[offsets[i]:offsets[i + 1]]) for i in range(24)])
        assert sets[0] == sets[1]
    print("simulator agrees")
""")


# about 18 s; test_btree runs the cooperative bodies of one layout in the README's tier, and CI
# runs this one after the README's tests
@pytest.mark.exhaustive
def test_btree_group_kernels_agree_with_their_scalar_bodies_in_the_simulator() -> None:
    agrees_in_the_simulator(SCRIPT)


RUNS_SCRIPT = textwrap.dedent("""
    from support import cudasim_warp
    cudasim_warp.install()
    import numpy as np
    from indexzoo.native.runs import RUN_SUM

    rng = np.random.default_rng(3)
    rowids = rng.permutation(500).astype(np.uint32)
    values = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    first = rng.integers(0, 400, 20).astype(np.int64)
    count = rng.integers(0, 100, 20).astype(np.int64)
    count[:3] = [0, 1, 33]
    for group in (1, 4, 16, 32):
        for vals, use in ((values, np.bool_(True)), (values[:1], np.bool_(False))):
            outs = []
            for device, g in (("cpu", 1), ("cuda", group)):
                out = np.empty(20, np.uint64)
                RUN_SUM(device, 20, rowids, first, count, vals, use, out, np.int64(g), group=g,
                        threads_per_block=32)
                outs.append(out)
            assert np.array_equal(outs[0], outs[1]), group
    print("simulator agrees")
""")


@pytest.mark.exhaustive  # about 19 s of simulated threads: CI runs it after the README's tests
def test_the_collaborative_run_sum_agrees_with_one_thread_in_the_simulator() -> None:
    """cgRX's collaborative scan: G lanes share a run and add their parts."""
    agrees_in_the_simulator(RUNS_SCRIPT)


def test_an_operation_without_a_cooperative_body_runs_groups_of_one_only() -> None:
    from numba.extending import register_jitable

    @register_jitable
    def double_item(i, x, out):
        out[i] = 2 * x[i]

    op = GroupKernel(double_item)
    x = np.arange(5, dtype=np.int64)
    out = np.zeros(5, np.int64)
    op("cpu", 5, x, out, group=8)  # the CPU always runs the scalar body
    assert out.tolist() == [0, 2, 4, 6, 8]
    with pytest.raises(TypeError, match="no cooperative form"):
        op.cooperative()


def test_the_fast_launch_cache_keys_c_f_and_strided_layouts_apart() -> None:
    # numba compiles one specialisation per layout (C, F, A); the CuPy launch cache must not
    # hand an F-compiled kernel a strided array, or the kernel would read the wrong elements
    from indexzoo.native.cudalaunch import _arg_key

    a = np.zeros((8, 3), dtype=np.uint32)
    c, f, strided = a, np.asfortranarray(a), a[::2]
    keys = {_arg_key((x,), np.ndarray) for x in (c, f, strided)}
    assert len(keys) == 3
    assert _arg_key((a[:, 0].copy(),), np.ndarray) == _arg_key((np.zeros(4, np.uint32),),
                                                               np.ndarray)


class _DeviceArrayStandIn:
    """What the packed launch reads of a CuPy array, for a NumPy one."""

    def __init__(self, a: np.ndarray):
        self.size, self.itemsize, self.shape, self.strides = a.size, a.itemsize, a.shape, a.strides
        self.data = type("Pointer", (), {"ptr": a.ctypes.data})()


def test_the_packed_launch_buffer_holds_each_parameter_at_its_aligned_offset() -> None:
    # the CuPy path hands cuLaunchKernel one buffer laid out as the kernel's parameter list;
    # it must carry, in order and at C alignment, the values numba's ABI flattens each
    # argument into: (meminfo, parent, nitems, itemsize, data, shape, strides) per array,
    # tuple members one by one, scalars at their own width
    import struct

    from numba import typeof

    from indexzoo.native.cudalaunch import _extractor, _flat_plan, _pack_format

    arr2 = np.zeros((4, 3), np.uint32)
    arr1 = np.arange(5, dtype=np.uint64)
    args = (np.int64(5), np.bool_(True), (arr1, np.int32(-7), np.uint8(3)), arr2,
            np.float32(1.5))
    plans = [_flat_plan(typeof(a)) for a in args]
    fmt = "@" + "".join(_pack_format(p) for p in plans)
    stand_ins = [(_DeviceArrayStandIn(a[0]), a[1], a[2]) if isinstance(a, tuple) else (
        _DeviceArrayStandIn(a) if isinstance(a, np.ndarray) else a) for a in args]
    values = list(_extractor(plans)(*stand_ins))
    packed = struct.pack(fmt, *values)
    assert struct.unpack(fmt, packed) == tuple(
        pytest.approx(v) if isinstance(v, float) else v for v in values)
    # int64 at 0, bool at 8, then the first array's meminfo padded to 16
    assert packed[8] == 1 and struct.unpack_from("@q", packed, 16) == (0,)
    assert values[2:9] == [0, 0, 5, 8, arr1.ctypes.data, 5, 8]
    assert values[9:11] == [-7, 3]
    assert values[11:18] == [0, 0, 12, 4, arr2.ctypes.data, 4, 3] and values[18:20] == [12, 4]
    assert struct.calcsize(fmt) == 8 + 8 + 7 * 8 + 4 + 1 + 3 + 9 * 8 + 4


def test_python_ints_reach_the_fast_launch_as_int64_parameters() -> None:
    # the fast path hands Python ints (item counts, sizes) to the packer unconverted: numba
    # types them as int64, like np.int64, so both compile the same kernel and pack as "q"
    import struct

    from numba import typeof

    from indexzoo.native.cudalaunch import _arg_key, _extractor, _flat_plan, _pack_format

    assert typeof(5) == typeof(np.int64(5))
    assert _arg_key((5, np.int64(5)), np.ndarray) == (int, np.int64)
    # a Python bool keys too (without a key the launch would fall back to numba's own, some
    # 20x slower a call), apart from an int, and packs as numba's boolean
    assert _arg_key((True, 1), np.ndarray) == (bool, int)
    assert _flat_plan(typeof(True)) is np.bool_
    assert struct.pack("@" + _pack_format(np.bool_), *_extractor([np.bool_])(True)) == b"\x01"
    plans = [_flat_plan(typeof(x)) for x in (5, np.int64(5))]
    fmt = "@" + "".join(_pack_format(p) for p in plans)
    assert struct.pack(fmt, *_extractor(plans)(2**62, np.int64(2**62))) == struct.pack(
        "@qq", 2**62, 2**62)


class _FakeDeviceArray:
    """What the bound launch reads of a CuPy array (dtype, ndim, contiguity, size, pointer,
    shape, strides), over a NumPy array."""

    def __init__(self, a: np.ndarray):
        self.a = a
        self.dtype, self.ndim, self.size, self.itemsize = a.dtype, a.ndim, a.size, a.itemsize
        self.shape, self.strides = a.shape, a.strides
        self._c_contiguous = a.flags.c_contiguous
        self.data = type("Pointer", (), {"ptr": a.ctypes.data})()


def test_a_bound_launch_writes_the_parameter_buffer_of_the_ordinary_packed_launch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Kernel.bind packs the fixed arguments once and writes only the count and the open
    # arrays per call: the bytes handed to cuLaunchKernel must be those the ordinary packed
    # launch would write for the same arguments (checked without a GPU: CuPy and the compiled
    # kernel are stand-ins; the packer and the extractor are the real ones)
    import ctypes
    from types import SimpleNamespace

    from numba import typeof

    from indexzoo.native import cudalaunch, targets
    from indexzoo.native.cudalaunch import _extractor, _flat_plan, _pack_format
    from indexzoo.native.targets import Slot

    sent: list[tuple[Any, ...]] = []

    def launch_kernel(fptr: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                      shared: int, stream: int, params: int, extra: int) -> None:
        words = (ctypes.c_void_p * 5).from_address(extra)
        size = ctypes.c_size_t.from_address(words[3]).value
        sent.append((fptr, gx, bx, stream, ctypes.string_at(words[1], size)))

    fake_cupy = SimpleNamespace(
        ndarray=_FakeDeviceArray,
        empty=lambda shape, dtype: _FakeDeviceArray(np.zeros(shape, dtype)),
        cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=77),
                             driver=SimpleNamespace(launchKernel=launch_kernel)))

    def fast_launcher(owner: Any, fn: Any, args: tuple[Any, ...]) -> Any:
        def host(a: Any) -> Any:
            if isinstance(a, tuple):
                return tuple(host(x) for x in a)
            return a.a if isinstance(a, _FakeDeviceArray) else (np.int64(a) if type(a) is int
                                                                else a)

        plan = [_flat_plan(typeof(host(a))) for a in args]
        packer = struct.Struct("@" + "".join(_pack_format(p) for p in plan))
        return SimpleNamespace(_plan=plan, _packer=packer, _extract=_extractor(plan), _device=0,
                               _function_ptr=1234)

    monkeypatch.setattr(targets, "cupy_module", lambda: fake_cupy)
    monkeypatch.setattr(targets, "fast_launcher", fast_launcher)
    monkeypatch.setattr(cudalaunch, "_context_current", lambda device: None)  # no CUDA here
    keys = _FakeDeviceArray(np.arange(40, dtype=np.uint64).reshape(8, 5))
    record = (_FakeDeviceArray(np.arange(3, dtype=np.uint32)), np.int32(-4), np.uint8(9))
    op = Kernel(scaled_pair_item)
    monkeypatch.setattr(op, "_get", lambda device: None)
    launch = op.bind("cuda", keys, Slot(np.dtype(np.uint64)), np.bool_(True), record,
                     Slot(np.dtype(np.int32)), np.float32(0.5), threads_per_block=64)
    for n in (1, 100, 1000):
        q = _FakeDeviceArray(np.arange(n, dtype=np.uint64) * 3)
        out = _FakeDeviceArray(np.zeros(n, np.int32))
        launch(n, q, out)
        fptr, grid, block, stream, sent_bytes = sent[-1]
        full = (n, keys, q, np.bool_(True), record, out, np.float32(0.5))
        plain = fast_launcher(None, None, full)
        assert sent_bytes == plain._packer.pack(*plain._extract(*full))
        assert (fptr, grid, block, stream) == (1234, (n + 63) // 64, 64, 77)
    calls = len(sent)
    launch(0, q, out)  # no item: no launch
    assert len(sent) == calls


@register_jitable
def scaled_pair_item(i, keys, q, flag, rec, out, factor):  # type: ignore[no-untyped-def]
    out[i] = q[i] * factor
