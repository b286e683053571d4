"""Results whose size follows from the input, refused before they are allocated when they
cannot fit in the free memory of the device that would hold them.

* ``out="bitmap"``: one row of ``ceil(N/32)`` 4-byte words per lookup, known from the batch;
* ``out="rowids"``: the CSR of every match, 8 bytes of offsets per lookup and a rowID per
  match;
* :func:`indexzoo.join`: a pair per match, its rowID in the CSR and two int64 rowIDs.

The refusal is a :class:`~indexzoo.ResourceError` that says how many bytes the result needs,
for what, and how much memory is free (and where that figure comes from); nothing has been
allocated then. Reading the free memory costs a file read (host) or a driver call (GPU), so a
result whose worst case stays below :data:`CHECK_FROM` bytes is not checked. The matches of a
CSR or a join are counted (one count lookup over the batch) only where the worst case (every
lookup matching every row) does not fit; an index that counts only by listing its matches
(its count is derived from ``rowids``) is not counted first.
"""

from __future__ import annotations

from collections.abc import Callable

from .errors import ResourceError
from .resources import available_memory

__all__ = ["CHECK_FROM", "OFFSET_BYTES", "check_bitmaps", "check_counted", "check_known",
           "check_rowids", "size_text"]

#: Results from this many bytes are checked against the free memory; smaller ones are not.
CHECK_FROM = 1 << 28

#: Bytes of one CSR offset (int64).
OFFSET_BYTES = 8


def size_text(n: float) -> str:
    """``1.5 GB``, ``12.0 MB``, ``512 B``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _refusal(need: int, what: str, avail: tuple[int, str], device: str,
             hint: str) -> ResourceError:
    where = "GPU" if device == "cuda" else "host"
    return ResourceError(f"{what} needs {size_text(need)} of {where} memory ({need:,} bytes), "
                         f"but only {size_text(avail[0])} is available ({avail[1]}); {hint}")


def check_known(need: int, what: str, device: str, hint: str,
                check_from: int = CHECK_FROM) -> None:
    """ResourceError when a result of ``need`` bytes (``what``: the result, in words) cannot
    fit in the free memory of ``device``; results below ``check_from`` bytes are not checked,
    nor any where the free memory is unknown."""
    if need < check_from:
        return
    avail = available_memory(device)
    if avail is not None and need > avail[0]:
        raise _refusal(need, what, avail, device, hint)


def check_counted(*, fixed: int, per_item: int, most: int, count: Callable[[], int | None],
                  what: Callable[[int], str], device: str, hint: str) -> None:
    """ResourceError when ``fixed + per_item * items`` bytes cannot fit in the free memory of
    ``device``, where ``most`` bounds the items and ``count()`` gives them exactly (None: they
    cannot be counted without the result). ``count`` is called only where the bound does not
    fit; ``what(items)`` names the result in the message."""
    worst = fixed + per_item * most
    if worst < CHECK_FROM:
        return
    avail = available_memory(device)
    if avail is None or worst <= avail[0]:
        return
    items = count()
    if items is None:
        return
    need = fixed + per_item * items
    if need > avail[0]:
        raise _refusal(need, what(items), avail, device, hint)


def check_bitmaps(q: int, n: int, device: str, check_from: int = CHECK_FROM) -> None:
    """ResourceError before ``q`` lookups over ``n`` rows are answered as bitmaps that cannot
    fit."""
    words = (n + 31) // 32
    check_known(4 * q * words, f"out='bitmap' for {q:,} lookups over {n:,} rows (one row of "
                "ceil(N/32) 4-byte words per lookup)", device,
                "ask for fewer lookups at once, or for out='count'/'rowids'", check_from)


def check_rowids(q: int, asked: int, n: int, rowid_bytes: int, kind: str, device: str,
                 count: Callable[[], int | None]) -> None:
    """ResourceError before ``q`` lookups (``asked`` of them can match) over ``n`` rows are
    answered as the CSR of every match when it cannot fit; ``count()`` gives the matches."""
    check_counted(
        fixed=(q + 1) * OFFSET_BYTES, per_item=rowid_bytes, most=asked * n, count=count,
        what=lambda m: (f"out='rowids' for {q:,} {kind} lookups over {n:,} rows ({m:,} "
                        f"matches: {OFFSET_BYTES}-byte offsets per lookup, {rowid_bytes}-byte "
                        "rowIDs per match)"),
        device=device, hint="ask for fewer lookups at once, or for out='count'")
