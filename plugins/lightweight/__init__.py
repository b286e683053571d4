"""Plugin family ``lightweight``: the five schemes of "Is Binary Search Really All You Need?"
as presets (``ao-bs``, ``eo-bs``, ``ao-pb-bs``, ``eo-ks``, ``ao-pb-ks``) and ``lightweight``
with every option; :func:`recommend` is the paper's decision tree.

Paper -> code:

* §3.1-3.5, the layouts: ascending order is the sorted array itself, K-ary Eytzinger order in
  :mod:`.eytzinger`, the pivot buffer in :mod:`.pivots`; a build's shape from its options in
  :mod:`.layout`;
* §3.1-3.4, the searches (binary, K-ary) one thread at a time, and the records handed to the
  kernels: :mod:`.search`; the operations both devices run: :mod:`.kernels`;
* §3.4 and §4, the cooperative K-ary search and the driver's optimisations (scheduling, lookup
  registers, pinning, reordering): :mod:`.kernels_cuda`; what it reads off the GPU:
  :mod:`.hardware`;
* the options and the five schemes' presets: :mod:`.params`; the index: :mod:`.index`;
* §6.1, the decision tree: :mod:`.recommend`; the saved form: :mod:`.saved`.
"""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import Suggestion, SuggestQuestion, hookimpl

from .index import PRESETS, LightweightIndex
from .recommend import Tree, recommend

__all__ = ["PRESETS", "LightweightIndex", "recommend"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(LightweightIndex)
    for cls in PRESETS.values():
        register(cls)


@hookimpl
def indexzoo_suggest_indexes(question: SuggestQuestion) -> Suggestion:
    """The decision trees' picks for ``indexzoo recommend``: the paper's tree and the measured
    one for the user's key count, and the paper's pick for data that fits the L2 ("in-cache")."""
    q = question
    trees: tuple[tuple[str, int, Tree], ...] = (("paper", q.n_keys, "paper"),
                                                ("measured", q.n_keys, "measured"),
                                                ("in-cache", 1, "paper"))
    picks = tuple((label, recommend(n, q.key_bytes, q.kind, q.device, ordered=q.ordered,
                                    tree=tree)) for label, n, tree in trees)
    return Suggestion(frozenset([LightweightIndex.name, *PRESETS]), picks,
                      "lightweight decision tree")
