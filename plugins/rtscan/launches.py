"""The launches of a batch's plan (:mod:`.plan`): the rank items of either layout
(:mod:`.ranks`), and for a small call of the compact layout on the GPU the whole plan in one
launch. The GPU's cooperative bodies (:mod:`.plan_cuda`) load on the first GPU launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from indexzoo.native.targets import GroupKernel

from .plan import query_plan_item
from .ranks import RANK_GROUP, rank_item, sorted_rank_item

__all__ = ["QUERY_PLAN", "RANKS", "SORTED_RANKS", "query_plan_group_size", "rank_launch"]


def _cuda() -> Any:
    from . import plan_cuda

    return plan_cuda


#: The rank intervals of a batch's predicates and the sieve's choice on each side: ``2 d Q``
#: items (:func:`.ranks.rank_item`).
RANKS = GroupKernel(rank_item, name="rtscan_ranks")
#: The same in the compact layout (:func:`.ranks.sorted_rank_item`; a warp an item on the
#: GPU).
SORTED_RANKS = GroupKernel(sorted_rank_item, lambda: _cuda().sorted_rank_group,
                           name="rtscan_sorted_ranks")
#: A query's whole plan in the compact layout, ``Q`` items (:func:`.plan.query_plan_item`): on
#: the GPU a block of ``2 d`` warps a query, its ranks and then its plan, so a small call makes
#: one launch for both (each launch costs the host about 5 us, as much as the ranks take the
#: device). Launch it with ``group`` and ``threads_per_block`` both
#: :func:`query_plan_group_size`.
QUERY_PLAN = GroupKernel(query_plan_item, lambda: _cuda().query_plan_group,
                         name="rtscan_query_plan")


def query_plan_group_size(d: int) -> int:
    """Threads of :data:`QUERY_PLAN`'s block for ``d`` columns (a warp a predicate side), or 0
    where a block cannot hold them (over 16 columns)."""
    threads = 2 * d * RANK_GROUP
    return threads if RANK_GROUP > 1 and threads <= 1024 else 0


def rank_launch(tables: Any, lc: Any,
                sieve_args: tuple[Any, ...]) -> tuple[GroupKernel, tuple[Any, ...], int]:
    """The kernel that encodes a batch's bounds over ``tables`` and chooses the sieve's
    borders, its arguments between ``lo, hi`` and ``rk`` (the tables', then ``sieve_args``:
    the sieve's arrays, ``bins``, ``sieving`` and the selection code), and its threads an
    item on the GPU: :data:`RANKS` over the mapping tables (the paper's layout), or
    :data:`SORTED_RANKS` over the sorted samples, the keys ``lc`` and the orders."""
    if hasattr(tables, "sample"):
        return SORTED_RANKS, (tables.sample, tables.sample_offsets, lc, tables.order,
                              np.int64(tables.stride), *sieve_args), RANK_GROUP
    return RANKS, (tables.values, tables.flat_starts, tables.offsets, *sieve_args), 1
