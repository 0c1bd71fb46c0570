"""An MPIJob run for real with the built cpu image, without a cluster: the Launcher and Worker containers of
``launch/k8s.py``'s MPIJob, started on this machine's Docker engine the way the mpi-operator starts its pods.

Mirrored from the operator (kubeflow/mpi-operator, pkg/controller/mpi_job_controller.go):
- the SSH Secret: one ECDSA P-521 key in PEM (``newSSHAuthSecret``), as ``id_rsa``, ``id_rsa.pub`` and
  ``authorized_keys``, mode 0600 under ``/root/.ssh`` (``setupSSHOnPod``), laid out as the kubelet writes a Secret
  volume (``..data`` symlinks into a timestamped folder, the volume folder world-writable) and mounted read-only
  at ``sshAuthMountPath`` in every container;
- the hostfile ``/etc/mpi/hostfile`` (mode 0444, ``newConfigMap``): ``<job>-worker-<i>.<job>-worker.<ns>.svc
  slots=<n>``, one line per worker;
- the Launcher's environment (``ompiEnvVars``, ``OMPI_MCA_orte_set_default_slots``, ``K_MPI_JOB_ROLE``);
- each container's command, working directory, environment and volume mounts from the rendered MPIJob.

Every pod has its own network namespace, as under a CNI plugin, on the test cluster's bridge (tests/lib/testcluster.py,
``scripts/testcluster plug``): a pod sandbox (a container of the same image running ``sleep infinity`` with
``--network none``, the pod's hostname, and the cluster DNS names of every pod in its /etc/hosts) holds the
namespace, gets a veth end on the bridge and its address (Launcher 10.213.57.100, Worker i 10.213.57.(101+i)),
and the pod's container joins it (``--network container:<sandbox>``), as the kubelet joins a pod's containers to
its pause container. Each Worker's sshd listens on port 22 of its own address; the Launcher's mpirun and the ranks'
TCP traffic cross the bridge. Nothing inside the image is changed. The image is named by its ID: its tag (the
manifest's digest) is shared with every checkout that builds the same stack.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest

from envs.manifest import load_stack
from launch import k8s
from launch.job import JobSpec, Mount
from tests.lib.leftovers import TEST_LABELS
from tests.lib.runs import FAST_MODEL
from tests.lib.testcluster import SCRIPT as TESTCLUSTER

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]

JOB, NAMESPACE = "chexstack-cxr", "default"
LAUNCHER_ADDRESS = "10.213.57.100"
WORKER_ADDRESSES = ("10.213.57.101", "10.213.57.102")
SSH_PORT = 22
#: mpi-operator's Launcher environment for Open MPI (ompiEnvVars) and the rank slots per worker.
OPERATOR_LAUNCHER_ENV = {"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                         "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                         "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                         "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
SECRET_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")


def _worker_host(i: int) -> str:
    return "%s-worker-%d.%s-worker.%s.svc" % (JOB, i, JOB, NAMESPACE)


#: the cluster DNS of the job's pods: each Worker's name (the operator's hostfile names) -> its pod address
CLUSTER_DNS = {_worker_host(i): address for i, address in enumerate(WORKER_ADDRESSES)}


def _ssh_secret(client, image: str, root: Path) -> Path:
    """The operator's SSH Secret as the kubelet mounts it: ``root/secret`` (mode 1777) holding ``..data`` ->
    ``..<timestamp>/`` with the three files (0600), and one symlink per file."""
    volume = root / "secret"
    payload = volume / "..2025_01_01_00_00_00.000000000"
    payload.mkdir(parents=True)
    client.containers.run(image, ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "",
                                  "-f", "/payload/id_rsa"], remove=True, network_mode="none", labels=TEST_LABELS,
                          volumes={str(payload): {"bind": "/payload", "mode": "rw"}})
    (payload / "authorized_keys").write_bytes((payload / "id_rsa.pub").read_bytes())
    assert (payload / "id_rsa").read_text().startswith("-----BEGIN EC PRIVATE KEY-----")
    for name in SECRET_FILES:
        os.chmod(payload / name, 0o600)
        os.symlink("..data/%s" % name, volume / name)
    os.symlink(payload.name, volume / "..data")
    os.chmod(volume, 0o1777)
    return volume


def _hostfile(root: Path, workers: int, slots: int) -> Path:
    path = root / "hostfile"
    path.write_text("".join("%s slots=%d\n" % (_worker_host(i), slots) for i in range(workers)))
    path.chmod(0o444)
    return path


def _container(replica: dict) -> tuple[dict, dict]:
    spec = replica["template"]["spec"]
    return spec, spec["containers"][0]


def _docker_volumes(pod: dict, container: dict, secret: Path, mount_path: str) -> tuple[dict, dict]:
    """(docker volumes, other run options) for the pod's volume mounts plus the SSH Secret at ``mount_path``."""
    volumes = {str(secret): {"bind": mount_path, "mode": "ro"}}
    options = {}
    by_name = {v["name"]: v for v in pod.get("volumes", [])}
    for vm in container.get("volumeMounts", []):
        vol = by_name[vm["name"]]
        if "hostPath" in vol:
            volumes[vol["hostPath"]["path"]] = {"bind": vm["mountPath"], "mode": "ro" if vm.get("readOnly") else "rw"}
        elif vol.get("emptyDir", {}).get("medium") == "Memory" and vm["mountPath"] == "/dev/shm":
            options["shm_size"] = vol["emptyDir"]["sizeLimit"].replace("Gi", "g").replace("Mi", "m")
        else:
            raise AssertionError("volume %s has no stand-in here" % vol)
    return volumes, options


def _env(container: dict, extra: dict) -> dict:
    return {**{e["name"]: e["value"] for e in container.get("env", [])}, **extra}


def _wait_listening(address: str, port: int, container, timeout: float = 30) -> None:
    """Like the operator's ``launcherCreationPolicy: WaitForWorkersReady``: until the worker's sshd accepts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            container.reload()
            if container.status == "exited":
                raise AssertionError("worker exited: %s" % container.logs().decode()[-2000:])
            time.sleep(0.3)
    raise AssertionError("no sshd on %s:%d after %ds" % (address, port, timeout))


class MpiJob:
    """The rendered MPIJob's pods on this engine (module docstring); ``stop()`` removes them."""

    def __init__(self, client, spec: JobSpec, opts: k8s.K8sOptions, root: Path):
        self.client, self.spec, self.opts = client, spec, opts
        self.obj = k8s.mpijob(spec, opts)
        self.suffix = secrets.token_hex(3)  # container names of this job only
        self.secret = _ssh_secret(client, spec.image, root)
        self.hostfile = _hostfile(root, spec.nodes, spec.ranks_per_node)
        self.workers: list = []
        self.names: list[str] = []  # every container asked for (sandboxes too), also one whose start failed

    def replica(self, role: str) -> tuple[dict, dict]:
        return _container(self.obj["spec"]["mpiReplicaSpecs"][role])

    def _sandbox(self, pod: str, address: str) -> str:
        """A pod's network namespace on the bridge at ``address``, held by a sandbox container named after the pod
        (hostname ``pod``, /etc/hosts with CLUSTER_DNS); returns the ``network_mode`` that joins it."""
        self.names.append("%s-%s-sandbox" % (pod, self.suffix))
        sandbox = self.client.containers.run(
            self.spec.image, ["sleep", "infinity"], detach=True, network_mode="none", hostname=pod,
            extra_hosts=CLUSTER_DNS, name=self.names[-1], labels=TEST_LABELS)
        sandbox.reload()
        plug = subprocess.run([str(TESTCLUSTER), "plug", str(sandbox.attrs["State"]["Pid"]), address],
                              capture_output=True, text=True, timeout=60)
        assert plug.returncode == 0, plug.stderr
        return "container:%s" % sandbox.id

    def start_worker(self, i: int, sshd_options: tuple[str, ...] = ()):
        """Worker ``i``: the rendered command (``sshd -De``) in its own pod at WORKER_ADDRESSES[i]."""
        pod, c = self.replica("Worker")
        volumes, options = _docker_volumes(pod, c, self.secret, self.opts.ssh_auth_mount_path)
        network = self._sandbox("%s-worker-%d" % (JOB, i), WORKER_ADDRESSES[i])
        self.names.append("%s-worker-%d-%s" % (JOB, i, self.suffix))
        worker = self.client.containers.run(
            c["image"], c["command"] + list(sshd_options), detach=True, network_mode=network,
            working_dir=c["workingDir"], environment=_env(c, {"K_MPI_JOB_ROLE": "worker"}), volumes=volumes,
            name=self.names[-1], labels=TEST_LABELS, **options)
        self.workers.append(worker)
        _wait_listening(WORKER_ADDRESSES[i], SSH_PORT, worker)
        return worker

    def run_launcher(self, command: list[str] | None = None, timeout: int = 600) -> tuple[int, str]:
        """The Launcher (the rendered mpirun, or ``command``) to completion in its own pod: (exit status, output)."""
        pod, c = self.replica("Launcher")
        env = _env(c, {**OPERATOR_LAUNCHER_ENV, "OMPI_MCA_orte_set_default_slots": str(self.spec.ranks_per_node)})
        volumes, _ = _docker_volumes(pod, c, self.secret, self.opts.ssh_auth_mount_path)
        volumes[str(self.hostfile)] = {"bind": "/etc/mpi/hostfile", "mode": "ro"}
        name = "%s-launcher-%s" % (JOB, self.suffix)
        try:
            network = self._sandbox("%s-launcher" % JOB, LAUNCHER_ADDRESS)
            launcher = self.client.containers.run(
                c["image"], command or c["command"], detach=True, network_mode=network, working_dir=c["workingDir"],
                environment=env, volumes=volumes, name=name, labels=TEST_LABELS)
            status = launcher.wait(timeout=timeout)["StatusCode"]
            return status, launcher.logs().decode("utf-8", "replace")
        finally:
            self._remove(name)
            self._remove(self.names.pop())  # the Launcher's sandbox: a next Launcher takes its address

    def _remove(self, name: str) -> None:
        import docker.errors
        try:
            self.client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass

    def stop(self) -> list[str]:
        """Remove the pods (also one that did not start); return each started Worker's sshd log."""
        logs = [w.logs().decode("utf-8", "replace") for w in self.workers]
        for name in reversed(self.names):
            self._remove(name)
        return logs


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
    job = MpiJob(client, _spec(cpu_build.image_id, out), k8s.K8sOptions(), tmp_path)
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
    job = MpiJob(client, _spec(cpu_build.image_id, tmp_path / "unused"), k8s.K8sOptions(), tmp_path)
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
