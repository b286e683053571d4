"""Plots of ``indexzoo bench`` results that answer "which index?".

* :func:`pareto_plot`: throughput against resident bytes, one labelled point per index, with
  the Pareto front (indexes that no other index beats on both: faster *and* smaller) marked
  and drawn as a step line. Written for every run.
* :func:`sweep_plot`: throughput against the swept value (``--sweep DIM`` or
  ``--param-sweep``), one line per index; in a ``--param-sweep`` alone the other indexes are
  horizontal lines.

Both state the device and the commit in the title, give every index its own colour and
marker (:func:`styles`: distinct colours for any number of indexes), put the legend outside
the data, show each figure's spread (slowest to fastest repetition: error bars and bands), use
readable units (k/M/G lookups/s; kB/MB/GB), and switch an axis to a log scale when its values
span more than :data:`LOG_SPAN` (a sweep of powers of two gets a log2 axis with ``2^k`` ticks).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from indexzoo.errors import MissingDependency

from .records import Record

__all__ = ["LOG_SPAN", "PlotInfo", "Style", "pareto_front", "pareto_plot", "plot_files",
           "styles", "sweep_plot"]

#: An axis whose values span more than this factor is drawn on a log scale.
LOG_SPAN = 20.0

# Ten well-separated colours (matplotlib's tab10), then ten more of other hues and weights;
# beyond twenty indexes, colours are spread evenly around the hue circle instead.
_PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#000000", "#393b79", "#8c6d31", "#637939", "#b8860b", "#7b4173",
    "#ad494a", "#3182bd", "#31a354", "#a65628",
]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*"]

_SWEEP_LABELS = {
    "keys": "keys in the build",
    "lookups": "lookups per run",
    "hit_rate": "hit rate (share of lookups that match)",
    "multiplicity": "copies of each key",
    "zipf": "Zipf skew of the lookups",
    "batches": "batches the lookups are fired in",
    "range_hits": "keys per range lookup",
}


@dataclass(frozen=True)
class Style:
    color: str
    marker: str


@dataclass(frozen=True)
class PlotInfo:
    """What a plot's title says besides the data: the run's label, device, commit."""

    label: str
    device_name: str
    commit: str
    workload: str = ""  # the workload, described (for one-workload plots)

    def title(self, what: str) -> str:
        where = ", ".join(x for x in (self.device_name,
                                      f"commit {_short_commit(self.commit)}" if self.commit else "") if x)
        return f"{what}: {self.label}" + (f"\n{where}" if where else "")


def _short_commit(commit: str) -> str:
    """The first 12 hex digits, keeping a ``-dirty`` mark."""
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def styles(names: Sequence[str]) -> dict[str, Style]:
    """A colour and a marker for each name; no two names share a colour."""
    unique = list(dict.fromkeys(names))
    if len(unique) <= len(_PALETTE):
        colors = _PALETTE[: len(unique)]
    else:
        import colorsys

        colors = []
        for i in range(len(unique)):
            r, g, b = colorsys.hsv_to_rgb(i / len(unique), 0.85, 0.55 + 0.35 * (i % 2))
            colors.append(f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}")
    return {n: Style(colors[i], _MARKERS[i % len(_MARKERS)]) for i, n in enumerate(unique)}


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (bytes, throughput) that no other point dominates (at most as
    many bytes and at least the throughput, better in one), by bytes ascending."""
    front = []
    for i, (b, t) in enumerate(points):
        dominated = any((b2 <= b and t2 >= t) and (b2 < b or t2 > t)
                        for j, (b2, t2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], points[i][1]))


# ---------------------------------------------------------------------- helpers
def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependency("matplotlib", "bench", "writing benchmark plots") from None
    return plt


def _unit(values: Sequence[float], units: Sequence[tuple[str, float]]) -> tuple[str, float]:
    top = max((v for v in values if math.isfinite(v)), default=1.0)
    for name, scale in units:
        if top >= scale:
            return name, scale
    return units[-1]


_TP_UNITS = [("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0)]
_BYTE_UNITS = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("bytes", 1.0)]


def _spans(values: Sequence[float]) -> bool:
    pos = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(pos) and max(pos) / min(pos) > LOG_SPAN


def _plain_log_axis(axis: Any) -> None:
    """Log-scale ticks labelled as plain numbers (1, 2, 5, 10, 20, ...), not powers of 10."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _is_geometric(values: Sequence[Any]) -> bool:
    """Numbers > 0 with a constant ratio > 1 between neighbours (e.g. powers of two)."""
    if len(values) < 3 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                  and v > 0 for v in values):
        return False
    xs = sorted(float(v) for v in values)
    ratios = [b / a for a, b in itertools.pairwise(xs)]
    return ratios[0] > 1.0 and all(abs(r / ratios[0] - 1.0) < 0.01 for r in ratios)


def _pow2_label(v: float) -> str:
    k = math.log2(v) if v > 0 else 0.5
    return f"$2^{{{round(k)}}}$" if abs(k - round(k)) < 1e-9 else f"{v:g}"


def _lookups_word(records: Sequence[Record]) -> str:
    ranges = all(r.workload_spec.get("range_hits") is not None for r in records if r.workload_spec)
    return "range lookups/s" if ranges and records else "lookups/s"


def _save(fig: Any, path: Path | BinaryIO) -> None:
    fig.savefig(path, dpi=120, format="png", bbox_inches="tight")


# ---------------------------------------------------------------------- Pareto
def _place_labels(ax: Any, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str],
                  colors: Sequence[str], left: Sequence[bool],
                  shelves: Sequence[tuple[float, float, float]] = ()) -> list[Any]:
    """Label every point beside it: to its right, or to its left where ``left`` says (points
    of the Pareto front, whose step line leaves them to the right). Labels that would cover
    each other form a column beside the whole group of their points, spread apart vertically,
    and a label away from its point gets a thin leader line. ``shelves`` are the level
    stretches (x0, x1, y) of the front's step line, which a lone label moves below. Returns
    the labels drawn (matplotlib annotations), in the order of ``texts``."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_pt = 72.0 / fig.dpi  # display pixels -> points
    disp = ax.transData.transform(list(zip(xs, ys, strict=True)))
    gap_px = 7 / to_pt
    frame = ax.get_window_extent(renderer)
    boxes = []  # (x0, x1, wanted y centre, height, i)
    lifted = []  # the fastest point's label if it does not fit on the left: alone, lifted
    top = max(ys)
    bold = list(left)
    left = list(left)
    for i, text in enumerate(texts):
        t = ax.text(0.5, 0.5, text, fontsize=8, transform=ax.transAxes,
                    fontweight="bold" if bold[i] else "normal")
        bb = t.get_window_extent(renderer)
        t.remove()
        px, py = disp[i]
        x0 = px - gap_px - bb.width
        if left[i] and x0 >= frame.x0:
            boxes.append((x0, x0 + bb.width, py, bb.height * 1.1, i))
        elif bold[i] and ys[i] == top:  # no room on the left: above the front's last step,
            left[i] = False             # which runs to the right edge (nothing is faster)
            lifted.append((px + gap_px, px + gap_px + bb.width, py + bb.height * 0.8,
                           bb.height, i))
        else:
            left[i] = False
            boxes.append((px + gap_px, px + gap_px + bb.width, py, bb.height * 1.1, i))
    columns: list[list[tuple[float, float, float, float, int]]] = [[b] for b in lifted]
    for on_left in (True, False):  # labels on one side whose extents overlap share a column
        reach = -math.inf
        start = len(columns)
        for b in sorted((b for b in boxes if left[b[4]] == on_left), key=lambda b: b[0]):
            if len(columns) > start and b[0] <= reach:
                columns[-1].append(b)
                reach = max(reach, b[1])
            else:
                columns.append([b])
                reach = b[1]
    placed: dict[int, float] = {}
    xpos: dict[int, float] = {}
    shelves_px = [(*ax.transData.transform((x0, y)), ax.transData.transform((x1, y))[0])
                  for x0, x1, y in shelves]  # (x0, y, x1) in display pixels
    for col in columns:
        col.sort(key=lambda b: b[2])
        want = [b[2] for b in col]
        ys_ = list(want)
        for _ in range(2):  # push up past neighbours, then re-centre on the wanted heights
            for k in range(1, len(col)):
                need = (col[k - 1][3] + col[k][3]) / 2
                ys_[k] = max(ys_[k], ys_[k - 1] + need)
            shift = sum(w - y for w, y in zip(want, ys_, strict=True)) / len(col)
            ys_ = [y + shift for y in ys_]
            ys_[0] = min(ys_[0], want[0])
        for k in range(1, len(col)):
            ys_[k] = max(ys_[k], ys_[k - 1] + (col[k - 1][3] + col[k][3]) / 2)
        members = [b[4] for b in col]
        if any(abs(y - w) > 1 for y, w in zip(ys_, want, strict=True)):
            # spread apart: one column for the group, beside all of its points
            if left[members[0]]:
                edge = min(disp[i][0] for i in members) - gap_px
            else:
                edge = max(disp[i][0] for i in members) + gap_px
            xpos.update({i: edge for i in members})
        elif len(col) == 1 and not bold[members[0]]:
            # a lone label crossing a level stretch of the front's step line goes below it
            x0, x1, y, h = col[0][0], col[0][1], ys_[0], col[0][3]
            for sx0, sy, sx1 in shelves_px:
                if sx0 < x1 and x0 < sx1 and abs(sy - y) < h / 2:
                    ys_[0] = sy - h / 2 - 1
        for b, y in zip(col, ys_, strict=True):
            placed[b[4]] = y
    drawn = []
    for i, text in enumerate(texts):
        px, py = disp[i]
        dy = (placed[i] - py) * to_pt
        dx = (xpos[i] - px) * to_pt if i in xpos else (-7 if left[i] else 7)
        lead = dict(arrowprops=dict(arrowstyle="-", color=colors[i], lw=0.5, shrinkA=0,
                                    shrinkB=3)) if abs(dy) > 4 or abs(dx) > 8 else {}
        drawn.append(ax.annotate(text, (xs[i], ys[i]), xytext=(dx, dy),
                                 textcoords="offset points", ha="right" if left[i] else "left",
                                 va="center", fontsize=8, color=colors[i],
                                 fontweight="bold" if bold[i] else "normal", zorder=5, **lead))
    return drawn


#: Points closer than this many pixels across (and than 1.5 label heights up or down) are
#: crowded; a chain of at least CROWD_MIN crowded points is drawn as a cluster: a box around
#: them, a letter, and a table of its members beside the plot instead of a label each.
CROWD_DX_PX = 24.0
CROWD_MIN = 3


def crowds(disp: Sequence[tuple[float, float]], label_height: float,
           min_size: int = CROWD_MIN) -> list[list[int]]:
    """Chains of points (display pixels) too close for a label each: groups of at least
    ``min_size``, in the order of their first member."""
    parent = list(range(len(disp)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(len(disp)), 2):
        if abs(disp[i][0] - disp[j][0]) < CROWD_DX_PX and \
                abs(disp[i][1] - disp[j][1]) < 1.5 * label_height:
            parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(disp)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) >= min_size]


def _box(ax: Any, text: Any) -> tuple[float, float, float, float]:
    bb = text.get_window_extent(ax.figure.canvas.get_renderer())
    return (bb.x0, bb.y0, bb.x1, bb.y1)


def pareto_plot(records: Sequence[Record], path: Path | BinaryIO, info: PlotInfo,
                style: dict[str, Style] | None = None) -> dict[str, Any]:
    """Throughput against resident bytes for the records of one workload (the first one if
    there are several), the Pareto front marked and drawn as a step line. Returns what was
    drawn: the axes' scales, the front's labels, the units."""
    plt = _pyplot()
    if not records:
        raise ValueError("no records to plot")
    wl = records[0].workload
    rows = [r for r in records if r.workload == wl]
    style = style or styles([r.index for r in records])
    bu, bs = _unit([r.resident_bytes for r in rows], _BYTE_UNITS)
    tu, ts = _unit([r.throughput for r in rows], _TP_UNITS)
    xs = [max(r.resident_bytes, 1) / bs for r in rows]
    ys = [r.throughput / ts for r in rows]
    lo = [r.throughput_range[0] / ts for r in rows]
    hi = [r.throughput_range[1] / ts for r in rows]
    front = pareto_front(list(zip(xs, ys, strict=True)))
    on_front = [i in front for i in range(len(rows))]
    # the hardware references of the same run (indexzoo.tools.references), as horizontal lines
    refs = [(v / ts, label, ls) for v, label, ls in (
        (rows[0].random_gather, "random gather: one random read per lookup (the floor)", ":"),
        (rows[0].raw_searchsorted, "raw searchsorted: positions only", "-."),
    ) if v]

    fig, ax = plt.subplots(figsize=(9.5, 6.0))
    if _spans(xs):
        ax.set_xscale("log")
        _plain_log_axis(ax.xaxis)
    if _spans(ys + hi + lo + [y for y, _, _ in refs]):
        ax.set_yscale("log")
        _plain_log_axis(ax.yaxis)
    # Every point's place first: matplotlib autoscales as each point is drawn, and the first
    # alone would give identical limits (it warns). One value on an axis (a linear one) gets
    # a window centred on it.
    ax.update_datalim(list(zip(xs, ys, strict=True)))
    for values, set_lim in ((xs, ax.set_xlim), (ys + lo + hi, ax.set_ylim)):
        if min(values) == max(values):
            v = values[0]
            set_lim(*((v / 2, v * 3 / 2) if v > 0 else (v - 1, v + 1)))
    for i, r in enumerate(rows):
        st = style[r.index]
        ax.errorbar([xs[i]], [ys[i]], yerr=[[ys[i] - lo[i]], [hi[i] - ys[i]]], fmt="none",
                    ecolor=st.color, elinewidth=1.0, capsize=3, alpha=0.8, zorder=2)
        ax.scatter([xs[i]], [ys[i]], s=80 if on_front[i] else 40, marker=st.marker,
                   color=st.color, edgecolors="black" if on_front[i] else "none",
                   linewidths=1.2, alpha=0.9, zorder=4 if on_front[i] else 3)
    for y, label, ls in refs:
        ax.axhline(y, color="dimgrey", linestyle=ls, linewidth=1.0, zorder=0,
                   label=f"{label}, same run")
    fx = [xs[i] for i in front]
    fy = [ys[i] for i in front]
    ax.margins(x=0.12, y=0.12)
    ax.autoscale_view()
    right = ax.get_xlim()[1]
    ax.step([*fx, right], [*fy, fy[-1]], where="post", color="black", linestyle="--",
            linewidth=1.2, zorder=1, label="Pareto front: no other index is both faster "
            "and smaller (points with a black edge)")
    ax.set_xlim(right=right)
    ax.set_xlabel(f"resident memory of the index ({bu}; left is smaller)")
    ax.set_ylabel(f"throughput ({tu} {_lookups_word(rows)}, median; up is faster)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(info.title("Throughput against memory"), fontsize=11)
    ax.errorbar([], [], yerr=[], fmt="none", ecolor="grey", capsize=3,
                label="slowest to fastest repetition")
    n_rep = max(len(r.lookup_seconds) for r in rows)
    note = rows[0].workload_spec and _describe(rows[0])
    ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.11), frameon=False, fontsize=8.5,
              title=(f"{note}; {n_rep} repetitions" if note else None), title_fontsize=8.5,
              alignment="left")
    shelves = [(x, nx, y) for x, nx, y in zip(fx, [*fx[1:], right], fy, strict=True)]
    fig.canvas.draw()
    disp = [tuple(p) for p in ax.transData.transform(list(zip(xs, ys, strict=True)))]
    probe = ax.text(0.5, 0.5, "Ag", fontsize=8, transform=ax.transAxes)
    height = probe.get_window_extent(fig.canvas.get_renderer()).height
    probe.remove()
    groups = crowds(disp, height)
    in_group = {i for g in groups for i in g}
    alone = [i for i in range(len(rows)) if i not in in_group]
    drawn = _place_labels(ax, [xs[i] for i in alone], [ys[i] for i in alone],
                          [rows[i].index for i in alone],
                          [style[rows[i].index].color for i in alone],
                          [on_front[i] for i in alone], shelves)
    boxes = {rows[i].index: _box(ax, t) for i, t in zip(alone, drawn, strict=True)}
    label_points: dict[str, list[str]] = {}
    clusters = []
    for k, g in enumerate(groups):
        letter = chr(ord("A") + k) if k < 26 else f"Z{k - 25}"
        g = sorted(g, key=lambda i: -ys[i])
        clusters.append([rows[i].index for i in g])
        tag = _draw_cluster(ax, [disp[i] for i in g], letter)
        boxes[letter] = _box(ax, tag)
        label_points[letter] = clusters[-1]
    if groups:
        _cluster_table(ax, rows, groups, ys, tu, on_front, style)
    facts = {"xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
             "clusters": clusters, "labelled": [rows[i].index for i in alone],
             "label_boxes": boxes, "label_points": label_points,
             "points": {r.index: disp[i] for i, r in enumerate(rows)},
             "front": [rows[i].index for i in front], "xlabel": ax.get_xlabel(),
             "ylabel": ax.get_ylabel(), "title": ax.get_title(),
             "colors": {r.index: style[r.index].color for r in rows},
             "references": [label for _, label, _ in refs]}
    _save(fig, path)
    plt.close(fig)
    return facts


def _draw_cluster(ax: Any, points: Sequence[tuple[float, float]], letter: str) -> Any:
    """A dashed box around a cluster's markers (display pixels) and its letter above it."""
    from matplotlib.patches import Rectangle

    pad = 7.0
    x0 = min(p[0] for p in points) - pad
    x1 = max(p[0] for p in points) + pad
    y0 = min(p[1] for p in points) - pad
    y1 = max(p[1] for p in points) + pad
    inv = ax.transData.inverted()
    (dx0, dy0), (dx1, dy1) = inv.transform([(x0, y0), (x1, y1)])
    ax.add_patch(Rectangle((dx0, dy0), dx1 - dx0, dy1 - dy0, fill=False, linestyle="--",
                           linewidth=0.8, edgecolor="dimgrey", zorder=1))
    return ax.annotate(letter, ((dx0 + dx1) / 2 if ax.get_xscale() == "linear" else
                                math.sqrt(dx0 * dx1), dy1), xytext=(0, 2),
                       textcoords="offset points", ha="center", va="bottom", fontsize=8,
                       fontweight="bold", color="dimgrey", zorder=5)


def _cluster_table(ax: Any, rows: Sequence[Record], groups: Sequence[Sequence[int]],
                   ys: Sequence[float], unit: str, on_front: Sequence[bool],
                   style: dict[str, Style]) -> None:
    """The clusters' members beside the plot, fastest first: marker, name, throughput (the
    Pareto front's in bold), under a heading per cluster with its letter and memory."""
    from matplotlib.lines import Line2D

    main = ax.get_legend()
    words = _lookups_word(rows)
    handles: list[Any] = []
    labels: list[str] = []
    bold: list[bool] = []
    for k, g in enumerate(groups):
        letter = chr(ord("A") + k) if k < 26 else f"Z{k - 25}"
        sizes = sorted({rows[i].resident_bytes for i in g})
        mb = (f"{sizes[0] / 1e6:.3g} MB" if len(sizes) == 1 else
              f"{sizes[0] / 1e6:.3g}-{sizes[-1] / 1e6:.3g} MB")
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"{letter}: {len(g)} indexes at {mb} ({unit} {words})")
        bold.append(True)
        for i in sorted(g, key=lambda i: -ys[i]):
            st = style[rows[i].index]
            handles.append(Line2D([], [], linestyle="none", marker=st.marker, color=st.color,
                                  markeredgecolor="black" if on_front[i] else st.color))
            labels.append(f"{rows[i].index}  {ys[i]:.3g}")
            bold.append(on_front[i])
    table = ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      frameon=False, fontsize=8, handletextpad=0.4, borderaxespad=0.0)
    for text, b in zip(table.get_texts(), bold, strict=True):
        if b:
            text.set_fontweight("bold")
    if main is not None:
        ax.add_artist(main)


def _describe(r: Record) -> str:
    w = r.workload_spec
    kind = "point lookups" if w.get("range_hits") is None else \
        f"range lookups of {w['range_hits']} keys"
    return (f"workload {r.workload}: {r.n_keys:,} u{w.get('key_bits', 64)} keys, "
            f"{r.n_lookups:,} {kind}, hit rate {w.get('hit_rate', 1.0):g}, out={r.out}")


# ---------------------------------------------------------------------- sweeps
_SWEEP_FIELDS = {"keys": "n_keys", "lookups": "n_lookups", "hit_rate": "hit_rate",
                 "multiplicity": "multiplicity", "zipf": "lookup_zipf", "batches": "batches",
                 "range_hits": "range_hits"}


def _count(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 1 and n & (n - 1) == 0 else f"{n:,}"


def _fixed(records: Sequence[Record], kind: str) -> str:
    """The workload's dimensions that the sweep keeps fixed, in words."""
    w = records[0].workload_spec
    if not w:
        return ""
    swept = _SWEEP_FIELDS.get(records[0].sweep or "", "") if kind == "sweep" else ""
    parts = []
    if swept != "n_keys":
        parts.append(f"{_count(int(w['n_keys']))} {w.get('distribution', '')} "
                     f"u{w.get('key_bits', 64)} keys")
    else:
        parts.append(f"{w.get('distribution', '')} u{w.get('key_bits', 64)} keys")
    if swept != "multiplicity" and w.get("multiplicity", 1) > 1:
        parts.append(f"x{w['multiplicity']} each")
    what = "point lookups" if w.get("range_hits") is None else \
        f"range lookups of {w['range_hits']} keys" if swept != "range_hits" else "range lookups"
    parts.append(what if swept == "n_lookups" else f"{_count(int(w['n_lookups']))} {what}")
    if swept != "hit_rate":
        parts.append(f"hit rate {w.get('hit_rate', 1.0):g}")
    if swept != "lookup_zipf" and w.get("lookup_zipf"):
        parts.append(f"zipf {w['lookup_zipf']:g}")
    return ", ".join(parts) + f", out={records[0].out}"



def _sweep_axis(records: Sequence[Record]) -> tuple[str, str, Callable[[Record], Any]]:
    """(kind, x label, value of a record): kind is 'sweep' or 'param'."""
    sweep = next((r.sweep for r in records if r.sweep), None)
    if sweep:
        return "sweep", _SWEEP_LABELS.get(sweep, sweep), lambda r: r.sweep_value
    param = next((r.param for r in records if r.param), None)
    owner = next((r.index_name for r in records if r.param), "")
    return "param", f"{owner}: parameter {param}", lambda r: r.param_value


def sweep_plot(records: Sequence[Record], path: Path | BinaryIO, info: PlotInfo,
               style: dict[str, Style] | None = None) -> dict[str, Any]:
    """Throughput against the swept value, one line per index (see the module docstring).
    Returns what was drawn: the axes' scales, the lines' labels in legend order, the units."""
    plt = _pyplot()
    kind, xlabel, value = _sweep_axis(records)
    style = style or styles([r.index for r in records])
    tu, ts = _unit([r.throughput for r in records], _TP_UNITS)
    if kind == "sweep":
        lines = {n: [r for r in records if r.index == n]
                 for n in dict.fromkeys(r.index for r in records)}
        flat: dict[str, Record] = {}
        xvals = list(dict.fromkeys(value(r) for r in records))
    else:
        swept = [r for r in records if r.param]
        owner = swept[0].index_name
        lines = {f"{owner} ({swept[0].param})": swept}
        flat = {r.index: r for r in records if not r.param}
        xvals = list(dict.fromkeys(value(r) for r in swept))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xvals)
    position: dict[Any, float] = {v: float(v) for v in xvals} if numeric else \
        {v: float(i) for i, v in enumerate(xvals)}

    def last_y(item: tuple[str, list[Record]]) -> float:
        return -max(item[1], key=lambda r: position[value(r)]).throughput

    fig, ax = plt.subplots(figsize=(10.0, 5.8))
    all_y: list[float] = []
    for name, rows in sorted(lines.items(), key=last_y):  # legend in the order of the lines' ends
        rows = sorted(rows, key=lambda r: position[value(r)])
        xs = [position[value(r)] for r in rows]
        ys = [r.throughput / ts for r in rows]
        lo = [r.throughput_range[0] / ts for r in rows]
        hi = [r.throughput_range[1] / ts for r in rows]
        all_y += ys + lo + hi
        st = style.get(name) or style.get(rows[0].index) or Style("#000000", "o")
        ax.plot(xs, ys, marker=st.marker, color=st.color, label=name, linewidth=1.6,
                markersize=6)
        if any(len(r.lookup_seconds) > 1 for r in rows):
            ax.fill_between(xs, lo, hi, color=st.color, alpha=0.15, linewidth=0)
    for name, r in flat.items():
        st = style[name]
        y = r.throughput / ts
        all_y.append(y)
        ax.axhline(y, color=st.color, linestyle="--", linewidth=1.3,
                   label=f"{name} (not swept)")
    if numeric and _is_geometric(xvals):
        ax.set_xscale("log", base=2)
        ax.set_xticks([position[v] for v in xvals])
        ax.set_xticklabels([_pow2_label(float(v)) for v in xvals])
        ax.xaxis.set_minor_locator(plt.NullLocator())
    elif not numeric:
        ax.set_xticks([position[v] for v in xvals])
        ax.set_xticklabels([str(v) for v in xvals])
    if _spans(all_y):
        ax.set_yscale("log")
        _plain_log_axis(ax.yaxis)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"throughput ({tu} {_lookups_word(records)}, median)")
    ax.grid(True, which="major", alpha=0.3)
    title = info.title("Throughput over " + xlabel.split(":")[-1].strip())
    fixed = _fixed(records, kind)
    ax.set_title(title + (f"\n{fixed}" if fixed else ""), fontsize=11)
    n_rep = max(len(r.lookup_seconds) for r in records)
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8.5,
                       title=f"index, fastest at the right end first\n(bands: slowest to "
                             f"fastest of {n_rep} repetitions)",
                       title_fontsize=8.5, alignment="left")
    facts = {"xscale": ax.get_xscale(), "yscale": ax.get_yscale(), "xlabel": ax.get_xlabel(),
             "ylabel": ax.get_ylabel(), "title": ax.get_title(),
             "legend": [t.get_text() for t in legend.get_texts()],
             "colors": [line.get_color() for line in ax.get_lines()]}
    _save(fig, path)
    plt.close(fig)
    return facts


# ---------------------------------------------------------------------- files
def plot_files(records: Sequence[Record], stem: Path,
               info: PlotInfo) -> list[tuple[Path, Callable[[Path | BinaryIO], Any]]]:
    """The PNG files of a run and how to draw each (to a path or an open binary file given
    later): a run without a sweep gets ``STEM.png`` (the Pareto plot); a sweep gets
    ``STEM.png`` (the lines) and ``STEM-pareto.png`` (the Pareto plot of its last workload, or
    of all configurations of a ``--param-sweep``). The names extend ``stem``'s whole name
    (``my.run`` gives ``my.run.png``)."""
    if not records:
        return []
    style = styles([r.index for r in records])
    swept = any(r.sweep for r in records) or any(r.param for r in records)
    if not swept:
        return [(stem.with_name(stem.name + ".png"),
                 lambda p: pareto_plot(records, p, info, style))]
    last = records[-1]
    tail = [r for r in records if r.workload == last.workload]
    at = info.label
    if last.sweep:
        v = last.sweep_value
        shown_v = _count(v) if isinstance(v, int) and not isinstance(v, bool) else f"{v:g}" \
            if isinstance(v, float) else str(v)
        at = f"{info.label}, the sweep's last point ({last.sweep} = {shown_v})"
    pinfo = PlotInfo(at, info.device_name, info.commit)
    return [(stem.with_name(stem.name + ".png"), lambda p: sweep_plot(records, p, info, style)),
            (stem.with_name(stem.name + "-pareto.png"),
             lambda p: pareto_plot(tail, p, pinfo, style))]

