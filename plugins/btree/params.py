"""The tunables of ``btree`` (node width, cooperative search, leaf fill and layout)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from indexzoo.native.targets import KernelParams

__all__ = ["BTreeParams"]


class BTreeParams(KernelParams):
    """Parameters of ``btree``."""

    node_width: Literal[8, 16, 32] = Field(
        default=16, description="Slots per node, and threads searching one node together."
    )
    cooperative: bool = Field(
        default=False,
        description="On the GPU, search each node with a group of node_width threads (the "
                    "paper's traversal). False (the default) runs one thread per lookup, a "
                    "binary search in each node reading keys only, which is faster on GPUs "
                    "where the group's node search is issue-bound; True keeps the paper's "
                    "groups.",
    )
    leaf_fill: Literal[0.5, 1.0] = Field(  # type: ignore[valid-type]  # float Literal: pydantic
        default=1.0, description="Share of each leaf's slots filled by the bulk load."
    )
    leaf_layout: Literal["split", "interleaved", "paired"] = Field(
        default="split",
        description="Where a leaf's rowIDs lie: 'split' (the default), separate key and rowID "
                    "arrays; 'interleaved', one record per leaf, its B keys then their B "
                    "rowIDs (the rowID in the line after the keys' line); 'paired', (key, "
                    "rowID) side by side (the rowID in the sector of its key, which the leaf "
                    "search has already read). Records widen keys and rowIDs to the wider "
                    "dtype, so they take more memory; choose 'paired' for faster point "
                    "lookups when memory allows.",
    )
