"""The seed's Figure 1 from sweep results: images/s vs GPU count, one bar series per labelled system, the %
difference of each system against the first (the baseline) at every count, and scaling efficiency — as a PNG
(matplotlib, Agg) and as the same numbers in a table (rich on screen, CSV and Markdown beside the PNG).

``compare`` computes the numbers once; the PNG and the three tables only render them.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.results import Sweep  # noqa: E402
from chexstack.errors import ChexstackError  # noqa: E402
from chexstack.outputs import output_file  # noqa: E402

#: Above this ratio between the largest and smallest bar, the throughput axis is logarithmic (a CPU sweep next to
#: V100 figures would otherwise be invisible); the axis label says so.
LOG_SCALE_RATIO = 30.0
#: From this many series on, a bar is narrower than its label ("1106" over "-1.0 %"): the labels stand upright.
UPRIGHT_BAR_LABELS = 4


@dataclass(frozen=True)
class Cell:
    images_per_sec: float
    per_rank: float
    efficiency: float | None
    diff_pct: float | None  # against the baseline at the same count; None for the baseline or not comparable


@dataclass(frozen=True)
class Comparison:
    """``cells[(label, count)]``: None where that system has no point at that count."""

    labels: tuple[str, ...]
    units: tuple[str, ...]
    counts: tuple[int, ...]
    cells: dict[tuple[str, int], Cell | None]
    differences: tuple[tuple[str, ...], ...]  # per series: what differs from the baseline (``differences``)

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


#: What must be equal for a % difference to mean something: (name in messages, value of a sweep or None when its
#: record does not say). A 32 px sweep is not "−90 %" of a 224 px one.
COMPARED = (
    ("device kind", lambda s: s.unit),
    ("model", lambda s: s.record.model),
    ("image size", lambda s: None if s.record.image_size is None else "%d px" % s.record.image_size),
    ("batch size per rank", lambda s: s.record.batch_size_per_rank),
    ("precision", lambda s: None if s.record.amp is None else ("mixed float16" if s.record.amp else "float32")),
)


def differences(sweep: Sweep, base: Sweep) -> tuple[str, ...]:
    """What differs between ``sweep`` and ``base`` among ``COMPARED``, e.g. ``("image size 32 px vs 224 px",)``;
    empty when they compare like with like. A field one record does not give (a published series) is not
    compared."""
    out = []
    for name, value in COMPARED:
        mine, theirs = value(sweep), value(base)
        if mine is not None and theirs is not None and mine != theirs:
            out.append("%s %s vs %s" % (name, mine, theirs))
    return tuple(out)


def comparable(sweep: Sweep, base: Sweep) -> bool:
    """Whether a % difference against ``base`` means something: nothing of ``COMPARED`` differs."""
    return not differences(sweep, base)


def compare(sweeps: list[Sweep]) -> Comparison:
    """Line up the sweeps by count. The first sweep is the baseline of the % differences: ``100 · (X − X_base) /
    X_base`` with X the total images/s, for sweeps ``comparable`` with it; the others are shown as their own
    group, labelled with what differs (``differences``). Raises ChexstackError for no sweeps or a repeated
    label."""
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
        for n in counts:
            p, base = sweep.point(n), sweeps[0].point(n)
            diff = None
            if p is not None and base is not None and sweep is not sweeps[0] and comparable(sweep, sweeps[0]):
                diff = 100.0 * (p.images_per_sec - base.images_per_sec) / base.images_per_sec
            cells[(sweep.label, n)] = None if p is None else Cell(p.images_per_sec, p.images_per_sec_per_rank,
                                                                   p.scaling_efficiency, diff)
    return Comparison(tuple(labels), tuple(s.unit for s in sweeps), tuple(counts), cells,
                      tuple(differences(s, sweeps[0]) for s in sweeps))


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None else "%.*f" % (digits, x)


def columns(cmp: Comparison) -> list[str]:
    per = "GPU" if set(cmp.units) == {"GPUs"} else "rank"
    return [cmp.count_axis, "system", "images/s", "images/s per %s" % per, "scaling efficiency (%)",
            "vs %s (%%)" % cmp.baseline]


def records(cmp: Comparison) -> list[tuple[int, str, Cell]]:
    """(count, system, cell) for every point, grouped by count, systems in the given order."""
    return [(n, label, cmp.cells[(label, n)]) for n in cmp.counts for label in cmp.labels
            if cmp.cells[(label, n)] is not None]


def rows(cmp: Comparison) -> list[list[str]]:
    """The records as text: images/s to 1 decimal, efficiency and difference in %."""
    def diff(label: str, c: Cell) -> str:
        if label == cmp.baseline:
            return "baseline"
        if not cmp.comparable[cmp.labels.index(label)]:
            return "not comparable: %s" % "; ".join(cmp.differences[cmp.labels.index(label)])
        return "" if c.diff_pct is None else "%+.1f" % c.diff_pct
    return [[str(n), label, _num(c.images_per_sec), _num(c.per_rank),
             _num(c.efficiency * 100 if c.efficiency is not None else None), diff(label, c)]
            for n, label, c in records(cmp)]


def rich_table(cmp: Comparison, title: str = "Throughput vs count") -> Table:
    """The rows with short headers (the title names the baseline) so the table fits a terminal; one system: no
    difference column."""
    table = Table(title=title)
    per = columns(cmp)[3].replace("images/s ", "")
    headers = [cmp.count_axis, "system", "images/s", per, "eff. (%)", "Δ vs base (%)"]
    width = len(headers) if len(cmp.labels) > 1 else len(headers) - 1
    for i, col in enumerate(headers[:width]):
        table.add_column(col, justify="left" if i == 1 else "right", no_wrap=i == 1)
    body = [row[:width] for row in rows(cmp)]
    for i, row in enumerate(body):
        last_of_count = i + 1 == len(body) or body[i + 1][0] != row[0]
        table.add_row(*row, end_section=last_of_count)
    return table


def csv_text(cmp: Comparison) -> str:
    """CSV with full-precision numbers (empty where undefined); when a series is not comparable with the
    baseline, a last column ``not comparable`` says what differs."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    why = not all(cmp.comparable)
    writer.writerow(columns(cmp) + (["not comparable"] if why else []))
    for n, label, c in records(cmp):
        writer.writerow([n, label, "%.3f" % c.images_per_sec, "%.3f" % c.per_rank,
                         "" if c.efficiency is None else "%.2f" % (100 * c.efficiency),
                         "" if c.diff_pct is None else "%.2f" % c.diff_pct]
                        + (["; ".join(cmp.differences[cmp.labels.index(label)])] if why else []))
    return buf.getvalue()


def markdown_text(cmp: Comparison) -> str:
    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    cols = columns(cmp)
    align = ["---:", ":---"] + ["---:"] * (len(cols) - 2)
    return "\n".join([line(cols), "|" + "|".join(align) + "|"] + [line(r) for r in rows(cmp)]) + "\n"


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


def draw(cmp: Comparison, sweeps: list[Sweep], path: Path, title: str | None = None) -> Path:
    """Write the figure (``figure``) to ``path``, in the format its suffix names."""
    fig = figure(cmp, sweeps, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def figure(cmp: Comparison, sweeps: list[Sweep], title: str | None = None) -> plt.Figure:
    """The figure: bars of images/s per count (one colour per system, value on each bar, % vs the baseline above
    the others) over a panel of scaling efficiency (%, ideal 100 % dashed). The caller closes it."""
    n_series, x = len(cmp.labels), range(len(cmp.counts))
    width = 0.8 / n_series
    fig, (ax, ax_eff) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    values = [c.images_per_sec for c in cmp.cells.values() if c]
    log = max(values) / min(values) > LOG_SCALE_RATIO
    mixed_units = len(set(cmp.units)) > 1
    for i, (label, unit) in enumerate(zip(cmp.labels, cmp.units)):
        colour = "C%d" % i
        offsets = [xi - 0.4 + width * (i + 0.5) for xi in x]
        cells = [cmp.cells[(label, n)] for n in cmp.counts]
        legend = "%s (%s)" % (label, unit) if mixed_units else label
        if cmp.differences[i]:
            legend += " [n/c: %s]" % "; ".join(cmp.differences[i])
        bars = ax.bar([o for o, c in zip(offsets, cells) if c], [c.images_per_sec for c in cells if c], width * 0.95,
                      color=colour, label=legend)
        upright = n_series >= UPRIGHT_BAR_LABELS
        for bar, c in zip(bars, [c for c in cells if c]):
            text = _bar_label(c.images_per_sec)
            if c.diff_pct is not None:
                text += ("  " if upright else "\n") + "%+.1f %%" % c.diff_pct
            elif label != cmp.baseline and not cmp.comparable[i]:
                text += ("  " if upright else "\n") + "(n/c)"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 2),
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
        ax.set_ylim(min(values) / 2, max(values) * (12 if upright else 6))
    else:
        ax.set_ylim(0, max(values) * (1.45 if upright else 1.25))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    models = sorted({s.record.model for s in sweeps if s.record.model})
    ax.set_title(title or "Training throughput vs %s%s" % (cmp.count_axis, " — " + ", ".join(models) if models else ""))
    if n_series > 1:
        note = "%% above bars: difference vs %s" % cmp.baseline
        if not all(cmp.comparable):
            note += "\n(n/c): not comparable (the legend names what differs)"
        ax.text(0.99, 0.97, note, transform=ax.transAxes, ha="right", va="top", fontsize=8, color="0.3")
    ax_eff.axhline(100, color="0.5", linestyle="--", linewidth=1)
    ax_eff.set_ylabel("scaling\nefficiency (%)")
    ax_eff.set_ylim(0, 125)
    ax_eff.grid(axis="y", alpha=0.3)
    ax_eff.set_xticks(list(x), [str(n) for n in cmp.counts])
    ax_eff.set_xlabel(cmp.count_axis)
    fig.tight_layout()
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


def write_report(sweeps: list[Sweep], png: Path, title: str | None = None) -> Report:
    """The figure at ``png`` (PNG, or another format matplotlib writes, from the suffix) plus ``.csv`` and ``.md``
    with the same stem. Raises ChexstackError for a path that cannot take the figure, before drawing."""
    figure_path(png)
    cmp = compare(sweeps)
    draw(cmp, sweeps, png, title)
    csv_path, md_path = png.with_suffix(".csv"), png.with_suffix(".md")
    csv_path.write_text(csv_text(cmp))
    md_path.write_text(markdown_text(cmp))
    return Report(png, csv_path, md_path, cmp)
