"""The container launch command of ``invoke train --stack`` (no Docker needed: interfaces and GPUs given)."""
from __future__ import annotations

import pytest

from chexstack.errors import ChexstackError
from launch.container import docker_plan, singularity_plan
from launch.request import TrainRequest
from tests.conftest import SAMPLE

LABELS = SAMPLE / "Data_Entry_2017_v2020.csv.gz"
IMAGES = SAMPLE / "images-64"


def _request(tmp_path, **kw) -> TrainRequest:
    base = dict(gpus=0, np=2, images=str(IMAGES), labels=str(LABELS), image_size=64, epochs=1,
                output=str(tmp_path / "out"))
    base.update(kw)
    return TrainRequest(**base)


def test_cpu_ranks_with_a_network_use_gloo(tmp_path):
    plan = docker_plan(_request(tmp_path), "chexstack/cpu:x", gpus_here=0, interfaces=["eth0", "lo"])
    argv = plan.argv
    import resource
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    memlock = "memlock=-1" if hard == resource.RLIM_INFINITY else "memlock=%d" % hard
    assert argv[:4] == ["docker", "run", "--rm", "--init"]  # tini as PID 1 passes SIGTERM on to horovodrun
    assert argv[4] == "--name" and argv[5] == plan.container and plan.container.startswith("chexstack-train-")
    assert argv[6:12] == ["--network", "host", "--ipc=host", "--ulimit", memlock, "--ulimit"]
    assert argv[argv.index("chexstack/cpu:x") - 2:argv.index("chexstack/cpu:x")] == ["-e", "CHEXSTACK_OUTPUT_LOCK"]
    assert "%s:/output" % (tmp_path / "out") in argv and "%s:/data/images:ro" % IMAGES in argv
    assert "%s:/data/labels/%s:ro" % (LABELS, LABELS.name) in argv
    assert "--gpus" not in argv and "CUDA_VISIBLE_DEVICES=" in argv
    tail = argv[argv.index("chexstack/cpu:x"):]
    assert tail[:7] == ["chexstack/cpu:x", "horovodrun", "-np", "2", "-H", "localhost:2", "--gloo"]
    assert tail[7:10] == ["python", "-m", "trainer"]
    assert tail[tail.index("--images") + 1] == "/data/images" and tail[tail.index("--output") + 1] == "/output"
    assert plan.controller == "gloo" and not (tmp_path / "out").exists()  # planning creates nothing


def test_loopback_only_container_runs_mpi_as_root(tmp_path):
    plan = docker_plan(_request(tmp_path), "img", network="none", gpus_here=0, interfaces=["lo"])
    assert plan.controller == "mpi" and "only loopback" in plan.reason
    assert "--network" in plan.argv and plan.argv[plan.argv.index("--network") + 1] == "none"
    assert "OMPI_ALLOW_RUN_AS_ROOT=1" in plan.argv and "--mpi" in plan.argv
    assert "OMPI_MCA_btl_vader_single_copy_mechanism=none" in plan.argv


def test_gloo_requested_on_loopback_stops_before_launch(tmp_path):
    with pytest.raises(ChexstackError, match=r"loopback.*exit 139.*--controller mpi"):
        docker_plan(_request(tmp_path, controller="gloo"), "img", network="none", gpus_here=0, interfaces=["lo"])


def test_gpus_are_passed_only_when_present(tmp_path):
    plan = docker_plan(_request(tmp_path, gpus=2, np=None), "img", gpus_here=2, interfaces=["eth0"])
    assert plan.argv[plan.argv.index("--gpus") + 1] == "all" and "CUDA_VISIBLE_DEVICES=" not in plan.argv
    with pytest.raises(ChexstackError, match="--gpus 2: this machine has 0"):
        docker_plan(_request(tmp_path, gpus=2, np=None), "img", gpus_here=0, interfaces=["eth0"])


def test_bad_network_and_missing_data(tmp_path):
    with pytest.raises(ChexstackError, match="--network 'bridge'"):
        docker_plan(_request(tmp_path), "img", network="bridge", gpus_here=0, interfaces=["eth0"])
    with pytest.raises(ChexstackError, match="--images .*/nope: no such directory"):
        docker_plan(_request(tmp_path, images=str(tmp_path / "nope")), "img", gpus_here=0, interfaces=["eth0"])
    with pytest.raises(ChexstackError, match="--labels .*/nope.csv: no such file"):
        docker_plan(_request(tmp_path, labels=str(tmp_path / "nope.csv")), "img", gpus_here=0, interfaces=["eth0"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(ChexstackError, match="--output .*/file is a file, not a folder"):
        docker_plan(_request(tmp_path, output=str(tmp_path / "file")), "img", gpus_here=0, interfaces=["eth0"])


def test_singularity_without_the_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ChexstackError) as e:
        singularity_plan(_request(tmp_path), str(tmp_path / "x.sif"))
    assert e.value.exit_code == 3 and "apptainer or singularity" in str(e.value)
