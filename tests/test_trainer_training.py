"""Real 2-rank horovodrun training on the 800-image ChestX-ray14 sample (64 px): 1 epoch, then --resume to 2.

One module-scoped run pair (about 2-3 minutes on 2 cores) feeds every assertion below.
"""
from __future__ import annotations

import csv
import dataclasses
import glob
import gzip
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from launch import local
from launch.request import TrainRequest
from tests.conftest import REPO, SAMPLE
from trainer.labels import CLASSES

pytestmark = pytest.mark.slow

IMAGES = SAMPLE / "images-64"
LABELS = SAMPLE / "Data_Entry_2017_v2020.csv.gz"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    output = tmp_path_factory.mktemp("train") / "run"
    request = TrainRequest(gpus=0, np=2, images=str(IMAGES), labels=str(LABELS), image_size=64, batch_size=16,
                           epochs=1, output=str(output))
    first = local.train(request)
    first_state = json.loads((output / "checkpoint" / "state.json").read_text())
    second = local.train(dataclasses.replace(request, epochs=2, resume=True))
    return {"output": output, "first": first, "first_state": first_state, "metrics": second}


def _python_trainer(*args):
    return subprocess.run([sys.executable, "-m", "trainer", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})


def test_metrics_file(run):
    metrics = run["metrics"]
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    with gzip.open(LABELS, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    for entry in metrics["epochs"]:
        assert list(entry["auroc"]) == list(CLASSES)
        assert entry["world_size"] == 2 and entry["label_sha256"] == sha
        assert len(entry["images_per_sec"]["per_rank"]) == 2 and min(entry["images_per_sec"]["per_rank"]) > 0
        assert entry["images_per_sec"]["total"] == pytest.approx(sum(entry["images_per_sec"]["per_rank"]))
        assert entry["val_rows"] == {"expected": entry["n_val"], "evaluated": entry["n_val"], "skipped": []}
        assert entry["n_train"] + entry["n_val"] + metrics["run"]["data"]["split"]["test"] == 800
        assert np.isfinite(entry["loss"])
        defined = [v for v in entry["auroc"].values() if v is not None]
        assert entry["mean_auroc"] == pytest.approx(np.mean(defined)) and entry["n_classes_defined"] == len(defined)
    run_info = metrics["run"]
    assert run_info["steps_per_epoch"] == int(np.ceil(run_info["data"]["split"]["train"] / (16 * 2)))
    assert run_info["lr_scaled"] == pytest.approx(2 * run_info["lr_base"])
    assert run_info["data"]["rows_without_image"] == 112120 - 800


def test_pooled_auroc_equals_scikit_learn_on_predictions_csv(run):
    from sklearn.metrics import roc_auc_score
    with open(run["output"] / "predictions.csv") as f:
        rows = list(csv.DictReader(f))
    last = run["metrics"]["epochs"][-1]
    assert len(rows) == last["n_val"] == len({r["Image Index"] for r in rows})
    for name in CLASSES:
        y = np.array([int(r["label_" + name]) for r in rows])
        p = np.array([float(r["score_" + name]) for r in rows], dtype=np.float32)
        expected = None if y.min() == y.max() else roc_auc_score(y, p)
        assert last["auroc"][name] == (None if expected is None else pytest.approx(expected, abs=1e-12)), name


def test_undefined_classes_are_null_in_json(run):
    text = (run["output"] / "metrics.json").read_text()
    last = run["metrics"]["epochs"][-1]
    undefined = [k for k, v in last["auroc"].items() if v is None]
    for name in undefined:
        assert '"%s": null' % name in text


def test_checkpoint_and_final_model(run):
    folder = run["output"] / "checkpoint"
    assert run["first_state"]["epoch"] == 1
    state = json.loads((folder / "state.json").read_text())
    assert state["epoch"] == 2 and (folder / state["model_file"]).is_file()
    assert sorted(os.listdir(folder)) == sorted(["state.json", state["model_file"]])  # no temp files, one epoch
    assert not glob.glob(str(run["output"] / ".tmp-*"))
    import tensorflow as tf
    model = tf.keras.models.load_model(str(run["output"] / "model.h5"), compile=False)
    assert model.output_shape == (None, 14)


def test_resume_continues_after_the_checkpoint(run):
    first, second = run["first"]["epochs"], run["metrics"]["epochs"]
    assert second[0] == first[0]  # epoch 1 kept as written, not re-run
    assert run["metrics"]["run"]["initial_epoch"] == 1
    log = (run["output"] / "launch.log").read_text()
    assert "resuming after epoch 1" in log


def test_new_run_into_a_used_output_is_refused(run):
    result = _python_trainer("--images", str(IMAGES), "--labels", str(LABELS), "--image-size", "64",
                             "--epochs", "3", "--output", str(run["output"]))
    assert result.returncode == 2
    assert "already holds the checkpoint of epoch 2: pass --resume" in result.stderr


def test_resume_with_a_different_label_file_is_refused(run, tmp_path):
    with gzip.open(LABELS, "rt") as f:
        text = f.read()
    changed = tmp_path / "Data_Entry_2017.csv"  # one label changed, as between NIH releases (case 18)
    changed.write_text(text.replace("00000001_000.png,Cardiomegaly,", "00000001_000.png,Cardiomegaly|Emphysema,", 1))
    result = _python_trainer("--images", str(IMAGES), "--labels", str(changed), "--image-size", "64",
                             "--epochs", "3", "--resume", "--output", str(run["output"]))
    assert result.returncode == 2
    assert "refusing to resume" in result.stderr and "label_sha256" in result.stderr
