"""The conformance checks: small functions, each named for the property of the contract it
guards, grouped, and selected by the index's capabilities.

Every check takes a :class:`Context` (how to make a fresh index of the plugin under test, on
which device, at which size) and raises ``AssertionError`` with a message that says what was
expected. Checks that need a capability (``range``, ``duplicates``, ``uint64``) are only run
for indexes that declare it; :func:`check_missing_capabilities_raise_unsupported` checks that
an index without it says so with ``Unsupported``.

One module per group, in the order the groups run (:data:`MODULES`).
"""

from __future__ import annotations

from . import (
    bad_input,
    capabilities,
    concurrency,
    contract,
    differential,
    dtypes,
    extremes,
    footprint,
    order,
    out_modes,
    ownership,
    persistence,
    ranges,
    sizes,
    stateful,
)

__all__ = ["MODULES"]

#: The modules of the check groups, in the order they run.
MODULES = (contract, differential, stateful, out_modes, ranges, extremes, sizes, dtypes, order, bad_input,
           ownership, concurrency, footprint, persistence, capabilities)
