"""Bounded renderings of user data for error messages.

An error message that quotes what the user gave must stay short whatever was given: a spec
value can be a string of a megabyte, a list nested a thousand deep, or an integer of a
million digits (whose ``repr`` Python refuses). :func:`shown` renders any value in at most
about ``limit`` characters, at a cost bounded by the limits, never by the value's size.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

__all__ = ["byte_size", "count_text", "duration", "int_text", "one_line", "plain", "printable",
           "shown",
           "shown_path"]

_LIMIT = 60


class _Repr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxtuple = self.maxlist = self.maxarray = self.maxset = self.maxfrozenset = 4
        self.maxdeque = 4
        self.maxdict = 4
        self.maxstring = 48
        self.maxlong = 40
        self.maxother = 48

    def repr_int(self, x: int, level: int) -> str:
        return int_text(x)


_REPR = _Repr()


def int_text(x: int) -> str:
    """``str(x)`` for integers up to 128 bits, ``<int of N bits>`` (signed) beyond."""
    n = abs(int(x)).bit_length()
    if n <= 128:
        return str(int(x))
    return f"<{'negative ' if x < 0 else ''}int of {n} bits>"


def shown(value: Any, limit: int = _LIMIT) -> str:
    """A ``repr``-like rendering of ``value`` in at most about ``limit`` characters."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a hostile __repr__, or one that refuses (huge ints inside objects)
        text = f"<{type(value).__name__}>"
    text = one_line(text)
    if len(text) > limit:
        keep = max(limit - 3, 8)
        text = text[: keep - keep // 3] + "..." + text[len(text) - keep // 3:]
    return text


def shown_path(path: Any) -> str:
    """A file path as quoted text, shortened in the middle past 160 characters."""
    s = str(path)
    return repr(s) if len(s) <= 160 else repr(s[:100] + "..." + s[-50:])


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on instead of showing escaped as
    Python writes it in a string literal (``\\x1b``, ``\\n``, ``\\u202e``): control
    characters (escape codes, carriage returns, newlines), DEL and C1 controls, and Unicode's
    invisible format characters (bidirectional overrides). For names and other text from a
    user's files or plugins echoed to a terminal: a workload named ``"\\x1b[2J"`` must not
    clear the screen."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


_RST_LITERAL = re.compile(r"``([^`]+)``")
_RST_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(~?)([^`]+)`")


def plain(text: str) -> str:
    """Docstring text for a terminal: RST literals ``x`` become `x`, roles such as
    :class:`~a.B` become `B` (`a.B` without the tilde)."""
    text = _RST_LITERAL.sub(r"`\1`", text)
    return _RST_ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`",
                         text)


def one_line(text: str) -> str:
    """``text`` with its lines joined by ``"; "`` (blank lines dropped)."""
    if "\n" not in text and "\r" not in text:
        return text
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def _three_digits(v: float) -> str:
    """``v`` (1 <= v < 1000 after the unit is chosen) with three significant digits, in
    fixed notation: ``1.23``, ``36.9``, ``512``."""
    return f"{v:.0f}" if v >= 99.95 else f"{v:.1f}" if v >= 9.995 else f"{v:.2f}"


def byte_size(n: float) -> str:
    """A byte count in the unit that fits, three significant digits (powers of 1000):
    ``512 B``, ``36.9 kB``, ``1.23 MB``, ``4.10 GB``; never ``0.0 MB`` for a small index."""
    n = float(n)
    if n < 1000:
        return f"{n:.0f} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n / scale < 999.5:
            return f"{_three_digits(n / scale)} {unit}"
    return f"{_three_digits(n / 1e12) if n < 999.5e12 else f'{n / 1e12:.0f}'} TB"


def count_text(n: int) -> str:
    """A count of keys or lookups: ``2^20`` for a power of two from 2 on, else the number
    with thousands separators (``100,000``), never a fractional power (``2^16.61``)."""
    n = int(n)
    if n > 1 and n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return f"{n:,}"


def duration(seconds: float) -> str:
    """``0.42 s``, ``3.1 s``, ``54 s``, ``3 min 05 s``, ``2 h 10 min``: short, for a status line."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
