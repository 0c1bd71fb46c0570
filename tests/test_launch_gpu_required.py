"""../shared/cases/32: GPUs asked for, TensorFlow cannot load its CUDA libraries and registers no GPU. The run must
stop before training (exit 2) naming the missing libraries, not train on CPU and exit 0; CPU ranks are unaffected."""
from __future__ import annotations

import os
import subprocess
import sys

from facts.parsers import horovodrun
from launch import failure
from launch.request import TrainRequest
from tests.lib.paths import CASES, REPO


def test_a_rank_asked_for_gpus_that_sees_none_stops_before_training(tmp_path):
    """The real trainer on this CPU-only TensorFlow, as a launcher with --gpus 1 starts it."""
    env = dict(os.environ, **TrainRequest(gpus=1).device_env(), PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run([sys.executable, "-m", "trainer", "--data", "synthetic", "--epochs", "1",
                          "--image-size", "32", "--output", str(tmp_path / "r")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "trainer: error: GPUs were asked for (--gpus) but TensorFlow" in run.stdout + run.stderr
    assert not (tmp_path / "r" / "metrics.json").exists()
    assert TrainRequest(gpus=0).device_env() == {"CUDA_VISIBLE_DEVICES": ""}


def test_the_failure_names_the_libraries_tensorflow_could_not_load():
    lines = [l for l in (CASES / "32-tf-cuda-libs-missing-trains-on-cpu.txt").read_text().splitlines()
             if l.startswith("[1,0]")]
    lines.append("[1,0]<stdout>:trainer: error: GPUs were asked for (--gpus) but TensorFlow 2.4.1 sees no GPU")
    tails = {0: [horovodrun.RANK_LINE.match(l).group(3) for l in lines]}
    outcome = failure.Outcome(2, (0, 2), ["rank 0: GPUs were asked for (--gpus) but TensorFlow 2.4.1 sees no GPU"],
                             lines[-5:], "/tmp/r7/launch.log", tails)
    message = failure.explain_failure(outcome, "mpi")
    assert "rank 0 exited first, with code 2" in message and "sees no GPU" in message
    assert "TensorFlow could not load libcudart.so.11.0, libcudnn.so.8" in message
