"""Every conformance check, in the order they run: the one-column checks (:mod:`.checks`, group
by group),
then the multi-column ``columns`` checks (:mod:`.multicolumn`), then tables as keys
(:mod:`.tables`)."""

from __future__ import annotations

from . import checks, multicolumn, tables
from .context import GROUPS, Check, checks_in

__all__ = ["CHECKS", "GROUPS"]

CHECKS: tuple[Check, ...] = (*(c for m in checks.MODULES for c in checks_in(m)),
                             *checks_in(multicolumn), *checks_in(tables))
