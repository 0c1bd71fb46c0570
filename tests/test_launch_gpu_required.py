"""../shared/cases/32: GPUs asked for, TensorFlow cannot load its CUDA libraries and registers no GPU. The run must
stop before training (exit 2) naming the missing libraries, not train on CPU and exit 0; CPU ranks are unaffected."""
from __future__ import annotations

import os
import subprocess
import sys

from facts.parsers import horovodrun
from launch import failure
from launch.request import TrainRequest
from tests.lib import cli as cmd
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


def _case32_rank0() -> list[str]:
    return [l for l in (CASES / "32-tf-cuda-libs-missing-trains-on-cpu.txt").read_text().splitlines()
            if l.startswith("[1,0]")]


def _explained(tmp_path, lines: list[str]) -> str:
    log = tmp_path / "launch.log"
    log.write_text("\n".join(lines + ["[1,2]<stderr>:FileNotFoundError: /data/cxr14/Data_Entry_2017_v2020.csv"])
                   + "\n")
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1, result.stderr  # the log shows a failure
    return result.stdout


def test_tensorrt_that_did_not_load_is_no_cause_where_the_gpu_was_used(tmp_path):
    """The reviewer's log: TF-TRT's warning for libnvinfer.so.7 (TensorRT, an optional feature), then TensorFlow
    made its GPU device, then another rank failed for its own reason: TensorRT is not named."""
    warning = _case32_rank0()[0]
    trt = [warning.replace("libcudart.so.11.0", name) for name in ("libnvinfer.so.7", "libnvinfer_plugin.so.7",
                                                                   "libcupti.so.11.0")]
    created = ("[1,0]<stderr>:2024-02-06 14:03:20.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1613] "
               "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 38402 MB memory")
    out = _explained(tmp_path, trt + [created])
    assert "rank 2: FileNotFoundError" in out and "could not load" not in out
    assert horovodrun.is_optional_library("libnvinfer.so.7") and horovodrun.is_optional_library("libcupti.so.11.0")
    assert not horovodrun.is_optional_library("libcudnn.so.8") and not horovodrun.is_optional_library("libcuda.so.1")


def test_tensorrt_is_named_with_the_rest_where_tensorflow_registered_no_gpu(tmp_path):
    """Case 32's ranks (Skipping registering GPU devices) with TensorRT missing as well: every library is named,
    the one the GPU needed first."""
    lines = _case32_rank0()
    trt = lines[0].replace("libcudart.so.11.0", "libnvinfer.so.7")
    out = _explained(tmp_path, lines[:1] + [trt] + lines[1:])
    assert "TensorFlow could not load libcudart.so.11.0, libnvinfer.so.7, libcudnn.so.8" in out
    alone = _explained(tmp_path, [trt])  # no GPU line either way: TensorRT alone proves nothing
    assert "could not load" not in alone
