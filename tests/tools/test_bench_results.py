"""Bench results a user can trust: spreads in the table, warnings for indexes whose order is
not reliable, interleaved repetitions, every repetition in the JSON, and plots that answer
"which index" (Pareto front, sweeps; distinct colours). No timing is asserted."""

from __future__ import annotations

import io
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from indexzoo.tools.bench import (
    Contender,
    Entry,
    Record,
    format_table,
    format_warnings,
    overlap_groups,
    time_interleaved,
)
from indexzoo.tools.cli import main
from indexzoo.tools.plots import PlotInfo, pareto_front, pareto_plot, plot_files, styles, sweep_plot
from indexzoo.tools.timing import Timing


def rec(name: str, seconds: list[float], n: int = 1000, resident: int = 10_000,
        workload: str = "w", **kw: Any) -> Record:
    t = Timing(tuple(seconds))
    return Record(index=name, workload=workload, device="cpu", n_keys=100, n_lookups=n,
                  out="rowid", lookup_s=t.median, lookup_spread=t.spread,
                  throughput=n / t.median, build_s=0.001, resident_bytes=resident,
                  peak_build_bytes=resident, lookup_seconds=list(seconds),
                  workload_spec={"n_keys": 100, "n_lookups": n, "hit_rate": 1.0,
                                 "key_bits": 64, "distribution": "uniform"}, **kw)


# ---------------------------------------------------------------------- timing
def test_timing_states_half_the_range_and_overlaps() -> None:
    a = Timing((1.0, 1.1, 0.9))
    assert a.median == 1.0 and a.half_spread == pytest.approx(0.1)
    assert a.overlaps(Timing((1.05, 1.3))) and not a.overlaps(Timing((1.2, 1.3)))
    assert Timing((2.0,)).half_spread == 0.0


def test_table_ranks_fastest_first_with_the_spread() -> None:
    rows = [rec("slow", [1.0, 1.04, 0.96]), rec("fast", [0.5, 0.5, 0.5])]
    text = format_table(rows)
    lines = text.splitlines()
    assert "spread" in lines[0]
    assert lines[2] == "workload w"
    assert lines[3].split()[0] == "fast" and lines[4].split()[0] == "slow"
    assert "±4%" in lines[4] and "±0%" in lines[3]


def test_overlapping_spreads_are_grouped() -> None:
    rows = [rec("a", [1.0, 1.2, 0.9]), rec("b", [1.1, 1.3, 1.15]), rec("c", [0.2, 0.21, 0.22]),
            rec("d", [5.0, 5.1, 5.2])]
    groups = overlap_groups(rows)
    assert [[r.index for r in g] for g in groups] == [["a", "b"]]


def test_names_in_the_table_and_warnings_have_control_characters_escaped() -> None:
    rows = [rec("a\x1b[2J", [1.0, 1.2, 0.9], workload="w\x1b[31m"),
            rec("b\r", [1.1, 1.3, 1.15], workload="w\x1b[31m")]
    text = "\n".join([format_table(rows), *format_warnings(rows)])
    assert "\x1b" not in text and "\r" not in text
    assert "workload w\\x1b[31m\na\\x1b[2J" in text and "of a\\x1b[2J and b\\r is not established" in text


def test_overlap_groups_chain_and_stay_within_a_workload() -> None:
    rows = [rec("a", [1.0, 1.1]), rec("b", [1.08, 1.2]), rec("c", [1.18, 1.3]),
            rec("a", [1.0, 1.1], workload="v"), rec("b", [5.0, 5.1], workload="v")]
    assert [[r.index for r in g] for g in overlap_groups(rows)] == [["a", "b", "c"]]
    assert format_warnings(rows)[0].startswith("warning (w): the order of a, b and c is not "
                                               "established after 2 rounds")


def test_one_repetition_gets_a_note_instead_of_a_spread() -> None:
    rows = [rec("a", [1.0]), rec("b", [1.0])]
    assert overlap_groups(rows) == []
    assert format_warnings(rows)[-1].startswith("note: one timed repetition")
    assert "spread" not in format_table(rows)  # a column of nothing but "-"


def test_interleaved_rounds_rotate_and_rewarm_short_calls() -> None:
    calls: list[str] = []

    def contender(name: str) -> Contender:
        return Contender(Entry(name), None, lambda: calls.append(name), Timing((0.0,)))

    cs = [contender("a"), contender("b"), contender("c")]
    time_interleaved(cs, "cpu", repeats=3)
    assert all(len(c.seconds) == 3 for c in cs)
    # every timed call of these fast contenders follows one untimed call of the same one
    assert calls == ["a", "a", "b", "b", "c", "c", "b", "b", "c", "c", "a", "a",
                     "c", "c", "a", "a", "b", "b"]


# ---------------------------------------------------------------------- plots
def test_pareto_front_keeps_what_nothing_beats_on_both() -> None:
    pts = [(10.0, 5.0), (12.0, 9.0), (10.0, 4.0), (30.0, 9.0), (50.0, 20.0), (5.0, 1.0)]
    assert pareto_front(pts) == [5, 0, 1, 4]


def test_styles_never_share_a_colour() -> None:
    for n in (3, 16, 20, 33):
        st = styles([f"i{k}" for k in range(n)])
        assert len({s.color for s in st.values()}) == n
    st16 = styles([f"i{k}" for k in range(16)])
    assert len({(s.color, s.marker) for s in st16.values()}) == 16


def test_pareto_plot_marks_the_front_and_goes_log_beyond_20x(tmp_path: Path) -> None:
    rows = [rec("small-slow", [1.0, 1.1], resident=1_000_000),
            rec("big-fast", [0.01, 0.011], resident=200_000_000),
            rec("dominated", [2.0, 2.1], resident=300_000_000),
            rec("mid", [0.5, 0.55], resident=1_500_000)]
    facts = pareto_plot(rows, tmp_path / "p.png", PlotInfo("w", "Some GPU", "abc123def4567"))
    assert (tmp_path / "p.png").stat().st_size > 10_000
    assert facts["front"] == ["small-slow", "mid", "big-fast"]
    assert facts["xscale"] == "log" and facts["yscale"] == "log"
    assert "(MB" in facts["xlabel"] and "k lookups/s" in facts["ylabel"]
    assert "Some GPU" in facts["title"] and "abc123def456" in facts["title"]
    assert len(set(facts["colors"].values())) == 4


def test_pareto_plot_stays_linear_within_20x(tmp_path: Path) -> None:
    rows = [rec("a", [1.0], resident=10_000_000), rec("b", [0.5], resident=30_000_000)]
    facts = pareto_plot(rows, tmp_path / "p.png", PlotInfo("w", "cpu", "c"))
    assert facts["xscale"] == "linear" and facts["yscale"] == "linear"


def test_sweep_plot_uses_log2_for_powers_of_two(tmp_path: Path) -> None:
    rows = []
    for k in (10, 11, 12, 13):
        rows.append(rec("fast", [0.001, 0.0011], n=1 << k, workload=f"w:{k}",
                        sweep="keys", sweep_value=1 << k))
        rows.append(rec("slow", [0.1 * k, 0.11 * k], n=1 << k, workload=f"w:{k}",
                        sweep="keys", sweep_value=1 << k))
    facts = sweep_plot(rows, tmp_path / "s.png", PlotInfo("w-keys", "cpu", "c"))
    assert facts["xscale"] == "log" and facts["yscale"] == "log"
    assert facts["legend"] == ["fast", "slow"] and facts["xlabel"] == "keys in the build"
    files = [p.name for p, _ in plot_files(rows, tmp_path / "run", PlotInfo("w", "cpu", "c"))]
    assert files == ["run.png", "run-pareto.png"]
    files = [p.name for p, _ in plot_files(rows, tmp_path / "a.b-cpu-1", PlotInfo("w", "cpu", "c"))]
    assert files == ["a.b-cpu-1.png", "a.b-cpu-1-pareto.png"]  # dots in the name stay


def test_param_sweep_plot_has_one_line_and_the_others_flat(tmp_path: Path) -> None:
    rows = [rec("sorted-array", [1.0, 1.0])] + [
        rec(f"wh lf={v}", [v, v], index_name="wh", param="lf", param_value=v)
        for v in (0.5, 0.7, 0.9)]
    facts = sweep_plot(rows, tmp_path / "s.png", PlotInfo("w", "cpu", "c"))
    assert facts["xscale"] == "linear" and facts["xlabel"] == "wh: parameter lf"
    assert facts["legend"] == ["wh (lf)", "sorted-array (not swept)"]


# ---------------------------------------------------------------------- the command
def test_bench_table_json_and_plots_carry_the_spread(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"name": "spread", "n_keys": 2048, "n_lookups": 2048}))
    out = io.StringIO()
    code = main(["bench", "--workload", str(wl), "--device", "cpu", "--repeats", "3",
                 "--indexes", "sorted-array,warpcore-hash,btree", "--output", str(tmp_path)],
                out=out)
    text = out.getvalue()
    assert code == 0, text
    table = text.splitlines()
    assert "spread" in table[0]
    assert all("±" in line or " unstable " in line for line in table[3:7])  # a busy machine
    err = capsys.readouterr().err  # the figures once, in the table: not before it on stderr
    assert not re.search(r"^ +[a-z-]+ +[0-9.]+ M lookups/s", err, re.MULTILINE), err
    data = json.loads(next(tmp_path.glob("w-cpu-*.json")).read_text())
    for r in data["records"]:
        assert len(r["lookup_seconds"]) == 3 and len(r["build_seconds"]) == 3
        assert r["timing"] == "interleaved"
        assert r["throughput_slowest"] <= r["throughput"] <= r["throughput_fastest"]
    assert len(list(tmp_path.glob("w-cpu-*.png"))) == 1


def test_an_entry_whose_engine_cannot_run_is_skipped_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    code = main(["bench", "--preset", "tiny", "--device", "cpu", "--repeats", "1", "--no-plot",
                 "--indexes", "rx", "--param-sweep", "rx.engine=software,optix",
                 "--output", str(tmp_path)], out=out)
    assert code == 0, out.getvalue()
    assert "rx engine=optix  skipped: engine='optix' runs on the GPU only" in \
        capsys.readouterr().err
    assert "rx engine=software" in out.getvalue()
    assert "rx engine=optix" not in out.getvalue()  # no row for what did not run


# ---------------------------------------------------------------------- hardware references
def test_every_point_workload_is_stated_against_the_raw_call_and_the_gather_floor(
        tmp_path: Path) -> None:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"name": "refs", "n_keys": 4096, "n_lookups": 4096, "batches": 2}))
    out = io.StringIO()
    code = main(["bench", "--workload", str(wl), "--device", "cpu", "--repeats", "2",
                 "--indexes", "sorted-array", "--no-plot", "--output", str(tmp_path)], out=out)
    text = out.getvalue()
    assert code == 0, text
    head = text.splitlines()[0]
    assert "x raw" in head and "x gather" in head
    assert "references, same run: x raw" in text
    records = json.loads(next(tmp_path.glob("w-cpu-*.json")).read_text())["records"]
    for r in records:
        assert r["raw_searchsorted"] > 0 and r["random_gather"] > 0
        assert r["ratio_to_raw"] == pytest.approx(r["throughput"] / r["raw_searchsorted"])
        assert r["ratio_to_gather"] == pytest.approx(r["throughput"] / r["random_gather"])


def test_the_references_compute_what_they_claim() -> None:
    import numpy as np

    from indexzoo.tools.references import GATHER, RAW, SCAN, lookups_per_call, reference_calls
    from indexzoo.tools.workloads import Workload, generate

    data = generate(Workload(name="r", n_keys=1000, n_lookups=300, batches=3), "cpu")
    calls = reference_calls(data, "cpu")
    table = np.sort(data.keys)
    raw = np.concatenate(calls[RAW]())
    assert np.array_equal(raw, np.searchsorted(table, data.queries))
    gathered = np.concatenate(calls[GATHER]())
    assert np.array_equal(gathered, table[np.minimum(raw, table.shape[0] - 1)])
    # every lookup hits: the gather reads the looked-up keys themselves
    assert np.array_equal(gathered, data.queries)
    # ranges: one plain read of every key, which stands for one lookup
    ranges = generate(Workload(name="r", n_keys=1000, n_lookups=30, range_hits=4), "cpu")
    calls = reference_calls(ranges, "cpu")
    assert list(calls) == [SCAN] and calls[SCAN]() == [ranges.keys.max()]
    assert lookups_per_call(SCAN, ranges) == 1 and lookups_per_call(RAW, data) == 300


def test_a_range_workload_states_the_scan_floor(tmp_path: Path) -> None:
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"name": "scans", "n_keys": 4096, "n_lookups": 512,
                              "range_hits": 8}))
    out = io.StringIO()
    code = main(["bench", "--workload", str(wl), "--device", "cpu", "--repeats", "2",
                 "--indexes", "sorted-array", "--no-plot", "--output", str(tmp_path)], out=out)
    text = out.getvalue()
    assert code == 0, text
    assert "x scan" in text.splitlines()[0] and "scan floor" in text
    records = json.loads(next(tmp_path.glob("w-cpu-*.json")).read_text())["records"]
    for r in records:
        assert r["scan_floor"] > 0 and r["raw_searchsorted"] is None
        assert r["ratio_to_scan"] == pytest.approx(r["throughput"] / r["scan_floor"])
        # on the CPU one read of the keys, NumPy's: it is the floor
        assert r["scan_floor_reference"] == "scan floor"
        assert r["scan_references"] == {"scan floor": r["scan_floor"]}


def test_the_scan_floor_is_the_fastest_read_of_the_keys() -> None:
    from indexzoo.tools.references import GATHER, SCAN_REDUCTION, SCAN_VECTOR, scan_floor

    assert scan_floor({SCAN_VECTOR: 3300.0, SCAN_REDUCTION: 1800.0, GATHER: 1e9}) == \
        (SCAN_VECTOR, 3300.0)
    assert scan_floor({SCAN_VECTOR: 1700.0, SCAN_REDUCTION: 1800.0}) == (SCAN_REDUCTION, 1800.0)
    assert scan_floor({GATHER: 1e9}) == (None, None)


def test_the_references_lines_name_the_read_that_was_the_floor() -> None:
    from indexzoo.tools.references import SCAN_REDUCTION, SCAN_VECTOR

    reads = {SCAN_VECTOR: 1e3 / 0.3, SCAN_REDUCTION: 1e3 / 0.55}
    r = rec("fused-scan", [0.001], n=1, scan_floor=reads[SCAN_VECTOR],
            scan_floor_reference=SCAN_VECTOR, scan_references=reads)
    text = "\n".join(format_warnings([r]))
    assert "scan floor (vector read) 0.300 ms a read of the keys (scan floor (reduction) " \
           "0.550 ms)" in text
    assert "the fastest read timed" in text


def test_a_table_without_references_leaves_their_columns_out() -> None:
    lines = format_table([rec("a", [1.0, 1.1])]).splitlines()
    cols = lines[0].split()
    assert "raw" not in cols and "gather" not in cols and "scan" not in cols
    both = format_table([rec("a", [1.0, 1.1]), rec("b", [1.0, 1.1], random_gather=1e5)])
    assert "x gather" in both and "x raw" not in both
    at = both.splitlines()[0].index("x gather") + len("x gather")
    assert [line[:at].split()[-1] for line in both.splitlines()[3:]] == ["-", "0.0095"]


def test_the_pareto_plot_draws_the_references_of_the_run(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [rec("a", [1.0, 1.1], raw_searchsorted=2000.0, random_gather=9000.0),
            rec("b", [0.5, 0.6], resident=20_000, raw_searchsorted=2000.0,
                random_gather=9000.0)]
    facts = pareto_plot(rows, tmp_path / "p.png", PlotInfo("w", "cpu", "c"))
    assert len(facts["references"]) == 2 and "floor" in facts["references"][0]
    assert pareto_plot([rec("a", [1.0])], tmp_path / "q.png",
                       PlotInfo("w", "cpu", "c"))["references"] == []


# the quick preset on a 2-core CPU: nine indexes share 12.6 MB, more sit close by
CROWD = [("warpcore-hash", 10.5, 21.0), ("eo-bs", 4.8, 12.6), ("sorted-array", 4.7, 12.6),
         ("btree", 4.3, 14.0), ("ao-ks", 4.2, 12.6), ("ao-pb-ks", 4.1, 18.9),
         ("lightweight", 4.1, 12.6), ("ao-pb-bs", 3.9, 17.8), ("ao-bs", 3.9, 12.6),
         ("eo-pb-bs", 3.8, 12.6), ("ao-ix", 3.7, 12.6), ("searchsorted", 3.6, 12.6),
         ("eo-ks", 3.5, 12.6), ("rx-opt", 1.5, 108.0), ("rx", 1.2, 82.5),
         ("cgrx-8x4", 1.0, 13.2), ("cgrx-5x4", 0.4, 14.3), ("cgrx", 0.3, 14.3)]


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_a_crowded_pareto_plot_keeps_labels_apart_and_off_other_markers(tmp_path: Path) -> None:
    rows = [rec(name, [1e6 / (tp * 1e6) * s for s in (0.95, 1.0, 1.05)], n=1_000_000,
                resident=int(mb * 1e6)) for name, tp, mb in CROWD]
    facts = pareto_plot(rows, tmp_path / "p.png", PlotInfo("quick", "cpu", "c"))
    boxes, points = facts["label_boxes"], facts["points"]
    named = set(facts["labelled"]) | {n for c in facts["clusters"] for n in c}
    assert named == {name for name, _, _ in CROWD}, "every index is named once"
    assert any(len(c) >= 9 for c in facts["clusters"]), "the 12.6 MB crowd gets its own table"
    items = list(boxes.items())
    for i, (a, box_a) in enumerate(items):
        for b, box_b in items[i + 1:]:
            assert not _overlap(box_a, box_b), f"label {a!r} overlaps label {b!r}"
        for name, (x, y) in points.items():
            if name == a or name in facts["label_points"].get(a, ()):
                continue
            r = 4  # a marker's radius in pixels
            assert not _overlap(box_a, (x - r, y - r, x + r, y + r)), \
                f"label {a!r} covers the marker of {name!r}"


def test_an_uncrowded_plot_labels_every_point_beside_it(tmp_path: Path) -> None:
    rows = [rec("a", [1.0, 1.0]), rec("b", [0.1, 0.1], resident=100_000),
            rec("c", [0.01, 0.01], resident=1_000_000)]
    with warnings.catch_warnings():  # nor does matplotlib warn of limits as it draws
        warnings.simplefilter("error")
        facts = pareto_plot(rows, tmp_path / "p.png", PlotInfo("w", "cpu", "c"))
    assert facts["clusters"] == [] and sorted(facts["labelled"]) == ["a", "b", "c"]



def test_one_index_or_indexes_of_one_size_and_speed_plot_without_a_warning(
        tmp_path: Path) -> None:
    """Each axis gets a window around its one value."""
    for rows in ([rec("a", [1.0, 1.0])], [rec("a", [0.5, 0.5]), rec("b", [0.5, 0.5])]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            facts = pareto_plot(rows, tmp_path / "p.png", PlotInfo("w", "cpu", "c"))
        assert sorted(facts["labelled"]) == sorted(r.index for r in rows)
