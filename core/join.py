"""``indexzoo.join``: an index nested-loop inner join over any index with point lookups.

One side's key column is indexed (rowID = position), the other side's keys are point lookups
with ``out="rowids"``, and every match is a pair (left rowID, right rowID). The optimized-RX
thesis models joins exactly so (one batch of point probes against an index of the other
relation, Ch. 1-2) and picks the smaller relation as the indexed side, as a hash join picks its
build side; ``build="auto"`` does the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from . import result_memory, text
from .config import IndexSpec
from .devices import to_device, to_numpy
from .errors import InvalidInput, Unsupported
from .registry import create
from .validation import read_1d

__all__ = ["JoinResult", "join"]


@dataclass(frozen=True)
class JoinResult:
    """The pairs of an inner join: ``left[i]`` and ``right[i]`` are the rowIDs (positions) of
    the i-th matching pair, on the index's device. Pairs come grouped by the probing side's
    rowID in ascending order; within one probe row, in any order."""

    left: Any
    right: Any
    built_on: Literal["left", "right"]

    def __len__(self) -> int:
        return int(self.left.shape[0])

    def to_host(self) -> JoinResult:
        return JoinResult(to_numpy(self.left), to_numpy(self.right), self.built_on)


def join(left_keys: Any, right_keys: Any, *, index: str | IndexSpec | dict[str, Any] =
         "sorted-array", device: str | None = None,
         build: Literal["auto", "left", "right"] = "auto") -> JoinResult:
    """Inner join of two key columns on equality: every pair ``(l, r)`` with
    ``left_keys[l] == right_keys[r]``.

    ``index``: the index to build (a registered name, an :class:`IndexSpec` or a spec dict); it
    needs point lookups with ``out="rowids"``. ``build``: which side is indexed; ``auto`` indexes
    the side with fewer rows (the left one on a tie). Keys of both sides go through the key
    map, so any key dtype works where the two columns compare (e.g. int64 with int32, text
    with text, byte strings of any length; text and bytes exactly, NULs included). Float and
    integer columns join whichever side is indexed: a float equals an integer only when it is
    a whole number of that value.
    Null keys (pandas, Arrow, Polars nulls; None in a list) join nothing, as in SQL. Pairs
    that cannot fit in the free memory of the index's device are refused with ResourceError
    before they are listed (:mod:`indexzoo.result_memory`).
    """
    if build not in ("auto", "left", "right"):
        raise InvalidInput(f"argument 'build': {build!r} is not one of 'auto', 'left', 'right'")
    left, left_nulls = read_1d(left_keys, "left_keys")
    right, right_nulls = read_1d(right_keys, "right_keys")
    _check_comparable(left, right)
    smaller: Literal["left", "right"] = \
        "left" if int(left.shape[0]) <= int(right.shape[0]) else "right"
    side: Literal["left", "right"] = smaller if build == "auto" else build
    built, probes = (left, right) if side == "left" else (right, left)
    built_nulls, probe_nulls = (left_nulls, right_nulls) if side == "left" else \
        (right_nulls, left_nulls)
    idx = create(index, device=device) if device is not None else create(index)
    caps = idx.capabilities
    if not caps.point or "rowids" not in caps.out_modes:
        raise Unsupported(f"index {idx.name!r} cannot join: a join needs point lookups with "
                          "out='rowids'")
    for arr, name in ((left, "left_keys"), (right, "right_keys")):
        if arr.dtype.kind == "f" and bool(idx.xp.isnan(to_device(arr, idx.device)).any()):
            raise InvalidInput(f"argument {name!r}: NaN has no place in a join on equality; "
                               "drop or replace it")
    probes, miss = _comparable(built, probes)
    if probe_nulls is not None:
        miss = probe_nulls if miss is None else miss | probe_nulls
    idx.build(built, nulls="skip" if built_nulls is not None else "refuse")
    kept = None
    if miss is not None:  # probes that equal no key are not looked up
        kept = np.flatnonzero(~to_numpy(miss))
        probes = probes[kept if isinstance(probes, np.ndarray) else idx.xp.asarray(kept)]
    _check_pairs(idx, probes)
    try:
        res = idx.point(probes, out="rowids")
    except InvalidInput as exc:  # the probing side, named as the caller named it
        probing = "right_keys" if side == "left" else "left_keys"
        raise InvalidInput(str(exc).replace(
            "argument 'queries'", f"argument {probing!r} (probing {side}_keys)")) from None
    xp = idx.xp
    counts = res.offsets[1:] - res.offsets[:-1]
    probe_rows = xp.repeat(xp.arange(int(counts.shape[0]), dtype=np.int64), counts)
    if kept is not None:
        probe_rows = xp.asarray(kept, dtype=np.int64)[probe_rows]
    build_rows = res.rowids.astype(np.int64)
    if side == "left":
        return JoinResult(build_rows, probe_rows, side)
    return JoinResult(probe_rows, build_rows, side)


def _check_pairs(idx: Any, probes: Any) -> None:
    """ResourceError before the pairs of ``probes`` against the built ``idx`` are listed when
    they cannot fit: per pair its rowID in the CSR and two int64 rowIDs, 8 bytes of offsets
    per probe (the pairs are counted first where every probe matching every row would not
    fit)."""
    q, rid = int(probes.shape[0]), idx.rowid_dtype.itemsize
    per_pair = rid + 16

    def pairs() -> int:
        return int(idx.point(probes, out="count").count.sum(dtype=np.int64))

    result_memory.check_counted(
        fixed=(q + 1) * result_memory.OFFSET_BYTES, per_item=per_pair, most=q * len(idx),
        count=pairs, device=idx.device,
        what=lambda m: (f"join of {q:,} probes against {len(idx):,} keys ({m:,} pairs: "
                        f"{per_pair} bytes per pair, 8 per probe)"),
        hint="join smaller parts of the probing side one after another")


#: Key dtype families whose members compare with each other (NumPy dtype kinds).
_FAMILIES = {"b": "numbers", "i": "numbers", "u": "numbers", "f": "numbers",
             "M": "timestamps", "m": "durations", "U": "text", "S": "byte strings"}


def _family(arr: Any) -> str | None:
    """The family of a key column (text and byte strings held as Python objects too)."""
    kind = arr.dtype.kind
    if kind == "O":
        kind = text.kind_of(arr) or kind
    return _FAMILIES.get(kind)


def _check_comparable(left: Any, right: Any) -> None:
    """InvalidInput naming both arguments when the two key columns cannot equal each other
    (numbers join numbers, timestamps timestamps, text text, byte strings byte strings)."""
    a, b = (_family(arr) for arr in (left, right))
    if a is None or b is None or a == b:
        return  # other dtypes: the key map explains what it takes
    raise InvalidInput(
        f"arguments 'left_keys' and 'right_keys' cannot be joined: left_keys holds {a} "
        f"(dtype {left.dtype}), right_keys holds {b} (dtype {right.dtype}); a join on "
        "equality needs key columns of one kind (numbers with numbers, timestamps with "
        "timestamps, text with text, byte strings with byte strings)")


def _comparable(built: Any, probes: Any) -> tuple[Any, Any]:
    """Probes the built side's key map compares with, and the probes that equal no key (None:
    all may): float probes against integer keys become integers where they are whole
    numbers in range (the others miss), so a float/int join does not depend on which side is
    indexed (integer probes against float keys are compared exactly by the key map)."""
    if built.dtype.kind not in "biu" or probes.dtype.kind != "f":
        return probes, None
    host = to_numpy(probes).astype(np.float64)
    unsigned = built.dtype.kind in "bu"
    low, end = (0.0, 2.0**64) if unsigned else (-(2.0**63), 2.0**63)
    whole = (np.floor(host) == host) & (host >= low) & (host < end)
    target = np.uint64 if unsigned else np.int64
    ints = np.where(whole, host, 0.0).astype(target)
    if not isinstance(probes, np.ndarray):
        ints = to_device(ints, "cuda")
    return ints, (None if bool(whole.all()) else ~whole)
