"""Kubernetes MPIJob (``kubeflow.org/v2beta1``, Kubeflow mpi-operator) for a ``JobSpec``.

Shape (mpi-operator v2beta1 API, pkg/apis/kubeflow/v2beta1/types.go): one Launcher pod runs ``mpirun`` (Horovod's
Open MPI flags, ``launch.mpirun``), which reaches the Worker pods over SSH with the key the operator mounts at
``sshAuthMountPath``; each Worker runs ``sshd`` in the foreground and holds ``slotsPerWorker`` ranks.
``launcherCreationPolicy: WaitForWorkersReady`` starts the launcher only when every worker is Ready, so mpirun
does not fail on DNS or sshd that is not up yet.

Per worker: ``nvidia.com/gpu`` limits (NVIDIA device plugin) equal to its slots; ``/dev/shm`` as a memory-backed
``emptyDir`` (NCCL's shared-memory transport dies in the 64 MiB default: https://github.com/NVIDIA/nccl/issues/290);
where an RDMA device
resource is configured (e.g. ``rdma/hca_shared_devices_a`` of Mellanox's k8s-rdma-shared-dev-plugin) that
resource plus the ``IPC_LOCK`` capability, without which NCCL cannot register memory and silently falls back to
TCP sockets (https://github.com/NVIDIA/nccl/issues/451).

Mounts: ``Mount.source`` ``pvc:CLAIM`` is a PersistentVolumeClaim, any other path a ``hostPath`` directory.

Network (``K8sOptions.host_network``): by default each pod has its own network namespace on the cluster's pod network
(a CNI plugin's: flannel's VXLAN overlay, for instance); with ``host_network`` the Workers (whose ranks carry the
traffic) run on their nodes' network (``hostNetwork: true``), with ``dnsPolicy: ClusterFirstWithHostNet`` so that
they still resolve the cluster's names; the Launcher stays on the pod network: on its node's network beside a
Worker it would hold that Worker's address itself, and Open MPI's mpirun then starts that Worker's ranks in the
Launcher instead of over ssh (observed on the test cluster, Open MPI 4.1) (Kubernetes, Pod's DNS Policy: https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/
#pod-s-dns-policy; the operator's own choice, https://github.com/kubeflow/mpi-operator/pull/428), and the Workers'
sshd on port ``HOST_NETWORK_SSH_PORT`` 2222, which the Launcher's ``mpirun`` reaches (``plm_rsh_args``): port 22 is
the node's own sshd (the operator's base image moved to 2222 for this:
https://github.com/kubeflow/mpi-operator/issues/593).
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Literal

import yaml

from chexstack.errors import ChexstackError
from launch.job import JobSpec, Mount
from launch.mpirun import EXPORTED_ENV, mpirun_argv

API_VERSION = "kubeflow.org/v2beta1"
#: The stack manifest's ``mpi`` row name -> the MPIJob's ``mpiImplementation`` (enum OpenMPI, Intel, MPICH).
MPI_IMPLEMENTATIONS = {"open mpi": "OpenMPI", "openmpi": "OpenMPI", "intel mpi": "Intel", "mpich": "MPICH"}
GPU_RESOURCE = "nvidia.com/gpu"
SHM_VOLUME = "dshm"
#: The launcher waits for every worker to be Ready (else mpirun fails on DNS or sshd not up yet: the launcher log
#: of https://github.com/kubeflow/mpi-operator/issues/481).
LAUNCHER_CREATION_POLICY = "WaitForWorkersReady"
#: The DNS name by which an MPIJob's launcher reaches Worker ``i``: ``<job>-worker-<i>.<job>-worker`` (the operator's
#: headless Service of the Workers, as its hostfile names them: the launcher log of
#: https://github.com/kubeflow/mpi-operator/issues/481), optionally followed by the namespace and cluster domain. The
#: name exists only once the Worker's pod does.
WORKER_HOST = re.compile(r"^(?P<job>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)-worker-\d+\.(?P=job)-worker(?:\.|$)")


def is_worker_host(name: str) -> bool:
    """Whether ``name`` is an MPIJob Worker's DNS name (``WORKER_HOST``)."""
    return bool(WORKER_HOST.match(str(name)))


#: The Workers' sshd port on the host network (module docstring): not the node's own 22.
HOST_NETWORK_SSH_PORT = 2222
#: The operator's ``OMPI_MCA_plm_rsh_args`` (``ompiEnvVars``), which an ``mpirun -mca plm_rsh_args`` replaces: the
#: Launcher's command keeps it and adds the Workers' port.
OPERATOR_RSH_ARGS = "-o ConnectionAttempts=10"


#: The capability a worker needs with an RDMA resource (NCCL registers memory; else it falls back to sockets).
IPC_LOCK = "IPC_LOCK"
#: The extended resources through which a device plugin gives a pod an RDMA device (an HCA, or an SR-IOV VF of one),
#: as name patterns (``fnmatch``, lower case), each with its source: a worker that requests one needs ``IPC_LOCK``.
RDMA_RESOURCES = (
    (("rdma/*",), "Mellanox's k8s-rdma-shared-dev-plugin, resource prefix rdma (rdma/hca_shared_devices_a; "
                  "rdma/rdma_shared_device_a as the NVIDIA Network Operator deploys it): "
                  "https://github.com/Mellanox/k8s-rdma-shared-dev-plugin; its predecessor "
                  "k8s-rdma-sriov-dev-plugin (rdma/vhca): https://github.com/Mellanox/k8s-rdma-sriov-dev-plugin"),
    (("mellanox.com/*",), "the SR-IOV network device plugin with Mellanox's resource prefix, VFs of ConnectX HCAs "
                          "(mellanox.com/mlnx_sriov_rdma, mellanox.com/mlnx_sriov_rdma_ib): "
                          "https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin"),
    (("*/*rdma*",), "an RDMA pool under another prefix: the NVIDIA Network Operator's RDMA shared device plugin and "
                    "SR-IOV pools with isRdma named for it (nvidia.com/rdma_shared_device_a, nvidia.com/sriov_rdma): "
                    "https://docs.nvidia.com/networking/display/cokan/device+plugin"),
    (("*/hca*", "*/vhca*"), "k8s-rdma-shared-dev-plugin's HCA resources (resourceName hca_shared_devices_a) and "
                            "k8s-rdma-sriov-dev-plugin's vhca under another resourcePrefix, which both plugins' "
                            "configurations set: https://github.com/Mellanox/k8s-rdma-shared-dev-plugin"),
)


def is_rdma_resource(name: str) -> bool:
    """``name`` (an extended resource a container requests) gives the pod an RDMA device (``RDMA_RESOURCES``)."""
    return any(fnmatch.fnmatchcase(str(name).lower(), p) for patterns, _ in RDMA_RESOURCES for p in patterns)


def holds_ipc_lock(security_context: dict | None) -> bool:
    """Whether a container with this ``securityContext`` holds ``IPC_LOCK``: it adds the capability (as ``IPC_LOCK``,
    ``CAP_IPC_LOCK`` or ``ALL``; container runtimes take the name with or without ``CAP_``) or it is privileged, which
    grants every capability (Kubernetes API, SecurityContext.privileged: "Processes in privileged containers are
    essentially equivalent to root on the host"; Docker's ``--privileged``: all capabilities)."""
    context = security_context or {}
    if context.get("privileged") is True:
        return True
    added = ((context.get("capabilities") or {}).get("add") or [])
    return any(str(c).upper().removeprefix("CAP_") in (IPC_LOCK, "ALL") for c in added)
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")
#: The resources a container may name without a domain (Kubernetes API validation, validateContainerResourceName in
#: pkg/apis/core/validation/validation.go: a name without "/" that is none of these is refused, "must be a standard
#: resource for containers"); ``hugepages-<size>`` too.
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
#: An extended resource's name: a DNS subdomain outside kubernetes.io, "/", a name of at most 63 characters
#: ("Extended resources are fully qualified with any domain outside of *.kubernetes.io/. Valid extended resource
#: names have the form example.com/foo": https://kubernetes.io/docs/tasks/configure-pod-container/extended-resource/;
#: the qualified-name rule of IsExtendedResourceName, pkg/apis/core/v1/helper/helpers.go).
_EXTENDED_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def extended_resource_problem(name: str) -> str | None:
    """Why ``name`` is no extended resource name (a device plugin's ``DOMAIN/NAME``, such as
    ``rdma/hca_shared_devices_a``), else None: no domain (``bogus``), a domain in kubernetes.io (Kubernetes' own),
    or characters a name cannot have (``_EXTENDED_RESOURCE``)."""
    text = str(name)
    if "/" not in text:
        return ("it has no domain: an extended resource is DOMAIN/NAME (a name without '/' is a standard resource "
                "such as cpu or memory, and Kubernetes refuses any other: \"must be a standard resource for "
                "containers\")")
    domain = text.split("/", 1)[0]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return "its domain %s is Kubernetes' own: extended resources are outside *.kubernetes.io/" % domain
    if not _EXTENDED_RESOURCE.match(text) or len(domain) > 253 - len("requests."):
        return ("expected DOMAIN/NAME: a lower-case DNS domain, then a name of letters, digits, '-', '_' and '.' "
                "(at most 63) that starts and ends with a letter or digit")
    return None


def container_resource_problem(name: str) -> str | None:
    """Why the Kubernetes API server refuses ``name`` in a container's ``limits`` or ``requests``, else None: a
    standard resource (``STANDARD_CONTAINER_RESOURCES``, ``hugepages-<size>``) or an extended resource
    (``extended_resource_problem``)."""
    text = str(name)
    if "/" not in text and (text in STANDARD_CONTAINER_RESOURCES or text.startswith("hugepages-")):
        return None
    return extended_resource_problem(text)


@dataclass(frozen=True)
class K8sOptions:
    """Cluster-specific settings. ``rdma_resource``: extended resource name of the RDMA device plugin (None: no
    RDMA). ``ssh_auth_mount_path``: where the operator mounts the SSH key; ``/root/.ssh`` (the default, and what
    chexstack's images are built for: root's sshd on port 22) means the image runs as root (mpirun then gets
    ``--allow-run-as-root``); another path needs an image with the operator's non-root set-up (a user owning that
    folder, sshd on an unprivileged port), which chexstack's recipes do not make. ``sshd_command``: the workers'
    foreground sshd. ``nodes``: the nodes the pods must run on (``kubernetes.io/hostname``, a required node
    affinity), the Workers spread one per node while they last (a topology spread of maxSkew 1), so that runs to
    be compared share their hosts (``invoke study``). ``host_network``: every pod on its node's network
    (``hostNetwork: true``, module docstring): the Workers, not on the pod network."""

    namespace: str | None = None
    rdma_resource: str | None = None
    rdma_per_worker: int = 1
    shm_size: str = "1Gi"
    clean_pod_policy: Literal["Running", "All", "None"] = "Running"
    ssh_auth_mount_path: str = "/root/.ssh"
    sshd_command: tuple[str, ...] = ("/usr/sbin/sshd", "-De")
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    backoff_limit: int = 0
    nodes: tuple[str, ...] = ()
    host_network: bool = False

    def __post_init__(self):
        if not _QUANTITY.match(self.shm_size):
            raise ChexstackError("shm size %r: expected a Kubernetes quantity such as 1Gi or 512Mi" % self.shm_size)
        problem = extended_resource_problem(self.rdma_resource) if self.rdma_resource is not None else None
        if problem:
            raise ChexstackError("RDMA resource %r: %s; give the device plugin's resource name, such as "
                                 "rdma/hca_shared_devices_a (Kubernetes, Extended resources: https://kubernetes.io/"
                                 "docs/tasks/configure-pod-container/extended-resource/)" % (self.rdma_resource,
                                                                                             problem))

    @property
    def as_root(self) -> bool:
        return self.ssh_auth_mount_path.rstrip("/") == "/root/.ssh"


def mpi_implementation(spec: JobSpec) -> str:
    name = (spec.stack.components["mpi"].name or "").lower()
    if name not in MPI_IMPLEMENTATIONS:
        raise ChexstackError("stack %s: mpi row name %r has no MPIJob mpiImplementation; expected one of %s"
                             % (spec.stack.name, spec.stack.components["mpi"].name,
                                ", ".join(sorted(MPI_IMPLEMENTATIONS))))
    return MPI_IMPLEMENTATIONS[name]


def _volume_name(i: int) -> str:
    return "mount-%d" % i


def _volumes(mounts: tuple[Mount, ...], opts: K8sOptions) -> tuple[list[dict], list[dict]]:
    volumes = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": opts.shm_size}}]
    volume_mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    for i, m in enumerate(mounts):
        if m.source.startswith("pvc:"):
            source = {"persistentVolumeClaim": {"claimName": m.source[4:], "readOnly": m.read_only}}
            if m.target is None:
                raise ChexstackError("mount %s: a PVC needs a path inside the container (pvc:CLAIM=PATH)" % m.source)
        else:
            # "Directory", never "DirectoryOrCreate": on a node without the shared mount the kubelet would create
            # a local folder and the run's checkpoints would land on that node's disk, silently.
            source = {"hostPath": {"path": m.source, "type": "Directory"}}
        volumes.append(dict(name=_volume_name(i), **source))
        volume_mounts.append({"name": _volume_name(i), "mountPath": m.container_path, "readOnly": m.read_only})
    return volumes, volume_mounts


def _labels(spec: JobSpec, role: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "chexstack", "app.kubernetes.io/instance": spec.name,
            "app.kubernetes.io/component": role, "chexstack.io/stack": spec.stack.name}


#: The node label the scheduler places pods by (a well-known label every kubelet sets).
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _placement(spec: JobSpec, opts: K8sOptions, role: str) -> dict:
    """Pod spec fields that keep the pods on ``opts.nodes`` (none without nodes): a required node affinity, and for
    the Workers a spread of at most one more Worker on any node than on another."""
    if not opts.nodes:
        return {}
    out: dict = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME_LABEL, "operator": "In", "values": list(opts.nodes)}]}]}}}}
    if role == "worker":
        out["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": HOSTNAME_LABEL,
                                             "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": _labels(spec, role)}}]
    return out


def _network(opts: K8sOptions) -> dict:
    """Pod spec fields of the network: none on the pod network; the node's network and the DNS policy that still
    resolves the cluster's names with ``host_network``."""
    return {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"} if opts.host_network else {}


def _env(spec: JobSpec) -> list[dict]:
    return [{"name": k, "value": v} for k, v in sorted(spec.env.items())]


def launcher_template(spec: JobSpec, opts: K8sOptions) -> dict:
    """Pod template of the launcher: mpirun over the workers listed in the operator's hostfile. The launcher runs
    in the stack image, so its ``PYTHONPATH`` (the image's ``/opt/chexstack``) is exported too: ranks started
    through sshd get sshd's environment, not the image's."""
    exported = EXPORTED_ENV + ("PYTHONPATH",) + tuple(sorted(spec.env))
    command = mpirun_argv(spec.world_size, spec.command, allow_run_as_root=opts.as_root, exported_env=exported)
    if opts.host_network:
        command[1:1] = ["-mca", "plm_rsh_args", "%s -p %d" % (OPERATOR_RSH_ARGS, HOST_NETWORK_SSH_PORT)]
    container = {
        "name": "launcher", "image": spec.image, "imagePullPolicy": opts.image_pull_policy,
        "workingDir": spec.workdir,
        "command": command,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    }
    if spec.env:
        container["env"] = _env(spec)
    return {"metadata": {"labels": _labels(spec, "launcher")},
            "spec": {"containers": [container], **_placement(spec, opts, "launcher")}}


def worker_template(spec: JobSpec, opts: K8sOptions) -> dict:
    """Pod template of a worker: foreground sshd, its GPUs, /dev/shm in memory, RDMA where configured."""
    volumes, volume_mounts = _volumes(spec.mounts, opts)
    limits: dict[str, object] = {}
    if spec.gpus:
        limits[GPU_RESOURCE] = spec.ranks_per_node
    if opts.rdma_resource:
        limits[opts.rdma_resource] = opts.rdma_per_worker
    container = {
        "name": "worker", "image": spec.image, "imagePullPolicy": opts.image_pull_policy,
        "workingDir": spec.workdir,
        "command": list(opts.sshd_command) + (["-p", str(HOST_NETWORK_SSH_PORT)] if opts.host_network else []),
        "volumeMounts": volume_mounts,
    }
    if limits:
        container["resources"] = {"limits": limits}
    if opts.rdma_resource:
        container["securityContext"] = {"capabilities": {"add": [IPC_LOCK]}}
    if spec.env:
        container["env"] = _env(spec)
    return {"metadata": {"labels": _labels(spec, "worker")},
            "spec": {**_network(opts), "containers": [container], "volumes": volumes,
                     **_placement(spec, opts, "worker")}}


def mpijob(spec: JobSpec, opts: K8sOptions = K8sOptions()) -> dict:
    """The MPIJob object for ``spec``: ``spec.nodes`` workers × ``spec.ranks_per_node`` slots."""
    metadata: dict[str, object] = {"name": spec.name, "labels": _labels(spec, "mpijob")}
    if opts.namespace:
        metadata["namespace"] = opts.namespace
    return {
        "apiVersion": API_VERSION,
        "kind": "MPIJob",
        "metadata": metadata,
        "spec": {
            "slotsPerWorker": spec.ranks_per_node,
            "runPolicy": {"cleanPodPolicy": opts.clean_pod_policy, "backoffLimit": opts.backoff_limit},
            "sshAuthMountPath": opts.ssh_auth_mount_path,
            "launcherCreationPolicy": LAUNCHER_CREATION_POLICY,
            "mpiImplementation": mpi_implementation(spec),
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": launcher_template(spec, opts)},
                "Worker": {"replicas": spec.nodes, "restartPolicy": "Never", "template": worker_template(spec, opts)},
            },
        },
    }


def render(spec: JobSpec, opts: K8sOptions = K8sOptions()) -> str:
    """The MPIJob as YAML (block style, keys in the order built above)."""
    header = "# chexstack: Horovod CheXNet with stack %s: %d worker pod(s) x %d %s = %d ranks, image %s\n" % (
        spec.stack.name, spec.nodes, spec.ranks_per_node, "GPU(s)" if spec.gpus else "CPU rank(s)",
        spec.world_size, spec.image + (" (from %s)" % spec.image_from if spec.image_from else ""))
    return header + yaml.safe_dump(mpijob(spec, opts), sort_keys=False, default_flow_style=False, width=120)
