"""Pooled AUROC (../shared/cases/16): per-rank AUROCs 1.0 and 1.0, their mean 1.0 — the pooled AUROC is 0.4375."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.lib.paths import CASES, REPO, SAMPLE
from trainer import evaluation
from trainer.errors import TrainerError

CASE16 = CASES / "16-horovod-auroc-allreduce-mean.csv"


def _case16():
    rows = list(csv.DictReader(open(CASE16)))
    return (np.array([int(r["rank"]) for r in rows]), np.array([[int(r["label"])] for r in rows]),
            np.array([[float(r["score"])] for r in rows]))


def test_case16_pooled_auroc_is_not_the_mean_of_rank_aurocs():
    ranks, labels, scores = _case16()
    per_rank = [evaluation.auroc_per_class(labels[ranks == r], scores[ranks == r])[0] for r in (0, 1)]
    assert per_rank == [1.0, 1.0]
    assert evaluation.auroc_per_class(labels, scores) == [0.4375]


def test_single_valued_class_is_undefined_not_half_and_left_out_of_the_mean():
    labels = np.array([[0, 1, 1], [0, 0, 1], [0, 1, 1]])
    scores = np.array([[0.1, 0.9, 0.3], [0.2, 0.1, 0.4], [0.3, 0.8, 0.5]])
    values = evaluation.auroc_per_class(labels, scores)
    assert values == [None, 1.0, None]
    assert evaluation.mean_defined(values) == 1.0
    assert evaluation.mean_defined([None, None]) is None


def test_order_rows_checks_for_lost_and_duplicated_rows():
    idx, scores, missing = evaluation.order_rows([3, 0, 1], np.arange(3)[:, None], 5)
    assert idx.tolist() == [0, 1, 3] and scores[:, 0].tolist() == [1, 2, 0] and missing.tolist() == [2, 4]
    with pytest.raises(TrainerError, match="more than one rank"):
        evaluation.order_rows([0, 1, 1], np.zeros((3, 1)), 3)


@pytest.mark.slow
def test_case16_pooled_across_two_real_horovod_ranks(tmp_path):
    out = tmp_path / "auroc.json"
    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    subprocess.run([horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
                    str(REPO / "tests" / "horovod_pool_case16.py"), str(CASE16), str(out)],
                   cwd=REPO, check=True, capture_output=True, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""})
    result = json.loads(out.read_text())
    assert result["per_rank"] == [1.0, 1.0] and result["mean_of_ranks"] == 1.0
    assert result["pooled"] == 0.4375
    assert result["rows"] == list(range(8)) and result["missing"] == []
    assert result["uneven_rows"] == list(range(8)) and result["uneven_missing"] == []
    assert result["uneven_same_scores"]
    assert sorted(result["empty_rows"]) == list(range(8))


def _block(n_images=40, n_patients=20, resamples=50):
    """``held_out_block`` of ``n_images`` rows of ``n_patients`` patients, every pathology with positives."""
    rng = np.random.RandomState(0)
    labels = (np.arange(n_images)[:, None] + np.arange(14)[None, :]) % 2
    patients = [str(i % n_patients) for i in range(n_images)]
    return evaluation.held_out_block(labels, rng.rand(n_images, 14), patients, resamples, 0, n_images, [])


def test_the_summary_line_says_how_many_images_the_run_trained_on():
    """The reported fault: the last line (the one people copy) left out that 653 of the 800 images scored were in
    the model's training or validation split, said only in a warning 16 lines earlier."""
    from trainer.evaluate import summary_line

    block = _block()
    head = "mean AUROC %.4f (95%% CI %.3f-%.3f) over 14 of 14 pathologies, 40 images of 20 patients" % (
        block["mean_auroc"], block["mean_auroc_ci_low"], block["mean_auroc_ci_high"])
    tail = "; evaluation.json and predictions.csv in out"
    assert summary_line(block, "out", 17) == head + " (17 of them seen in training)" + tail
    for held_out in (0, None):  # none seen / no splits.csv beside the model: nothing to say
        assert summary_line(block, "out", held_out) == head + tail


def test_few_cases_are_said_in_the_warning_the_last_line_and_evaluation_json():
    """The reported fault: the 3 images of images-1024 gave "mean AUROC 0.0000 (95% CI 0.000-0.000) over 2 of 14
    pathologies, 3 images of 3 patients", exit 0, with nothing saying that it means little. ``few_cases`` (what
    evaluation.json records as ``few_cases``) names each AUROC from fewer than 30 positives or negatives and a set
    of fewer than 30 patients; the warning says why; the last line says so. Enough cases: nothing said."""
    from trainer import labels
    from trainer.evaluate import summary_line

    table = labels.read_label_file(str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"))
    rows = [table.names.index(n) for n in sorted(os.listdir(SAMPLE / "images-1024"))]
    y = table.labels[rows]
    block = evaluation.held_out_block(y, np.linspace(0, 1, 3 * 14).reshape(3, 14), [table.patients[i] for i in rows],
                                      100, 0, 3, [])
    few = evaluation.few_cases(block)
    defined = [name for name, entry in block["auroc"].items() if entry["auroc"] is not None]
    assert evaluation.MIN_CASES == few["minimum"] == 30 and len(defined) == block["n_classes_defined"] == 2
    assert list(few["pathologies"]) == defined and few["n_patients"] == 3 and few["few_patients"]
    assert all(e["n_positive"] + e["n_negative"] == 3 for e in few["pathologies"].values())
    assert few["warning"].startswith("the AUROCs and their 95 % intervals mean little: 2 of the 2 pathologies with "
                                     "an AUROC have fewer than 30 positive or 30 negative images (")
    assert "the 3 patients, the bootstrap's units, are fewer than 30" in few["warning"]
    assert "Hanley & McNeil 1982" in few["warning"] and few["warning"].endswith("score more images")
    line = summary_line(block, "out", None, few)
    assert ("over 2 of 14 pathologies, 3 images of 3 patients (too few cases to mean much: 2 of 2 AUROCs from fewer "
            "than 30 positives or negatives, fewer than 30 patients); evaluation.json") in line, line
    assert "(5 of them seen in training; too few cases" in summary_line(block, "out", 5, few)

    enough = _block(n_images=120, n_patients=60)  # every pathology 60 positives and 60 negatives
    assert evaluation.few_cases(enough)["warning"] is None and not evaluation.few_cases(enough)["pathologies"]
    assert "too few" not in summary_line(enough, "out", None, evaluation.few_cases(enough))
    assert evaluation.few_cases(_block(n_images=120, n_patients=20))["few_patients"]
