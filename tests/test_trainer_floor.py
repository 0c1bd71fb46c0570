"""The LR floor on the real sample: a run whose epochs no longer change (issue 27: validation loss 0.0967 at every
epoch from 5 to 15 at an LR of about 1e-7) stops at the floor instead of repeating them, and says why; its final
table states whether the CNN is distinguishable from the baseline.

One real run (one process, world size 1; ResNet-50 at 32 px on the 800-image sample): --lr 1e-7 barely moves the
weights and the BatchNorm statistics are recomputed from them, so no epoch beats the first by more than
--min-delta (1e-4, the default); --min-lr 1e-8 is one decay below --lr. Epoch 1 is the best, epoch 2
does not improve and lowers the LR to the floor, epoch 3 is the first at the floor without improvement and, with the
default --early-stop 1, the last of the 6 asked for.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from launch.report import results_table
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = pytest.mark.slow


def test_a_run_whose_epochs_no_longer_change_stops_at_the_floor_and_says_why(tmp_path):
    output = tmp_path / "run"
    argv = ["--images", str(SAMPLE / "images-64"), "--labels", str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"),
            *FAST_MODEL, "--image-size", "32", "--batch-size", "32", "--epochs", "6", "--lr", "1e-7",
            "--min-lr", "1e-8", "--bn-images", "512", "--bootstrap", "200", "--output", str(output)]
    result = subprocess.run([sys.executable, "-m", "trainer", *argv], cwd=REPO, capture_output=True, text=True,
                            timeout=900, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = json.loads((output / "metrics.json").read_text())
    epochs = metrics["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert [e["improved"] for e in epochs] == [True, False, False]
    assert [e["lr_at_floor"] for e in epochs] == [False, False, True]
    assert [e["learning_rate"] for e in epochs] == [pytest.approx(1e-7), pytest.approx(1e-7), pytest.approx(1e-8)]
    assert all(e["val_loss"] >= epochs[0]["val_loss"] - 1e-4 for e in epochs[1:])  # none beat epoch 1 by --min-delta
    end = metrics["run"]["end"]
    assert (end["reason"], end["epoch"], end["floor_epoch"], end["best_epoch"]) == ("early_stop", 3, 3, 1)
    assert end["message"] == ("stopped early after epoch 3 of 6: the LR reached its floor 1e-08 at epoch 3 and 1 "
                              "epoch at it brought no improvement (--early-stop 1); best epoch 1")
    assert "trainer: " + end["message"] in result.stdout
    recipe = metrics["run"]["recipe"]
    assert (recipe["min_lr"], recipe["lr_floor"], recipe["min_delta"], recipe["early_stop"]) == (
        pytest.approx(1e-8), pytest.approx(1e-8), 1e-4, 1)

    comparison = metrics["comparison"]
    assert comparison["difference"] == pytest.approx(metrics["test"]["mean_auroc"] - metrics["baseline"]["mean_auroc"])
    assert comparison["n_images"] == metrics["test"]["n_images"] and comparison["bootstrap"]["resamples"] == 200
    assert comparison["ci_low"] <= comparison["difference"] <= comparison["ci_high"]
    assert comparison["distinguishable"] == (comparison["ci_low"] > 0 or comparison["ci_high"] < 0)
    console = Console(record=True, width=200)
    console.print(results_table(metrics))
    text = " ".join(console.export_text().split())  # the caption wraps at the table's width
    assert end["message"] in text
    assert "test mean AUROC, CNN - baseline: %+.3f (95 %% interval %+.3f .. %+.3f): " % (
        comparison["difference"], comparison["ci_low"], comparison["ci_high"]) in text
