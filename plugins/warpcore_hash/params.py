"""The tunables of ``warpcore-hash`` (group size, load factor, slot layout)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from indexzoo.native.targets import KernelParams

__all__ = ["WarpcoreHashParams"]


class WarpcoreHashParams(KernelParams):
    """Parameters of ``warpcore-hash``."""

    group_size: Literal[1, 2, 4, 8, 16, 32] = Field(
        default=4, description="Threads probing one key together (slots per window). 4 (the "
                               "default) issues fewer instructions per lookup, which is faster "
                               "where most lookups end in their first window; 8 is both "
                               "papers' setting."
    )
    load_factor: float = Field(
        default=0.8, ge=0.05, le=0.95,
        description="Target share of occupied slots: the table has keys / load_factor slots "
                    "(pairs in the first build pass, distinct keys after a move).",
    )
    layout: Literal["soa", "aos"] = Field(
        default="aos",
        description="aos (the default, WarpCore's): (key, value) pairs in one array, so a hit "
                    "reads and an insert writes one sector, which is faster for lookups and "
                    "builds; soa: keys and value words in two arrays, less memory for uint64 "
                    "keys with uint32 value words.",
    )
