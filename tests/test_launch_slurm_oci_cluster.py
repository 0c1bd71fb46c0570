"""Issue 42, item 7, for real: the verified cpu image unpacked into an OCI bundle (skopeo, umoci), then
``invoke train --launcher slurm --container BUNDLE --submit`` on the test cluster: Slurm's ``srun --container``
(crun, the test cluster's ``oci.conf``) runs one task per node on chex1 and chex2, each starting 2 ranks wired by
Horovod's Gloo from Slurm's task environment; world size 4, the image's versions and the bundle's digest in the
run record. Few steps, synthetic 32² images."""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from images import oci
from tests.lib.cli import INVOKE
from tests.lib.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]


def test_a_slurm_oci_job_trains_across_both_hosts_inside_the_bundle(testcluster, cpu_build, tmp_path):
    bundle = oci.make_bundle(cpu_build.ref, str(tmp_path / "bundle"))
    assert bundle.image_id == cpu_build.image_id and bundle.digest.startswith("sha256:")
    out = tmp_path / "oci"
    proc = subprocess.run([INVOKE, "train", "--launcher", "slurm", "--stack", "cpu", "--container", bundle.bundle,
                           "--submit", "--gpus", "0", "--nodes", "2", "--ntasks-per-node", "2", "--data",
                           "synthetic", "--model", "mobilenet", "--image-size", "32", "--epochs", "1",
                           "--bn-images", "0", "--baseline-size", "0", "--time", "00:15:00", "--output", str(out)],
                          cwd=REPO, env=testcluster.env(COLUMNS="160", PYTHONPATH=str(REPO)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout
    assert re.search(r"Slurm job \d+ COMPLETED on chex\[1-2\]", proc.stdout), proc.stdout
    run = json.loads((out / "metrics.json").read_text())["run"]
    assert run["world_size"] == 4 and run["hosts"] == ["chex1", "chex1", "chex2", "chex2"], run["hosts"]
    container = run["container"]
    assert container["runtime"] == "oci" and container["bundle"] == bundle.bundle
    assert container["digest"] == bundle.digest and container["image_id"] == cpu_build.image_id
    assert "gloo from Slurm" in container["rendezvous"]
    in_image = {r.row: r.found for r in cpu_build.verification.rows}
    assert in_image["tensorflow"].startswith(run["versions"]["tensorflow"])
    assert in_image["python"].startswith(run["versions"]["python"])
    assert not list(out.glob("oci-bundle-*")), "the job's bundle folder is removed when the job ends"
