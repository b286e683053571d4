"""One kernel source for both devices.

The per-item logic of a kernel is written once, as a plain Python function decorated with
:func:`numba.extending.register_jitable`, whose first argument is the item index::

    @register_jitable
    def count_item(i, keys, lo, hi, out):
        ...

:class:`Kernel` wraps such a body into a loop over ``range(n)``: on ``cpu`` a numba
``njit(parallel=True)`` function with ``prange``, on ``cuda`` a ``numba.cuda.jit`` kernel with
one thread per item. Both are generated from the body's signature and compiled lazily, once
per argument types (numba caches the specialisations). The same body therefore runs on both
devices, and the CPU result is the reference for the GPU one.

Helpers the bodies call (``lower_bound`` and friends) are ``register_jitable`` functions too,
which numba and numba-cuda both accept inside jitted code.

Threads: CPU kernels release the GIL, so lookups from several Python threads run in parallel
when numba's threading layer is thread-safe (TBB or OpenMP, which numba picks first when they
are installed). Its fallback, the ``workqueue`` layer, aborts the whole process when two threads
enter parallel code at once; under it every CPU kernel call takes :data:`WORKQUEUE_LOCK`, so
concurrent calls run one at a time instead (``pip install tbb`` lifts that).

GPU launches (:mod:`.cudalaunch`): numba-cuda compiles each kernel once per argument types; the
launch itself then goes through the CUDA driver (the PTX numba produced, loaded as a CuPy module), on CuPy's
current stream. The arguments are flattened the way numba's kernel ABI expects and packed into
one parameter buffer for ``cuLaunchKernel`` by code generated per argument types, which costs
the host much less than numba-cuda's own launch and matters for small batches. Anything the
fast path cannot handle falls back to numba's own launch; set ``INDEXZOO_NUMBA_LAUNCH=1`` to
always use numba's.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import struct
import threading
import typing
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import Field

from indexzoo.config import IndexParams
from indexzoo.envvars import CPU_SERIAL_BELOW
from indexzoo.native import jitcache

from .cudalaunch import (
    SHARED_DEFAULT,
    CupyLaunch,
    cupy_module,
    fast_launcher,
    launch_cuda,
    leaf_offsets,
    param_buffer,
)

__all__ = ["DEFAULT_THREADS_PER_BLOCK", "WORKQUEUE_LOCK", "BlockKernel", "BoundLaunch",
           "GroupKernel", "Kernel", "KernelParams", "Slot", "call_parallel", "launch_cuda",
           "njit_cached", "one_per_item", "resident_threads", "sm_count", "values_arg"]

DEFAULT_THREADS_PER_BLOCK = 256

class KernelParams(IndexParams):
    """Parameters of an index whose lookups run :class:`Kernel` launches."""

    threads_per_block: int = Field(
        default=DEFAULT_THREADS_PER_BLOCK, ge=32, le=1024, multiple_of=32,
        description="CUDA threads per block of the lookup kernels (ignored on the CPU).",
    )


#: Taken by every parallel CPU call while numba runs on its workqueue threading layer, which
#: is not thread-safe (see the module docstring).
WORKQUEUE_LOCK = threading.Lock()
_layer: list[str] = []  # numba's threading layer, once a parallel function has run


def call_parallel(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` for an ``njit(parallel=True)`` function, safe from any number of threads:
    serialised under numba's workqueue layer, concurrent under TBB or OpenMP."""
    if _layer and _layer[0] != "workqueue":
        return fn(*args)
    with WORKQUEUE_LOCK:
        result = fn(*args)
        if not _layer:
            import numba

            with contextlib.suppress(ValueError):  # no parallel region ran yet (zero items)
                _layer.append(numba.threading_layer())
        return result


def njit_cached(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options, cache=True)`` where numba can keep its on-disk cache, else
    without it. numba caches next to the source file, in ``NUMBA_CACHE_DIR`` or in the home
    cache; on a read-only install with none of them writable, ``cache=True`` raises
    ``RuntimeError: cannot cache function ...: no locator available`` when the module is
    imported. Here the function then compiles in each process instead (a second or so)."""

    def decorate(fn: Callable[..., Any]) -> Any:
        from numba import njit

        dispatcher = njit(**options)(fn)
        try:
            dispatcher.enable_caching()  # what cache=True does, at decoration time
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise  # e.g. a malformed NUMBA_CACHE_LOCATOR_CLASSES: numba's own message
        return dispatcher

    return decorate


_CPU_TEMPLATE = """
def {name}(n_items__, {args}):
    for i in {loop}(n_items__):
        body__(i, {args})
"""

#: CPU calls with fewer items than this run serially: waking numba's thread pool costs tens
#: of microseconds on an idle machine and milliseconds on a loaded one, more than a few
#: thousand cheap items take on one core. Kernels with costly items lower it.
SERIAL_BELOW = CPU_SERIAL_BELOW.value()

_CUDA_TEMPLATE = """
def {name}(n_items__, {args}):
    i = cuda.grid(1)
    if i < n_items__:
        body__(i, {args})
"""


def _body_function(body: Any) -> Callable[..., Any]:
    """The Python function behind a register_jitable body."""
    return getattr(body, "py_func", body)


class Kernel:
    """``body(i, *args)`` for every ``i`` in ``range(n)``, on the CPU or the GPU."""

    def __init__(self, body: Callable[..., Any], name: str | None = None,
                 serial_below: int | None = None):
        fn = _body_function(body)
        params = list(inspect.signature(fn).parameters)
        if not params:
            raise TypeError(f"kernel body {fn.__name__} must take the item index first")
        self.body = body
        self.name = name or fn.__name__.removesuffix("_item")
        self.arg_names = params[1:]
        self.serial_below = SERIAL_BELOW if serial_below is None else serial_below
        self._compiled: dict[str, Any] = {}
        self._fast: dict[tuple[Any, ...], CupyLaunch | None] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Kernel({self.name}({', '.join(self.arg_names)}))"

    def _make(self, device: str) -> Any:
        args = ", ".join(self.arg_names)
        if device in ("cpu", "cpu-serial"):
            from numba import njit, prange

            # (named as this module's: numba records the module of a function's globals, and
            # the kernel cache rebuilds a loaded kernel's environment from that name)
            namespace: dict[str, Any] = {"prange": prange, "body__": self.body,
                                         "__name__": __name__}
            serial = device == "cpu-serial"
            exec(_CPU_TEMPLATE.format(name=self.name, args=args,
                                      loop="range" if serial else "prange"), namespace)
            # Without numba's reference counting (NRT): bodies read and write the arrays they
            # are given and allocate nothing, and every call of a helper that takes arrays or
            # records of arrays would otherwise pay atomic increments and decrements, which cost
            # far more than a binary search step (measured on the lightweight family's CPU
            # twins: docs/plugins/lightweight.md).
            return jitcache.attach(
                njit(parallel=not serial, nogil=True, _nrt=False)(namespace[self.name]))
        from numba import cuda

        namespace = {"cuda": cuda, "body__": self.body}
        exec(_CUDA_TEMPLATE.format(name=self.name, args=args), namespace)
        return cuda.jit(namespace[self.name])

    def _get(self, device: str) -> Any:
        fn = self._compiled.get(device)
        if fn is None:
            with self._lock:
                fn = self._compiled.get(device)
                if fn is None:
                    fn = self._compiled[device] = self._make(device)
        return fn

    def __call__(self, device: str, n: int, *args: Any,
                 threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> None:
        """Run ``body(i, *args)`` for ``i < n`` on ``device`` ("cpu" or "cuda").

        On cuda the launch is asynchronous, on CuPy's current stream.
        """
        if len(args) != len(self.arg_names):
            raise TypeError(f"{self!r} takes {len(self.arg_names)} arguments, got {len(args)}")
        if n <= 0:
            return
        if device == "cpu":
            if n < self.serial_below:
                self._get("cpu-serial")(n, *args)
            else:
                call_parallel(self._get("cpu"), n, *args)
            return
        fn = self._get(device)
        blocks = (n + threads_per_block - 1) // threads_per_block
        launch_cuda(self, fn, blocks, threads_per_block, (n, *args))

    def bind(self, device: str, *args: Any,
             threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> Callable[..., None]:
        """This kernel with ``args`` bound, :class:`Slot` places left open: a function
        ``launch(n, *open)`` for a call that repeats with the same fixed arguments (an index's
        arrays) and fresh lookups and outputs, at the host cost of the open arguments alone
        (see :class:`BoundLaunch`). It keeps the fixed arrays alive; they must stay in place
        (unchanged in shape) as long as it is used."""
        if len(args) != len(self.arg_names):
            raise TypeError(f"{self!r} takes {len(self.arg_names)} arguments, got {len(args)}")
        return BoundLaunch(self, device, args, threads_per_block).call


@functools.cache
def sm_count() -> int:
    """The current GPU's multiprocessors (4 where CuPy cannot say, as under numba's CUDA
    simulator)."""
    try:
        import cupy

        return int(cupy.cuda.Device().attributes["MultiProcessorCount"])
    except Exception:  # no CuPy or no device
        return 4


@functools.cache
def shared_memory_per_sm() -> tuple[int, int]:
    """(bytes of shared memory a multiprocessor of the current GPU holds, bytes the system
    reserves of it per block); an H100's (228 KiB, 1 KiB) where CuPy cannot say."""
    try:
        import cupy

        attrs = cupy.cuda.Device().attributes
        return (int(attrs.get("MaxSharedMemoryPerMultiprocessor", 228 * 1024)),
                int(attrs.get("ReservedSharedMemoryPerBlock", 1024)))
    except Exception:  # no CuPy or no device
        return 228 * 1024, 1024


#: Dynamic shared memory a kernel takes without opting in to more.
SHARED_WITHOUT_OPT_IN = 48 * 1024


def resident_threads() -> int:
    """Threads the current GPU holds at once (2048 a multiprocessor): the grid of a kernel that
    strides over a count it reads on the device."""
    return 2048 * sm_count()


def one_per_item(launch: Callable[..., None], xp: Any, dtype: Any,
                 as_range: bool = False) -> Callable[[Any], Any]:
    """A prepared lookup over a bound launch whose open arguments are the lookups and an
    answer of one ``dtype`` element per lookup: ``q -> answer`` (allocated, then launched).
    ``as_range``: the launch takes ranges, and a point ``q`` is the range ``[q, q]`` (its two
    open bounds get the same array)."""
    empty = xp.empty

    def answer(q: Any) -> Any:
        res = empty(q.shape[0], dtype)
        launch(q.shape[0], q, res)
        return res

    def answer_range(q: Any) -> Any:
        res = empty(q.shape[0], dtype)
        launch(q.shape[0], q, q, res)
        return res

    return answer_range if as_range else answer


class Slot(typing.NamedTuple):
    """A launch argument that :meth:`Kernel.bind` leaves open: a C-contiguous array of
    ``dtype`` and ``ndim`` dimensions, given at each call of the bound launch. A slot may also
    stand for a field of a (named) tuple argument, e.g. a launch record's lookups."""

    dtype: np.dtype
    ndim: int = 1


def _slot_paths(args: tuple[Any, ...], path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The paths of the :class:`Slot` places in ``args``, inside (named) tuples too, in the
    order of the flattened arguments."""
    found: list[tuple[int, ...]] = []
    for j, a in enumerate(args):
        if isinstance(a, Slot):
            found.append((*path, j))
        elif isinstance(a, tuple):
            found += _slot_paths(a, (*path, j))
    return found


def _filled(args: tuple[Any, ...], given: dict[tuple[int, ...], Any],
            path: tuple[int, ...] = ()) -> tuple[Any, ...]:
    """``args`` with the value at each path of ``given`` put in its place (a named tuple keeps
    its class)."""
    items = []
    for j, a in enumerate(args):
        here = (*path, j)
        if here in given:
            items.append(given[here])
        elif isinstance(a, tuple) and not isinstance(a, Slot) and any(
                k[:len(here)] == here for k in given):
            inner = _filled(a, given, here)
            items.append(type(a)(*inner) if hasattr(a, "_fields") else inner)
        else:
            items.append(a)
    return tuple(items)


def _slot_at(args: tuple[Any, ...], path: tuple[int, ...]) -> Slot:
    got: Any = args
    for j in path:
        got = got[j]
    return typing.cast(Slot, got)


class BoundLaunch:
    """A kernel with its fixed arguments bound (see :meth:`Kernel.bind`): its ``call(n,
    *open)`` runs ``n`` items with the open arguments (the :class:`Slot` places, in order)
    filled in.

    On the GPU the fixed arguments are flattened into the parameter buffer once per thread, so
    a call writes only the item count and the open arrays' pointers, shapes and strides, and
    launches: no argument-type key, no walk over the bound arrays. An open array whose dtype,
    dimensions or contiguity differ from its slot's takes the kernel's ordinary call, which
    compiles or picks the matching specialisation; so does every call on the CPU.
    """

    def __init__(self, kernel: Kernel | BlockKernel, device: str, args: tuple[Any, ...],
                 threads_per_block: int, items: Callable[[int], int] | None = None, *,
                 blocks: Callable[[int], int] | None = None, shared_mem: int = 0):
        self.kernel = kernel
        self.device = device
        self.args = args
        self.threads_per_block = threads_per_block
        self.items = items
        # a BlockKernel's grid (blocks for n items) and dynamic shared memory: its first
        # argument is then n itself
        self.blocks = blocks
        self.shared_mem = shared_mem
        self.open = tuple(_slot_paths(args))
        self.call: Callable[..., None] = self._ordinary
        if device == "cuda":
            fast = self._packed()
            if fast is not None:
                self.call = fast

    def _ordinary(self, n: int, *opened: Any) -> None:
        """The kernel's ordinary call with the open arguments put in their places."""
        if len(opened) != len(self.open):
            raise TypeError(f"{self.kernel!r} bound with {len(self.open)} open arguments, got "
                            f"{len(opened)}")
        full = _filled(self.args, dict(zip(self.open, opened, strict=True)))
        if isinstance(self.kernel, BlockKernel):
            if n > 0 and self.blocks is not None:
                self.kernel(self.blocks(n), self.threads_per_block, n, *full,
                            shared_mem=self.shared_mem)
            return
        self.kernel(self.device, n if self.items is None else self.items(n), *full,
                    threads_per_block=self.threads_per_block)

    def _packed(self) -> Callable[..., None] | None:
        """The GPU call that writes only the open arguments into a prepared parameter buffer
        (None where the CuPy launch cannot take these arguments)."""
        cupy = cupy_module()
        if cupy is None:
            return None
        slots = {path: _slot_at(self.args, path) for path in self.open}
        stand_ins = _filled(self.args, {path: cupy.empty((1,) * slot.ndim, dtype=slot.dtype)
                                        for path, slot in slots.items()})
        kernel = self.kernel
        fast = fast_launcher(kernel, kernel._get("cuda"), (0, *stand_ins))
        if fast is None:
            return None
        if self.shared_mem > SHARED_DEFAULT:  # the opt-in CupyLaunch makes per call
            fast.opt_in(self.shared_mem)
        offsets = leaf_offsets(fast._plan)
        template = fast._packer.pack(*fast._extract(np.int64(0), *stand_ins))
        local = threading.local()

        def buffer() -> Any:
            return param_buffer(local, template, len(template), fast._device)

        # one generated function per bound launch: check each open array against its slot,
        # write the count and the open arrays' fields (after numba's meminfo and parent
        # words, which stay zero), launch
        env: dict[str, Any] = {
            "local": local, "buffer": buffer, "ordinary": self._ordinary,
            "stream": cupy.cuda.get_current_stream, "launch_kernel": cupy.cuda.driver.launchKernel,
            "fptr": fast._function_ptr, "tpb": self.threads_per_block,
            "pack_n": struct.Struct("@q").pack_into, "blocks_of": self.blocks,
            "shm": self.shared_mem}
        names = [f"s{j}" for j in range(len(self.open))]
        contiguous = ("_c_contiguous" if all(hasattr(a, "_c_contiguous") for a in stand_ins
                                             if isinstance(a, cupy.ndarray))
                      else "flags.c_contiguous")
        checks, packs = [], ["pack_n(buf, 0, items)"]
        for j, path in enumerate(self.open):
            slot = slots[path]
            env[f"dt{j}"] = np.dtype(slot.dtype)
            env[f"pk{j}"] = struct.Struct("@qqQ" + "q" * (2 * slot.ndim)).pack_into
            a = names[j]
            checks.append(f"{a}.dtype is not dt{j} or {a}.ndim != {slot.ndim} "
                          f"or not {a}.{contiguous}")
            fields = [f"{a}.size", f"{a}.itemsize", f"{a}.data.ptr"]
            fields += [f"{a}.shape[{d}]" for d in range(slot.ndim)]
            fields += [f"{a}.strides[{d}]" for d in range(slot.ndim)]
            # (the kernel's arguments are n, then the bound ones: a path's first index is
            # one more in the buffer)
            key = (path[0] + 1, *path[1:])
            at = offsets[key] + 16
            packs.append(f"pk{j}(buf, {at}, {', '.join(fields)})")
        items = "n" if self.items is None else "items_of(n)"
        env["items_of"] = self.items
        args = ", ".join(["n", *names])
        src = [f"def bound_launch({args}):"]
        if checks:
            src += [f"    if {' or '.join(f'({c})' for c in checks)}:",
                    f"        return ordinary({args})"]
        src += [f"    items = {items}",
                "    if items <= 0:",
                "        return",
                "    try:",
                "        buf = local.buf",
                "    except AttributeError:",
                "        buf = buffer()",
                *[f"    {p}" for p in packs],
                "    launch_kernel(fptr, " + ("blocks_of(items)" if self.blocks else
                                               "(items + tpb - 1) // tpb")
                + ", 1, 1, tpb, 1, 1, shm, stream().ptr,",
                "                  0, local.extra_ptr)"]
        exec("\n".join(src) + "\n", env)
        return typing.cast("Callable[..., None]", env["bound_launch"])


class GroupKernel:
    """One operation run by groups of G threads per item on the GPU, and by one thread per item
    on the CPU: cuCollections' cooperative-group pattern, where the scalar path is a group of
    one.

    ``scalar``: a body ``scalar(i, *args)`` that serves item ``i`` alone (both devices: the CPU
    always runs it, the GPU with ``group=1``). ``cooperative``: a callable returning the GPU
    body ``coop(t, *args)`` run by thread ``t`` for item ``t // G`` (loaded on first GPU use, so
    CPU-only programs never import ``numba.cuda``); it must give the scalar body's results.
    Both take the same arguments, so an index calls one operation the same way on every
    device::

        FIND = GroupKernel(find_item, lambda: _cuda().find_group_item)
        FIND(index.device, n_lookups, *args, group=params.group_size, threads_per_block=256)
    """

    def __init__(self, scalar: Callable[..., Any],
                 cooperative: Callable[[], Callable[..., Any]] | None = None,
                 name: str | None = None,
                 threads: Callable[[int, int], int] | None = None):
        self.scalar = Kernel(scalar, name)
        self._threads = threads or (lambda n, group: n * group)
        self.name = self.scalar.name
        self._load_cooperative = cooperative
        self._cooperative: Kernel | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GroupKernel({self.name})"

    def cooperative(self) -> Kernel:
        """The cooperative GPU kernel (TypeError if the operation has none)."""
        if self._cooperative is None:
            if self._load_cooperative is None:
                raise TypeError(f"{self!r} has no cooperative form; call it with group=1")
            with self._lock:
                if self._cooperative is None:
                    self._cooperative = Kernel(self._load_cooperative(), f"{self.name}_group")
        return self._cooperative

    def __call__(self, device: str, n: int, *args: Any, group: int = 1,
                 threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> None:
        """Serve items ``0 .. n-1`` on ``device``: one thread each on the CPU or with
        ``group=1``, else ``group`` threads each on the GPU."""
        if device == "cpu" or group == 1:
            self.scalar(device, n, *args, threads_per_block=threads_per_block)
        else:
            self.cooperative()(device, self._threads(n, group), *args,
                               threads_per_block=threads_per_block)

    def bind(self, device: str, *args: Any, group: int = 1,
             threads_per_block: int = DEFAULT_THREADS_PER_BLOCK) -> Callable[..., None]:
        """The operation with ``args`` bound (see :meth:`Kernel.bind`); a call serves ``n``
        items as :meth:`__call__` does, with ``group`` threads each on the GPU."""
        if device == "cpu" or group == 1:
            return self.scalar.bind(device, *args, threads_per_block=threads_per_block)
        coop = self.cooperative()
        if len(args) != len(coop.arg_names):
            raise TypeError(f"{coop!r} takes {len(coop.arg_names)} arguments, got {len(args)}")
        threads = self._threads
        return BoundLaunch(coop, device, args, threads_per_block,
                           items=lambda n: threads(n, group)).call


class BlockKernel:
    """A whole-block CUDA kernel (shared memory, barriers) compiled by numba-cuda from
    ``source``, a function named ``name`` defined in ``namespace``; launched like
    :class:`Kernel`'s GPU path, with a grid size and dynamic shared memory of the caller's."""

    def __init__(self, name: str, source: str, namespace: dict[str, Any]):
        self.name = name
        self._source = source
        self._namespace = namespace
        self._fn: Any = None
        self._fast: dict[tuple[Any, ...], CupyLaunch | None] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BlockKernel({self.name})"

    def _get(self, device: str = "cuda") -> Any:
        """The numba-cuda dispatcher (made on first use)."""
        if self._fn is None:
            with self._lock:
                if self._fn is None:
                    from numba import cuda

                    ns = {"cuda": cuda, **self._namespace}
                    exec(self._source, ns)
                    self._fn = cuda.jit(ns[self.name])
        return self._fn

    def __call__(self, blocks: int, threads: int, *args: Any, shared_mem: int = 0) -> None:
        launch_cuda(self, self._get(), blocks, threads, args, shared_mem)

    def resident_blocks(self, threads: int, shared_mem: int = 0) -> int | None:
        """Blocks of ``threads`` threads (and ``shared_mem`` bytes of dynamic shared memory)
        that the current GPU holds at once over all its multiprocessors, by the driver's
        occupancy calculator for the compiled kernel (its registers count); None before the
        kernel is compiled or loaded, or with several specialisations, or under the simulator.

        The kernel that runs is the one its CuPy launcher loaded (:mod:`.cudalaunch`), so
        where there is one launcher on the current device, its count is the answer: a process
        that loaded the kernel from the kernel cache has that launcher and no kernel compiled
        by numba. Otherwise numba's compiled kernel counts. Beyond :data:`SHARED_WITHOUT_OPT_IN` the
        driver counts no block at all for numba's copy of the kernel, which has not opted in
        (the launch opts in on its own copy): there the driver's count without dynamic shared
        memory is capped by what the multiprocessors' shared memory holds."""
        launchers = [f for f in self._fast.values() if f is not None]
        if launchers:
            device = cupy_module().cuda.runtime.getDevice()
            here = [f for f in launchers if f._device == device]
            if len(here) == 1:
                return here[0].resident_blocks(threads, shared_mem)
        if self._fn is None:
            return None
        overloads = getattr(self._fn, "overloads", {})
        if len(overloads) != 1:
            return None
        (compiled,) = overloads.values()
        if not hasattr(compiled, "max_cooperative_grid_blocks"):
            return None
        if shared_mem <= SHARED_WITHOUT_OPT_IN:
            return max(1, int(compiled.max_cooperative_grid_blocks(threads, shared_mem)))
        per_sm, reserved = shared_memory_per_sm()
        static = int(getattr(compiled, "shared_mem_per_block", 0) or 0)
        return max(1, min(int(compiled.max_cooperative_grid_blocks(threads, 0)),
                          sm_count() * (per_sm // (static + shared_mem + reserved))))

    def bind(self, device: str, *args: Any, threads_per_block: int,
             blocks: Callable[[int], int], shared_mem: int = 0) -> Callable[..., None]:
        """This kernel with ``args`` (every argument after the first, which is the item count
        ``n``) bound, :class:`Slot` places left open, as :meth:`Kernel.bind`: ``launch(n,
        *open)`` runs ``blocks(n)`` blocks of ``threads_per_block`` threads with
        ``shared_mem`` bytes of dynamic shared memory (nothing where ``n`` is 0)."""
        return BoundLaunch(self, device, args, threads_per_block, blocks=blocks,
                           shared_mem=shared_mem).call


_NO_VALUES: dict[str, Any] = {}


def values_arg(values: Any, xp: Any) -> tuple[Any, np.bool_]:
    """``(values, True)``, or a one-element stand-in and False when the sums are of rowIDs
    (kernels take the values array either way, so one kernel serves both)."""
    if values is not None:
        return values, np.bool_(True)
    key = xp.__name__
    if key not in _NO_VALUES:
        _NO_VALUES[key] = xp.zeros(1, dtype=np.uint64)
    return _NO_VALUES[key], np.bool_(False)
