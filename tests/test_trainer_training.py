"""Real 2-rank horovodrun training on the 800-image ChestX-ray14 sample (at 32 px): 1 epoch, then --resume to 2, and
the same 2 epochs uninterrupted (resume equivalence, seed determinism), all with --deterministic.

One module-scoped set of runs (about 3-4 minutes on 2 idle cores) feeds every assertion below.
"""
from __future__ import annotations

import csv
import glob
import gzip
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import launch
from tests.lib import cli as cmd
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL, request
from trainer.labels import CLASSES

pytestmark = pytest.mark.slow

IMAGES = SAMPLE / "images-64"
LABELS = SAMPLE / "Data_Entry_2017_v2020.csv.gz"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    output = tmp_path_factory.mktemp("train") / "run"
    kw = dict(gpus=0, np=2, images=str(IMAGES), labels=str(LABELS), model=FAST_MODEL[1], image_size=32,
              batch_size=16, epochs=1, output=str(output), deterministic=True)
    # The baseline (a logistic regression per class, fitted at the end of a run) is asserted on the resumed run
    # only; the other two runs skip it (it touches neither the model nor the CNN's numbers compared below).
    here = launch.where()
    first = launch.run(request(**kw, baseline_size=0), here)
    first_state = json.loads((output / "checkpoint" / "state.json").read_text())
    second = launch.run(request(**{**kw, "epochs": 2}, resume=True), here)
    whole_output = output.parent / "uninterrupted"
    whole = launch.run(request(**{**kw, "epochs": 2, "output": str(whole_output)}, baseline_size=0), here)
    return {"output": output, "first": first, "first_state": first_state, "metrics": second,
            "whole": whole, "whole_output": whole_output}


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
    result = _python_trainer("--images", str(IMAGES), "--labels", str(LABELS), "--image-size", "32",
                             "--epochs", "3", "--output", str(run["output"]))
    assert result.returncode == 2
    assert "already holds the checkpoint of epoch 2: pass --resume" in result.stderr


def test_resume_with_a_different_label_file_is_refused(run, tmp_path):
    with gzip.open(LABELS, "rt") as f:
        text = f.read()
    changed = tmp_path / "Data_Entry_2017.csv"  # one label changed, as between NIH releases (case 18)
    changed.write_text(text.replace("00000001_000.png,Cardiomegaly,", "00000001_000.png,Cardiomegaly|Emphysema,", 1))
    result = _python_trainer("--images", str(IMAGES), "--labels", str(changed), "--image-size", "32",
                             "--epochs", "3", "--resume", "--output", str(run["output"]))
    assert result.returncode == 2
    assert "refusing to resume" in result.stderr and "label_sha256" in result.stderr


def test_resumed_run_equals_the_uninterrupted_run(run):
    """Epoch order and augmentation are functions of (seed, epoch), the recipe state is replayed and BatchNorm
    statistics are the ranks' mean: 1 epoch + resume gives the uninterrupted run's numbers (float tolerance), and
    a second fresh run with the same seed repeats the first (epoch 1)."""
    resumed, whole = run["metrics"]["epochs"], run["whole"]["epochs"]
    for a, b in zip(resumed, whole):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-3), a["epoch"]
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-3), a["epoch"]
        for name in CLASSES:
            assert (a["auroc"][name] is None) == (b["auroc"][name] is None)
            if a["auroc"][name] is not None:
                assert a["auroc"][name] == pytest.approx(b["auroc"][name], abs=0.02), (a["epoch"], name)
        assert a["learning_rate"] == pytest.approx(b["learning_rate"]) and a["best_epoch"] == b["best_epoch"]
    assert run["metrics"]["test"]["mean_auroc"] == pytest.approx(run["whole"]["test"]["mean_auroc"], abs=0.02)
    assert run["metrics"]["run"]["deterministic"] is True


def test_a_run_resized_in_the_step_trains_and_says_so(run, tmp_path):
    """``--input-resize device`` (``trainer.device_input``: the host decodes, the step resizes and augments) on the
    uninterrupted run's request, through horovodrun: it trains both epochs, is scored, and the run records say where
    each run resized and why.

    Its numbers are not compared with the host-resized run's: the pixels differ by float32 rounding (3e-5 of 255),
    and at 32 px a perturbation that small grows in each step (measured here: 3e-5 of noise on the host's own
    pixels moves the third step's loss by 0.5 % for MobileNet and 1 % for DenseNet-121; this run pair's epoch-1
    validation loss came out 0.171 against 0.221). That the step is the same step — same loss, same updated
    weights — is tests/test_trainer_device_input.py's."""
    whole = run["whole"]
    kw = dict(gpus=0, np=2, images=str(IMAGES), labels=str(LABELS), model=FAST_MODEL[1], image_size=32,
              batch_size=16, epochs=2, output=str(tmp_path / "in-step"), deterministic=True, baseline_size=0)
    step = launch.run(request(**kw, input_resize="device"), launch.where())
    assert whole["run"]["input_resize"] == {"where": "host", "source_size": None, "other_sizes": 0,
                                            "why": "the ranks train on the CPU: the resize would cost the same cores"}
    assert step["run"]["input_resize"] == {"where": "device", "why": "asked for (--input-resize device)",
                                           "source_size": [64, 64], "other_sizes": 0}
    assert [e["epoch"] for e in step["epochs"]] == [1, 2]
    assert all(np.isfinite([e["loss"], e["val_loss"]]).all() for e in step["epochs"])
    assert step["test"]["n_images"] == whole["test"]["n_images"]


def _predict(model_file, names, size=32):
    import tensorflow as tf

    from trainer import compat, pipeline
    model = tf.keras.models.load_model(str(model_file), compile=False)
    paths = [str(IMAGES / n) for n in names]
    scores = [model.predict_on_batch(x) for x, _ in
              compat.iterate_numpy(pipeline.evaluation(paths, np.arange(len(paths)), 32, pipeline.png_loader(size)))]
    return np.concatenate(scores)


def _read_predictions(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [r["Image Index"] for r in rows], np.array([[float(r["score_" + c]) for c in CLASSES] for r in rows])


def test_pooled_predictions_are_the_saved_models(run):
    """One model: the pooled validation predictions of the last epoch (both ranks) are model.h5's, and the pooled
    test predictions are model-best.h5's, on the same rows."""
    names, pooled = _read_predictions(run["output"] / "predictions.csv")
    assert np.allclose(_predict(run["output"] / "model.h5", names), pooled, atol=2e-5)
    names, pooled = _read_predictions(run["output"] / "test-predictions.csv")
    assert np.allclose(_predict(run["output"] / "model-best.h5", names), pooled, atol=2e-5)


def test_test_block_baseline_and_split_records(run):
    metrics = run["metrics"]
    test, baseline = metrics["test"], metrics["baseline"]
    n_test = metrics["run"]["data"]["split"]["test"]
    assert test["n_images"] == n_test == test["rows"]["expected"] and test["rows"]["skipped"] == []
    assert test["best_epoch"] == metrics["epochs"][-1]["best_epoch"] and test["model"] == "model-best.h5"
    assert test["bootstrap"]["unit"] == "patient" and test["bootstrap"]["resamples"] == 1000
    for block in (test, baseline):
        for name, entry in block["auroc"].items():
            if entry["auroc"] is not None and entry["ci_low"] is not None:
                assert entry["ci_low"] <= entry["auroc"] <= entry["ci_high"], name
        defined = [e["auroc"] for e in block["auroc"].values() if e["auroc"] is not None]
        assert block["mean_auroc"] == pytest.approx(np.mean(defined))
    names, _ = _read_predictions(run["output"] / "test-predictions.csv")
    with open(run["output"] / "splits.csv") as f:
        splits = list(csv.DictReader(f))
    assert sorted(names) == sorted(r["Image Index"] for r in splits if r["split"] == "test")
    assert len(splits) == 800 and {r["split"] for r in splits} == {"train", "val", "test"}
    patients = {}
    for r in splits:
        patients.setdefault(r["Patient ID"], set()).add(r["split"])
    assert all(len(v) == 1 for v in patients.values())
    recorded = metrics["run"]["splits"]
    assert recorded["sha256"] == hashlib.sha256((run["output"] / "splits.csv").read_bytes()).hexdigest()
    assert recorded["test"]["sha256"] == hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()
    assert "logistic regression" in baseline["method"]


def test_evaluate_scores_a_saved_model_on_a_list(run, tmp_path):
    names, pooled = _read_predictions(run["output"] / "test-predictions.csv")
    listed = tmp_path / "test_list.txt"
    listed.write_text("\n".join(names) + "\n")
    result = _python_trainer("evaluate", "--model", str(run["output"] / "model-best.h5"), "--images", str(IMAGES),
                             "--labels", str(LABELS), "--list", str(listed), "--output", str(tmp_path / "eval"))
    assert result.returncode == 0, result.stderr[-3000:]
    evaluated = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    assert evaluated["test"]["mean_auroc"] == pytest.approx(run["metrics"]["test"]["mean_auroc"], abs=1e-4)
    assert evaluated["image_size"] == 32 and evaluated["world_size"] == 1
    again_names, again = _read_predictions(tmp_path / "eval" / "predictions.csv")
    order = [again_names.index(n) for n in names]
    assert np.allclose(again[order], pooled, atol=2e-5)
    assert evaluated["images_seen_in_training"] == 0 and "not a held-out one" not in result.stdout + result.stderr
    block = evaluated["test"]
    summary = result.stdout.strip().splitlines()[-1]  # the last line says it all
    few = evaluated["few_cases"]  # the sample's test split: most pathologies have a few positives
    assert few["warning"] and len(few["pathologies"]) > 0 and few["warning"] in " ".join(result.stderr.split())
    assert summary == ("trainer: mean AUROC %.4f (95%% CI %.3f-%.3f) over %d of 14 pathologies, %d images of %d "
                       "patients (too few cases to mean much: %d of %d AUROCs from fewer than 30 positives or "
                       "negatives%s); evaluation.json and predictions.csv in %s" % (
                           block["mean_auroc"], block["mean_auroc_ci_low"], block["mean_auroc_ci_high"],
                           block["n_classes_defined"], block["n_images"], block["n_patients"],
                           len(few["pathologies"]), block["n_classes_defined"],
                           ", fewer than 30 patients" if few["few_patients"] else "", tmp_path / "eval"))
    # images the run trained on, scored as "test": counted and said (the README's evaluate without --list did this)
    trained = [r["Image Index"] for r in csv.DictReader((run["output"] / "splits.csv").read_text().splitlines())
               if r["split"] == "train"]
    listed.write_text("\n".join(names + trained[:3]) + "\n")
    mixed = _python_trainer("evaluate", "--model", str(run["output"] / "model-best.h5"), "--images", str(IMAGES),
                            "--labels", str(LABELS), "--list", str(listed), "--output", str(tmp_path / "mixed"))
    assert mixed.returncode == 0, mixed.stderr[-3000:]
    mixed_result = json.loads((tmp_path / "mixed" / "evaluation.json").read_text())
    assert mixed_result["images_seen_in_training"] == 3
    # the last line, the one people copy, says it too
    assert "%d images of %d patients (3 of them seen in training; too few cases" % (
        len(names) + 3, mixed_result["test"]["n_patients"]) in mixed.stdout.strip().splitlines()[-1]
    assert ("3 of the %d images scored were in the model's training or validation split (%s)"
            % (len(names) + 3, run["output"] / "splits.csv")) in " ".join((mixed.stdout + mixed.stderr).split())


def test_evaluate_split_test_repeats_the_runs_test_block(run, tmp_path):
    """``invoke evaluate --split test``: the images of the test split of the run that trained the model (its
    splits.csv beside model-best.h5), with the run's bootstrap seed and resamples: evaluation.json's ``test`` block
    is the run's own metrics.json ``test`` block, number for number (a user checked 0.5008 [0.426-0.569] by hand),
    none of the images seen in training."""
    model = run["output"] / "model-best.h5"
    p = cmd.run("evaluate", "--model", str(model), "--images", str(IMAGES), "--labels", str(LABELS), "--split", "test",
                "--output", str(tmp_path / "eval"), env={"CUDA_VISIBLE_DEVICES": ""})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    evaluated = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    test = run["metrics"]["test"]
    assert evaluated["split"] == "test" and evaluated["images_seen_in_training"] == 0
    assert evaluated["test"] == {k: test[k] for k in evaluated["test"]}, (evaluated["test"], test)
    assert "seen in training" not in p.stdout.strip().splitlines()[-1]
