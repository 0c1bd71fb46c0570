"""bench/ratios/accuracy_vs_world_size.py's own logic, without training: the --ranks option, the paired difference
read from two runs' test predictions, and the printed report."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from bench.ratios import accuracy_vs_world_size as bench
from trainer import outputs


def test_ranks_are_distinct_world_sizes_the_first_the_reference():
    assert bench.parse_ranks("1,2,4") == [1, 2, 4] and bench.parse_ranks("2,1") == [2, 1]
    for bad in ("", "0,1", "1,1", "one"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.parse_ranks(bad)


def _run(tmp_path, ranks, scores, mean, low, high):
    folder = tmp_path / ("np%d" % ranks)
    folder.mkdir()
    names = ["%08d_000.png" % i for i in range(len(scores))]
    labels = np.zeros((len(scores), 14), dtype=int)
    labels[:, 0] = [1, 0, 1, 0, 1, 0]
    full = np.full((len(scores), 14), 0.5)
    full[:, 0] = scores
    outputs.write_predictions(str(folder), names, labels, full, outputs.TEST_PREDICTIONS)
    (folder / outputs.SPLITS).write_text("Image Index,Patient ID,split\n" + "".join(
        "%s,%s,test\n" % (n, "ABCDDE"[i]) for i, n in enumerate(names)))
    metrics = {"run": {"global_batch_size": 16 * ranks, "lr_scaled": 1e-3 * ranks, "end_epoch": 3,
                       "end": {"reason": "early_stop"}},
               "test": {"mean_auroc": mean, "mean_auroc_ci_low": low, "mean_auroc_ci_high": high, "best_epoch": 2},
               "epochs": [{"images_per_sec": {"total": v}} for v in (10.0, 30.0, 20.0)]}
    return bench.Run(ranks, metrics, str(folder), 12.0)


def test_the_report_pairs_the_runs_on_their_test_images_and_judges_the_goal(tmp_path):
    one = _run(tmp_path, 1, [0.9, 0.1, 0.8, 0.3, 0.4, 0.5], 0.6, 0.5, 0.7)
    two = _run(tmp_path, 2, [0.2, 0.6, 0.7, 0.1, 0.3, 0.4], 0.45, 0.3, 0.6)
    reference, other = bench.test_predictions(one), bench.test_predictions(two)
    assert reference["00000003_000.png"][0] == "D" and len(reference) == 6
    diff = bench.difference(reference, other, 200, 0)
    assert diff["difference"] == pytest.approx(5 / 9 - 8 / 9)  # the AUROCs of test_trainer_recipe's hand split
    lines = bench.report([one, two], [diff], "title")
    assert lines[0] == "title" and lines[1].split()[:3] == ["ranks", "batch", "lr"]
    assert lines[2].split() == ["1", "16", "0.001", "2", "3", "0.600", "[0.500-0.700]", "20.0", "12", "early_stop"]
    assert lines[3].split()[:2] == ["2", "32"]
    assert lines[4] == "against 1 rank (paired patient bootstrap on the same test images):"
    assert lines[5].startswith("  2 ranks - 1 rank: -0.333 (95 % interval ")
    assert lines[5].endswith("; within 1 rank's interval: NO")  # 0.45 is below 0.5
