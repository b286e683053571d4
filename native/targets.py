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
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_THREADS_PER_BLOCK", "Kernel"]

DEFAULT_THREADS_PER_BLOCK = 256
_FEW_BLOCKS = 128  # numba-cuda warns about low occupancy below this many blocks

_CPU_TEMPLATE = """
def {name}(n, {args}):
    for i in prange(n):
        body(i, {args})
"""

_CUDA_TEMPLATE = """
def {name}(n, {args}):
    i = cuda.grid(1)
    if i < n:
        body(i, {args})
"""


def _body_function(body: Any) -> Callable[..., Any]:
    """The Python function behind a register_jitable body."""
    return getattr(body, "py_func", body)


class Kernel:
    """``body(i, *args)`` for every ``i`` in ``range(n)``, on the CPU or the GPU."""

    def __init__(self, body: Callable[..., Any], name: str | None = None):
        fn = _body_function(body)
        params = list(inspect.signature(fn).parameters)
        if not params:
            raise TypeError(f"kernel body {fn.__name__} must take the item index first")
        self.body = body
        self.name = name or fn.__name__.removesuffix("_item")
        self.arg_names = params[1:]
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Kernel({self.name}({', '.join(self.arg_names)}))"

    def _make(self, device: str) -> Any:
        args = ", ".join(self.arg_names)
        if device == "cpu":
            from numba import njit, prange

            namespace: dict[str, Any] = {"prange": prange, "body": self.body}
            exec(_CPU_TEMPLATE.format(name=self.name, args=args), namespace)
            return njit(parallel=True, nogil=True)(namespace[self.name])
        from numba import cuda

        namespace = {"cuda": cuda, "body": self.body}
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

        On cuda the launch is asynchronous, on the current (default) stream.
        """
        if len(args) != len(self.arg_names):
            raise TypeError(f"{self!r} takes {len(self.arg_names)} arguments, got {len(args)}")
        if n <= 0:
            return
        fn = self._get(device)
        if device == "cpu":
            fn(n, *args)
            return
        blocks = (n + threads_per_block - 1) // threads_per_block
        if blocks >= _FEW_BLOCKS:
            fn[blocks, threads_per_block](n, *args)
            return
        with warnings.catch_warnings():  # small batches are legal; numba warns about them
            warnings.filterwarnings("ignore", message=".*under-utilization")
            fn[blocks, threads_per_block](n, *args)
