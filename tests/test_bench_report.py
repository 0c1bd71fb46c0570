"""Sweep results and the seed's Figure 1: the reference series, efficiencies, % differences, tables and PNG."""
from __future__ import annotations

import csv
import io
import json
import os

import pytest

from bench import figure
from bench.results import REFERENCE_DIR, Point, RunRecord, Sweep, load_sweep, point_from_throughput, save_sweep
from chexstack.errors import ChexstackError
from tests.lib.golden import assert_golden
from tests.lib.paths import REPO

SEED = REFERENCE_DIR / "seed-densenet121-baremetal.json"
CPU_SWEEP = REPO / "tests" / "data" / "bench" / "cpu-sweep"


def _gpu_sweep(label, factor, counts=(1, 2, 4, 8)):
    """A series expressed relative to the seed's numbers (a fixture, not a measurement)."""
    seed = load_sweep(SEED)
    return Sweep(label=label, record=RunRecord(model="densenet121", count_unit="GPUs"),
                 points=[Point(count=n, images_per_sec=seed.point(n).images_per_sec * factor) for n in counts])


def test_seed_reference_is_figure_1():
    seed = load_sweep(SEED)
    assert [(p.count, p.images_per_sec) for p in seed.points] == [(1, 185), (2, 315), (3, 422), (4, 589), (8, 1117)]
    assert "Figure 1" in seed.source and seed.record.count_unit == "GPUs"
    # E(n) = X(n) / (n X(1))
    assert [round(p.scaling_efficiency, 3) for p in seed.points] == [1.0, 0.851, 0.76, 0.796, 0.755]
    assert round(seed.point(8).images_per_sec_per_rank, 2) == 139.62


def test_point_from_the_trainers_throughput_json():
    data = json.loads((CPU_SWEEP / "np-2" / "throughput.json").read_text())
    point, device, versions, dataset, drift = point_from_throughput(2, data, "np-2/throughput.json")
    assert device == "CPU" and versions["horovod"] == "0.28.1"
    # recorded before the trainer hashed its data: nothing to compare, nothing invented
    assert dataset == {"label_sha256": None, "train_split_sha256": None} and point.step_split is None
    assert drift == ()  # recorded before the trainer recorded its as-run facts: not judged
    assert point.images_per_sec == data["images_per_sec"]["total"]
    assert len(point.step_times_s) == data["timed_steps"]  # warm-up steps (27 s of tracing) are not timed
    assert max(point.step_times_s) < 5
    with pytest.raises(ChexstackError, match="world_size 2, expected 4"):
        point_from_throughput(4, data, "x")


def test_differences_against_the_baseline():
    cmp = figure.compare([load_sweep(SEED), _gpu_sweep("kubernetes", 0.92)])
    assert cmp.baseline == "seed: bare metal (conda)"
    assert round(cmp.cells[("kubernetes", 8)].diff_pct, 6) == -8.0
    assert cmp.cells[("kubernetes", 3)] is None  # no point at 3 GPUs
    assert cmp.cells[("seed: bare metal (conda)", 8)].diff_pct is None


def test_other_device_kinds_are_not_compared(tmp_path):
    cpu = Sweep(label="cpu", record=RunRecord(model="resnet50", count_unit="CPU ranks"),
                points=[point_from_throughput(n, json.loads((CPU_SWEEP / ("np-%d" % n) / "throughput.json")
                                                            .read_text()), "x").point for n in (1, 2)])
    cmp = figure.compare([load_sweep(SEED), cpu])
    assert cmp.comparable == (True, False) and cmp.cells[("cpu", 1)].diff_pct is None
    assert cmp.count_axis == "CPU ranks / GPUs"
    assert "not comparable" in figure.markdown_text(cmp)


@pytest.mark.parametrize("field, value, other, named", [
    ("image_size", 32, 224, "image size 32 px vs 224 px"),
    ("batch_size_per_rank", 8, 32, "batch size per rank 8 vs 32"),
    ("amp", True, False, "precision mixed float16 vs float32"),
    ("model", "resnet50", "densenet121", "model resnet50 vs densenet121"),
])
def test_series_run_differently_are_a_labelled_group_naming_the_field(tmp_path, field, value, other, named):
    """32 px vs 224 px must not read as -90 %: no difference is computed, and the table, CSV, Markdown and the
    figure's legend say which field differs (../shared/cases: issue 15)."""
    base, run = _gpu_sweep("224px", 1.0), _gpu_sweep("32px", 10.0)
    base.record = base.record.model_copy(update={field: other})
    run.record = run.record.model_copy(update={field: value})
    cmp = figure.compare([base, run])
    assert cmp.comparable == (True, False) and cmp.differences[1] == (named,)
    assert cmp.cells[("32px", 8)].diff_pct is None
    assert "not comparable: %s" % named in figure.markdown_text(cmp) and named in figure.csv_text(cmp)
    fig = figure.figure(cmp, [base, run])
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    figure.plt.close(fig)
    assert legend == ["224px", "32px [n/c: %s]" % named]


def test_a_field_a_published_series_does_not_give_is_not_compared():
    run = _gpu_sweep("k8s", 0.9)
    run.record = run.record.model_copy(update={"image_size": 224, "batch_size_per_rank": 32, "amp": False})
    assert figure.compare([load_sweep(SEED), run]).comparable == (True, True)


def test_tables_golden():
    cmp = figure.compare([load_sweep(SEED), _gpu_sweep("kubernetes", 0.92)])
    assert_golden("bench/figure1-seed-vs-kubernetes.csv", figure.csv_text(cmp))
    assert_golden("bench/figure1-seed-vs-kubernetes.md", figure.markdown_text(cmp))
    rows = list(csv.DictReader(io.StringIO(figure.csv_text(cmp))))
    assert rows[-1]["system"] == "kubernetes" and rows[-1]["vs seed: bare metal (conda) (%)"] == "-8.00"


def test_report_writes_png_csv_markdown(tmp_path):
    report = figure.write_report([load_sweep(SEED), _gpu_sweep("kubernetes", 0.92)], tmp_path / "fig.png")
    assert report.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and report.png.stat().st_size > 20000
    assert report.csv.is_file() and report.markdown.read_text().startswith("| GPUs | system |")


def test_repeated_labels_and_bad_files_are_named(tmp_path):
    with pytest.raises(ChexstackError, match="label 'seed: bare metal \\(conda\\)' appears in more than one"):
        figure.compare([load_sweep(SEED), load_sweep(SEED)])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"label": "x", "points": [{"count": 0, "images_per_sec": 1}]}))
    with pytest.raises(ChexstackError, match=r"bad.json: field points.0.count"):
        load_sweep(bad)


def test_save_is_atomic_and_round_trips(tmp_path):
    sweep = _gpu_sweep("k", 0.9)
    path = save_sweep(sweep, tmp_path / "a" / "k.json")
    assert load_sweep(path) == sweep and [p.name for p in path.parent.iterdir()] == ["k.json"]
    old = os.umask(0o022)
    try:  # readable by the others a result is shared with, as any file written with open() (not mkstemp's 0600)
        assert save_sweep(sweep, tmp_path / "b.json").stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)


def test_a_finished_sweep_is_kept_when_its_folder_cannot_be_written(tmp_path, capsys):
    """A sweep whose last write fails is not lost: it goes beside the
    run's files and says so; only when that fails too is it an error (naming both)."""
    from bench.sweep import keep_sweep

    sweep = _gpu_sweep("k", 0.9)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    path = keep_sweep(sweep, blocker / "k.json", tmp_path / "runs" / "k.json")
    assert path == tmp_path / "runs" / "k.json" and load_sweep(path) == sweep
    out = " ".join(capsys.readouterr().err.split())
    assert "warning: cannot write %s" % (blocker / "k.json") in out and "the sweep went to %s" % path in out
    with pytest.raises(ChexstackError, match="cannot write the sweep to .* nor to .*; the per-count results stay in"):
        keep_sweep(sweep, blocker / "k.json", blocker / "k2.json")
    assert keep_sweep(sweep, tmp_path / "ok" / "k.json", tmp_path / "unused.json") == tmp_path / "ok" / "k.json"


def test_efficiency_labels_of_neighbouring_series_never_overlap():
    """Review finding N11: "85 %" and "73 %" overlapped. Five series with close efficiencies at every count:
    neighbours alternate above/below their markers, so no two labels' boxes intersect, and each label sits on a
    white box above the lines."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation

    seed = load_sweep(SEED)
    series = [Sweep(label="s%d" % i, record=RunRecord(model="densenet121", count_unit="GPUs"),
                    points=[Point(count=n, images_per_sec=seed.point(n).images_per_sec * (1 - 0.01 * i * (n > 1)))
                            for n in (1, 2, 3, 4, 8)]) for i in range(5)]
    fig = figure.figure(figure.compare(series), series)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()

        def overlapping(labels):
            boxes = [a.get_window_extent(renderer) for a in labels]
            return [(labels[i].get_text(), labels[j].get_text()) for i in range(len(boxes))
                    for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j])]

        ax, ax_eff = fig.axes
        labels = [a for a in ax_eff.texts if a.get_text().endswith(" %")]
        assert len(labels) == 25 and overlapping(labels) == []
        assert all(a.get_bbox_patch() is not None and a.get_zorder() > 2 for a in labels)
        bar_labels = [a for a in ax.texts if isinstance(a, Annotation)]
        assert len(bar_labels) == 25 and overlapping(bar_labels) == []  # upright from 4 series on
        assert all(a.get_rotation() == 90 for a in bar_labels)
        top = ax.get_window_extent(renderer)
        assert all(top.contains(*a.get_window_extent(renderer).corners()[1]) for a in bar_labels)  # inside
    finally:
        plt.close(fig)
    assert [figure.efficiency_label_above(i, 80) for i in range(4)] == [True, False, True, False]
    assert figure.efficiency_label_above(1, 10)  # never below the panel's floor
