"""What the RT indexes share as a class: mixins an index lists before ``GpuIndex``.

* :class:`EngineIndex`: every index on the ray-tracing engine; saved params naming
  ``engine="optix"`` load onto the CPU as ``"auto"`` (:func:`~.select.params_for_load`).
* :class:`KeySceneIndex`: the RX family (one primitive per key, :class:`~.params.KeySceneParams`);
  adds the index's :class:`~.keymap.KeyCoder`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from indexzoo.native.lazy import lazy_module

from .params import KeySceneParams
from .select import params_for_load

if TYPE_CHECKING:
    from . import keymap
else:  # numba code: imported when an index first maps keys, not when its class is imported
    keymap = lazy_module("indexzoo.native.rt.keymap")

__all__ = ["EngineIndex", "KeySceneIndex"]


class EngineIndex:
    """An index on the ray-tracing engine (list it before ``GpuIndex``)."""

    @classmethod
    def _params_for_load(cls, params: Any, device: str) -> Any:
        """``engine="optix"`` loaded onto the CPU becomes ``"auto"`` (see
        :func:`indexzoo.native.rt.params_for_load`)."""
        return params_for_load(params, device)


class KeySceneIndex(EngineIndex):
    """An RX-family index: its keys become points by its params' key mode and bit split."""

    params: KeySceneParams

    @property
    def coder(self) -> keymap.KeyCoder:
        p = self.params
        return keymap.KeyCoder.for_params(p.key_mode, p.x_bits, p.y_bits, p.z_bits)
