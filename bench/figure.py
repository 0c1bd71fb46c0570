"""The seed's Figure 1 from sweep results: the median images/s over repeats vs GPU count with its 95 % interval
(error bars), one bar series per labelled system, the % difference of each system against the first (the
baseline) at every count with its interval ("not distinguishable" where that holds 0; ``bench.stats``), and
scaling efficiency — as a PNG (matplotlib, Agg) and as the same numbers in a table (rich on screen, CSV and
Markdown beside the PNG). Only series that differ from the baseline in the system alone get a difference
(``bench.guard``); what the others differ in is named in the table and the caption.

``compare`` computes the numbers once; the PNG and the three tables only render them.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from rich.table import Table  # noqa: E402

from bench import cores, guard, stats  # noqa: E402
from bench.results import Point, Sweep  # noqa: E402
from chexstack.errors import ChexstackError  # noqa: E402
from chexstack.outputs import output_file  # noqa: E402

#: Above this ratio between the largest and smallest bar, the throughput axis is logarithmic (a CPU sweep next to
#: V100 figures would otherwise be invisible); the axis label says so.
LOG_SCALE_RATIO = 30.0
#: From this many series on, a bar is narrower than its label ("1106" over "-1.0 %"): the labels stand upright.
UPRIGHT_BAR_LABELS = 4


@dataclass(frozen=True)
class Cell:
    """One system at one count: ``images_per_sec`` the median over its ``repeats`` (readings), ``interval`` its 95 %
    interval (``bench.stats``; None under 3 repeats), ``diff`` against the baseline at the same count (None for the
    baseline, a missing baseline point or a series that is not comparable)."""

    images_per_sec: float
    per_rank: float
    efficiency: float | None
    repeats: int
    interval: stats.Interval | None
    diff: stats.Difference | None

    @property
    def diff_pct(self) -> float | None:
        return None if self.diff is None else self.diff.pct


@dataclass(frozen=True)
class Comparison:
    """``cells[(label, count)]``: None where that system has no point at that count."""

    labels: tuple[str, ...]
    units: tuple[str, ...]
    counts: tuple[int, ...]
    cells: dict[tuple[str, int], Cell | None]
    differences: tuple[tuple[str, ...], ...]  # per series: what differs from the baseline (``guard.differences``)
    notes: tuple[str, ...] = ()  # sentences for the caption (``guard.table1_note``)
    cores: tuple[str, ...] = ()  # each point's cores and load, below the table; runs under foreign load flagged

    @property
    def comparable(self) -> tuple[bool, ...]:
        return tuple(not d for d in self.differences)

    @property
    def baseline(self) -> str:
        return self.labels[0]

    @property
    def count_axis(self) -> str:
        units = sorted(set(self.units))
        return units[0] if len(units) == 1 else " / ".join(units)


def _cell(point: Point, diff: stats.Difference | None) -> Cell:
    return Cell(point.images_per_sec, point.images_per_sec_per_rank, point.scaling_efficiency, len(point.readings),
                stats.median_interval(point.readings), diff)


def compare(sweeps: list[Sweep]) -> Comparison:
    """Line up the sweeps by count. The first sweep is the baseline of the % differences (``bench.stats.difference``:
    of the medians over repeats, ``100 · (X / X_base − 1)``, with its 95 % interval) for sweeps
    ``guard.comparable`` with it; the others are shown as their own group, labelled with what differs
    (``guard.differences``). Raises ChexstackError for no sweeps or a repeated label."""
    if not sweeps:
        raise ChexstackError("bench-report: expected at least one result file")
    labels = [s.label for s in sweeps]
    repeated = sorted({lbl for lbl in labels if labels.count(lbl) > 1})
    if repeated:
        raise ChexstackError("bench-report: label %s appears in more than one result file; labels name the series "
                             "(give each sweep its own --label)" % ", ".join(repr(r) for r in repeated))
    counts = sorted({p.count for s in sweeps for p in s.points})
    cells: dict[tuple[str, int], Cell | None] = {}
    for sweep in sweeps:
        compared = sweep is not sweeps[0] and guard.comparable(sweep, sweeps[0])
        for n in counts:
            p = sweep.point(n)
            diff = stats.gap(sweep, sweeps[0], n) if p and compared and sweeps[0].point(n) else None
            cells[(sweep.label, n)] = None if p is None else _cell(p, diff)
    notes = tuple(dict.fromkeys(n for n in (guard.table1_note(s, sweeps[0]) for s in sweeps[1:]) if n))
    notes += guard.path_notes(sweeps)
    return Comparison(tuple(labels), tuple(s.unit for s in sweeps), tuple(counts), cells,
                      tuple(guard.differences(s, sweeps[0]) for s in sweeps), notes, tuple(cores.caption_lines(sweeps)))


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None else "%.*f" % (digits, x)


NOT_DISTINGUISHABLE = "not distinguishable"
NO_INTERVAL = "no interval"
#: How the intervals are made, for captions (``bench.stats``).
METHOD = ("95 %% intervals: percentile bootstrap of the median over repeats (Efron & Tibshirani 1993), %d resamples, "
          "fixed seed; %s under %d repeats" % (stats.RESAMPLES, NO_INTERVAL, stats.MIN_REPEATS))
#: What ``±`` and the designs of a difference mean, for captions (``bench.stats``).
RESOLVED = ("±: a difference's interval half-width, the smallest difference the design resolved; unpaired: each "
            "side's repeats resampled alone (separate sweeps)")
PAIRED = ("paired: the median of the per-round ratios (system / %s in the same round of the study), its interval "
          "bootstrapped over the rounds")


def columns(cmp: Comparison) -> list[str]:
    """The columns of the Markdown and screen tables."""
    per = "GPU" if set(cmp.units) == {"GPUs"} else "rank"
    return [cmp.count_axis, "system", "repeats", "images/s (median)", "images/s 95 % interval",
            "images/s per %s" % per, "scaling efficiency (%)", "vs %s (%%)" % cmp.baseline]


def records(cmp: Comparison) -> list[tuple[int, str, Cell]]:
    """(count, system, cell) for every point, grouped by count, systems in the given order."""
    return [(n, label, cmp.cells[(label, n)]) for n in cmp.counts for label in cmp.labels
            if cmp.cells[(label, n)] is not None]


def _interval_text(interval: stats.Interval | None, signed: bool = False) -> str:
    if interval is None:
        return NO_INTERVAL
    return ("[%+.1f, %+.1f]" if signed else "[%.1f, %.1f]") % (interval.low, interval.high)


def verdict(d: stats.Difference) -> str:
    """``not distinguishable`` where the difference's interval holds 0, ``no interval`` without one, else ``""``."""
    return {None: NO_INTERVAL, False: NOT_DISTINGUISHABLE, True: ""}[d.distinguishable]


def diff_text(cmp: Comparison, label: str, c: Cell) -> str:
    """The difference column: ``baseline``, ``not comparable: …``, ``-5.9 [-8.7, -3.0]`` (% and its 95 % interval),
    ``… not distinguishable`` where the interval holds 0, ``-8.0 (no interval)``; empty without a baseline point."""
    if label == cmp.baseline:
        return "baseline"
    if not cmp.comparable[cmp.labels.index(label)]:
        return "not comparable: %s" % "; ".join(cmp.differences[cmp.labels.index(label)])
    if c.diff is None:
        return ""
    if c.diff.interval is None:
        return "%+.1f (%s)" % (c.diff.pct, ", ".join([NO_INTERVAL] + ([c.diff.design] if c.diff.paired else [])))
    return " ".join(filter(None, ["%+.1f" % c.diff.pct, _interval_text(c.diff.interval, True),
                                  "(±%.1f, %s)" % (c.diff.half_width, c.diff.design), verdict(c.diff)]))


def rows(cmp: Comparison) -> list[list[str]]:
    """The records as text: images/s to 1 decimal with the 95 % interval, efficiency and difference in %."""
    return [[str(n), label, str(c.repeats), _num(c.images_per_sec), _interval_text(c.interval), _num(c.per_rank),
             _num(c.efficiency * 100 if c.efficiency is not None else None), diff_text(cmp, label, c)]
            for n, label, c in records(cmp)]


def caption(cmp: Comparison) -> list[str]:
    """What the figure and the Markdown table say below themselves: how the intervals are made (when a point has
    repeats enough for one), what each series not compared differs in, and the guard's notes."""
    lines = [METHOD] if any(c and c.interval for c in cmp.cells.values()) else []
    diffs = [c.diff for c in cmp.cells.values() if c and c.diff]
    if any(d.interval for d in diffs):
        lines.append(RESOLVED)
    if any(d.paired for d in diffs):
        lines.append(PAIRED % cmp.baseline)
    lines += ["not compared with %s: %s: %s" % (cmp.baseline, label, "; ".join(found))
              for label, found in zip(cmp.labels, cmp.differences) if found]
    return lines + list(cmp.notes)


def rich_table(cmp: Comparison, title: str = "Throughput vs count") -> Table:
    """The rows with short headers (the title names the baseline) so the table fits a terminal; one system: no
    difference column."""
    table = Table(title=title)
    per = columns(cmp)[5].replace("images/s ", "")
    headers = [cmp.count_axis, "system", "n", "images/s", "95 % interval", per, "eff. (%)", "Δ vs base (%)"]
    width = len(headers) if len(cmp.labels) > 1 else len(headers) - 1
    for i, col in enumerate(headers[:width]):
        table.add_column(col, justify="left" if i == 1 else "right", no_wrap=i == 1)
    body = [row[:width] for row in rows(cmp)]
    for i, row in enumerate(body):
        last_of_count = i + 1 == len(body) or body[i + 1][0] != row[0]
        table.add_row(*row, end_section=last_of_count)
    return table


def csv_text(cmp: Comparison) -> str:
    """CSV with full-precision numbers (empty where undefined): per point the repeats, the median images/s and its
    95 % interval's bounds, per GPU, efficiency, the difference against the baseline with its interval's bounds
    and ``verdict``; when a series is not comparable with the baseline, a last column ``not comparable`` says
    what differs."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    why = not all(cmp.comparable)
    cols = columns(cmp)
    vs = cols[7].replace(" (%)", "")
    writer.writerow(cols[:4] + ["images/s 95 % low", "images/s 95 % high"] + cols[5:8]
                    + ["%s 95 %% low (%%)" % vs, "%s 95 %% high (%%)" % vs, "%s resolved ± (%%)" % vs, "design",
                       "verdict"]
                    + (["not comparable"] if why else []))
    for n, label, c in records(cmp):
        d = c.diff
        bounds = d.interval if d is not None else None
        writer.writerow([n, label, c.repeats, "%.3f" % c.images_per_sec,
                         _num(c.interval and c.interval.low, 3), _num(c.interval and c.interval.high, 3),
                         "%.3f" % c.per_rank, _num(c.efficiency and 100 * c.efficiency, 2),
                         _num(c.diff_pct, 2), _num(bounds and bounds.low, 2),
                         _num(bounds and bounds.high, 2), _num(d and d.half_width, 2), "" if d is None else d.design,
                         "" if d is None else verdict(d) or "distinguishable"]
                        + (["; ".join(cmp.differences[cmp.labels.index(label)])] if why else []))
    return buf.getvalue()


def markdown_text(cmp: Comparison, gap: list[str] | tuple[str, ...] = ()) -> str:
    """The rows as a Markdown table, the caption's lines below it, then the ``gap`` sentences
    (``bench.attribution.explain``) under a heading of their own."""
    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    cols = columns(cmp)
    align = ["---:", ":---"] + ["---:"] * (len(cols) - 2)
    notes = caption(cmp) + list(cmp.cores)
    return "\n".join([line(cols), "|" + "|".join(align) + "|"] + [line(r) for r in rows(cmp)]
                     + ([""] + ["- " + n for n in notes] if notes else [])
                     + (["", GAP_HEADING, ""] + ["- " + g for g in gap] if gap else [])) + "\n"


#: The Markdown heading above the gap's sentences.
GAP_HEADING = "Where the step time went (Horovod timeline, `invoke bench --timeline`):"


def _bar_label(x: float) -> str:
    return "%.0f" % x if x >= 100 else "%.1f" % x


def efficiency_label_above(series: int, efficiency_pct: float) -> bool:
    """Where series ``series``'s efficiency label goes: neighbouring series alternate above and below their
    markers, so labels of close values at one count never share a row (review N11: "85 %" and "73 %" overlapped);
    a value near the panel's floor always goes above."""
    return series % 2 == 0 or efficiency_pct < 15


def _efficiency_label(ax, x: float, y: float, series: int, colour: str) -> None:
    above = efficiency_label_above(series, y)
    ax.annotate("%.0f %%" % y, (x, y), xytext=(0, 5 if above else -5), textcoords="offset points", ha="center",
                va="bottom" if above else "top", fontsize=7, color=colour, zorder=5,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})


def _error_bars(ax, shown: list[tuple[float, Cell]]) -> None:
    """Error bars at the bars' x offsets: each cell's 95 % interval (cells without one get none)."""
    if shown:
        ax.errorbar([o for o, _ in shown], [c.images_per_sec for _, c in shown], fmt="none", ecolor="0.2",
                    elinewidth=1, capsize=3, yerr=[[c.images_per_sec - c.interval.low for _, c in shown],
                                                   [c.interval.high - c.images_per_sec for _, c in shown]])


def _legend_differences(found: tuple[str, ...]) -> str:
    """What a legend entry says a series differs in: the first difference, and how many more the caption names."""
    return found[0] + ("; +%d more (caption)" % (len(found) - 1) if len(found) > 1 else "")


def _bar_text(cmp: Comparison, series: int, c: Cell, upright: bool) -> str:
    """A bar's label: its images/s, then (not the baseline) the % difference with its interval and ``n.d.`` where
    that holds 0 (not distinguishable), or ``(n/c)`` for a series not comparable."""
    sep = "  " if upright else "\n"
    text = _bar_label(c.images_per_sec)
    if c.diff is not None:
        text += sep + "%+.1f %%" % c.diff.pct
        if c.diff.interval is not None:
            text += sep + _interval_text(c.diff.interval, True) + (" n.d." if not c.diff.distinguishable else "")
            text += sep + "±%.1f%s" % (c.diff.half_width, " paired" if c.diff.paired else "")
    elif series and not cmp.comparable[series]:
        text += sep + "(n/c)"
    return text


def draw(cmp: Comparison, sweeps: list[Sweep], path: Path, title: str | None = None) -> Path:
    """Write the figure (``figure``) to ``path``, in the format its suffix names."""
    fig = figure(cmp, sweeps, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def figure(cmp: Comparison, sweeps: list[Sweep], title: str | None = None) -> plt.Figure:
    """The figure: bars of the median images/s per count (one colour per system, error bars: the 95 % interval
    over repeats, value on each bar, % vs the baseline with its interval above the others) over a panel of scaling
    efficiency (%, ideal 100 % dashed); below, the ``caption``. The caller closes it."""
    n_series, x = len(cmp.labels), range(len(cmp.counts))
    width = 0.8 / n_series
    fig, (ax, ax_eff) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    values = [c.images_per_sec for c in cmp.cells.values() if c]
    tops = [c.interval.high if c.interval else c.images_per_sec for c in cmp.cells.values() if c]  # labels' base
    log = max(values) / min(values) > LOG_SCALE_RATIO
    mixed_units = len(set(cmp.units)) > 1
    for i, (label, unit) in enumerate(zip(cmp.labels, cmp.units)):
        colour = "C%d" % i
        offsets = [xi - 0.4 + width * (i + 0.5) for xi in x]
        cells = [cmp.cells[(label, n)] for n in cmp.counts]
        legend = "%s (%s)" % (label, unit) if mixed_units else label
        if cmp.differences[i]:
            legend += " [n/c: %s]" % _legend_differences(cmp.differences[i])
        shown = [(o, c) for o, c in zip(offsets, cells) if c]
        bars = ax.bar([o for o, _ in shown], [c.images_per_sec for _, c in shown], width * 0.95, color=colour,
                      label=legend)
        _error_bars(ax, [(o, c) for o, c in shown if c.interval])
        upright = n_series >= UPRIGHT_BAR_LABELS
        for bar, (_, c) in zip(bars, shown):
            top = c.interval.high if c.interval else bar.get_height()
            ax.annotate(_bar_text(cmp, i, c, upright), (bar.get_x() + bar.get_width() / 2, top), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8,
                        rotation=90 if upright else 0)
        eff = [(o, c.efficiency * 100) for o, c in zip(offsets, cells) if c and c.efficiency is not None]
        if eff:
            ax_eff.plot([e[0] for e in eff], [e[1] for e in eff], marker="o", color=colour, label=legend)
            for xo, yo in eff:
                _efficiency_label(ax_eff, xo, yo, i, colour)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("images/s (total%s)" % (", log scale" if log else ""))
    upright = n_series >= UPRIGHT_BAR_LABELS  # taller labels need more room above the bars
    if log:
        ax.set_ylim(min(values) / 2, max(tops) * (12 if upright else 6))
    else:
        ax.set_ylim(0, max(tops) * (1.45 if upright else 1.25))
    ax.grid(axis="y", alpha=0.3)
    # above the axes, in one row: inside them it covered the first group's labels
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=min(n_series, 4), fontsize=9, frameon=False)
    models = sorted({s.record.model for s in sweeps if s.record.model})
    ax.set_title(title or "Training throughput vs %s%s" % (cmp.count_axis, " — " + ", ".join(models) if models else ""),
                 pad=8 + 16 * math.ceil(n_series / 4))
    lines = caption(cmp) + [c for c in cmp.cores if c.startswith(cores.FOREIGN + ":")]
    if n_series > 1:
        lines.insert(0, "%% above bars: difference vs %s [95 %% interval]; n.d.: not distinguishable%s" % (
            cmp.baseline, "; (n/c): not comparable" if not all(cmp.comparable) else ""))
    ax_eff.axhline(100, color="0.5", linestyle="--", linewidth=1)
    ax_eff.set_ylabel("scaling\nefficiency (%)")
    ax_eff.set_ylim(0, 125)
    ax_eff.grid(axis="y", alpha=0.3)
    ax_eff.set_xticks(list(x), [str(n) for n in cmp.counts])
    ax_eff.set_xlabel(cmp.count_axis)
    if lines:
        fig.text(0.01, 0.005, "\n".join(lines), ha="left", va="bottom", fontsize=7, color="0.25", wrap=True)
    fig.tight_layout(rect=(0, 0.022 * len(lines) + (0.01 if lines else 0), 1, 1))
    return fig


@dataclass(frozen=True)
class Report:
    png: Path
    csv: Path
    markdown: Path
    comparison: Comparison


def figure_path(path: Path) -> Path:
    """``path`` as the figure's file: its suffix names a format matplotlib writes (.png, .svg, .pdf, …; not
    .csv/.md, the tables' names) and its folder takes files (made when missing). Raises ChexstackError naming the
    formats, or the folder's problem."""
    formats = sorted(FigureCanvasAgg.get_supported_filetypes())
    if path.suffix[1:].lower() not in formats:
        raise ChexstackError("--output %s: expected a figure file name ending in one of %s (the formats matplotlib "
                             "writes; the .csv and .md tables go beside it)"
                             % (path, ", ".join("." + f for f in formats)))
    return output_file(path, "--output", create_folder=True)


def write_report(sweeps: list[Sweep], png: Path, title: str | None = None, gap: list[str] | None = None) -> Report:
    """The figure at ``png`` (PNG, or another format matplotlib writes, from the suffix) plus ``.csv`` and ``.md``
    with the same stem (the ``.md`` with the ``gap`` sentences). Raises ChexstackError for a path that cannot take
    the figure, before drawing."""
    figure_path(png)
    cmp = compare(sweeps)
    draw(cmp, sweeps, png, title)
    csv_path, md_path = png.with_suffix(".csv"), png.with_suffix(".md")
    csv_path.write_text(csv_text(cmp))
    md_path.write_text(markdown_text(cmp, gap or ()))
    return Report(png, csv_path, md_path, cmp)
