"""Throughput mode with mixed precision under a real 2-rank horovodrun with the MPI controller (Open MPI as root:
the launcher's flags; float16 on CPU is slow but runs the loss-scaling path)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from launch.horovodrun import horovodrun_argv
from tests.lib.paths import REPO
from tests.lib.runs import FAST_MODEL

pytestmark = pytest.mark.slow


def test_synthetic_throughput_two_ranks_mpi(tmp_path):
    argv, env = horovodrun_argv(2, ["--data", "synthetic", "--throughput", "--amp", "--steps", "2",
                                    "--warmup-steps", "1", *FAST_MODEL, "--image-size", "32",
                                    "--batch-size", "4", "--output", str(tmp_path)], controller="mpi")
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600,
                            env={**os.environ, **env, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = json.loads((tmp_path / "throughput.json").read_text())
    assert out["world_size"] == 2 and out["model"] == FAST_MODEL[1] and out["batch_size"] == 4
    assert out["device"] == "CPU" and out["amp"] is True
    assert len(out["step_times_s"]) == 3 and len(out["images_per_sec"]["per_rank"]) == 2
    assert out["images_per_sec"]["total"] == pytest.approx(sum(out["images_per_sec"]["per_rank"]))
    # the MPI the ranks mapped (trainer.mpilib), what bench.guard compares; synthetic data has no hashes
    assert out["mpi"]["implementation"] == "Open MPI" and out["versions"]["openmpi"] == out["mpi"]["version"]
    assert out["label_sha256"] is None and out["splits"] is None and out["trainable_parameters"] > 0
    assert "input_wait_s" not in out and "timeline" not in out  # no --horovod-timeline
    # as-run facts per rank (trainer.asrun), what launch.drift compares: both ranks, the same libraries
    assert [r["horovod_build"]["mpi"] for r in out["as_run"]] == [True, True]
    assert out["as_run"][0] == out["as_run"][1] and out["as_run"][0]["openmpi"] == out["mpi"]["version"]
    assert len(out["as_run"][0]["packages_sha256"]) == 64 and out["as_run"][0]["packages"] > 10
    # each rank's cores and their accounting over the 2 timed steps (trainer.hostload), what bench.results reads
    assert [sorted(r) for r in out["host_load"]] == [sorted(["host", "boot_id", "cpus", "window_s", "cpu_s",
                                                             "ticks_per_s", "stat", "loadavg"])] * 2
    assert all(r["cpus"] == sorted(os.sched_getaffinity(0)) and r["window_s"] > 0 and r["cpu_s"] > 0
               and r["stat"][0].startswith("cpu ") for r in out["host_load"])


def test_real_png_throughput_with_the_resize_in_the_step(tmp_path):
    """``invoke bench``'s throughput mode from PNGs with ``--input-resize device`` (auto picks it on GPUs) and the
    input-wait timeline: it runs, and throughput.json says where the images were resized."""
    from tests.lib.paths import SAMPLE

    result = subprocess.run(
        [sys.executable, "-m", "trainer", "--images", str(SAMPLE / "images-64"), "--labels",
         str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--throughput", "--input-resize", "device",
         "--horovod-timeline", "--steps", "2", "--warmup-steps", "1", *FAST_MODEL, "--image-size", "32",
         "--batch-size", "4", "--output", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = json.loads((tmp_path / "throughput.json").read_text())
    assert out["input_resize"] == {"where": "device", "why": "asked for (--input-resize device)",
                                   "source_size": [64, 64], "other_sizes": 0}
    assert len(out["step_times_s"]) == 3 and len(out["input_wait_s"]) == 3


def test_a_throughput_run_needs_no_val_split(tmp_path):
    """3 images of one patient: the seeded split leaves val empty, which refuses training but not a throughput run,
    which never validates (it times the training split's steps)."""
    import shutil

    from tests.lib.paths import SAMPLE

    images = tmp_path / "images"
    images.mkdir()
    for name in sorted(os.listdir(SAMPLE / "images-64"))[:3]:
        shutil.copy(SAMPLE / "images-64" / name, images / name)
    result = subprocess.run(
        [sys.executable, "-m", "trainer", "--images", str(images), "--labels",
         str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--throughput", "--steps", "1", "--warmup-steps", "0",
         *FAST_MODEL, "--image-size", "32", "--batch-size", "2", "--output", str(tmp_path / "out")], cwd=REPO,
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert '"n_train": 3' in result.stdout and "split is empty" not in result.stderr
    assert len(json.loads((tmp_path / "out" / "throughput.json").read_text())["step_times_s"]) == 1
