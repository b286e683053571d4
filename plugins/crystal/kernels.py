"""``crystal``'s CPU kernel and the compaction of a query's filled slots (both devices); its
GPU kernels are generated per query (:mod:`.codegen`).

Result layout, shared by the kernels and the host: ``res`` holds ``rows`` rows of ``n_slots``
int64 words, row-major. Row 0 holds each slot's COUNT; ``row_of[3 * e + k]`` is the row of
expression ``e``'s SUM (k = 0), MIN (1) or MAX (2), -1 where the query does not ask for it. The
SUM rows come first, so rows ``0 .. n_add - 1`` are the ones a row adds into, and the MIN and
MAX rows follow. After the query's kernel, :func:`compact_kernel` packs the slots whose COUNT
is not zero, so the host copies back only the slots the query filled, never the whole array.
It looks at the slots the CPU kernel lists as it fills them (a slot's first add appends it),
or at every slot after a GPU kernel, which lists none: there the list would make every
qualifying row wait for its COUNT's old value (see :mod:`.codegen`), and one look at each
slot's COUNT costs less. On the CPU the atomics' old values come at no cost, and a look at each
of many slots would not (1.75 M slots, SSB Q4.3: 4.9 ms on two cores).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.groupagg import atomics, expr_value, passes
from indexzoo.native.targets import BlockKernel, Kernel, shared_memory_per_sm, sm_count

__all__ = ["blocks_for", "compact_kernel", "fold_kernel", "item_kernel"]


@functools.cache
def item_kernel(device: str) -> Kernel:
    """``(n_rows, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts, row_of,
    n_slots, res, listed, n_listed)``, one item per row; the query's constants are arrays
    (one compiled kernel serves every query)."""
    add, amin, amax, _ = atomics(device)

    @register_jitable
    def crystal_item(i, fcols, starts, lo, hi, gcols, gmin, gstride, vcols, terms, tstarts,
                     row_of, n_slots, res, listed, n_listed):
        if not passes(i, fcols, starts, lo, hi):
            return
        g = np.int64(0)
        for j in range(len(gcols)):
            g += (np.int64(gcols[j][i]) - gmin[j]) * gstride[j]
        for e in range(len(tstarts) - 1):
            v = expr_value(i, vcols, terms, tstarts[e], tstarts[e + 1])
            r = row_of[3 * e]
            if r >= 0:
                add(res, r * n_slots + g, v)
            r = row_of[3 * e + 1]
            if r >= 0:
                amin(res, r * n_slots + g, v)
            r = row_of[3 * e + 2]
            if r >= 0:
                amax(res, r * n_slots + g, v)
        if add(res, g, np.int64(1)) == 0:
            listed[add(n_listed, 0, np.int64(1))] = g

    return Kernel(crystal_item, name="crystal_query")


@functools.cache
def compact_kernel(device: str) -> Kernel:
    """``(n, res, rows, n_slots, listed, packed)``, one item per slot of ``listed`` (``n`` of
    them), or per slot of ``res`` where ``listed`` is empty (``n = n_slots``): each slot whose
    COUNT is not zero is packed as ``(slot, row 0, .., row rows-1)`` after ``packed[0]``, which
    must start at zero and ends as their number (the records in no particular order)."""
    add = atomics(device)[0]

    @register_jitable
    def compact_item(k, res, rows, n_slots, listed, packed):
        s = listed[k] if len(listed) else k
        c = res[s]
        if c != 0:
            at = 1 + add(packed, 0, np.int64(1)) * (rows + 1)
            packed[at] = s
            packed[at + 1] = c
            for r in range(1, rows):
                packed[at + 1 + r] = res[r * n_slots + s]

    return Kernel(compact_item, name="crystal_compact")


@functools.cache
def fold_kernel(device: str) -> Kernel:
    """``(n, buf, n_slots, copies, copy_at, kinds)``, one item per word of copy 0 of the result
    (``n`` = its rows x ``n_slots``): the other ``copies - 1`` copies, from word ``copy_at``
    on, folded into it by each row's kind (``kinds``: 0 COUNT or SUM adds, 1 MIN, 2 MAX)."""

    @register_jitable
    def fold_item(k, buf, n_slots, copies, copy_at, kinds):
        kind = kinds[k // n_slots]
        words = len(kinds) * n_slots
        v = buf[k]
        for c in range(1, copies):
            w = buf[copy_at + (c - 1) * words + k]
            if kind == 0:
                v += w
            elif kind == 1:
                v = min(v, w)
            else:
                v = max(v, w)
        buf[k] = v

    return Kernel(fold_item, name="crystal_fold")


def blocks_for(kernel: BlockKernel, threads: int, shared: int,
               rows_per_block: int) -> Callable[[int], int]:
    """``blocks(n_rows)`` for ``kernel``, a grid-stride kernel: as many blocks as the GPU holds
    at once, none idle for lack of rows (a block takes ``rows_per_block`` rows a tile).

    The blocks held at once come from the driver's occupancy calculator once the kernel is
    compiled or loaded from the kernel cache (:meth:`~.targets.BlockKernel.resident_blocks`),
    so a kernel's registers count: a grid larger than what is resident runs in
    waves, the last one partly empty. (SSB Q3.1's kernel takes 48 registers a thread on an
    H100, so 5 blocks of 256 a multiprocessor fit: 8 made a second wave of 3.) Before then,
    by threads and by ``shared`` bytes of shared memory alone."""
    held: list[int] = []  # the compiled kernel's count, once known

    def blocks(n: int) -> int:
        if not held and (got := kernel.resident_blocks(threads, shared)) is not None:
            held.append(got)
        if held:
            most = held[0]
        else:
            per_sm, reserved = shared_memory_per_sm()
            most = sm_count() * max(1, min(2048 // threads, per_sm // (shared + reserved)))
        return max(1, min(most, -(-n // rows_per_block)))

    return blocks
