"""``indexzoo.native.targets.Kernel``: a per-item body runs once per item on the CPU, whatever
the body is called."""

from __future__ import annotations

import numpy as np
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
