"""RTScan's refine programs for the OptiX engine (``programs.cu``): the twins of
:mod:`.refine`'s ``refine_match``, ``cube_intersection`` and ``plan_raygen``, with the ray
plan's column numbers (:mod:`.layout`) defined before them."""

from __future__ import annotations

import importlib.resources

from .layout import AXIS, HI, LO, NB, NZ, PLAN_COLUMNS, QUERY, RAYS

__all__ = ["CUDA"]

_COLUMNS = dict(RTS_PLAN_COLUMNS=PLAN_COLUMNS, RTS_QUERY=QUERY, RTS_LO=LO, RTS_HI=HI,
                RTS_AXIS=AXIS, RTS_NB=NB, RTS_NZ=NZ, RTS_RAYS=RAYS)

#: The refine's programs in CUDA C++, for the OptiX engine.
CUDA = "".join(f"#define {k} {v}\n" for k, v in _COLUMNS.items()) + \
    importlib.resources.files(__package__).joinpath("programs.cu").read_text()
