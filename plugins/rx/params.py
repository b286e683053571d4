"""Parameters of ``rx``: every design dimension of the paper (§3.2-§3.6) as a field, with
the paper's selected configuration (§3, "Selected Configuration") as the defaults. The key
mode, primitive and scene fields are the RX family's (:mod:`indexzoo.native.rt.params`); rx
adds its point rays and updates. Combinations the paper rules out are
:class:`~indexzoo.ConfigError`\\s, raised before any device work (a refit of a compacted
structure, §3.6, besides the family's).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from indexzoo.native.rt import KeySceneParams

__all__ = ["PAPER_DEFAULT", "PRESETS", "RxParams"]


class RxParams(KeySceneParams):
    """Every configuration of RX; the defaults are the paper's (3D, triangles, compacted,
    perpendicular point rays, offset range rays, rebuild on update)."""

    point_ray: Literal["perpendicular", "parallel"] = Field(
        default="perpendicular",
        description="Point lookups [§3.3, Table 2]: a short ray along z through the key's point, "
                    "or the range [k, k] (a ray along x, with the origin of range_ray).")
    update: Literal["rebuild", "refit"] = Field(
        default="rebuild",
        description="update(): build the scene again, or move the changed primitives and refit "
                    "the BVH keeping its topology [§3.6].")
    @model_validator(mode="after")
    def _consistent(self) -> RxParams:
        if self.update == "refit" and self.compact:
            raise ValueError("update='refit' needs an update-capable build, which disables "
                             "compaction (§3.6); set compact=False, or use update='rebuild'")
        return self


#: The paper's selected configuration (§3): what ``indexzoo.create("rx")`` builds.
PAPER_DEFAULT: dict[str, object] = dict(
    key_mode="3d", x_bits=23, y_bits=23, z_bits=18, primitive="triangle",
    point_ray="perpendicular", range_ray="offset", compact=True, update="rebuild")

#: Named configurations of the paper's design experiments (§3), selected by the parameter
#: ``preset`` (``indexzoo.create("rx", preset="lean")``, ``params: {preset: lean}`` in a spec
#: file, ``--set rx.preset=lean`` in ``indexzoo bench``); parameters given beside it win.
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
    # memory-lean: one copy of the keys, 24-primitive leaves; smaller than the paper's B+-tree
    # and faster to build than the paper's RX (measured: docs/plugins/rx.md)
    "lean": dict(geometry="generated", leaf_size=24),
}
RxParams.presets = PRESETS
