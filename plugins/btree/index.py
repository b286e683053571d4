"""``btree``: a bulk-loaded GPU B+-tree after Awad et al., the B+ baseline of the RX paper
(section 4.1) and of the lightweight-indexing paper (section 5.1).

Paper -> code
-------------
* "Bulk-loaded via CUB DeviceRadixSort": :func:`indexzoo.native.sort.sort_pairs`, then
  :func:`indexzoo.plugins.btree.kernels.build_btree` builds the leaves and every inner level bottom-up
  with array operations (parallel on the GPU).
* "Traverses in groups of 16 threads, using warp intrinsics for the in-node search": one lookup
  per group of ``node_width`` threads (8, 16 or 32; default 16); each lane reads one slot of
  the node, the group votes with ``ballot_sync`` and takes the first child whose largest key is
  ``>= x`` (:mod:`indexzoo.plugins.btree.kernels_cuda`).
* "Leaves are linked for range scans": ``leaf_next``; a range lookup descends to the lower bound
  of ``lo`` and scans leaves, one leaf per group step, while keys are ``<= hi`` (``sum``,
  ``rowids``).
* "Leaves filled to 50% or 100%": ``leaf_fill``. Inner nodes are packed full.
* [AMBIG] Departure from the paper's traversal, by default: ``cooperative=False`` runs one
  thread per lookup on the GPU (the scalar body: a binary search in each node, children and
  counts computed from the packed layout, so only keys are read). It measured faster, the
  groups' kernel being bound by the instructions every lane issues at every level (the
  compares, votes and shuffles), not by memory (measured: ``docs/plugins/btree.md``).
  ``cooperative=True`` keeps the paper's groups for every operation.

Beyond the paper's baseline
---------------------------
* Duplicate keys (Awad's tree has none): pivots are the largest key under each child, so the
  descent finds the first of a run of equal keys even when the run spans leaves; point lookups
  are the range ``[x, x]`` and see every copy.
* 64-bit keys (Awad's tree is 32-bit only) and the whole key domain: padding slots are ignored
  through per-node counts, so no key value is reserved.

* Opt-in: ``leaf_layout`` ``"interleaved"`` or ``"paired"`` keeps a leaf's rowIDs next to its
  keys in one record array (the rowID read after the leaf search then hits the adjacent line,
  or the sector just read), for more memory: choose ``"paired"`` when point-lookup speed
  matters more than resident bytes (measured: ``docs/plugins/btree.md``).

Decisions
---------
* [AMBIG] ``count`` descends twice (to the first key ``>= lo`` and the first ``> hi``) and
  subtracts positions instead of scanning: O(log n) for any range width. ``sum`` and ``rowids``
  scan the linked leaves as the paper does.
* Updates: none in place; a batch of changes is absorbed by building again (the build is a radix
  sort plus array operations; see the benchmarks for its cost). Batched inserts are left open.
* ``rowid`` returns the first match in key order (the smallest rowID among equal keys: the sort
  is stable), identical on the CPU twin and the GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams, Operation
from indexzoo.native.lazy import lazy_module
from indexzoo.native.sort import sort_pairs
from indexzoo.native.targets import Slot, one_per_item, values_arg
from indexzoo.persist import StateSchema, Value

from .params import BTreeParams
from .saved import tree_schema

if TYPE_CHECKING:
    from indexzoo.native import csr

    from . import kernels as btree
else:  # imported when a tree is built or loaded: the registry lists the class without them
    csr = lazy_module("indexzoo.native.csr")
    btree = lazy_module("indexzoo.plugins.btree.kernels")

__all__ = ["BTreeIndex", "BTreeState"]


class BTreeState(BuildState):
    """One build of ``btree``: the tree and the build's peak bytes."""

    tree: btree.BTree
    peak: int


class BTreeIndex(GpuIndex[BTreeState]):
    """Bulk-loaded B+-tree: one thread per lookup (or the paper's groups of 16), linked leaves."""

    name: ClassVar[str] = "btree"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-28-restructure-324db91/paper-scan/: 12.2 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 4e6, "cuda": 5.5e9}
    Params: ClassVar[type[IndexParams]] = BTreeParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: 2: the kernels moved from indexzoo.native into this plugin, and a saved file names its
    #: records (BTree) by module, so files of version 1 are built again
    state_version: ClassVar[int] = 2
    #: a point lookup q is the range [q, q]: the descent to the first key >= q serves both
    points_as_ranges: ClassVar[bool] = True
    #: the tree, its links made again from n and the params (see plugins/btree/saved.py)
    state_schema: ClassVar[StateSchema] = StateSchema(tree_schema("tree"),
                                                      Value("peak", int, at_least=0))
    params: BTreeParams

    def _build(self, st: BTreeState, keys: Any) -> None:
        pairs = sort_pairs(keys, st.rowid_dtype)
        p = self.params
        st.tree = btree.build_btree(pairs.keys, pairs.rowids, p.node_width, p.leaf_fill,
                                    p.leaf_layout)
        resident = sum(st.tree.breakdown().values())
        st.peak = max(pairs.peak_bytes, int(pairs.keys.nbytes + pairs.rowids.nbytes) + resident)

    def _footprint(self, st: BTreeState) -> Footprint:
        return Footprint(breakdown=st.tree.breakdown(), peak_build_bytes=st.peak)

    @property
    def height(self) -> int:
        """Inner levels above the leaves."""
        return self._live().tree.n_levels

    # -------------------------------------------------------------- kernels
    @property
    def _ops(self) -> btree.Operations:
        return btree.operations(self.params.leaf_layout)

    def _launch(self, name: str, q: int, *args: Any) -> None:
        """Run a tree operation (a field of :class:`~indexzoo.plugins.btree.kernels.Operations`): one
        thread per lookup on the CPU, a group of ``node_width`` threads on the GPU if
        ``cooperative``."""
        op = getattr(self._ops, name)
        op(self.device, q, *args,
           group=self.params.node_width if self.params.cooperative else 1,
           threads_per_block=self.params.threads_per_block)

    def _range_rowid(self, st: BTreeState, lo: Any, hi: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype=st.rowid_dtype)
        self._launch("FIND_ROWID", lo.shape[0], st.tree.record(), lo, hi, out, st.miss)
        return out

    def _counts(self, st: BTreeState, lo: Any, hi: Any, dtype: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype=dtype)
        self._launch("COUNT", lo.shape[0], st.tree.record(), lo, hi, out)
        return out

    def _range_count(self, st: BTreeState, lo: Any, hi: Any) -> Any:
        return self._counts(st, lo, hi, st.rowid_dtype)

    def _range_sum(self, st: BTreeState, lo: Any, hi: Any) -> Any:
        out = st.xp.empty(lo.shape[0], dtype=np.uint64)
        values, use_values = values_arg(st.values, st.xp)
        self._launch("SUM", lo.shape[0], st.tree.record(), values, use_values, lo, hi, out)
        return out

    def _range_rowids(self, st: BTreeState, lo: Any, hi: Any) -> tuple[Any, Any]:
        offsets = csr.offsets_from_counts(self._counts(st, lo, hi, np.int64))
        out = st.xp.empty(int(offsets[-1]), dtype=st.rowid_dtype)
        if out.shape[0]:
            self._launch("FILL", lo.shape[0], st.tree.record(), lo, hi, offsets, out)
        return offsets, out

    def _prepared_point(self, st: BTreeState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups (the ranges ``[q, q]``) with the tree's record bound into the
        launch: a call allocates the answer and launches (the small-batch path)."""
        if op.out != "rowid":
            return None
        p = self.params
        launch = self._ops.FIND_ROWID.bind(
            self.device, st.tree.record(), Slot(st.native_dtype), Slot(st.native_dtype),
            Slot(st.rowid_dtype), st.miss, group=p.node_width if p.cooperative else 1,
            threads_per_block=p.threads_per_block)
        return one_per_item(launch, st.xp, st.rowid_dtype, as_range=True)
