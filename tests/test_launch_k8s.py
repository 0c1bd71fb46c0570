"""MPIJob manifests: golden text, the mpi-operator's v2beta1 schema (jsonschema), every pod template against
Kubernetes' core/v1 schema (kubernetes-validate), and what the operator and NCCL need in the pods."""
from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest
import yaml

from chexstack.errors import ChexstackError
from envs.manifest import load_stack
from launch import k8s
from launch.job import JobSpec, Mount
from launch.submit import submit_k8s
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden
from tests.lib.k8s import validate_mpijob as validate


def _spec(gpus=True, nodes=2, per_node=4):
    return JobSpec(name="chexstack-cxr", stack=load_stack("cpu"), image="registry.example.com/chexstack/cpu:0.1.0-ab",
                   nodes=nodes, ranks_per_node=per_node, gpus=gpus,
                   trainer_args=("--data", "synthetic", "--throughput", "--steps", "50", "--output", "/out"),
                   mounts=(Mount("/scratch/out", "/out"), Mount("pvc:chestxray14", "/data", read_only=True)))


def test_gpu_rdma_mpijob_golden_and_valid():
    opts = k8s.K8sOptions(namespace="ml", rdma_resource="rdma/hca_shared_devices_a")
    text = k8s.render(_spec(), opts)
    assert_golden("launch/mpijob-2x4gpu-rdma.yaml", text)
    obj = yaml.safe_load(text)
    validate(obj)
    spec = obj["spec"]
    assert spec["slotsPerWorker"] == 4 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady" and spec["sshAuthMountPath"] == "/root/.ssh"
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    container = worker["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4, "rdma/hca_shared_devices_a": 1}
    assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in worker["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:4] == ["mpirun", "--allow-run-as-root", "-np", "8"]
    assert "nvidia.com/gpu" not in str(launcher)


def test_cpu_mpijob_without_rdma_golden_and_valid():
    opts = k8s.K8sOptions(ssh_auth_mount_path="/home/mpiuser/.ssh", clean_pod_policy="None", shm_size="2Gi")
    text = k8s.render(_spec(gpus=False, nodes=1, per_node=2), opts)
    assert_golden("launch/mpijob-1x2cpu.yaml", text)
    obj = yaml.safe_load(text)
    validate(obj)
    container = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert "resources" not in container and "securityContext" not in container
    assert "--allow-run-as-root" not in obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"][0]["command"]


def test_the_schemas_catch_mistakes():
    obj = k8s.mpijob(_spec())
    bad = copy.deepcopy(obj)
    bad["spec"]["launcherCreationPolicies"] = "WaitForWorkersReady"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    bad = copy.deepcopy(obj)
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad)


def test_bad_options_are_named():
    with pytest.raises(ChexstackError, match="shm size"):
        k8s.K8sOptions(shm_size="lots")
    with pytest.raises(ChexstackError, match="RDMA resource"):
        k8s.K8sOptions(rdma_resource="rdma hca")


@pytest.mark.parametrize("name,why", [
    ("bogus", "it has no domain"), ("hca_shared_devices_a", "it has no domain"),
    ("kubernetes.io/rdma", "Kubernetes' own"), ("example.kubernetes.io/rdma", "Kubernetes' own"),
    ("RDMA/hca", "expected DOMAIN/NAME"), ("rdma/", "expected DOMAIN/NAME"), ("rdma/a/b", "expected DOMAIN/NAME"),
    ("rdma/" + "x" * 64, "expected DOMAIN/NAME"),
])
def test_an_rdma_resource_without_a_domain_is_refused_at_render(name, why):
    """New-user report: `--rdma bogus` rendered `bogus: 1` into the workers' limits, which the API server refuses
    (a name without '/' must be a standard resource: cpu, memory, ...). An extended resource is DOMAIN/NAME outside
    kubernetes.io (https://kubernetes.io/docs/tasks/configure-pod-container/extended-resource/)."""
    with pytest.raises(ChexstackError) as e:
        k8s.K8sOptions(rdma_resource=name)
    assert str(e.value).startswith("RDMA resource %r: " % name) and why in str(e.value)
    assert "https://kubernetes.io/docs/tasks/configure-pod-container/extended-resource/" in str(e.value)


def test_resource_names_kubernetes_accepts():
    for name in ("rdma/hca_shared_devices_a", "nvidia.com/gpu", "mellanox.com/mlnx_sriov_rdma", "example.com/foo",
                 "nvidia.com/mig-1g.5gb"):
        assert k8s.extended_resource_problem(name) is None and k8s.container_resource_problem(name) is None, name
        k8s.K8sOptions(rdma_resource=name)
    for name in ("cpu", "memory", "ephemeral-storage", "hugepages-2Mi"):
        assert k8s.container_resource_problem(name) is None and k8s.extended_resource_problem(name), name
    assert "standard resource" in k8s.container_resource_problem("gpu")


def test_train_refuses_a_bogus_rdma_resource_before_printing_a_manifest():
    result = cmd.run("train", "--launcher", "k8s", "--stack", "cpu", "--gpus", "8", "--rdma", "bogus", "--data",
                     "/nfs/cxr", "--output", "/nfs/runs/r1", "--render")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: RDMA resource 'bogus': it has no domain")


def test_submit_without_a_cluster_is_a_clear_error(monkeypatch, tmp_path):
    manifest = k8s.render(_spec())
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ChexstackError, match="kubectl not found on PATH"):
        submit_k8s(manifest)


@pytest.mark.skipif(__import__("shutil").which("kubectl") is None, reason="kubectl not installed")
def test_submit_with_kubectl_but_no_cluster_reports_kubectl_error():
    with pytest.raises(ChexstackError) as e:
        submit_k8s(k8s.render(_spec()))
    assert str(e.value).startswith("submitting the MPIJob failed: `kubectl create -f - -o name` exited 1")


def test_host_network_mpijob_golden_and_valid():
    """Issue 41: the Workers on their nodes' network: hostNetwork with the DNS policy that still resolves the
    cluster's names, their sshd on 2222 (the node's sshd has 22) and the Launcher's mpirun (on the pod network)
    reaching them there."""
    opts = k8s.K8sOptions(host_network=True, nodes=("node1", "node2"))
    text = k8s.render(_spec(gpus=False, nodes=2, per_node=1), opts)
    assert_golden("launch/mpijob-2x1cpu-hostnetwork.yaml", text)
    obj = yaml.safe_load(text)
    validate(obj)
    pod = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "hostNetwork" not in obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]  # beside a Worker
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["/usr/sbin/sshd", "-De", "-p", "2222"]
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert launcher[1:4] == ["-mca", "plm_rsh_args", "-o ConnectionAttempts=10 -p 2222"]
    pod_network = yaml.safe_load(k8s.render(_spec(gpus=False, nodes=2, per_node=1), k8s.K8sOptions()))
    assert "hostNetwork" not in str(pod_network) and "2222" not in str(pod_network)
