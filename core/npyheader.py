"""The header of an ``.npy`` member, parsed strictly.

NumPy's own reader evaluates the header's Python literal (``ast.literal_eval`` after a pass of
``tokenize``), which on a damaged file raises whatever those raise. A saved index holds only
headers that ``np.lib.format`` writes for a plain array, so this reader accepts exactly that
form, ``{'descr': '<u8', 'fortran_order': False, 'shape': (40, 3), }`` padded with spaces and a
newline, and says in one line what is wrong with anything else.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

__all__ = ["MAX_HEADER", "NpyHeader", "parse_header", "plain_dtype"]

#: The longest header read (NumPy's own default limit).
MAX_HEADER = 10_000
_MAGIC = b"\x93NUMPY"
_DICT = re.compile(
    r"\{'descr': *'(?P<descr>[^']{1,32})', *'fortran_order': *"
    r"(?P<fortran>True|False), *'shape': *\((?P<shape>[0-9, ]{0,400})\), *\} *\n")
_DIM = re.compile(r"[0-9]{1,19}")
#: Kinds of array a saved index holds: booleans, integers, floats, byte strings and text (a
#: key map's dictionary).
_KINDS = "biufSU"


@dataclass(frozen=True)
class NpyHeader:
    """What an ``.npy`` header declares, and its own length in bytes (magic included)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    length: int

    @property
    def count(self) -> int:
        out = 1
        for d in self.shape:
            out *= d
        return out

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


def plain_dtype(descr: str) -> np.dtype | None:
    """The dtype ``descr`` names if it is one a saved index may hold (a plain numeric,
    byte-string or text dtype of this machine's byte order), else None."""
    try:
        dt = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError):
        return None
    if dt.kind not in _KINDS or dt.itemsize == 0 or dt.fields is not None or dt.shape:
        return None
    if dt.byteorder not in ("=", "|") and dt != dt.newbyteorder("="):
        return None
    return dt


def parse_header(head: bytes) -> NpyHeader | str:
    """The header at the start of ``head`` (the member's first bytes, at most
    ``MAX_HEADER + 12``), or a one-line reason why it is not one indexzoo reads."""
    if head[:6] != _MAGIC or len(head) < 10:
        return "not an .npy array (no NumPy magic)"
    major = head[6]
    if major == 1:
        (size,), start = struct.unpack_from("<H", head, 8), 10
    elif major in (2, 3) and len(head) >= 12:
        (size,), start = struct.unpack_from("<I", head, 8), 12
    else:
        return f"npy format version {head[6]}.{head[7]} is not read"
    if size > MAX_HEADER or start + size > len(head):
        return f"its header claims {size} bytes"
    try:
        text = head[start:start + size].decode("ascii")
    except UnicodeDecodeError:
        return "its header is not ASCII"
    m = _DICT.fullmatch(text)
    if m is None:
        return "its header is not the plain form NumPy writes"
    dtype = plain_dtype(m["descr"])
    if dtype is None:
        return f"dtype {m['descr']!r} is refused (plain numeric and string dtypes only)"
    dims = [d.strip() for d in m["shape"].split(",")]
    if dims and dims[-1] == "":
        dims.pop()
    if len(dims) > 32 or not all(_DIM.fullmatch(d) for d in dims):
        return f"its shape ({m['shape']}) is not a shape"
    return NpyHeader(dtype, tuple(int(d) for d in dims), m["fortran"] == "True", start + size)
