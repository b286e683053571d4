"""cgRX's programs over the RT query layer, for the successor search cast as query launches
(:mod:`.launched`): a hit names its triangle's cgRX id ``h`` (``ids[prim]``), which the search
maps to a bucket, a row or a plane. ``programs.cu`` holds the twin for the OptiX engine
(:data:`CUDA`)."""

from __future__ import annotations

import importlib.resources
from typing import Any, NamedTuple

import numpy as np
from numba.extending import register_jitable

from indexzoo.native.rt import QueryPrograms

__all__ = ["CUDA", "PROGRAMS", "CgRecord", "cg_match"]


class CgRecord(NamedTuple):
    """cgRX's launch parameters (fields of ``params`` in its programs)."""

    ids: Any  # int32 or int64 per primitive: the triangle's cgRX id


@register_jitable
def cg_match(ray, inst, prim, t, front, params):
    return np.int64(params.ids[prim])


#: The same program in CUDA C++ for the OptiX engine (``programs.cu``).
CUDA = importlib.resources.files(__package__).joinpath("programs.cu").read_text()

#: cgRX's programs: stored or generated triangles, no intersection program.
PROGRAMS = QueryPrograms(match=cg_match, cuda=CUDA)
