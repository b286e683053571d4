"""What ``indexzoo bench`` prints: the table of a run's records ranked by median, the single
call latencies, the warnings under the table (overlapping spreads, the ranking's rounds) and the
references' figures."""

from __future__ import annotations

from collections.abc import Sequence

from indexzoo.display import byte_size, printable

from .ranking import CONFIDENCE, MIN_PAIRED_ROUNDS, TIE, PairVerdict, verdicts
from .records import Record, rounds_text
from .references import SCAN

__all__ = ["TABLE_WIDTH", "UNSTABLE", "format_latency", "format_references", "format_table",
           "format_warnings", "overlap_groups", "ranking_lines", "ratio_text", "spread_cell"]

# ---------------------------------------------------------------------- output
def _ranked(records: Sequence[Record]) -> list[Record]:
    """Records grouped by workload (in run order), fastest first within each."""
    order = {w: i for i, w in enumerate(dict.fromkeys(r.workload for r in records))}
    return sorted(records, key=lambda r: (order[r.workload], -r.throughput))


#: The widest the ranked table may be, in columns (with index labels of 13 characters).
TABLE_WIDTH = 100

#: A spread (half the range of the repetitions) above this is printed as "unstable".
UNSTABLE = 1.0


def ratio_text(x: float | None) -> str:
    """A ratio to a reference: two decimals from 0.1 on, two significant digits below it
    (``0.0027``: an index 370 times slower than a cache-resident gather reads as such, not as
    0.00), ``-`` where there is no reference."""
    if x is None:
        return "-"
    return f"{x:.2f}" if x >= 0.095 or x == 0 else f"{x:.2g}"  # 0.0999 reads 0.10, not 0.1


def spread_cell(r: Record) -> str:
    """The ``±`` of a record; ``unstable`` where the repetitions spread over more than 100%
    of the median (their range is over twice the median), ``-`` for one repetition."""
    t = r.lookup_timing
    if len(t.seconds) > 1 and t.half_spread > UNSTABLE:
        return "unstable"
    return t.spread_text() or "-"


def format_table(records: Sequence[Record]) -> str:
    """A plain-text table, fastest first per workload: each workload's rows under a line
    ``workload NAME``, the spread of each throughput next to it, memory in the unit that fits.
    Columns that hold nothing but ``-`` (``x scan`` on point workloads, the point references on
    range workloads) are left out, so that the table fits :data:`TABLE_WIDTH` columns. Records
    with latency figures (``--latency``, the latency preset) get a second table of their own
    (:func:`format_latency`) under it."""
    head = ["index", "M lookups/s", "spread", "x peer", "x raw", "x gather", "x scan",
            "build ms", "resident", "peak", "agrees"]
    right = set(range(1, 10))
    rows: list[list[str]] = []
    groups: list[tuple[str, int]] = []  # (workload, index of its first row)
    for r in _ranked(records):
        if not groups or groups[-1][0] != r.workload:
            groups.append((r.workload, len(rows)))
        rows.append([
            printable(r.index), f"{r.throughput / 1e6:.1f}", spread_cell(r),
            ratio_text(r.ratio_to_peer), ratio_text(r.ratio_to_raw),
            ratio_text(r.ratio_to_gather),
            "-" if r.ratio_to_scan is None else f"{r.ratio_to_scan:.3g}",
            f"{r.build_s * 1e3:.2f}", byte_size(r.resident_bytes),
            byte_size(r.peak_build_bytes),
            {True: "yes", False: "NO", None: "-"}[r.agrees_with_peer],
        ])
    keep = [i for i in range(len(head))
            if i < 2 or not rows or any(row[i] != "-" for row in rows)]
    head = [head[i] for i in keep]
    rows = [[row[i] for i in keep] for row in rows]
    right = {j for j, i in enumerate(keep) if i in right}
    lines = _plain_table(head, rows, right).splitlines()
    body = lines[2:]
    for workload, at in reversed(groups):
        body.insert(at, f"workload {printable(workload)}")
    table = "\n".join(lines[:2] + body)
    latency = format_latency(records)
    return f"{table}\n\n{latency}" if latency else table


def _plain_table(head: list[str], rows: list[list[str]], right: set[int]) -> str:
    """``head`` and ``rows`` as aligned columns under a rule; columns in ``right`` are
    right-aligned, trailing blanks dropped."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]

    def cell(text: str, i: int) -> str:
        return text.rjust(widths[i]) if i in right else text.ljust(widths[i])

    lines = ["  ".join(cell(h, i) for i, h in enumerate(head)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(cell(c, i) for i, c in enumerate(row)).rstrip() for row in rows]
    return "\n".join(lines)


def _us(v: float) -> str:
    """Microseconds per call: whole numbers from 10 on, one decimal below."""
    return f"{v:.0f}" if v >= 9.95 else f"{v:.1f}"


def format_latency(records: Sequence[Record]) -> str:
    """The small-batch latencies of the records that have them, as a table of their own:
    one row per (workload, index) as ranked in the main table, one column per batch size
    (lookups per call), wall time per call in µs (median); "" when no record has them."""
    timed = [r for r in _ranked(records) if r.latency_us]
    if not timed:
        return ""
    sizes = list(dict.fromkeys(k for r in timed for k in r.latency_us))
    rows = [[printable(r.workload), printable(r.index),
             *(_us(r.latency_us[k]) if k in r.latency_us else "-" for k in sizes)]
            for r in timed]
    title = "latency: wall time per call (us, median), by lookups per call"
    return title + "\n" + _plain_table(["workload", "index", *sizes], rows,
                                        right=set(range(2, 2 + len(sizes))))


def overlap_groups(records: Sequence[Record]) -> list[list[Record]]:
    """Records of one workload whose throughput ranges (slowest to fastest repetition)
    overlap, chained: in a group, each record's range meets the range of another member, so
    the group's order in a ranked table may change from run to run. Groups of two or more,
    fastest first; records of a single repetition state no range and are left out."""
    groups: list[list[Record]] = []
    for w in dict.fromkeys(r.workload for r in records):
        rows = sorted((r for r in records if r.workload == w and len(r.lookup_seconds) > 1),
                      key=lambda r: -r.throughput_range[1])
        current: list[Record] = []
        low = float("inf")
        for r in rows:
            lo, hi = r.throughput_range
            if current and hi >= low:
                current.append(r)
                low = min(low, lo)
                continue
            if len(current) > 1:
                groups.append(sorted(current, key=lambda r: -r.throughput))
            current, low = [r], lo
        if len(current) > 1:
            groups.append(sorted(current, key=lambda r: -r.throughput))
    return groups


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _m(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:.1f}"


_ENDED = {"budget": "the ranking budget was spent", "rounds": "the most rounds were run",
          "fixed": "no rounds beyond --repeats were asked for",
          "alone": "an index timed alone, for memory, cannot be compared round by round"}


def _chains(pairs: Sequence[PairVerdict]) -> list[list[str]]:
    """Neighbouring open pairs joined into chains of names: a/b and b/c give [a, b, c]."""
    chains: list[list[str]] = []
    for p in pairs:
        if chains and chains[-1][-1] == p.faster:
            chains[-1].append(p.slower)
        else:
            chains.append([p.faster, p.slower])
    return chains


def _rounds_of(r: Record) -> list[int] | None:
    """The record's rounds; records written before rounds were kept number theirs in order."""
    if r.timing != "interleaved":
        return None
    return r.lookup_rounds or list(range(len(r.lookup_seconds)))


def ranking_lines(records: Sequence[Record]) -> list[str]:
    """Per workload: whether the table's order is established (every neighbouring pair
    ordered or tied, :mod:`indexzoo.tools.ranking`) and, where not, which indexes may swap."""
    lines = []
    several = len({r.workload for r in records}) > 1
    for w in dict.fromkeys(r.workload for r in records):
        rows = [r for r in _ranked(records) if r.workload == w and r.lookup_seconds]
        if len(rows) < 2:
            continue
        where = f" ({w})" if several else ""
        rounds = max(len(r.lookup_seconds) for r in rows)
        found = verdicts([(r.index, r.lookup_seconds, _rounds_of(r)) for r in rows])
        pending = [v for v in found if v.state == "open"]
        tied = [v for v in found if v.state == "tied"]
        ties = ("; " + "; ".join(f"{v.faster} and {v.slower} tied within {TIE:.0%}"
                                 for v in tied)) if tied else ""
        if not pending:
            lines.append(f"ranking{where}: established after {rounds_text(rounds)} (each neighbour "
                         f"ordered at {CONFIDENCE:.0%} confidence{ties})")
            continue
        ended = _ENDED.get(rows[0].ranking or "", "")
        few = (f", and a paired comparison needs at least {MIN_PAIRED_ROUNDS}"
               if rounds < MIN_PAIRED_ROUNDS else "")
        sets = "; of ".join(_and(c) for c in _chains(pending))
        lines.append(f"warning{where}: the order of {sets} is not established after "
                     f"{rounds_text(rounds)} ({ended or 'as run'}{few}); it may change from run "
                     "to run")
    return lines


def format_warnings(records: Sequence[Record]) -> list[str]:
    """Lines for under the table: whether the ranking is established (:func:`ranking_lines`),
    the hardware references (:func:`format_references`), and a note when the figures come
    from one repetition each."""
    lines = ranking_lines(records)
    lines += format_references(records)
    if records and max(len(r.lookup_seconds) for r in records) < 2:
        lines.append("note: one timed repetition per figure, so no spread is stated and the "
                     "order of close figures is unverified (use --repeats 5)")
    return [printable(line) for line in lines]


def format_references(records: Sequence[Record]) -> list[str]:
    """Lines on the hardware references of the run's point workloads: what ``x raw`` and
    ``x gather`` compare with, said once, then one short line of figures per workload (the
    workload named when the run has several, as a sweep has)."""
    figures = []
    points = scans = False
    for w in dict.fromkeys(r.workload for r in records):
        r = next(r for r in records if r.workload == w)
        if r.raw_searchsorted or r.random_gather:
            points = True
            figures.append((w, f"raw {_m(r.raw_searchsorted)}, gather {_m(r.random_gather)} "
                               "M lookups/s"))
        if r.scan_floor:
            scans = True
            name = r.scan_floor_reference or SCAN
            others = [f"{k} {1e3 / v:.3f} ms" for k, v in r.scan_references.items()
                      if k != name and v > 0]
            figures.append((w, f"{name} {1e3 / r.scan_floor:.3f} ms a read of the keys"
                               + (f" ({'; '.join(others)})" if others else "")))
    if not figures:
        return []
    several = len({r.workload for r in records}) > 1
    lines = ["references, same run:"]
    if points:
        lines[0] += " x raw against the array library's own searchsorted (positions only),"
        lines.append("  x gather against one random read per lookup (the floor for one "
                     "random access)")
    if scans:
        lines.append("  x scan: range lookups answered in the time of one plain read of the "
                     "keys (a scan's floor for one lookup; the fastest read timed)")
    return [*lines, *(f"  {w}: {text}" if several else f"  {text}" for w, text in figures)]


