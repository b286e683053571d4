"""The regions a group's refine must visit (paper §4.3.2, Fig. 10, in an order-independent form
[ours]).

Per column ``j`` of a group, in ranks: the predicate ``P_j = [x0, x1)``, the sieve's
approximation ``A_j = [a0, a1)`` (empty without sieving), and

* ``U_j = P_j xor A_j``: the uncertain ranks (at most two intervals);
* ``C_j = P_j and A_j``: certain (approximate result right, and 1);
* ``H_j``: the hull of ``P_j or A_j`` (the approximate and the exact results are both 0 outside
  the product of the hulls).

The approximate result of the group (the AND of the ``A_j``) differs from the exact one only
inside ``prod_j H_j`` minus ``prod_j C_j``, which the boxes

    ``U_j x prod_{k<j} C_k x prod_{k>j} H_k``,   j = 1 .. g

cover (a row there falls in the box of the first column where it is not certain); they are
disjoint, at most ``2g``, and their union is independent of whether each side was chosen
positive or negative. Every row the refine meets gets ``bit := exact predicate``, so rows met
twice, or met outside the boxes (the hull is an interval even when ``P`` and ``A`` are not
adjacent), keep the right bit. For ``x < 80, y < 90, z < 80`` with ``A = x < 70, y < 60,
z < 65`` these are the paper's R1 = [70,80)x[0,90)x[0,80), R2 = [0,70)x[60,90)x[0,80) and
R3 = [0,70)x[0,60)x[65,80).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.devices import xp_of

__all__ = ["Boxes", "refine_boxes"]


@dataclass(frozen=True)
class Boxes:
    """Refine boxes of a batch of queries, in ranks: box ``b`` of query ``query[b]`` is the
    product over the group's columns ``k`` of ``[lo[b, k], hi[b, k])``."""

    query: Any  # (B,) int64
    lo: Any     # (B, g) int64
    hi: Any     # (B, g) int64

    @property
    def n(self) -> int:
        return int(self.query.shape[0])


def refine_boxes(x0: Any, x1: Any, a0: Any, a1: Any) -> Boxes:
    """The refine boxes of queries with rank predicates ``[x0, x1)`` and approximations
    ``[a0, a1)`` (int64 (Q, g) arrays; every predicate non-empty): the host reference of the
    plan kernel's boxes (:mod:`.plan`, which gives each of the ``2 g`` a fixed slot)."""
    xp = xp_of(x0)
    q, g = int(x0.shape[0]), int(x0.shape[1])
    a_empty = a0 >= a1
    apart = a_empty | (a1 <= x0) | (x1 <= a0)  # P and A share no rank
    # U = P xor A as two intervals (u0, u1) and (v0, v1)
    u0 = xp.where(apart, x0, xp.minimum(x0, a0))
    u1 = xp.where(apart, x1, xp.maximum(x0, a0))
    v0 = xp.where(apart, xp.where(a_empty, 0, a0), xp.minimum(x1, a1))
    v1 = xp.where(apart, xp.where(a_empty, 0, a1), xp.maximum(x1, a1))
    c0 = xp.where(apart, 0, xp.maximum(x0, a0))
    c1 = xp.where(apart, 0, xp.minimum(x1, a1))
    h0 = xp.where(a_empty, x0, xp.minimum(x0, a0))
    h1 = xp.where(a_empty, x1, xp.maximum(x1, a1))
    queries = xp.arange(q, dtype=np.int64)
    qs, los, his = [], [], []
    for j in range(g):
        for s0, s1 in ((u0, u1), (v0, v1)):
            lo = xp.concatenate([c0[:, :j], s0[:, j:j + 1], h0[:, j + 1:]], axis=1)
            hi = xp.concatenate([c1[:, :j], s1[:, j:j + 1], h1[:, j + 1:]], axis=1)
            keep = xp.all(lo < hi, axis=1)
            qs.append(queries[keep])
            los.append(lo[keep])
            his.append(hi[keep])
    if not qs:
        return Boxes(xp.zeros(0, np.int64), xp.zeros((0, g), np.int64),
                     xp.zeros((0, g), np.int64))
    return Boxes(xp.concatenate(qs), xp.concatenate(los), xp.concatenate(his))
