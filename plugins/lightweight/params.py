"""Parameters of the lightweight family and its five presets (the paper's schemes M1-M5).

``lightweight`` takes every option; a preset (``ao-bs``, ``eo-bs``, ``ao-pb-bs``, ``eo-ks``,
``ao-pb-ks``) fixes the scheme (layout, pivot buffer, search) and starts from the paper's
recommended configuration for it, which every other option can change.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from indexzoo import IndexParams
from indexzoo.native.targets import KernelParams

__all__ = ["PRESET_PARAMS", "LightweightParams"]

KValue = Literal[2, 3, 5, 9, 17, 33]


class LightweightParams(KernelParams):
    """Every option the paper studies (sections 3 and 4), and whether the family's decision
    tree picks them."""

    configuration: Literal["auto", "given"] = Field(
        default="auto",
        description="auto: at build, the family's decision tree (indexzoo recommend; the "
                    "measured tree on the GPU, the paper's on the CPU) picks one of the five "
                    "schemes with its preset's configuration for the number of keys, their "
                    "width and the device, and the other options are not read; given: the "
                    "options as given. Setting any other option of the family makes it "
                    "'given' (max_batch and the probe sort, which every index has, do not).")
    layout: Literal["ao", "eo"] = Field(
        default="ao", description="ao: ascending order; eo: (K-ary) Eytzinger order [§3.1, §3.2].")
    pivot_buffer: Literal["none", "full", "coarse"] = Field(
        default="none",
        description="Pivot buffer over the ascending array (ao only) [§3.3, §4.5]: full = every "
                    "level down to chunks of K-1 keys (2 for K=2); coarse = the top pb_levels.")
    pb_levels: int | None = Field(
        default=None, ge=-40, le=64,
        description="Coarse pivot buffer: materialised levels L (> 0), or all but -L bottom "
                    "levels of the full buffer (<= 0; the paper's 24 of 27 levels at 2^28 keys "
                    "is -3); None: the coarsest buffer whose chunks fit one 128-byte cache line "
                    "(§4.5).")
    search: Literal["binary", "kary"] = Field(
        default="binary", description="binary search, or K-ary search by groups of K-1 threads [§3.4].")
    k: KValue = Field(
        default=9, description="Arity of the K-ary search (K-1 threads per lookup); binary search "
                               "uses 2.")
    schedule: Literal["dynamic", "static"] = Field(
        default="dynamic",
        description="dynamic: one block per tile of lookups; static: one block per SM, looping "
                    "over tiles (the number of SMs is read from the device) [§4.1].")
    blocks_per_sm: int = Field(
        default=1, ge=1, le=32,
        description="Static scheduling: blocks per SM (the paper: 1, i.e. as many blocks as SMs).")
    lookups_per_thread: Literal[1, 2, 4, 8, 16, 32] = Field(
        default=1, description="Lookups each thread (K-ary: each group) holds and answers [§4.1].")
    pinning: Literal["none", "steps", "full"] = Field(
        default="none",
        description="Top of the search structure in shared memory: the keys of whole search "
                    "steps, or as many keys as fit [§4.2].")
    pinning_bytes: int | None = Field(
        default=None, ge=0,
        description="Shared memory for pinning per block; None: the device's opt-in maximum "
                    "minus the reordering buffers.")
    reorder: Literal["none", "single", "double"] = Field(
        default="none",
        description="Sort each tile's lookups in shared memory before searching; double also "
                    "restores the order in shared memory before writing [§4.3].")
    memory_layout: Literal["soa", "aos"] = Field(
        default="soa", description="soa: keys and rowIDs in two arrays; aos: interleaved [§4.4].")
    multi_thread_scan: bool = Field(
        default=True,
        description="Range scans: a warp finishes every range longer than 32 entries together "
                    "[§5.7] (GPU; the CPU scans one range per thread).")

    @model_validator(mode="before")
    @classmethod
    def _given_options(cls, data: object) -> object:
        """Options of the family set without ``configuration`` are the configuration:
        'given'. The parameters every index has (``max_batch``, the probe sort) are not
        options of a scheme and leave the decision to the tree."""
        if isinstance(data, dict) and "configuration" not in data and \
                set(data) - set(IndexParams.model_fields):
            return {**data, "configuration": "given"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> LightweightParams:
        if self.layout == "eo" and self.pivot_buffer != "none":
            raise ValueError("a pivot buffer sits on the ascending array: use layout='ao' with "
                             "pivot_buffer, or pivot_buffer='none' with layout='eo'")
        if self.layout == "ao" and self.pivot_buffer == "none" and self.search == "kary":
            raise ValueError("AO+KS is not a scheme of the paper (K-1 random accesses per step, "
                             "§3.4): use a pivot buffer (ao-pb-ks) or layout='eo' (eo-ks)")
        if self.search == "kary" and self.k == 2:
            raise ValueError("K-ary search needs k in 3, 5, 9, 17, 33 (K-1 threads per lookup)")
        if self.reorder != "none":
            groups = self.threads_per_block // (self.k - 1 if self.search == "kary" else 1)
            tile = groups * self.lookups_per_thread
            if tile & (tile - 1):
                raise ValueError(f"reordering sorts tiles of (threads_per_block / group) x "
                                 f"lookups_per_thread = {tile} lookups: make it a power of two")
            if tile > 8192:
                raise ValueError(f"reordering tiles of {tile} lookups do not fit shared memory; "
                                 "at most 8192 (lower threads_per_block or lookups_per_thread)")
        return self

    @property
    def scheme(self) -> str:
        """The paper's name of the configured scheme, e.g. ``eo-ks``."""
        pb = "-pb" if self.pivot_buffer != "none" else ""
        return f"{self.layout}{pb}-{'ks' if self.search == 'kary' else 'bs'}"

    @property
    def arity(self) -> int:
        """K of the search structure: 2 for binary search."""
        return self.k if self.search == "kary" else 2


#: Each scheme's defaults: the option values that measured best on an H200 for 2^26 uniform
#: uint64 keys and 2^27 random hits (``docs/plugins/lightweight.md`` has the sweep, and the
#: paper's RTX 4090 settings, which are all still available: e.g. ``schedule="static",
#: threads_per_block=128, lookups_per_thread=16, pinning="steps", reorder="double"`` for AO+BS).
PRESET_PARAMS: dict[str, dict[str, object]] = {
    "ao-bs": dict(layout="ao", pivot_buffer="none", search="binary", schedule="dynamic",
                  threads_per_block=256, lookups_per_thread=1, pinning="none",
                  reorder="double", memory_layout="soa"),
    "eo-bs": dict(layout="eo", pivot_buffer="none", search="binary", schedule="dynamic",
                  threads_per_block=256, lookups_per_thread=1, pinning="none",
                  reorder="none", memory_layout="soa"),
    "ao-pb-bs": dict(layout="ao", pivot_buffer="coarse", pb_levels=None, search="binary",
                     schedule="static", blocks_per_sm=4, threads_per_block=256,
                     lookups_per_thread=1, pinning="none", reorder="none", memory_layout="aos"),
    "eo-ks": dict(layout="eo", pivot_buffer="none", search="kary", k=5, schedule="dynamic",
                  threads_per_block=128, lookups_per_thread=1, pinning="none", reorder="none",
                  memory_layout="soa"),
    "ao-pb-ks": dict(layout="ao", pivot_buffer="full", search="kary", k=5, schedule="dynamic",
                     threads_per_block=128, lookups_per_thread=1, pinning="none",
                     reorder="none", memory_layout="aos"),
}


#: ``lightweight`` with ``preset: eo-ks`` is that scheme's configuration, which every option
#: given beside it changes (the registered ``eo-ks`` fixes the scheme's own fields).
LightweightParams.presets = PRESET_PARAMS

_SCHEME_FIELDS = ("layout", "pivot_buffer", "search")


def preset_params(preset: str) -> type[LightweightParams]:
    """The Params model of a preset: the scheme's fields fixed, the others defaulting to the
    preset's configuration."""
    from pydantic import create_model

    values = PRESET_PARAMS[preset]
    fields: dict[str, object] = {
        "configuration": (Literal["given"], Field(
            default="given", description="A preset's options are its configuration."))}
    for name, value in values.items():
        info = LightweightParams.model_fields[name]
        if name == "pivot_buffer" and value != "none":  # full or coarse: both AO+PB
            fields[name] = (Literal["full", "coarse"],
                            Field(default=value, description=info.description))
        elif name in _SCHEME_FIELDS:
            fields[name] = (Literal[value],
                            Field(default=value, description=f"{info.description} Fixed by "
                                  f"the preset; use 'lightweight' to change it."))
        else:
            fields[name] = (info.annotation,
                            Field(default=value, description=info.description,  # type: ignore[call-overload]
                                  **_bounds(info)))
    model = create_model(f"{preset.title().replace('-', '')}Params",  # type: ignore[call-overload]
                         __base__=LightweightParams, **fields)
    model.__doc__ = f"Parameters of the preset ``{preset}`` (the lightweight family)."
    model.presets = {}  # one scheme: the family's presets are those of ``lightweight``
    return model


def _bounds(info: object) -> dict[str, object]:
    """ge/le/multiple_of of a field, so a preset keeps its base field's limits."""
    out: dict[str, object] = {}
    for meta in getattr(info, "metadata", []):
        for attr in ("ge", "le", "multiple_of"):
            if getattr(meta, attr, None) is not None:
                out[attr] = getattr(meta, attr)
    return out
