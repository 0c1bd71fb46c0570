"""Launch side: controller choice (../shared/cases/23), horovodrun argv, GPU checks, failure messages."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from chexstack.errors import ChexstackError
from launch import stream
from launch.controller import local_interfaces, pick_controller
from launch.horovodrun import horovodrun_argv
from launch.local import plan
from launch.request import TrainRequest
from tests.conftest import CASES, REPO

SAMPLE_REQUEST = TrainRequest(gpus=0, np=2, data="synthetic", epochs=1, image_size=64, output="/tmp/out")


def test_loopback_only_picks_mpi():
    controller, reason = pick_controller(["lo"], None)
    assert controller == "mpi" and "139" in reason


def test_loopback_only_with_gloo_requested_names_cause_and_both_fixes():
    with pytest.raises(ChexstackError) as err:
        pick_controller(["lo"], "gloo")
    message = str(err.value)
    assert "loopback" in message and "139" in message
    assert "--controller mpi" in message and "network interface" in message


def test_network_interface_keeps_gloo_and_mpi_is_honoured():
    assert pick_controller(["lo", "eth0"], None)[0] == "gloo"
    assert pick_controller(["lo", "eth0"], "gloo") == ("gloo", "requested")
    assert pick_controller(["lo"], "mpi") == ("mpi", "requested")
    assert pick_controller([], None)[0] == "mpi"
    with pytest.raises(ChexstackError, match="expected one of gloo, mpi"):
        pick_controller(["eth0"], "nccl")


def test_local_interfaces_lists_loopback():
    assert "lo" in local_interfaces()


def test_horovodrun_argv_gloo():
    argv, env = horovodrun_argv(2, ["--data", "synthetic"], controller="gloo", python="/opt/py/bin/python")
    assert argv == ["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", "/opt/py/bin/python", "-m", "trainer",
                    "--data", "synthetic"]
    assert env == {}


def test_horovodrun_argv_mpi_multi_host_adds_open_mpi_root_flags():
    argv, env = horovodrun_argv(8, ["--epochs", "3"], hosts=["node1:4", "node2:4"], controller="mpi",
                                python=sys.executable)
    assert argv[0].endswith("horovodrun")
    assert argv[1:7] == ["-np", "8", "-H", "node1:4,node2:4", "--mpi", "--mpi-args=--allow-run-as-root"]
    assert argv[7:] == [sys.executable, "-m", "trainer", "--epochs", "3"]
    assert env == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.mark.parametrize("np_,hosts,fragment", [(0, None, "at least one rank"),
                                               (9, ["node1:4", "node2:4"], "8 slots for 9 ranks"),
                                               (2, ["node1:x"], "NAME:SLOTS")])
def test_horovodrun_argv_rejects(np_, hosts, fragment):
    with pytest.raises(ChexstackError, match=fragment):
        horovodrun_argv(np_, [], hosts=hosts)


def test_plan_cpu_ranks():
    p = plan(SAMPLE_REQUEST, gpus_here=0, interfaces=["lo", "eth0"], python=sys.executable)
    assert p.controller == "gloo" and p.env["CUDA_VISIBLE_DEVICES"] == ""
    assert p.argv[1:6] == ["-np", "2", "-H", "localhost:2", "--gloo"]
    assert "CUDA_VISIBLE_DEVICES='' " in p.command_line()


def test_plan_more_gpus_than_the_machine_has():
    with pytest.raises(ChexstackError, match="--gpus 8: this machine has 0 GPUs"):
        plan(TrainRequest(gpus=8, data="synthetic"), gpus_here=0, interfaces=["eth0"])


def test_plan_checks_the_request():
    with pytest.raises(ChexstackError, match="each rank needs its own GPU"):
        plan(TrainRequest(gpus=2, np=4, data="synthetic"), gpus_here=2, interfaces=["eth0"])
    with pytest.raises(ChexstackError, match="no data"):
        plan(TrainRequest(gpus=0), gpus_here=0, interfaces=["eth0"])
    with pytest.raises(ChexstackError, match="either --data or --images"):
        plan(TrainRequest(data="x", images="y", labels="z"), gpus_here=0, interfaces=["eth0"])


def test_plan_gpus_one_rank_each():
    p = plan(TrainRequest(gpus=4, data="synthetic"), gpus_here=8, interfaces=["eth0"])
    assert p.argv[1:5] == ["-np", "4", "-H", "localhost:4"] and "CUDA_VISIBLE_DEVICES" not in p.env


def _outcome_of(text, returncode=1):
    failures = stream._Failures()
    for line in text.splitlines():
        failures.feed(line)
    errors = [l.split("trainer: error: ", 1)[1] for l in text.splitlines() if "trainer: error: " in l]
    return stream.Outcome(returncode, failures.first, errors, text.splitlines()[-5:], "/tmp/out/launch.log")


def test_gloo_segfault_of_case23_is_explained():
    text = (CASES / "23-horovod-gloo-loopback-only.txt").read_text().split("\n$ ", 2)[0]
    message = stream.explain_failure(_outcome_of(text), "gloo")
    assert "rank 1 exited first, with code 139 (SIGSEGV)" in message
    assert "loopback" in message and "--controller mpi" in message and "/tmp/out/launch.log" in message


def test_mpi_failure_names_rank_and_trainer_error():
    text = "\n".join([
        "[1,1]<stderr>:trainer: error: --data /x: no such directory",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "  Process name: [[51023,1],1]",
        "  Exit code:    2"])
    message = stream.explain_failure(_outcome_of(text), "mpi")
    assert "rank 1 exited first, with code 2;" in message and "--data /x: no such directory" in message
    assert "loopback" not in message


def _in_loopback_only_namespace(command: str) -> subprocess.CompletedProcess:
    """Run ``command`` in a new network namespace that has only ``lo`` (up), as a container with
    ``--network none`` has; skip where namespaces cannot be made (not root, no unshare)."""
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot create a network namespace here (unshare -n)")
    return subprocess.run([unshare, "-n", "sh", "-c", "ip link set lo up && " + command], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_loopback_only_namespace_picks_mpi_and_refuses_gloo_before_launch():
    plan_mpi = _in_loopback_only_namespace(
        "%s -c 'from launch.local import plan; from launch.request import TrainRequest; "
        "p = plan(TrainRequest(np=2, data=\"synthetic\"), gpus_here=0); print(p.controller, p.argv[5:7])'"
        % sys.executable)
    assert plan_mpi.returncode == 0, plan_mpi.stderr
    assert plan_mpi.stdout.strip() == "mpi ['--mpi', '--mpi-args=--allow-run-as-root']"
    invoke = os.path.join(os.path.dirname(sys.executable), "invoke")
    refused = _in_loopback_only_namespace("%s train --gpus 0 --np 2 --data synthetic --controller gloo" % invoke)
    assert refused.returncode == 2
    assert "only network interface is loopback (lo)" in refused.stdout and "--controller mpi" in refused.stdout
    assert "launch:" not in refused.stdout  # stopped before horovodrun
