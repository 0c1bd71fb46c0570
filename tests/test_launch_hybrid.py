"""Issue 22: the Slurm hybrid model for real on the test cluster: the host's Open MPI ``mpirun`` starts
``singularity exec`` of the signed cpu SIF on chex1 and chex2 (2 × 2 ranks, the real sample), a rank killed on chex2
ends the job naming the host, and ``--resume`` continues from the committed epoch, inside the SIF; and the
script's MPI guard refuses a host Open MPI of another release series, naming both."""
from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from images.sif import file_sha256
from tests.lib.cli import INVOKE
from tests.lib.cluster_runs import SAMPLE_ARGS, kill_chex2_and_expect_a_bounded_end, ranks_on, when_epoch_committed
from tests.lib.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]


def cpu_sif_image_id(made) -> str:
    return next(r.expected for r in made.verification.rows if r.row == "label org.chexstack.docker.image.id")


def _hybrid(cluster, sif, out, *extra):
    return subprocess.Popen([INVOKE, "train", "--launcher", "slurm", "--hybrid", "--submit", "--image", str(sif),
                             "--stack", "cpu", "--nodes", "2", "--ntasks-per-node", "2", "--gpus", "0",
                             "--epochs", "2", "--bn-images", "0", "--baseline-size", "0", "--time", "00:20:00",
                             "--output", str(out), *SAMPLE_ARGS, *extra],
                            cwd=REPO, env=cluster.env(COLUMNS="160", PYTHONPATH=str(REPO)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_hybrid_job_in_the_sif_across_both_hosts_survives_a_killed_rank_and_resumes(testcluster, cpu_sif, tmp_path):
    out = tmp_path / "hybrid"
    proc = _hybrid(testcluster, cpu_sif.path, out)
    try:
        when_epoch_committed(out, 1, proc)
        deadline = time.monotonic() + 120
        while not ranks_on("chex2") and time.monotonic() < deadline:
            time.sleep(0.5)
    except BaseException:
        proc.kill()
        raise
    kill_chex2_and_expect_a_bounded_end(proc)

    resumed = _hybrid(testcluster, cpu_sif.path, out, "--resume")
    text, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, text
    assert re.search(r"Slurm job \d+ COMPLETED on chex\[1-2\]", text), text
    metrics = json.loads((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2], metrics["epochs"]
    run = metrics["run"]
    assert run["world_size"] == 4 and run["hosts"] == ["chex1", "chex1", "chex2", "chex2"]
    assert run["initial_epoch"] == 1
    assert run["container"]["runtime"] == "apptainer" and run["container"]["image"] == str(cpu_sif.path)
    assert run["container"]["labels"]["org.chexstack.docker.image.id"] == cpu_sif_image_id(cpu_sif)
    assert run["container"]["sha256"] == file_sha256(cpu_sif.path)  # sha256sum in the script, on chex1
    in_image = {r.row: r.found for r in cpu_sif.verification.rows}
    assert in_image["tensorflow"].startswith(run["versions"]["tensorflow"])
    assert in_image["python"].startswith(run["versions"]["python"])
