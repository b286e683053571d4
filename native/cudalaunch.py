"""GPU launches without numba-cuda's host cost: a numba-cuda kernel (compiled once per argument
types) launched through CuPy's ``cuLaunchKernel`` on CuPy's current stream.

The arguments are flattened the way numba's kernel ABI expects (:func:`_flat_plan`) and packed
into one parameter buffer by code generated per argument types (:func:`_pack_format`,
:func:`_extractor`), which matters for small batches. :func:`launch_cuda` falls back to
numba's own launch for anything the fast path cannot take; ``INDEXZOO_NUMBA_LAUNCH=1`` always
uses numba's. :mod:`.targets` builds its kernels on this.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
import typing
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from indexzoo.envvars import NUMBA_LAUNCH

from . import jitcache

__all__ = ["SHARED_DEFAULT", "CupyLaunch", "cupy_module", "fast_launcher", "launch_cuda",
           "leaf_offsets", "param_buffer"]

#: Dynamic shared memory a CUDA kernel may take without opting in to more (bytes).
SHARED_DEFAULT = 48 * 1024


_FAST_LAUNCH = not NUMBA_LAUNCH.value()
_STREAMS: dict[int, Any] = {}


@functools.cache
def cupy_module() -> Any:
    try:
        import cupy
    except ImportError:  # numba's simulator, or numba arrays without CuPy
        return None
    return cupy


def _numba_stream() -> Any:
    """numba's handle of CuPy's current stream (0: the legacy default stream)."""
    cupy = cupy_module()
    if cupy is None:
        return 0
    ptr = cupy.cuda.get_current_stream().ptr
    if ptr == 0:
        return 0
    if ptr not in _STREAMS:
        from numba import cuda

        _STREAMS[ptr] = cuda.external_stream(ptr)
    return _STREAMS[ptr]


def _arg_key(args: tuple[Any, ...], ndarray: Any) -> tuple[Any, ...] | None:
    """What numba specialises a kernel on, cheaply (dtype, ndim, contiguity, scalar type, and
    the same for the elements of (named) tuples); None when an argument is none of these."""
    key: list[Any] = []
    for a in args:
        if isinstance(a, ndarray):
            # numba types an array's layout as C, F or A: all three must key apart, or a
            # kernel compiled for F-contiguous (stride-free) access could serve an A array.
            # CuPy arrays carry the two flags as attributes (``flags`` builds an object)
            c = getattr(a, "_c_contiguous", None)
            if c is None:
                c, f = a.flags.c_contiguous, a.flags.f_contiguous
            else:
                f = a._f_contiguous
            key.append((a.dtype.char, a.ndim, c, f))
        elif isinstance(a, np.generic) or type(a) in (int, bool):
            # (numba types Python ints as int64 and bools as boolean)
            key.append(type(a))
        elif isinstance(a, tuple):
            inner = _arg_key(a, ndarray)
            if inner is None:
                return None
            key.append((type(a), inner))
        else:
            return None
    return tuple(key)


class CupyLaunch:
    """A numba-compiled kernel launched through CuPy (see the module docstring)."""

    def __init__(self, dispatcher: Any, args: tuple[Any, ...]):
        import cupy
        from numba import cuda

        argtypes = tuple(dispatcher.typeof_pyval(a) for a in args)
        cc = cuda.get_current_device().compute_capability
        self._device = cupy.cuda.runtime.getDevice()  # the device whose context holds it
        _context_current(self._device)
        # the PTX another process compiled for the same kernel, types and device, else
        # compiled here (and kept for the next process)
        entry = jitcache.cuda_entry(dispatcher, argtypes, cc)
        kept = None if entry is None else entry.load()
        self._module = cupy.cuda.function.Module()
        if kept is not None:
            try:
                self._module.load(kept[0])
                self._function = self._module.get_function(kept[1])
            except Exception:  # PTX this driver refuses after all: compiled instead
                kept = None
                self._module = cupy.cuda.function.Module()
        if kept is None:
            kernel = dispatcher.compile(argtypes)
            ptx = kernel.inspect_asm(cc).encode()
            self._module.load(ptx)
            self._function = self._module.get_function(kernel.entry_name)
            if entry is not None:
                entry.save(ptx, kernel.entry_name)
        self._function_ptr = self._function.ptr
        self._shared_optin = SHARED_DEFAULT  # dynamic shared memory beyond needs an opt-in
        self._plan = [_flat_plan(ty) for ty in argtypes]
        self._packer = struct.Struct("@" + "".join(_pack_format(p) for p in self._plan))
        self._extract = _extractor(self._plan)
        self._local = threading.local()
        self._launch_kernel = cupy.cuda.driver.launchKernel

    def opt_in(self, shared_mem: int) -> None:
        """Let the kernel take ``shared_mem`` bytes of dynamic shared memory (beyond 48 KiB
        it must ask: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)."""
        if shared_mem > self._shared_optin:
            import cupy

            cupy.cuda.driver.funcSetAttribute(self._function.ptr, 8, shared_mem)
            self._shared_optin = shared_mem

    def resident_blocks(self, threads: int, shared_mem: int = 0) -> int:
        """Blocks of ``threads`` threads and ``shared_mem`` bytes of dynamic shared memory that
        its GPU holds at once over all its multiprocessors, by the driver's occupancy
        calculator for the function this launcher runs (its registers count; the opt-in beyond
        48 KiB made first, as a launch makes it)."""
        import cupy

        if shared_mem > self._shared_optin:
            self.opt_in(shared_mem)
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            self._function.ptr, threads, shared_mem)
        sms = cupy.cuda.Device(self._device).attributes["MultiProcessorCount"]
        return max(1, int(per_sm)) * int(sms)

    def __call__(self, blocks: int, threads: int, args: tuple[Any, ...], stream: Any,
                 shared_mem: int = 0) -> None:
        if shared_mem > self._shared_optin:
            self.opt_in(shared_mem)
        # every parameter packed into one buffer, laid out as the kernel's parameter list (C
        # alignment), handed to cuLaunchKernel through CU_LAUNCH_PARAM_BUFFER_POINTER: one
        # struct.pack instead of one CuPy argument object per flattened parameter
        # (a buffer per thread: cuLaunchKernel copies it before returning, so a thread can
        # reuse its own, and threads launching at once never share one)
        local = self._local
        buf = getattr(local, "buf", None)
        if buf is None:  # this thread's first launch
            buf = param_buffer(local, bytes(max(self._packer.size, 1)), self._packer.size,
                               self._device)
        self._packer.pack_into(buf, 0, *self._extract(*args))
        self._launch_kernel(self._function_ptr, blocks, 1, 1, threads, 1, 1, shared_mem,
                            stream.ptr, 0, local.extra_ptr)


def _context_current(device: int) -> None:
    """Make ``device``'s primary context current in this thread if no context is: the driver
    API launch needs one, and a thread that has made no CUDA runtime call yet has none (a
    Dask worker's thread that took over a task after another seceded, say: it failed with
    CUDA_ERROR_INVALID_CONTEXT). cudaSetDevice makes the primary context current."""
    import cupy

    if cupy.cuda.driver.ctxGetCurrent() == 0:
        cupy.cuda.runtime.setDevice(device)


def param_buffer(local: threading.local, init: bytes, size: int, device: int) -> Any:
    """This thread's parameter buffer (initialised with ``init``; ``size`` bytes handed to
    the driver) and the ``extra`` array that passes it to ``cuLaunchKernel`` as
    ``CU_LAUNCH_PARAM_BUFFER_POINTER`` / ``_SIZE``, kept in ``local`` (``buf``, ``extra_ptr``).
    Made at a thread's first launch, so it also makes ``device``'s context current there."""
    _context_current(device)
    buf = local.buf = ctypes.create_string_buffer(init, len(init))
    local.size = ctypes.c_size_t(size)
    local.extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2,
                                        ctypes.addressof(local.size), 0)
    local.extra_ptr = ctypes.addressof(local.extra)
    return buf


def _flat_plan(ty: Any) -> Any:
    """How to flatten an argument of numba type ``ty`` the way numba's kernel ABI does: the
    number of dimensions for an array, a NumPy scalar type for a scalar, a tuple of plans for
    a (named) tuple."""
    from numba import types

    if isinstance(ty, types.Array):
        return int(ty.ndim)
    if isinstance(ty, (types.Integer, types.Float, types.Boolean)):
        return np.dtype(str(ty)).type
    if isinstance(ty, types.BaseTuple):
        return tuple(_flat_plan(t) for t in ty)
    raise TypeError(f"no fast launch for arguments of type {ty}")


_PACK_CODES = {np.int8: "b", np.uint8: "B", np.int16: "h", np.uint16: "H", np.int32: "i",
               np.uint32: "I", np.int64: "q", np.uint64: "Q", np.float32: "f", np.float64: "d",
               np.bool_: "?"}


def _pack_format(plan: Any) -> str:
    """The :mod:`struct` codes of one argument's flattened parameters, numba's kernel ABI
    (per array: meminfo, parent, nitems, itemsize, data, shape, strides); an array plan
    carries its number of dimensions."""
    if isinstance(plan, int):  # an array of that many dimensions
        return "QQqqQ" + "q" * (2 * plan)
    if isinstance(plan, tuple):
        return "".join(_pack_format(p) for p in plan)
    return _PACK_CODES[plan]


def leaf_offsets(plans: list[Any]) -> dict[tuple[int, ...], int]:
    """Byte offset of every leaf argument's first flattened parameter in the packed buffer (at
    C alignment: the size of everything before it and its first field, less that field),
    keyed by its path: the argument's position, then its positions inside (named) tuples."""
    offsets: dict[tuple[int, ...], int] = {}
    before = ""

    def walk(plan: Any, path: tuple[int, ...]) -> None:
        nonlocal before
        if isinstance(plan, tuple):
            for j, p in enumerate(plan):
                walk(p, (*path, j))
            return
        code = _pack_format(plan)
        offsets[path] = (struct.calcsize("@" + before + code[:1])
                         - struct.calcsize("@" + code[:1]))
        before += code

    for i, plan in enumerate(plans):
        walk(plan, (i,))
    return offsets


def _extractor(plans: list[Any]) -> Callable[..., tuple[Any, ...]]:
    """A function of the launch arguments that returns their flattened parameters, in the
    order of :func:`_pack_format`: straight-line code generated once per argument types (the
    launch cache's key has already checked the types, so it reads and converts nothing else;
    a generic walk over the arguments cost several microseconds per launch)."""
    exprs: list[str] = []

    def walk(plan: Any, expr: str) -> None:
        if isinstance(plan, int):  # meminfo, parent, nitems, itemsize, data, shape, strides
            exprs.extend(["0", "0", f"{expr}.size", f"{expr}.itemsize", f"{expr}.data.ptr"])
            exprs.extend(f"{expr}.shape[{d}]" for d in range(plan))
            exprs.extend(f"{expr}.strides[{d}]" for d in range(plan))
        elif isinstance(plan, tuple):
            for j, p in enumerate(plan):
                walk(p, f"{expr}[{j}]")
        else:  # a NumPy scalar of the kernel's type already (the key says so)
            exprs.append(expr)

    names = [f"a{i}" for i in range(len(plans))]
    for plan, name in zip(plans, names, strict=True):
        walk(plan, name)
    source = f"def extract({', '.join(names)}):\n    return ({', '.join(exprs)},)\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return typing.cast("Callable[..., tuple[Any, ...]]", namespace["extract"])


def fast_launcher(owner: Any, fn: Any, args: tuple[Any, ...]) -> CupyLaunch | None:
    """The CuPy launcher of dispatcher ``fn`` for these arguments' types on the current device
    (made on first use and kept in ``owner._fast``), or None where only numba's own launch can
    run them."""
    cupy = cupy_module() if _FAST_LAUNCH else None
    if cupy is None:
        return None
    key = _arg_key(args, cupy.ndarray)
    if key is None:
        return None
    # a launcher's module is loaded into one device's context: one launcher a device (the
    # handle of another GPU's launched here fails with CUDA_ERROR_INVALID_HANDLE)
    key = (cupy.cuda.runtime.getDevice(), *key)
    fast = owner._fast.get(key, False)
    if fast is False:
        with owner._lock:
            try:
                fast = CupyLaunch(fn, tuple(np.int64(a) if type(a) is int else a
                                             for a in args))
            except Exception as exc:  # fall back to numba's launch, say why once
                warnings.warn(f"{owner!r}: CuPy launch unavailable ({exc}); using "
                              "numba's", RuntimeWarning, stacklevel=4)
                fast = None
            owner._fast[key] = fast
    return typing.cast("CupyLaunch | None", fast)


def launch_cuda(owner: Any, fn: Any, blocks: int, threads: int, args: tuple[Any, ...],
                shared_mem: int = 0) -> None:
    """Launch the numba-cuda dispatcher ``fn`` on CuPy's current stream, through CuPy where
    possible (see the module docstring). ``owner`` keeps the per-argument-types launchers in
    its ``_fast`` dict, guarded by its ``_lock``."""
    # Python ints go to the fast path as they are (the key types them as int64, the packer
    # writes them as such), and become np.int64 only for numba's own launch
    fast = fast_launcher(owner, fn, args)
    if fast is not None:
        fast(blocks, threads, args, cupy_module().cuda.get_current_stream(), shared_mem)
        return
    full = tuple(np.int64(a) if type(a) is int else a for a in args)
    with warnings.catch_warnings():  # small batches are legal; numba warns about them
        warnings.filterwarnings("ignore", message=".*under-utilization")
        fn[blocks, threads, _numba_stream(), shared_mem](*full)
