"""Parameters of ``rx-opt``: every optimization of the thesis as a field, with its final
"optimized RTX" configuration (thesis §5.15) as the defaults, and RX's key modes, primitives and
scene options (:mod:`indexzoo.native.rt.params`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from indexzoo.native.rt import KeySceneParams

__all__ = ["PRESETS", "RxOptParams"]


class RxOptParams(KeySceneParams):
    """Every optimization of optimized RX; the defaults are the thesis's final configuration
    (sorted keys, closest hit + scan, duplicate compression, 16 sub-BVHs, sorted probes)."""

    range_method: Literal["closest_scan", "anyhit"] = Field(
        default="closest_scan",
        description="closest_scan (Alg. 3 + 4): one closest-hit ray finds the first key >= lo, "
                    "then a scan of the sorted pairs stops at the first key > hi; anyhit: RX's "
                    "any-hit program per hit, one ray per occupied row.")
    compress_duplicates: bool = Field(
        default=True,
        description="One primitive per distinct key (§4.2); lookups scan the key's run of "
                    "duplicates from its first occurrence.")
    partitions: int = Field(
        default=16, ge=1, le=256,
        description="Sub-BVHs (Alg. 5): contiguous slices of the sorted (distinct) keys, one "
                    "GAS each, built one after another, under one IAS.")
    sort_probes: bool = Field(
        default=True,
        description="Sort each point batch before tracing and put the results back in the "
                    "caller's order (§3.4); both count in the lookup time. On by default: the "
                    "thesis's final configuration sorts its probes. Ranges keep the caller's "
                    "order (sorting them cost more than it saved), and so do point batches of "
                    "at most 4096 lookups of the index's key dtype (ordering so few costs more "
                    "than it saves).")
    scan_group_log: int = Field(
        default=4, ge=0, le=5,
        description="log2 of the GPU threads that add up one lookup's run together for "
                    "out='sum' (the collaborative scan; 0: one thread). The CPU scans with one. "
                    "Groups of 16 (the default) add up long runs faster than one thread.")
    inverse_mapping: Literal["off", "on", "auto"] = Field(
        default="off",
        description="Point batches (Alg. 6): build a BVH over the batch's distinct probes and "
                    "cast one ray per distinct key instead; auto: when the batch has fewer "
                    "distinct probes than the index has distinct keys.")

    @model_validator(mode="after")
    def _consistent(self) -> RxOptParams:
        if self.range_method == "anyhit" and self.inverse_mapping == "on":
            raise ValueError("inverse_mapping='on' answers point batches with closest hits and "
                             "a scan; it does not combine with range_method='anyhit'")
        if self.engine == "optix" and self.primitive == "sphere" and self.partitions > 1:
            raise ValueError("engine='optix' cannot trace spheres in several partitions (its "
                             "sphere program reads one GAS's centres by primitive index); use "
                             "partitions=1, or engine='software'")
        return self


#: Named configurations of the thesis's ablations (Ch. 5), selected by the parameter ``preset``
#: (``indexzoo.create("rx-opt", preset="rx-like")``, ``params: {preset: rx-like}``,
#: ``--set rx-opt.preset=rx-like``); parameters given beside it win.
PRESETS: dict[str, dict[str, object]] = {
    "optimized": {},                                                   # §5.15
    "rx-like": dict(range_method="anyhit", compress_duplicates=False, partitions=1,
                    sort_probes=False),                                 # the RX baseline
    "no-compression": dict(compress_duplicates=False),                  # Figs. 5.6, 5.10
    "one-partition": dict(partitions=1),                                # Figs. 5.7-5.9
    "unsorted-probes": dict(sort_probes=False),                         # Figs. 5.12, 5.13
    "inverse": dict(inverse_mapping="on"),                              # Fig. 5.14
    "lean": dict(geometry="generated", leaf_size=24),
}
RxOptParams.presets = PRESETS
