"""Parameters of ``rtscan`` and its presets: the paper's RTc1 and RTc3 and the ablations of its
§5 (no encoding, no sieving) plus ``rtscan-direct``, the CUDA-core refine.

Geometry is in units of the cube width ``w`` (paper §5.10, Fig. 29): the ray interval, the
spacing between ray segments and the segment length are fractions or multiples of ``w``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from indexzoo.native.rt import EngineParams

__all__ = ["MAX_CUBE_WIDTH", "MAX_RAY_LENGTH", "MAX_SIEVE_FINE", "MAX_SIEVE_VECTORS",
           "MIN_SIEVE_VECTORS", "PAPER_LAYOUT", "PRESETS", "RtscanParams"]

MIN_SIEVE_VECTORS = 16
MAX_SIEVE_VECTORS = 128
#: The most fine bins per coarse bin of the two-level sieve.
MAX_SIEVE_FINE = 64
#: The longest ray segment, in cube widths.
MAX_RAY_LENGTH = 1e6
#: The widest cube the refine can plan: a segment's period along the rays, ``(L + S) w`` with
#: ``L <= MAX_RAY_LENGTH`` and ``S <= 1``, plus a box's extent (coordinates are below 2^32)
#: must stay an int64 in the ray plan: ``(1e6 + 1) 2^43 + 2^32 < 2^63``.
MAX_CUBE_WIDTH = 1 << 43


class RtscanParams(EngineParams):
    """Uniform encoding, data sieving, Matrix RT Refine (or the direct refine), column groups."""

    layout: Literal["compact", "paper"] = Field(
        default="compact",
        description="What a build holds besides the sieve. compact: the keys, each column's "
                    "order (the row of each rank) and every 64th value of each sorted column; "
                    "a bound's rank is found by binary search in that sample, then among the "
                    "63 ranks between two samples through the order and the keys, and ranks "
                    "are computed where they are used (the RT scene's coordinates at build), "
                    "never stored. paper: the codes (each row's rank per column; the keys "
                    "without encoding), the order and the mapping tables (distinct values, "
                    "first ranks) [§4.2], as the paper and indexzoo's first RTScan; the "
                    "rtscan-paper preset with sieve_vectors=128, sieve_fine=0. Both answer "
                    "the same.")
    encoding: bool = Field(
        default=True,
        description="Uniform encoding [§4.2]: each column's values become their ranks 0..N-1 "
                    "(duplicates get consecutive ranks), so every axis of the scene is [0, N) "
                    "and uniform; off: the values themselves are the coordinates (the paper's "
                    "no-encoding ablation).")
    sieve_vectors: int = Field(
        default=32, ge=0, le=MAX_SIEVE_VECTORS,
        description="Data sieving [§4.3]: K equi-depth bins per column, K-1 stored bit "
                    "vectors [x < border] (borders moved to the start of their value's run); "
                    f"0: no sieving (the whole query box is refined). K is 0 or "
                    f"{MIN_SIEVE_VECTORS}..{MAX_SIEVE_VECTORS} (the paper: 128).")
    sieve_fine: int = Field(
        default=32, ge=0, le=MAX_SIEVE_FINE,
        description="The sieve's second level (ours): each of the K bins split into this many "
                    "equi-depth fine bins (borders moved to the start of their value's run), "
                    "one vector per fine border shared by all bins: G_t = [x < the t-th fine "
                    "border of x's own bin]. A fine border's vector is then F_c | (F_{c+1} & "
                    "G_t), three vectors read in place of one, for K times this many bins from "
                    "K + this - 2 vectors (32 x 32 = 1024 bins from 62 vectors, where the "
                    "paper's one level has 128 bins from 127). 0: one level, the paper's. "
                    f"0 or 2..{MAX_SIEVE_FINE}; no effect without sieving.")
    selection: Literal["auto", "positive", "negative"] = Field(
        default="auto",
        description="Which sieving vector approximates each side of a predicate [§4.3.3]: "
                    "positive = the one inside the predicate (refine sets bits), negative = "
                    "the one around it (refine clears bits); auto = the nearer border, a tie "
                    "going to negative, as the paper.")
    refine: Literal["auto", "rt", "direct"] = Field(
        default="auto",
        description="rt: Matrix RT Refine [§4.4], cubes in a BVH and a grid of short rays; "
                    "direct: the rows of each uncertain slab gathered by rank (order[a:b]) "
                    "and checked on CUDA cores, no BVH (our fair CUDA-core variant); auto: rt "
                    "on the OptiX engine (RT cores), direct on the software engine, where it "
                    "was measured faster and holds less (docs/plugins/rtscan.md).")
    group_size: int = Field(
        default=3, ge=1, le=3,
        description="Columns per RT job (one BVH each) [§4.1]; groups are ANDed on CUDA "
                    "cores. 3: the paper; 2: the (2+2) layout of §5.9; 1: RTc1.")
    cube_width: int | None = Field(
        default=None, ge=1, le=MAX_CUBE_WIDTH,
        description="Cube width w before epsilon, in coordinate units (at most 2^43); null: "
                    "chosen from the data, ceil((R^g / (14.4 N))^(1/g)) for a group of g "
                    "columns spanning R coordinates, about one row per ray cell (the paper's "
                    "tuned 8.3e4 at N = 1e8, R = N, g = 3). Epsilon is always the paper's "
                    "rule [§4.4.4], 2^(K-23) for coordinates below 2^K, K > 23 (0 below), "
                    "which keeps every row of a box on some ray.")
    ray_interval: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="Spacing of the ray grid across the ray direction, as a fraction of w "
                    "(Fig. 29: 0.25w..w); at most w, so every cube is met.")
    ray_spacing: float = Field(
        default=1.0, ge=0.0, le=1.0,
        description="Gap between consecutive ray segments along the ray direction, as a "
                    "fraction of w (Fig. 29: 0..w); at most w, so cubes bridge the gaps.")
    ray_length: float = Field(
        default=13.4, ge=0.0, le=MAX_RAY_LENGTH,
        description="Length of each ray segment, as a multiple of w (the paper's 1.1e6 for "
                    "w = 8.3e4); 0: one ray per grid point through the whole box (RTc3).")
    ray_axis: Literal["longest", "x", "y", "z"] = Field(
        default="longest",
        description="Direction of the rays: along the box's longest side (the artifact), or "
                    "along one axis for every box (x, y, z: the group's first, second, third "
                    "column; along an unused axis the rays are as long as a cube is wide, "
                    "the paper's 1- and 2-predicate layouts).")
    leaf_size: int = Field(
        default=4, ge=1, le=32,
        description="Cubes per BVH leaf of the software ray tracer (OptiX's BVH is opaque).")
    max_rays: int = Field(
        default=1 << 22, ge=1, le=1 << 40,
        description="Most rays traced in one launch (a refine needing more is traced in "
                    "launches of at most this many).")

    @model_validator(mode="after")
    def _consistent(self) -> RtscanParams:
        k = self.sieve_vectors
        if k and k < MIN_SIEVE_VECTORS:
            raise ValueError(f"sieve_vectors must be 0 (no sieving) or "
                             f"{MIN_SIEVE_VECTORS}..{MAX_SIEVE_VECTORS}, got {k}")
        if self.sieve_fine == 1:
            raise ValueError(f"sieve_fine must be 0 (one level) or 2..{MAX_SIEVE_FINE}, got 1")
        if self.selection != "auto" and k == 0:
            raise ValueError(f"selection={self.selection!r} picks sieving vectors; it needs "
                             "sieve_vectors > 0")
        return self


#: The paper's layout: codes, mapping tables and 127 sieve vectors per column (7.97x a table
#: of uint32 columns with the direct refine; the ``rtscan-paper`` preset).
PAPER_LAYOUT: dict[str, object] = dict(layout="paper", sieve_vectors=128, sieve_fine=0)

#: The paper's variants (its RTScan as ``rtscan-rt``, each with Matrix RT Refine on any
#: engine), ``rtscan-direct`` (ours) and ``rtscan-paper`` (the paper's layout, refined as
#: ``rtscan``), registered as indexes of their own.
PRESETS: dict[str, dict[str, object]] = {
    "rtscan-rt": dict(refine="rt"),
    "rtc1": dict(group_size=1, encoding=False, sieve_vectors=0, refine="rt"),
    "rtc3": dict(group_size=3, encoding=False, sieve_vectors=0, ray_length=0.0, ray_axis="z",
                 refine="rt"),
    "rtscan-noenc": dict(encoding=False, refine="rt"),
    "rtscan-nosieve": dict(sieve_vectors=0, refine="rt"),
    "rtscan-direct": dict(refine="direct"),
    "rtscan-paper": dict(PAPER_LAYOUT),
}

#: ``rtscan`` with ``preset: rtc3`` builds what the registered ``rtc3`` builds.
RtscanParams.presets = PRESETS
