"""Parameters shared by the RT indexes of the RX family (RX, optimized RX): how a key becomes a
primitive of the scene and how rays run, with RX's selected configuration (paper §3) as the
defaults. Combinations RX's paper rules out are refused here, before any device work: spheres
in extended mode (Table 1), offset ray origins in extended mode (§3.3), a custom bit split
outside 3D mode.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from indexzoo.native.targets import KernelParams

__all__ = ["EngineName", "EngineParams", "KeyMode", "KeySceneParams", "Primitive", "SceneParams"]

KeyMode = Literal["naive", "extended", "3d"]
Primitive = Literal["triangle", "sphere", "aabb"]
EngineName = Literal["auto", "software", "optix"]


class EngineParams(KernelParams):
    """The ray tracer an RT index runs on (:mod:`indexzoo.native.rt.engine`)."""

    engine: EngineName = Field(
        default="auto",
        description="The ray tracer: indexzoo's software engine (CUDA cores or the CPU), NVIDIA "
                    "OptiX (the GPU only; RT cores where the GPU has them), or auto: OptiX where "
                    "the GPU has RT cores and OptiX is usable, else the software engine.")


class SceneParams(EngineParams):
    """What every index on the ray-tracing engine sets: BVH leaves, compaction, and a fine
    (32-bit) grouping for sorted probes."""

    leaf_size: int = Field(
        default=4, ge=1, le=32,
        description="Primitives per BVH leaf of the software ray tracer (not a paper "
                    "dimension: OptiX's BVH is opaque).")
    compact: bool = Field(
        default=True,
        description="Compact the acceleration structure after the build [RX §3.5]: cut the "
                    "BVH's worst-case node buffer to the records used (optixAccelCompact). An "
                    "index that refits its scene in place (RX's update='refit') needs "
                    "compact=False [RX §3.6].")
    probe_sort_bits: int = Field(
        default=32, ge=1, le=64,
        description="With sort_probes: top bits of the batch's key span that order it. 32 by "
                    "default: a warp's rays share the most of their traversal when "
                    "neighbouring probes are neighbouring keys, and 2^32 groups order a batch "
                    "of 2^27 lookups as finely as a full sort, in four radix passes instead "
                    "of eight, which makes sorted point lookups a little faster than a full "
                    "sort; more bits order a batch more finely for more passes.")


class KeySceneParams(SceneParams):
    """Key mode, primitive, geometry, BVH leaves, compaction, rays per launch and range rays
    of an RX-family index (see :mod:`indexzoo.native.rt.keymap`,
    :mod:`~indexzoo.native.rt.keyprims`, :mod:`~indexzoo.native.rt.keyrays`)."""

    max_rays: int = Field(
        default=1 << 24, ge=1, le=1 << 40,
        description="Most rays traced in one launch; a batch needing more is traced in "
                    "launches of at most this many rays, so memory stays bounded whatever the "
                    "lookups span.")
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
    range_ray: Literal["offset", "zero"] = Field(
        default="offset",
        description="Range rays along x [§3.3, Table 2]: from an origin at the range's start "
                    "(t in (0, u - l + 1)), or from x = 0 with tmin = the start.")
    geometry: Literal["stored", "generated"] = Field(
        default="stored",
        description="stored: the scene keeps its primitives (OptiX's GAS holds its own copy; "
                    "the paper's setting); generated: the engine keeps only the keys and makes "
                    "each primitive from its key during traversal (no OptiX equivalent: 8 B per "
                    "key instead of 12-36, same answers).")

    @model_validator(mode="after")
    def _consistent_scene(self) -> KeySceneParams:
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
        if self.engine == "optix" and self.geometry == "generated":
            raise ValueError("engine='optix' needs geometry='stored': OptiX's GAS keeps its "
                             "own primitives and has no generated geometry")
        return self
