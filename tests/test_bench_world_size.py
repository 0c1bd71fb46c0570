"""bench/ratios/accuracy_vs_world_size.py's own logic, without training: the --ranks option, each world size's
trainer command line, the paired difference read from two runs' test predictions, and the printed report."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from bench.ratios import accuracy_vs_world_size as bench
from trainer import cli, outputs


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
    assert len(lines) == 6


def test_the_report_says_which_runs_shared_cores(tmp_path):
    one = _run(tmp_path, 1, [0.9, 0.1, 0.8, 0.3, 0.4, 0.5], 0.6, 0.5, 0.7)
    four = _run(tmp_path, 4, [0.2, 0.6, 0.7, 0.1, 0.3, 0.4], 0.65, 0.5, 0.8)._replace(
        warnings=("4 CPU ranks on 2 cores: ranks will share cores",))
    diff = bench.difference(bench.test_predictions(one), bench.test_predictions(four), 200, 0)
    lines = bench.report([one, four], [diff], "title")
    assert lines[-2].endswith("; within 1 rank's interval: yes")
    assert lines[-1] == "note (4 ranks): 4 CPU ranks on 2 cores: ranks will share cores"


def test_every_world_size_runs_the_recipe_defaults_with_the_same_seed_and_epochs(tmp_path):
    args = argparse.Namespace(model="mobilenet", epochs=2, image_size=32, seed=3, bootstrap=100)
    one, four = bench.request(1, args, str(tmp_path)), bench.request(4, args, str(tmp_path))
    assert (one.gpus, one.ranks(), four.ranks()) == (0, 1, 4)
    assert one.argv[one.argv.index("--output") + 1] == str(tmp_path / "np1")
    strip = [a for i, a in enumerate(one.argv) if i != one.argv.index("--output") + 1]
    assert strip == [a for i, a in enumerate(four.argv) if i != four.argv.index("--output") + 1]
    options = four.options  # the trainer's own parser: everything not given is the recipe's default
    assert (options.model, options.epochs, options.image_size, options.seed, options.bootstrap) == (
        "mobilenet", 2, 32, 3, 100)
    assert options.images == str(bench.SAMPLE / "images-64")
    for name in ("batch_size", "lr", "warmup_epochs", "min_lr", "lr_patience", "early_stop", "bn_images"):
        assert getattr(options, name) == cli.parser().get_default(name), name
