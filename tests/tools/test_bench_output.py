"""The bench printout stays compact: references as short lines, latencies in a table of their
own, memory with sensible precision at any size, key counts as the numbers they are."""

from __future__ import annotations

from typing import Any

from indexzoo.display import byte_size, count_text
from indexzoo.tools.bench import (
    Record,
    format_latency,
    format_references,
    format_table,
    format_warnings,
)
from indexzoo.tools.timing import Timing
from indexzoo.tools.workloads import Workload

HIT_RATES = [1.0, 0.9, 0.75, 0.5, 0.25, 0.1, 0.0]


def rec(name: str, workload: str = "w", seconds: tuple[float, ...] = (1.0, 1.1),
        resident: int = 10_000, **kw: Any) -> Record:
    t = Timing(seconds)
    return Record(index=name, workload=workload, device="cpu", n_keys=100, n_lookups=1000,
                  out="rowid", lookup_s=t.median, lookup_spread=t.spread,
                  throughput=1000 / t.median, build_s=0.001, resident_bytes=resident,
                  peak_build_bytes=2 * resident, lookup_seconds=list(seconds), **kw)


def sweep_records() -> list[Record]:
    """A hit-rate sweep of two indexes with the references of each workload."""
    return [rec(name, f"quick:hit_rate={h}", raw_searchsorted=5.6e6 + i,
                random_gather=30.1e6 + i)
            for i, h in enumerate(HIT_RATES) for name in ("sorted-array", "searchsorted")]


def test_a_sweep_states_what_the_references_are_once_and_one_short_line_each() -> None:
    lines = format_references(sweep_records())
    assert lines[:2] == [
        "references, same run: x raw against the array library's own searchsorted "
        "(positions only),",
        "  x gather against one random read per lookup (the floor for one random access)"]
    assert lines[2:] == [f"  quick:hit_rate={h}: raw 5.6, gather 30.1 M lookups/s"
                         for h in HIT_RATES]
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    assert len(lines) == len(HIT_RATES) + 2
    assert lines == [ln for ln in format_warnings(sweep_records()) if ln in lines]


def test_one_workload_gets_its_reference_figures_without_its_name() -> None:
    lines = format_references([rec("a", raw_searchsorted=2.9e6, random_gather=39.9e6)])
    assert lines[-1] == "  raw 2.9, gather 39.9 M lookups/s"
    assert format_references([rec("a")]) == []  # range workloads have no references


def test_latencies_are_a_table_of_their_own_not_part_of_the_workload_column() -> None:
    latency = {"1": 6.2, "16": 6.4, "256": 18.0, "4096": 643.4}
    records = [rec("sorted-array", "latency", latency_us=latency),
               rec("searchsorted", "latency", seconds=(2.0, 2.1),
                   latency_us={k: 2 * v for k, v in latency.items()})]
    text = format_table(records)
    main, _, extra = text.partition("\n\n")
    assert "latency(" not in main and "us/call" not in main
    assert max(len(line) for line in main.splitlines()) < 150
    assert main.splitlines()[2] == "workload latency"
    assert [ln.split()[0] for ln in main.splitlines()[3:]] == ["sorted-array", "searchsorted"]
    assert extra.splitlines() == [
        "latency: wall time per call (us, median), by lookups per call",
        "workload  index           1   16  256  4096",
        "--------  ------------  ---  ---  ---  ----",
        "latency   sorted-array  6.2  6.4   18   643",
        "latency   searchsorted   12   13   36  1287",
    ]
    assert format_latency([rec("a")]) == ""
    assert "\n\n" not in format_table([rec("a")])


def test_memory_columns_keep_three_significant_digits_at_any_size() -> None:
    lines = format_table([rec("tiny", resident=36_864), rec("big", resident=1_234_567_890)])
    head = lines.splitlines()[0].split()
    assert "resident" in head and "peak" in head and "MB" not in head
    rows = {line.split()[0]: line for line in lines.splitlines()[3:]}
    assert "36.9 kB" in rows["tiny"] and "73.7 kB" in rows["tiny"]
    assert "1.23 GB" in rows["big"] and "2.47 GB" in rows["big"]
    assert "MB" not in rows["tiny"]  # not "0.0 MB"


def test_byte_sizes_never_round_to_zero_or_switch_to_exponents() -> None:
    assert [byte_size(n) for n in (0, 512, 999, 1000, 36_900, 99_949, 99_950, 999_499,
                                   999_500, 1_234_567, 4.1e9, 2e12)] == [
        "0 B", "512 B", "999 B", "1.00 kB", "36.9 kB", "99.9 kB", "100 kB", "999 kB",
        "1.00 MB", "1.23 MB", "4.10 GB", "2.00 TB"]


def test_key_counts_are_powers_of_two_only_when_they_are() -> None:
    assert [count_text(n) for n in (1, 2, 64, 1 << 20, 3, 100_000, 1_000_000)] == [
        "1", "2^1", "2^6", "2^20", "3", "100,000", "1,000,000"]
    w = Workload(name="w", n_keys=100_000, n_lookups=1 << 12)
    assert w.describe().startswith("w: 100,000 uniform u64 keys x1, 2^12 point lookups")
    assert "2^16.61" not in w.describe()


BUILTIN = ["warpcore-hash", "btree", "sorted-array", "eo-bs", "ao-pb-ks", "ao-pb-bs",
           "lightweight", "ao-bs", "eo-ks", "searchsorted", "rx-opt", "rx", "cgrx-8x4",
           "cgrx-5x4", "cgrx"]


def ranked_run(workload: str = "quick") -> list[Record]:
    """A fabricated point run of the built-in indexes: a fast one far above the peer, slow
    ray-tracing ones hundreds of times below a cache-resident gather, one whose repetitions
    spread over 100%, four-digit throughputs and builds of seconds."""
    records = []
    for i, name in enumerate(BUILTIN):
        seconds = (1e-4 * (i + 1), 1.1e-4 * (i + 1))
        if name == "btree":
            seconds = (1e-4, 9e-4, 2e-4)  # range 8e-4 over a median of 2e-4: ±200%
        r = rec(name, workload, seconds=seconds, resident=1_234_567_890,
                raw_searchsorted=5e9, random_gather=68e9, agrees_with_peer=True,
                ratio_to_peer=float(i + 1) ** -3)
        r.n_lookups, r.build_s = 1 << 20, 2.09427
        r.throughput = r.n_lookups / r.lookup_timing.median
        records.append(r)
    return records


def test_the_ranked_table_fits_100_columns_without_empty_or_zero_columns() -> None:
    sweep = [r for h in HIT_RATES for r in ranked_run(f"quick:hit_rate={h}")]
    for records in (ranked_run(), sweep):
        text = format_table(records)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 100, max(lines, key=len)
        head = lines[0].split("  ")
        assert "x scan" not in lines[0]  # point workloads: a column of "-" only
        assert "lookups/s/B" not in lines[0]
        rows = [line for line in lines[2:] if not line.startswith("workload ")]
        assert len(rows) == len(records)
        assert " 0.00 " not in text + " " and "0.0 " not in text
        by_name = {row.split()[0]: row for row in rows}
        assert "unstable" in by_name["btree"] and "±" not in by_name["btree"]
        assert by_name["cgrx"].split()[3:6] == ["0.0003", "0.13", "0.0098"]
        assert [h.strip() for h in head if h.strip()][:4] == ["index", "M lookups/s",
                                                                 "spread", "x peer"]
    assert format_table(sweep).count("workload quick:hit_rate=") == len(HIT_RATES)
