"""K-ary Eytzinger order (EO): the closed-form layout behind EO+BS and EO+KS.

Paper: Henneberg & Schuhknecht, "Is Binary Search Really All You Need?", §3.2, §3.4 and §3.5.

Layout (0-indexed, counted in *slots*, one key per slot, ``n`` slots in all):

* node ``j`` holds slots ``j*(K-1) .. j*(K-1)+K-2`` (K-1 keys, ascending);
* its children are nodes ``j*K+1 .. j*K+K``; child ``c`` holds the keys between the node's keys
  ``c-1`` and ``c``;
* level ``d`` (top = 0) starts at slot ``K^d - 1`` and has ``K^d*(K-1)`` slots;
* levels ``0 .. H-1`` are complete (``K^H - 1`` slots, ``H`` the largest with ``K^H - 1 <= n``),
  the ``b = n - (K^H - 1)`` remaining keys fill the leaf level ``H`` from the left (the last leaf
  node may be partial).

``K = 2`` is the ordinary binary Eytzinger layout: node ``j`` = slot ``j``, children
``2j+1, 2j+2``.

The build (paper §3.5) is one out-of-place gather: one thread per output slot ``t`` computes the
sorted position :func:`eo_source` of its key, then does one load and one store (key and rowID
move together). :func:`eo_source` is also the *rank* of slot ``t`` (the number of keys before
it in sorted order), which lookups may use.

Closed form (tested against :func:`eo_reference`, an independent construction), for output
slot ``t``:

* ``t < K^H - 1`` (inner, complete levels): depth ``d`` with ``K^d-1 <= t < K^(d+1)-1``,
  ``i = t - (K^d - 1)``, ``l = H-1-d`` (the level counted *bottom-up* among the H complete
  levels), ``q = K^l * (1 + i + i // (K-1)) - 1``, source ``q + min(b, (K-1)*(q+1))``.
  ``q`` is the position the key would have if the leaf level were empty; the correction adds the
  leaf keys that precede it (``K-1`` leaf slots per leaf node left of it, at most ``b``).
* ``t >= K^H - 1`` (leaf level): ``i = t - (K^H - 1)``, source ``i + i // (K-1)``: between
  every ``K-1`` leaf keys lies one inner key.

Decisions where the paper is ambiguous [AMBIG]:

* The paper numbers levels top-down for the output offset ``K^l - 1`` but bottom-up in ``q``;
  here ``d`` is the depth (top-down) and ``l = H-1-d`` the bottom-up level, as in the closed
  form above.
* Leading empty slot: EO+BS (§3.2) keeps one empty slot in front ("better cache alignment",
  1-indexed: children of array index ``a`` at ``2a, 2a+1``); Fig. 10 shows none for K = 3.
  :data:`EO_GATHER` takes ``pad`` (0 or 1) so either is possible; with ``pad = 1`` array index
  ``a`` holds slot ``a - 1`` and the leading entry is left untouched (the caller fills it).
* Duplicates are allowed; the search-tree property is then non-strict (a key of child ``c`` is
  ``>=`` node key ``c-1`` and ``<=`` node key ``c``).

:func:`eo_reference` is an independent recursive in-order construction, for tests only.
"""

from __future__ import annotations

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.targets import Kernel

__all__ = ["EO_GATHER", "eo_gather_item", "eo_layout", "eo_reference", "eo_shape", "eo_source",
           "eo_sources"]


def eo_shape(n: int, k: int) -> tuple[int, int]:
    """``(H, b)``: ``H`` the largest integer with ``K^H - 1 <= n`` (the number of complete
    levels), ``b = n - (K^H - 1)`` (the keys of the partial leaf level). ``n = 0`` gives (0, 0)."""
    if k < 2:
        raise ValueError(f"the fan-out K must be at least 2, got {k}")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    h, full = 0, 1  # full = K^h
    while full * k - 1 <= n:
        full *= k
        h += 1
    return h, n - (full - 1)


@register_jitable
def eo_source(t, n, k, h, b):
    """The sorted position of the key in EO slot ``t`` (``0 <= t < n``), given ``(h, b) =
    eo_shape(n, k)``. Integer arithmetic only; a loop over the depth."""
    pw = 1  # K^d: the number of nodes at depth d
    d = 0
    while d < h and t >= pw * k - 1:
        pw *= k
        d += 1
    i = t - (pw - 1)  # index within the level
    if d == h:  # leaf level
        return i + i // (k - 1)
    kl = 1  # K^l with l = h-1-d
    for _ in range(h - 1 - d):
        kl *= k
    q = kl * (1 + i + i // (k - 1)) - 1
    c = (k - 1) * (q + 1)
    if c > b:
        c = b
    return q + c


@register_jitable
def eo_gather_item(t, src_keys, src_rowids, dst_keys, dst_rowids,
                   stride, pad, n, k, h, b):
    """EO slot ``t`` of the output: one load and one store of key and rowID.

    ``stride = 1``: separate key and rowID arrays (SoA). ``stride = 2``: one interleaved
    (key, rowID) table (AoS); pass ``table`` and ``table[1:]``, the rowID is cast to the key
    dtype. ``pad = 1`` leaves the leading entry (slot -1) untouched.
    """
    s = eo_source(t, n, k, h, b)
    a = (t + pad) * stride
    dst_keys[a] = src_keys[s]
    dst_rowids[a] = src_rowids[s]


#: ``EO_GATHER(device, n, src_keys, src_rowids, dst_keys, dst_rowids, stride, pad, n, k, h, b)``
#: with ``(h, b) = eo_shape(n, k)``: one item per output slot.
EO_GATHER = Kernel(eo_gather_item)


def eo_sources(n: int, k: int) -> np.ndarray:
    """The source map of the closed form: ``out[t] = eo_source(t, ...)`` (int64, length n).
    A Python loop; builds use :data:`EO_GATHER`."""
    h, b = eo_shape(n, k)
    return np.fromiter((eo_source(t, n, k, h, b) for t in range(n)), dtype=np.int64, count=n)


def eo_layout(sorted_keys: np.ndarray, k: int) -> np.ndarray:
    """``sorted_keys`` permuted into K-ary EO (no leading empty slot), via :func:`eo_source`."""
    keys = np.asarray(sorted_keys)
    return keys[eo_sources(len(keys), k)]


def eo_reference(sorted_keys: np.ndarray, k: int) -> np.ndarray:
    """The source map of a recursive in-order construction, independent of the closed form.

    The tree shape is the EO one (slots ``0 .. n-1`` exist, node ``j`` owns slots
    ``j*(K-1) ..``, children ``j*K+1 ..``); an in-order walk (child 0, key 0, child 1, key 1,
    ..., key K-2, child K-1) hands out the sorted positions 0, 1, 2, ... in turn.
    """
    if k < 2:
        raise ValueError(f"the fan-out K must be at least 2, got {k}")
    n = len(sorted_keys)
    src = np.full(n, -1, dtype=np.int64)
    next_position = 0

    def visit(node: int) -> None:
        nonlocal next_position
        first = node * (k - 1)
        if first >= n:  # the node does not exist, nor does any node below it
            return
        for c in range(k):
            visit(node * k + 1 + c)
            slot = first + c
            if c < k - 1 and slot < n:
                src[slot] = next_position
                next_position += 1

    visit(0)
    assert next_position == n
    return src
