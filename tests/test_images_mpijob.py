"""An MPIJob run for real with the built cpu image, without a cluster: the Launcher and Worker containers of
``launch/k8s.py``'s MPIJob, started on this machine's Docker engine the way the mpi-operator, the kubelet and a CNI
plugin start its pods (``launch.pods``, the Kubernetes system of ``invoke study``): the operator's SSH Secret and
hostfile, each pod in its own network namespace on the test cluster's bridge (``scripts/testcluster plug``:
Launcher 10.213.57.100, Worker i 10.213.57.(101+i)). Each Worker's sshd listens on port 22 of its own address; the
Launcher's mpirun and the ranks' TCP traffic cross the bridge. The study's other two paths (issue 41) run too: the
pods on the test cluster's VXLAN overlay (``plug --overlay``), and on their nodes' network (``hostNetwork``). Nothing
inside the image is changed. The image is
named by its ID: its tag (the manifest's digest) is shared with every checkout that builds the same stack.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.manifest import load_stack
from launch import k8s
from launch.job import JobSpec, Mount
from launch.pods import PodJob, PodNetwork, worker_host
from tests.lib.leftovers import TEST_LABELS
from tests.lib.runs import FAST_MODEL
from tests.lib.testcluster import SCRIPT as TESTCLUSTER

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]

JOB, NAMESPACE = "chexstack-cxr", "default"
LAUNCHER_ADDRESS = "10.213.57.100"
NETWORK = PodNetwork(plug=(str(TESTCLUSTER), "plug"), launcher_address=LAUNCHER_ADDRESS,
                     worker_addresses=("10.213.57.101", "10.213.57.102"))


def _worker_host(i: int) -> str:
    return worker_host(JOB, NAMESPACE, i)


def _job(client, spec: JobSpec, opts: k8s.K8sOptions, root: Path) -> PodJob:
    """The rendered MPIJob's pods on this engine, each container carrying the run's test label."""
    return PodJob(client, k8s.mpijob(spec, opts), NETWORK, root, labels=TEST_LABELS)


def _spec(image: str, out: Path, nodes: int = 2) -> JobSpec:
    return JobSpec(name=JOB, stack=load_stack("cpu"), image=image, nodes=nodes, ranks_per_node=1, gpus=False,
                   trainer_args=("--data", "synthetic", "--synthetic-images", "16", "--throughput", "--steps", "3",
                                 "--warmup-steps", "1", "--batch-size", "2", *FAST_MODEL, "--image-size", "32",
                                 "--output", "/out"),
                   mounts=(Mount(str(out), "/out"),))


def test_mpijob_launcher_runs_the_trainer_on_two_workers_over_ssh(testcluster, client, cpu_build,
                                                                  tmp_path):
    """Three pods, each in its own network namespace: the rendered Launcher's mpirun reaches both Workers' sshd
    with the operator's kind of key, read-only, and the trainer runs with world size 2 across the two Worker pods,
    rank 0 writing into the Workers' /out (the Launcher has no /out); each rank ran in its own pod."""
    out = tmp_path / "out"
    out.mkdir()
    job = _job(client, _spec(cpu_build.image_id, out), k8s.K8sOptions(), tmp_path)
    try:
        for i in range(2):
            job.start_worker(i)
        status, log = job.run_launcher()
    finally:
        sshd_logs = job.stop()
    assert status == 0, log[-4000:] + "\n".join(l[-1500:] for l in sshd_logs)
    result = json.loads((out / "throughput.json").read_text())
    assert result["world_size"] == 2 and len(result["images_per_sec"]["per_rank"]) == 2
    assert result["hosts"] == ["%s-worker-0" % JOB, "%s-worker-1" % JOB]  # a rank per Worker pod, by its hostname
    # each Worker's sshd let the Launcher's pod in with the job's key (not a password, not a host-based login)
    for sshd_log in sshd_logs:
        assert "Accepted publickey for root from %s" % LAUNCHER_ADDRESS in sshd_log and "ECDSA" in sshd_log, \
            sshd_log[-2000:]


def test_the_image_config_is_what_the_secret_mount_needs(testcluster, client, cpu_build, tmp_path):
    """Controls: with sshd's StrictModes back on, the read-only Secret folder refuses the key; with the client's
    host-key check back on, a new pod's host key stops the login; with known_hosts in the Secret folder, ssh cannot
    record it. The image's own settings pass all three."""
    job = _job(client, _spec(cpu_build.image_id, tmp_path / "unused"), k8s.K8sOptions(), tmp_path)
    ssh = ["ssh", "-o", "BatchMode=yes"]
    try:
        job.start_worker(0)
        job.start_worker(1, ("-o", "StrictModes=yes"))
        status, log = job.run_launcher(ssh + [_worker_host(0), "echo in-worker-0"])
        assert status == 0 and "in-worker-0" in log and "Failed to add" not in log, log
        status, log = job.run_launcher(ssh + [_worker_host(1), "true"])
        assert status == 255 and "Permission denied (publickey" in log, log
        status, log = job.run_launcher(ssh + ["-o", "StrictHostKeyChecking=ask", _worker_host(0), "true"])
        assert status == 255 and "Host key verification failed" in log, log
        status, log = job.run_launcher(ssh + ["-o", "UserKnownHostsFile=~/.ssh/known_hosts", _worker_host(0), "true"])
        assert "Failed to add the host to the list of known hosts" in log, log
    finally:
        sshd_logs = job.stop()
    # the refusal is sshd's mode check on the Secret's folder, not the key
    assert "bad ownership or modes for directory /root/.ssh" in sshd_logs[1], sshd_logs[1][-2000:]


def _flannel_bytes(host: str) -> tuple[int, int]:
    """(tx, rx) bytes of host's flannel.1 (``ip -s -j link``)."""
    import subprocess

    out = subprocess.run(["ip", "-n", host, "-s", "-j", "link", "show", "flannel.1"], capture_output=True, text=True,
                         check=True)
    stats = json.loads(out.stdout)[0]["stats64"]
    return stats["tx"]["bytes"], stats["rx"]["bytes"]


@pytest.mark.parametrize("path", ["overlay", "host"])
def test_the_mpijob_on_the_overlay_and_on_host_network(testcluster, client, cpu_build, tmp_path, path):
    """Issue 41: the study's two Kubernetes paths for real. On the overlay each pod is in its node's pod subnet
    (10.244.K.x, ``scripts/testcluster plug --overlay``) and the ranks' traffic between chex1 and chex2 crosses both
    nodes' flannel.1 (VXLAN): its counters grow by more than the trainer's gradients; the path observed in the
    Workers' namespaces says VXLAN on the node. With hostNetwork the pods run in chex1's and chex2's own namespaces
    (the ranks' hostnames are the nodes'), sshd on 2222 beside the node's own, and nothing is encapsulated."""
    from bench import netpath, study
    from tests.lib.testcluster import script

    assert script("overlay").returncode == 0  # the overlay's devices are on the hosts in both runs
    out = tmp_path / "out"
    out.mkdir()
    network = study.pod_network(path, ("chex1", "chex2"))
    obj = k8s.mpijob(_spec(cpu_build.image_id, out), k8s.K8sOptions(nodes=("chex1", "chex2"),
                                                                    host_network=path == "host"))
    job = PodJob(client, obj, network, tmp_path, labels=TEST_LABELS)
    seen = []

    def observe(j):
        for i, (pod, netns, node) in enumerate(j.namespaces):
            seen.append(netpath.observe(("nsenter", "--net=%s" % netns, "--"), pod, network.worker_addresses[1 - i],
                                        node=("nsenter", "--net=/run/netns/%s" % node, "--"), node_name=node))

    before = {h: _flannel_bytes(h) for h in ("chex1", "chex2")}
    status, log, sshd_logs = job.run(on_ready=observe)
    after = {h: _flannel_bytes(h) for h in ("chex1", "chex2")}
    assert status == 0, log[-4000:] + "\n".join(s[-1500:] for s in sshd_logs)
    result = json.loads((out / "throughput.json").read_text())
    assert result["world_size"] == 2
    grew = {h: (after[h][0] - before[h][0], after[h][1] - before[h][1]) for h in after}
    if path == "overlay":
        assert result["hosts"] == ["%s-worker-0" % JOB, "%s-worker-1" % JOB]
        assert all(tx > 1_000_000 and rx > 1_000_000 for tx, rx in grew.values()), grew  # the gradients, each way
        assert [s["encapsulation"] for s in seen] == [
            "VXLAN VNI 1, UDP 8472 over 10.213.57.%d (flannel.1 on chex%d, MTU 1450)" % (10 + k, k) for k in (1, 2)]
        assert all(s["device"] == "eth0" and s["mtu"] == 1450 for s in seen), seen
    else:
        assert result["hosts"] == ["chex1", "chex2"]  # the nodes' own names
        assert all(s["encapsulation"] == "none" and s["device"] == "eth0" and s["mtu"] == 1500 for s in seen), seen
    assert netpath.transport(log, started_by="mpirun").startswith("MPI"), log[-2000:]
