"""Parameters of ``cgrx`` (digest 001 §2.2) and its presets: ``cgrx-5x4`` (32-key buckets,
16-thread scan groups) and ``cgrx-8x4`` (256-key buckets, 16 threads), the thesis's two
configurations (Table 5.4)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from indexzoo.native.rt.params import SceneParams

__all__ = ["PRESETS", "CgrxParams"]


class CgrxParams(SceneParams):
    """Bucket size, scan group and the scene's BVH options."""

    bucket_log: int = Field(
        default=5, ge=0, le=10,
        description="log2 of the keys per bucket: one triangle stands for 2^bucket_log sorted "
                    "keys (cgRX5x4: 5, cgRX8x4: 8).")
    scan_group_log: int = Field(
        default=4, ge=0, le=5,
        description="log2 of the GPU threads that scan one lookup's run together (the "
                    "collaborative scan; 0: one thread). The CPU scans with one.")
    leaf_size: int = Field(
        default=8, ge=1, le=32,
        description="Triangles per BVH leaf of the software ray tracer (OptiX's BVH is opaque). "
                    "Smaller leaves cull the search's axis-aligned rays better and cost BVH "
                    "nodes: on an H100 at 2^26 keys, 32-key buckets run 786 M lookups/s at 8 "
                    "(1.08x sorted-array's memory) and 1246 at 1 (1.23x); cgrx-8x4 takes 1.")
    geometry: Literal["generated", "stored"] = Field(
        default="generated",
        description="generated: the engine makes each triangle from a 12-byte record during "
                    "traversal; stored: the scene keeps its vertices (36 bytes a triangle), as "
                    "OptiX's GAS does. Same triangles, same answers.")
    sort_probes: bool = Field(
        default=True,
        description="Sort each batch before tracing, answers back in the caller's order (the "
                    "thesis's comparison sorts cgRX's probes).")


#: The thesis's named configurations.
PRESETS: dict[str, dict[str, int]] = {
    "cgrx-5x4": dict(bucket_log=5, scan_group_log=4),
    # [AMBIG] leaf size is not a thesis dimension: 256-key buckets have few enough triangles
    # that one per leaf keeps the scene at 1.05x sorted-array's memory (H100, 2^26 keys:
    # 1331 M lookups/s against 845 at 8 per leaf)
    "cgrx-8x4": dict(bucket_log=8, scan_group_log=4, leaf_size=1),
}
