"""What the OptiX engine needs from outside indexzoo: NVIDIA's ``pyoptix`` bindings and the
OptiX SDK headers (``OptiX_INSTALL_DIR``), found without importing either at module level."""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["ENV", "INSTALL_HINT", "headers_dir", "import_optix"]

#: How a user gets OptiX going (the README's "OptiX" section says the same).
INSTALL_HINT = (
    "install NVIDIA's OptiX Python bindings (pip install pyoptix 'cuda-python>=12', or pip "
    "install -e '.[optix]' in indexzoo's source folder; pip builds pyoptix against the OptiX "
    "SDK your driver supports), download the OptiX SDK headers and set OptiX_INSTALL_DIR to "
    "the folder holding include/optix.h")

ENV = "OptiX_INSTALL_DIR"


def headers_dir() -> str | None:
    """The OptiX SDK folder named by ``OptiX_INSTALL_DIR`` if it holds ``include/optix.h``."""
    where = os.environ.get(ENV)
    if where and os.path.isfile(os.path.join(where, "include", "optix.h")):
        return where
    return None


def import_optix() -> Any:
    """NVIDIA's ``optix`` module (pyoptix); ImportError where it is not installed."""
    return importlib.import_module("optix")
