"""The trainer on the conda column of the study's Table 1: Python 3.6, TensorFlow 1.12.0, Horovod 0.16.1 (built
against it, MPI controller), CPU -- in ``.venv-tf112`` (``scripts/setup-legacy``; ``make test`` runs it).

One module-scoped pair of real 2-rank ``horovodrun`` runs on the 800-image sample (MobileNet at 32 px, PNG
decoding included): 1 epoch, then ``--resume`` to 2. Tensor fusion stays at Horovod's default: the trainer's
end-of-epoch check stops a run whose replicas differ, so exit 0 means the ranks stayed in step. About 3 minutes on
2 cores.

Why ``trainer.compat`` carries its own TF 1.12 Adam: TF 1.12's Keras Adam reads its step counter without ordering
the read against the increment, so ranks applied Adam's bias correction for different steps and diverged
(``test_tf112_adam_reads_the_step_after_incrementing_it``).
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL
from trainer.labels import CLASSES

pytestmark = [
    pytest.mark.legacy,
    pytest.mark.slow,
]

LEGACY = REPO / ".venv-tf112"
#: What scripts/setup-legacy leaves when this machine has no Python 3.6: the lane's one skip (docs/testing.md).
UNAVAILABLE = REPO / "build" / "setup-logs" / "legacy-unavailable"


@pytest.fixture(autouse=True)
def legacy_venv():
    """The legacy venv, or the one reason its tests may skip: scripts/setup-legacy found no Python 3.6 here (its
    words). A venv missing for any other reason skips outside CI (run scripts/setup-legacy) and fails in CI, where
    make test sets it up: a lane whose setup did not run is never a quiet skip."""
    if (LEGACY / "bin" / "python").exists():
        return LEGACY
    if UNAVAILABLE.exists():
        pytest.skip("scripts/setup-legacy: %s" % UNAVAILABLE.read_text().strip())
    missing = "no .venv-tf112 (Python 3.6 / TensorFlow 1.12.0 / Horovod 0.16.1): run scripts/setup-legacy"
    if os.environ.get("CI"):
        pytest.fail(missing + " (make test does; it did not say this machine lacks Python 3.6)")
    pytest.skip(missing + " (make test does)")
IMAGES = SAMPLE / "images-64"
LABELS = SAMPLE / "Data_Entry_2017_v2020.csv.gz"


def _env():
    """This environment with the legacy venv first on PATH (horovodrun 0.16 hands the environment to mpirun with
    ``-x``), nothing of the host's Python leaking in, CPU only, Horovod's default tensor fusion."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HOROVOD_FUSION_THRESHOLD")}
    env.update(PATH=str(LEGACY / "bin") + os.pathsep + env.get("PATH", ""), CUDA_VISIBLE_DEVICES="",
               TF_CPP_MIN_LOG_LEVEL="2")
    return env


def _horovodrun(*args):
    command = [str(LEGACY / "bin" / "horovodrun"), "-np", "2", "-H", "localhost:2", "python", "-m", "trainer", *args]
    # A bound for a hang, not a speed claim: TF 1.12 builds Keras' graphs slowly on 2 shared cores.
    return subprocess.run(command, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=1200)


def _ok(result):
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "weights differ between ranks" not in result.stdout + result.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    output = tmp_path_factory.mktemp("legacy") / "run"
    args = ["--images", str(IMAGES), "--labels", str(LABELS), *FAST_MODEL, "--image-size", "32",
            "--batch-size", "32", "--val-fraction", "0.2", "--test-fraction", "0.4", "--output", str(output)]
    # The first run trains and checkpoints; the resumed one also runs the epoch-end BatchNorm pass (on 64 images:
    # one batch per rank; its numbers are checked by test_tf112_batchnorm_moments_in_the_graph_equal_the_numpy_path)
    # and the baseline.
    first = _horovodrun(*args, "--epochs", "1", "--bn-images", "0", "--baseline-size", "0")
    _ok(first)
    first_metrics = json.loads((output / "metrics.json").read_text())
    first_state = json.loads((output / "checkpoint" / "state.json").read_text())
    first_state["model_file_present"] = (output / "checkpoint" / first_state["model_file"]).is_file()
    second = _horovodrun(*args, "--epochs", "2", "--resume", "--bn-images", "64")
    _ok(second)
    return {"output": output, "first_metrics": first_metrics, "first_state": first_state, "second": second,
            "metrics": json.loads((output / "metrics.json").read_text())}


def test_two_ranks_train_under_tf112_horovod0161(runs):
    metrics = runs["first_metrics"]
    assert [e["epoch"] for e in metrics["epochs"]] == [1]
    versions = metrics["run"]["versions"]
    assert versions["tensorflow"] == "1.12.0" and versions["horovod"] == "0.16.1", versions
    assert versions["python"].startswith("3.6."), versions
    assert metrics["run"]["world_size"] == 2 and metrics["run"]["device"] == "CPU"
    entry = metrics["epochs"][0]
    assert entry["world_size"] == 2 and list(entry["auroc"]) == list(CLASSES)
    assert entry["val_rows"]["evaluated"] == entry["n_val"] > 0 and entry["val_rows"]["skipped"] == []
    assert len(entry["images_per_sec"]["per_rank"]) == 2 and min(entry["images_per_sec"]["per_rank"]) > 0
    assert entry["loss"] is not None and entry["mean_auroc"] is not None
    state = runs["first_state"]
    assert state["epoch"] == 1 and state["model_file_present"], state  # checked before --resume replaced it


def test_resume_continues_to_epoch_two(runs):
    metrics = runs["metrics"]
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    assert metrics["epochs"][0] == runs["first_metrics"]["epochs"][0]  # epoch 1 kept as written, not re-run
    assert metrics["run"]["initial_epoch"] == 1 and metrics["epochs"][1]["world_size"] == 2
    assert "resuming after epoch 1" in runs["second"].stdout + runs["second"].stderr
    state = json.loads((runs["output"] / "checkpoint" / "state.json").read_text())
    assert state["epoch"] == 2 and (runs["output"] / "checkpoint" / state["model_file"]).is_file()
    assert (runs["output"] / "model.h5").is_file() and (runs["output"] / "predictions.csv").is_file()
    assert metrics["run"]["recipe"]["batchnorm_statistics"].startswith("recomputed each epoch on 64 ")
    assert "logistic regression" in metrics["baseline"]["method"]


def test_tf112_batchnorm_moments_in_the_graph_equal_the_numpy_path():
    """Precise BN's K.function over tf.nn.moments (learning phase 1) gives what the NumPy path did, under TF 1.12
    (tests/batchnorm_moments.py; the TF 2 side is in test_trainer_model.py)."""
    result = subprocess.run([str(LEGACY / "bin" / "python"), "-m", "tests.batchnorm_moments"], cwd=REPO, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["count"] == 8 and probe["layers"] == 3, probe
    assert probe["mean_error"] < 1e-4 and probe["variance_error"] < 1e-4, probe


#: Builds Adam's updates for one variable in a fresh graph and reports, for TF 1.12's own Adam and for the
#: trainer's, how many reads of the step counter that feed the variable's update are not ordered after the
#: counter's increment (walking data and control inputs back from the update).
ORDER_PROBE = r"""
import json
import tensorflow as tf
from trainer import compat

def unordered_reads(make_optimizer):
    with tf.Graph().as_default():
        optimizer = make_optimizer()
        x = tf.Variable([1.0, 2.0])
        updates = optimizer.get_updates(tf.reduce_sum(tf.square(x)), [x])
        handle = optimizer.iterations.handle.op
        def ancestors(op):
            seen, todo = set(), [op]
            while todo:
                op = todo.pop()
                for parent in [t.op for t in op.inputs] + list(op.control_inputs):
                    if parent not in seen:
                        seen.add(parent)
                        todo.append(parent)
            return seen
        before_update = ancestors(getattr(updates[-1], "op", updates[-1]))
        reads = [op for op in before_update if op.type == "ReadVariableOp" and op.inputs[0].op is handle]
        return {"reads": len(reads),
                "unordered": sum(not any(a.type == "AssignAddVariableOp" and a.inputs[0].op is handle
                                         for a in ancestors(r)) for r in reads),
                "class": type(optimizer).__module__ + "." + type(optimizer).__name__}

print(json.dumps({"stock": unordered_reads(lambda: tf.keras.optimizers.Adam(lr=0.01)),
                  "trainer": unordered_reads(lambda: compat.adam(0.01))}))
"""


def test_tf112_adam_reads_the_step_after_incrementing_it():
    """TF 1.12's Keras Adam computes its bias correction from a read of ``iterations`` that nothing orders against
    ``assign_add(iterations, 1)``: the step may use t or t + 1. Under Horovod the asynchronous allreduce shifts that
    race per rank (here, after the first step rank 0 had applied the t = 2 update and rank 1 the t = 1 one) and the
    replicas diverged -- with or without tensor fusion. ``trainer.compat.adam`` reads it after the increment."""
    result = subprocess.run([str(LEGACY / "bin" / "python"), "-c", ORDER_PROBE], cwd=REPO, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["stock"]["reads"] >= 1 and probe["stock"]["unordered"] >= 1, probe  # the race TF 1.12 ships
    assert probe["trainer"]["class"] != probe["stock"]["class"], probe
    assert probe["trainer"]["reads"] >= 1 and probe["trainer"]["unordered"] == 0, probe
