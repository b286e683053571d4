"""Parameters of ``rx``: every design dimension of the paper (§3.2-§3.6) as a field, with
the paper's selected configuration (§3, "Selected Configuration") as the defaults.

Combinations the paper rules out are :class:`~indexzoo.ConfigError`\\s, raised before any device
work: spheres in extended mode (Table 1), offset ray origins in extended mode (§3.3), a refit
of a compacted structure (§3.6: the update flag disables compaction), a custom bit split
outside 3D mode.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from indexzoo.native.targets import KernelParams

__all__ = ["PAPER_DEFAULT", "PRESETS", "RxParams"]

KeyMode = Literal["naive", "extended", "3d"]
Primitive = Literal["triangle", "sphere", "aabb"]


class RxParams(KernelParams):
    """Every configuration of RX; the defaults are the paper's (3D, triangles, compacted,
    perpendicular point rays, offset range rays, rebuild on update)."""

    key_mode: KeyMode = Field(
        default="3d",
        description="How a key becomes coordinates [§3.2, Table 1]: naive = (float(k), 0, 0), "
                    "keys < 2^23; extended = (bit_cast<float>(2k + 0x3F000000), 0, 0), keys "
                    "< 2^29, gaps by nextafter; 3d = the key's bits split into x, y, z.")
    x_bits: int = Field(
        default=23, ge=1, le=23,
        description="3D mode: low key bits that form x (at most 23: x +- 0.5 must be exact in "
                    "float32) [§3.4].")
    y_bits: int = Field(
        default=23, ge=0, le=63,
        description="3D mode: the next key bits, forming y [§3.4]. More than 23 is allowed, but "
                    "then only keys whose y part is below 2^23 can be indexed.")
    z_bits: int = Field(
        default=18, ge=0, le=63,
        description="3D mode: the remaining high bits, forming z (x_bits + y_bits + z_bits = "
                    "64) [§3.4]. More than 23: only keys whose z part is below 2^23.")
    primitive: Primitive = Field(
        default="triangle",
        description="Scene primitive per key [§3.5]: the artifact's triangle around the key's "
                    "point, a sphere of radius 0.25, or an AABB whose intersection program "
                    "compares the stored integer key exactly.")
    point_ray: Literal["perpendicular", "parallel"] = Field(
        default="perpendicular",
        description="Point lookups [§3.3, Table 2]: a short ray along z through the key's point, "
                    "or the range [k, k] (a ray along x, with the origin of range_ray).")
    range_ray: Literal["offset", "zero"] = Field(
        default="offset",
        description="Range rays along x [§3.3, Table 2]: from an origin at the range's start "
                    "(t in (0, u - l + 1)), or from x = 0 with tmin = the start.")
    compact: bool = Field(
        default=True,
        description="Compact the acceleration structure after the build [§3.5]: cut the "
                    "BVH's worst-case node buffer to the records used (optixAccelCompact). "
                    "update='refit' needs compact=False [§3.6].")
    update: Literal["rebuild", "refit"] = Field(
        default="rebuild",
        description="update(): build the scene again, or move the changed primitives and refit "
                    "the BVH keeping its topology [§3.6].")
    geometry: Literal["stored", "generated"] = Field(
        default="stored",
        description="stored: the scene keeps its primitives (OptiX's GAS holds its own copy; "
                    "the paper's setting); generated: the engine keeps only the keys and makes "
                    "each primitive from its key during traversal (no OptiX equivalent: 8 B per "
                    "key instead of 12-36, same answers).")
    leaf_size: int = Field(
        default=4, ge=1, le=32,
        description="Primitives per BVH leaf of the software ray tracer (not a paper "
                    "dimension: OptiX's BVH is opaque).")
    max_rays: int = Field(
        default=1 << 24, ge=1, le=1 << 40,
        description="Most rays traced in one launch; a batch needing more (3D ranges cast "
                    "several rays each) is traced in launches of at most this many rays, so "
                    "memory stays bounded whatever the ranges span.")

    @model_validator(mode="after")
    def _consistent(self) -> RxParams:
        split = (self.x_bits, self.y_bits, self.z_bits)
        if self.key_mode == "3d":
            if sum(split) != 64:
                raise ValueError(f"x_bits + y_bits + z_bits must be 64 (every key bit lands in "
                                 f"one coordinate), got {split[0]} + {split[1]} + {split[2]} = "
                                 f"{sum(split)}")
        elif split != (23, 23, 18):
            raise ValueError(f"x_bits/y_bits/z_bits split keys in key_mode='3d' only; "
                             f"key_mode={self.key_mode!r} does not split keys")
        if self.key_mode == "extended" and self.primitive == "sphere":
            raise ValueError("key_mode='extended' cannot use spheres (Table 1: one radius cannot "
                             "fit the gaps between floats of every magnitude); use "
                             "primitive='triangle' or 'aabb'")
        if self.key_mode == "extended" and self.range_ray == "offset":
            raise ValueError("key_mode='extended' cannot offset ray origins (§3.3: u - l is not "
                             "exact in float32 between bit-cast keys); use range_ray='zero'")
        if self.update == "refit" and self.compact:
            raise ValueError("update='refit' needs an update-capable build, which disables "
                             "compaction (§3.6); set compact=False, or use update='rebuild'")
        return self


#: The paper's selected configuration (§3): what ``indexzoo.create("rx")`` builds.
PAPER_DEFAULT: dict[str, object] = dict(
    key_mode="3d", x_bits=23, y_bits=23, z_bits=18, primitive="triangle",
    point_ray="perpendicular", range_ray="offset", compact=True, update="rebuild")

#: Named configurations of the paper's design experiments (§3), for
#: ``indexzoo.create("rx", **PRESETS[name])`` or ``--set`` in ``indexzoo bench``.
PRESETS: dict[str, dict[str, object]] = {
    "paper": PAPER_DEFAULT,
    "naive": dict(key_mode="naive"),                                   # Fig. 3
    "extended": dict(key_mode="extended", range_ray="zero"),           # Fig. 3
    "spheres": dict(primitive="sphere"),                               # Fig. 7
    "aabbs": dict(primitive="aabb"),                                   # Fig. 7
    "uncompacted": dict(compact=False),                                # Fig. 7
    "parallel-points": dict(point_ray="parallel", range_ray="zero"),  # Fig. 6
    "zero-ranges": dict(range_ray="zero"),                             # Table 3
    "refit": dict(compact=False, update="refit"),                      # Table 4
    "split-22-22-20": dict(x_bits=22, y_bits=22, z_bits=20),           # the artifact's split
    "generated": dict(geometry="generated", leaf_size=8),  # the engine's fastest RX scene
    # memory-lean: one copy of the keys, 24-primitive leaves; on the H200 with 2^26 uint64 keys
    # 1.07 GB (the paper's B+-tree: 1.23 GB), 1.79 G lookups/s, a 58.7 ms build
    "lean": dict(geometry="generated", leaf_size=24),
}
