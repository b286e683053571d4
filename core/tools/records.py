"""What ``indexzoo bench`` runs and what it records: :class:`Entry` (an index configuration)
and :class:`Record` (one index on one workload: timings, footprint, ratios to the references
of the same run). The table, the JSON and the plots are made from records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .timing import Timing

__all__ = ["PEER", "Entry", "Record", "rounds_text"]

#: The peer every figure of a run is compared with.
PEER = "searchsorted"


@dataclass(frozen=True)
class Entry:
    """One index configuration to run: a registered name, parameters, a label for tables."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    param: str | None = None  # the parameter a --param-sweep varies, if any
    value: Any = None

    @property
    def title(self) -> str:
        return self.label or self.name


@dataclass
class Record:
    """One index on one workload."""

    index: str
    workload: str
    device: str
    n_keys: int
    n_lookups: int
    out: str
    lookup_s: float
    lookup_spread: float
    throughput: float  # lookups per second
    build_s: float
    resident_bytes: int
    peak_build_bytes: int
    ratio_to_peer: float | None = None
    agrees_with_peer: bool | None = None
    sweep: str | None = None
    sweep_value: Any = None
    generate_s: float | None = None  # generating the workload's data on the device (untimed)
    latency_us: dict[str, float] = field(default_factory=dict)
    index_name: str = ""  # registered name (index is the table label)
    param: str | None = None
    param_value: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    workload_spec: dict[str, Any] = field(default_factory=dict)
    lookup_seconds: list[float] = field(default_factory=list)  # every timed repetition
    # the interleaved round of each repetition (empty: timed alone, repetitions back to back)
    lookup_rounds: list[int] = field(default_factory=list)
    build_seconds: list[float] = field(default_factory=list)
    timing: str = "interleaved"  # or "sequential": repetitions back to back (see run_bench)
    # the hardware references of the same run (:mod:`indexzoo.tools.references`), lookups per second
    raw_searchsorted: float | None = None
    random_gather: float | None = None
    scan_floor: float | None = None  # range lookups: one per plain read of the keys (the fastest)
    # which read of the keys was the scan floor (a name of indexzoo.tools.references.SCANS, e.g.
    # "scan floor (vector read)"), and every read timed, reads per second by name
    scan_floor_reference: str | None = None
    scan_references: dict[str, float] = field(default_factory=dict)
    # how the workload's timing rounds ended (:mod:`indexzoo.tools.ranking`): "established"
    # (every neighbouring pair ordered or tied), "budget" (the ranking budget was spent first),
    # "rounds" (the most rounds allowed were run), "fixed" (no rounds beyond --repeats asked),
    # "alone" (the open pairs have an index timed alone, which rounds cannot pair)
    ranking: str | None = None

    @property
    def ratio_to_raw(self) -> float | None:
        """Throughput against the raw searchsorted call (positions only)."""
        return self.throughput / self.raw_searchsorted if self.raw_searchsorted else None

    @property
    def ratio_to_gather(self) -> float | None:
        """Throughput against the random-gather floor."""
        return self.throughput / self.random_gather if self.random_gather else None

    @property
    def ratio_to_scan(self) -> float | None:
        """Range lookups answered in the time of one plain read of the keys."""
        return self.throughput / self.scan_floor if self.scan_floor else None

    @property
    def throughput_per_byte(self) -> float:
        return self.throughput / self.resident_bytes if self.resident_bytes else float("nan")

    @property
    def lookup_timing(self) -> Timing:
        return Timing(tuple(self.lookup_seconds) or (self.lookup_s,))

    @property
    def throughput_range(self) -> tuple[float, float]:
        """(slowest, fastest) throughput over the repetitions."""
        t = self.lookup_timing
        return (self.n_lookups / t.slowest if t.slowest > 0 else float("inf"),
                self.n_lookups / t.fastest if t.fastest > 0 else float("inf"))

    @property
    def half_spread(self) -> float:
        """The ``±`` of the throughput: (max - min) / median / 2 of the repetitions' seconds."""
        return self.lookup_timing.half_spread


def rounds_text(n: int) -> str:
    """``1 round``, ``7 rounds``."""
    return f"{n} round" + ("" if n == 1 else "s")
