"""Atomic read-modify-write on the CPU for numba kernels: numba has no CPU atomics, and its
parallel loops race on shared elements without them. The GPU kernels use ``numba.cuda.atomic``
instead; the modules that pick per device (:mod:`indexzoo.native.groupagg`,
:mod:`indexzoo.native.rt.query`) take these on the CPU."""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["atomic_rmw"]


@functools.cache
def atomic_rmw(op: str) -> Any:
    """A jitable intrinsic ``f(array, index, value) -> old``: LLVM's ``atomicrmw <op>``
    (``add``, ``min``, ``max``, ``or``, ``and``, ...; min and max signed) on one element of an
    integer array, monotonic ordering."""
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def rmw(typingctx, arr, idx, val):
        if not (isinstance(arr, types.Array) and isinstance(arr.dtype, types.Integer)
                and isinstance(idx, types.Integer) and isinstance(val, types.Integer)):
            return None
        sig = arr.dtype(arr, idx, val)

        def codegen(context, builder, signature, args):
            aryty, idxty, valty = signature.args
            ary, i, v = args
            a = context.make_array(aryty)(context, builder, ary)
            i = context.cast(builder, i, idxty, types.intp)
            v = context.cast(builder, v, valty, aryty.dtype)
            ptr = cgutils.get_item_pointer(context, builder, aryty, a, [i], wraparound=False)
            return builder.atomic_rmw(op, ptr, v, "monotonic")

        return sig, codegen

    return rmw
