"""An MPIJob run as its pods on this machine's Docker engine: what the mpi-operator, the kubelet and a CNI plugin do
with a rendered MPIJob (``launch.k8s``), for the test cluster, which has nodes and a network but no Kubernetes API
server (none is packaged for this machine: the Kubernetes system of ``invoke study``).

Mirrored from the operator (kubeflow/mpi-operator v2beta1, pkg/controller/mpi_job_controller.go):
- the SSH Secret: one ECDSA P-521 key in PEM (``newSSHAuthSecret``), as ``id_rsa``, ``id_rsa.pub`` and
  ``authorized_keys``, mode 0600, laid out as the kubelet writes a Secret volume (``..data`` symlinks into a
  timestamped folder, the volume folder world-writable) and mounted read-only at the MPIJob's ``sshAuthMountPath``
  in every container;
- the hostfile ``/etc/mpi/hostfile`` (mode 0444, ``newConfigMap``): ``<job>-worker-<i>.<job>-worker.<ns>.svc
  slots=<slotsPerWorker>``, one line per worker;
- the Launcher's environment (``ompiEnvVars``, ``OMPI_MCA_orte_set_default_slots``, ``K_MPI_JOB_ROLE``), started
  once every Worker's sshd accepts (``launcherCreationPolicy: WaitForWorkersReady``);
- each container's command, working directory, environment and volume mounts from the MPIJob: ``hostPath`` a bind
  mount, a ``persistentVolumeClaim`` the host folder it is bound to (``claims``, as a local-path provisioner binds
  one), the memory ``emptyDir`` at ``/dev/shm`` Docker's ``--shm-size``. Resource requests and limits are not
  enforced (no scheduler); the image is run as it is.

Every pod has its own network namespace, as under a CNI plugin (``PodNetwork``): a pod sandbox (a container of the
same image running ``sleep infinity`` with no network, the pod's hostname, and the cluster DNS names of the Workers
in its /etc/hosts) holds the namespace; ``PodNetwork.plug`` puts it on the network at the pod's address (the test
cluster's ``scripts/testcluster plug PID ADDR``: a veth on its bridge), and the pod's container joins it (``--network
container:<sandbox>``), as the kubelet joins a pod's containers to its pause container. Each Worker is placed on a
node of ``PodNetwork.nodes`` in turn (``placement``: what the MPIJob's one-worker-per-node spread asks of a
scheduler, ``launch.k8s.K8sOptions.nodes``); on the test cluster the nodes are network namespaces of this machine, so a
pod "on chex1" shares its kernel and bridge as chex1 does, and runs on chex1's CPUs (``PodNetwork.node_cpus``:
Docker's ``--cpuset-cpus``). Where the pod network is an overlay
(``scripts/testcluster plug --overlay``: each node's pods on its own bridge, VXLAN between nodes), each pod's address
is in its node's pod subnet (``PodNetwork.worker_addresses`` in placement order).

A pod with ``hostNetwork: true`` (``launch.k8s.K8sOptions.host_network``) has no namespace of its own: it runs in its
node's (``PodNetwork.node_netns``, e.g. ``/run/netns/chex1``), with the node's name as its hostname, as the kubelet
runs it. Docker cannot start a container in a named namespace, so its command is started through ``nsenter
--net=<the node's namespace, bind-mounted read-only>`` with ``CAP_SYS_ADMIN`` (setns(2)) and no network of Docker's
own; everything its sshd starts (the ranks) inherits that namespace. Its sshd's port is the one its command gives
(``-p``), else 22.

Where the pods' image comes from is the caller's explicit choice (``PodJob(pull=...)``, which ``invoke study`` makes
by the form of ``--image``: ``registry_pull``):

- ``pull=True``, a registry reference by digest (``REGISTRY/REPO@sha256:…``): the kubelet's way. ``client`` is the
  nodes' engine (the test cluster's pods' engine, a second dockerd whose store is empty at ``up``: ``scripts/
  testcluster``), which pulls the image from its registry before any container starts (``pull_image``:
  ``imagePullPolicy`` IfNotPresent and Always as the kubelet reads them), never from the build engine's store. A
  pull that fails (no such manifest, a registry that cannot be reached, one whose certificate the engine does not
  trust, one that wants credentials) fails the job with the kubelet's events (``Failed to pull image "REF": <the
  engine's error>``, ``Error: ErrImagePull``): ``ImagePullError``, whose events ``invoke train --explain`` names
  (``facts.parsers.faults``, the ``image_pull`` kind);
- ``pull=False``: the image as the engine ``client`` holds it (a local tag or image ID: a build without a registry),
  never pulled.

Errors: ChexstackError for an MPIJob this runner cannot stand in for (a volume kind it has no stand-in for, a claim
with no folder), a pod network that cannot be plugged, and a Worker whose sshd does not come up.
"""
from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chexstack import registry
from chexstack.errors import ChexstackError, ExitCode

#: mpi-operator's Launcher environment for Open MPI (``ompiEnvVars``) and the job role it sets.
OPERATOR_LAUNCHER_ENV = {"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                         "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                         "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                         "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
HOSTFILE = "/etc/mpi/hostfile"
SECRET_FILES = ("id_rsa", "id_rsa.pub", "authorized_keys")
SSH_PORT = 22
#: How long a Worker's sshd may take to accept (seconds): a container start under load.
READY_S = 90.0
#: Where a hostNetwork pod's container sees its node's network namespace (bind-mounted read-only).
NODE_NETNS = "/run/chexstack-node-netns"
#: The kubelet's image events, its words (kubernetes/kubernetes pkg/kubelet/images/image_manager.go; the reasons
#: ErrImagePull and ImagePullBackOff: https://kubernetes.io/docs/concepts/containers/images/#imagepullbackoff).
EVENT_PULLING = 'Pulling image "%s"'
EVENT_PULLED = 'Successfully pulled image "%s" in %.1fs'
EVENT_PRESENT = 'Container image "%s" already present on machine'
EVENT_FAILED = 'Failed to pull image "%s": %s'
ERR_IMAGE_PULL = "Error: ErrImagePull"
#: How long one pull may take (seconds): a stack image of gigabytes on a loaded machine.
PULL_S = 1200
#: Label of every container this runner starts (its value: the MPIJob's name), to find one a killed run left.
POD_LABEL = "org.chexstack.pod"


@dataclass(frozen=True)
class PodNetwork:
    """Where the pods' network namespaces go. ``plug``: the command that puts a process's network namespace on the
    network at an address, called as ``plug + (PID, ADDRESS)`` (a CNI plugin's ADD); ``launcher_address`` and
    ``worker_addresses`` (one per Worker, in order): IPv4 addresses on that network; ``nodes``: the nodes the
    Workers are placed on, in turn (``placement``), the Launcher on the first; ``node_cpus``: (node, CPU list "0" /
    "0-3") pairs, the CPUs a Worker on that node gets (Docker's ``--cpuset-cpus``, as the kubelet's static CPU
    manager gives a Guaranteed pod exclusive cores,
    https://kubernetes.io/docs/tasks/administer-cluster/cpu-management-policies/; a node not named: not
    restricted); ``node_netns``: the path of a node's network namespace, ``%s`` its name (for ``hostNetwork`` pods;
    None: this network has none to offer)."""

    plug: tuple[str, ...]
    launcher_address: str
    worker_addresses: tuple[str, ...]
    nodes: tuple[str, ...] = ()
    node_cpus: tuple[tuple[str, str], ...] = ()
    node_netns: str | None = None

    def cpus(self, node: str | None) -> str | None:
        """The CPU list of ``node`` (``node_cpus``), None when it has none."""
        return dict(self.node_cpus).get(node) if node else None

    def placement(self, workers: int) -> tuple[str, ...]:
        """The node of each of ``workers`` Workers: ``nodes`` in turn (one per node while they last, as a spread of
        maxSkew 1 places them); () without nodes. Raises ChexstackError when there are more Workers than
        addresses."""
        if workers > len(self.worker_addresses):
            raise ChexstackError("%d Worker pods, but the pod network has %d Worker addresses (%s)"
                                 % (workers, len(self.worker_addresses), ", ".join(self.worker_addresses)))
        return tuple(self.nodes[i % len(self.nodes)] for i in range(workers)) if self.nodes else ()


class ImagePullError(ChexstackError):
    """A pod's image could not be pulled: the message is the kubelet's events (``EVENT_FAILED``, then
    ``ERR_IMAGE_PULL``), with the engine's own error text; exit 1 (the job failed)."""

    def __init__(self, events: Sequence[str]) -> None:
        super().__init__("\n".join(events), exit_code=ExitCode.FAILED)
        self.events = list(events)


def registry_pull(ref: str) -> bool:
    """Whether pods of the image ``ref`` pull it from its registry (True: a registry reference by digest, read by
    ``chexstack.registry.parse``) or run the engine's local image (False: a local tag or image ID, no registry named).
    ChexstackError for a registry reference by tag: a tag can move between the push and the pull; give the digest
    it resolves to."""
    if not registry.is_registry_reference(ref):
        return False
    if registry.parse(ref, "--image").digest is None:
        raise ChexstackError("image %s: a registry reference by tag; the pods pull by digest, as the job must name "
                             "what it ran: give REPO@sha256:<digest> (skopeo inspect --format '{{.Digest}}' "
                             "docker://%s prints it)" % (ref, ref))
    return True


def pull_image(client, ref: str, policy: str = "IfNotPresent") -> list[str]:
    """The kubelet's pull of ``ref`` into ``client``'s engine, by the container's ``imagePullPolicy`` (IfNotPresent:
    pulled unless the engine holds that reference; Always: pulled each time; Never: never, and an error when
    absent); returns its events (``EVENT_*``). ImagePullError with the events, the engine's text quoted, when the
    pull fails."""
    import docker.errors

    present = True
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        present = False
    if policy == "Never" or (present and policy == "IfNotPresent"):
        if present:
            return [EVENT_PRESENT % ref]
        raise ImagePullError(['Container image "%s" is not present with pull policy of Never' % ref,
                              "Error: ErrImageNeverPull"])
    events, start = [EVENT_PULLING % ref], time.monotonic()
    try:
        client.images.pull(ref)
    except docker.errors.APIError as e:
        raise ImagePullError(events + [EVENT_FAILED % (ref, e.explanation or e), ERR_IMAGE_PULL]) from None
    except docker.errors.DockerException as e:  # the engine itself did not answer
        raise ImagePullError(events + [EVENT_FAILED % (ref, e), ERR_IMAGE_PULL]) from None
    return events + [EVENT_PULLED % (ref, time.monotonic() - start)]


def worker_host(job: str, namespace: str, i: int) -> str:
    """Worker ``i``'s DNS name in the operator's hostfile: ``<job>-worker-<i>.<job>-worker.<namespace>.svc``."""
    return "%s-worker-%d.%s-worker.%s.svc" % (job, i, job, namespace)


def ssh_secret(client, image: str, root: Path, labels: dict[str, str]) -> Path:
    """The operator's SSH Secret as the kubelet mounts it: ``root/secret`` (mode 1777) holding ``..data`` ->
    ``..<timestamp>/`` with the three files (0600), and one symlink per file. The key is made by ``ssh-keygen`` in
    ``image`` (the OpenSSH the job itself runs)."""
    volume = root / "secret"
    payload = volume / "..2025_01_01_00_00_00.000000000"
    payload.mkdir(parents=True)
    client.containers.run(image, ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "",
                                  "-f", "/payload/id_rsa"], remove=True, network_mode="none", labels=labels,
                          volumes={str(payload): {"bind": "/payload", "mode": "rw"}})
    (payload / "authorized_keys").write_bytes((payload / "id_rsa.pub").read_bytes())
    for name in SECRET_FILES:
        os.chmod(payload / name, 0o600)
        os.symlink("..data/%s" % name, volume / name)
    os.symlink(payload.name, volume / "..data")
    os.chmod(volume, 0o1777)
    return volume


def _container(replica: dict) -> tuple[dict, dict]:
    spec = replica["template"]["spec"]
    return spec, spec["containers"][0]


def _env(container: dict, extra: dict) -> dict:
    return {**{e["name"]: e["value"] for e in container.get("env", [])}, **extra}


class PodJob:
    """The MPIJob ``obj``'s pods on ``client``'s engine (module docstring). ``root``: a folder of this job's own for
    the Secret and the hostfile; ``claims``: PersistentVolumeClaim name -> the host folder it is bound to;
    ``labels``: added to every container; ``pull``: the image is pulled into ``client``'s engine first
    (``pull_image``, the module docstring), its events in ``events``; else the engine's local image is run.
    ``stop()`` removes every container it started. ImagePullError when the pull fails (no container started)."""

    def __init__(self, client, obj: dict, network: PodNetwork, root: Path, claims: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None, pull: bool = False) -> None:
        self.client, self.obj, self.network, self.claims = client, obj, network, dict(claims or {})
        meta, spec = obj["metadata"], obj["spec"]
        self.name, self.namespace = meta["name"], meta.get("namespace") or "default"
        self.slots = int(spec["slotsPerWorker"])
        self.replicas = int(spec["mpiReplicaSpecs"]["Worker"]["replicas"])
        self.mount_path = spec["sshAuthMountPath"]
        self.nodes = network.placement(self.replicas)
        worker = _container(spec["mpiReplicaSpecs"]["Worker"])[1]
        self.image = worker["image"]
        self.events: list[str] = []
        if pull:  # every pod runs the same image: pulled once per node's engine, before any container starts
            self.events = pull_image(client, self.image, worker.get("imagePullPolicy", "IfNotPresent"))
        self.labels = {POD_LABEL: self.name, **(labels or {})}
        self.suffix = secrets.token_hex(3)  # container names of this run only
        self.dns = {worker_host(self.name, self.namespace, i): network.worker_addresses[i]
                    for i in range(self.replicas)}
        self.secret = ssh_secret(client, self.image, root, self.labels)
        self.hostfile = root / "hostfile"
        self.hostfile.write_text("".join("%s slots=%d\n" % (host, self.slots) for host in self.dns))
        self.hostfile.chmod(0o444)
        self.workers: list = []
        self.names: list[str] = []  # every container asked for (sandboxes too), also one whose start failed
        #: (pod, the path of its network namespace, its node or None) of each Worker started
        self.namespaces: list[tuple[str, str, str | None]] = []
        worker_pod, worker = self.replica("Worker")
        self.host_network = bool(worker_pod.get("hostNetwork"))
        command = list(worker.get("command") or ())
        self.ssh_port = int(command[command.index("-p") + 1]) if "-p" in command[:-1] else SSH_PORT
        launcher_host = bool(self.replica("Launcher")[0].get("hostNetwork"))
        if (self.host_network or launcher_host) and not (network.node_netns and network.nodes):
            raise ChexstackError("MPIJob %s: its pods ask for hostNetwork, and this pod network names no node "
                                 "namespaces to run them in" % self.name)

    def replica(self, role: str) -> tuple[dict, dict]:
        """(pod spec, its container) of the MPIJob's ``role`` (Launcher or Worker)."""
        return _container(self.obj["spec"]["mpiReplicaSpecs"][role])

    def _volumes(self, pod: dict, container: dict) -> tuple[dict, dict]:
        """(docker volumes, other run options) for the container's volume mounts plus the SSH Secret."""
        volumes = {str(self.secret): {"bind": self.mount_path, "mode": "ro"}}
        options = {}
        by_name = {v["name"]: v for v in pod.get("volumes", [])}
        for vm in container.get("volumeMounts", []):
            vol, mode = by_name[vm["name"]], "ro" if vm.get("readOnly") else "rw"
            if "hostPath" in vol:
                volumes[vol["hostPath"]["path"]] = {"bind": vm["mountPath"], "mode": mode}
            elif "persistentVolumeClaim" in vol:
                claim = vol["persistentVolumeClaim"]["claimName"]
                if claim not in self.claims:
                    raise ChexstackError("MPIJob %s: volume %s claims PersistentVolumeClaim %r, which is bound to no "
                                         "folder here (known: %s)" % (self.name, vm["name"], claim,
                                                                      ", ".join(sorted(self.claims)) or "none"))
                volumes[self.claims[claim]] = {"bind": vm["mountPath"], "mode": mode}
            elif vol.get("emptyDir", {}).get("medium") == "Memory" and vm["mountPath"] == "/dev/shm":
                options["shm_size"] = vol["emptyDir"]["sizeLimit"].replace("Gi", "g").replace("Mi", "m")
            else:
                raise ChexstackError("MPIJob %s: volume %s (%s) has no stand-in on this engine; expected hostPath, "
                                     "a persistentVolumeClaim or the memory emptyDir at /dev/shm"
                                     % (self.name, vm["name"], sorted(set(vol) - {"name"})))
        return volumes, options

    def _sandbox(self, pod: str, address: str, cpus: dict | None = None) -> str:
        """A pod's network namespace at ``address``, held by a sandbox container named after the pod (hostname
        ``pod``, the Workers' DNS names in /etc/hosts; ``cpus``: its ``cpuset_cpus`` run option, if any); returns
        the ``network_mode`` that joins it."""
        self.names.append("%s-%s-sandbox" % (pod, self.suffix))
        sandbox = self.client.containers.run(
            self.image, ["sleep", "infinity"], detach=True, network_mode="none", hostname=pod,
            extra_hosts=self.dns, name=self.names[-1], labels=self.labels, **(cpus or {}))
        sandbox.reload()
        argv = list(self.network.plug) + [str(sandbox.attrs["State"]["Pid"]), address]
        try:
            plugged = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ChexstackError("pod %s: %s failed: %s" % (pod, " ".join(argv), e)) from None
        if plugged.returncode != 0:
            raise ChexstackError("pod %s: %s failed (exit %d): %s" % (pod, " ".join(argv), plugged.returncode,
                                                                      (plugged.stderr or plugged.stdout).strip()))
        return "container:%s" % sandbox.id

    def _network(self, pod: str, address: str, node: str | None, command: list[str], volumes: dict,
                 host_network: bool, cpus: str | None = None) -> tuple[list[str], dict]:
        """(the command as started, run options) of a pod's container: in a sandbox of its own at ``address`` (on
        ``cpus``, its node's, if given), or with ``host_network`` in ``node``'s namespace (module docstring;
        ``volumes`` gains that namespace)."""
        if not host_network:
            return command, {"network_mode": self._sandbox(pod, address, {"cpuset_cpus": cpus} if cpus else None)}
        netns = self.network.node_netns % node
        volumes[netns] = {"bind": NODE_NETNS, "mode": "ro"}
        return (["nsenter", "--net=%s" % NODE_NETNS, "--"] + command,
                {"network_mode": "none", "cap_add": ["SYS_ADMIN"], "hostname": node, "extra_hosts": self.dns})

    def start_worker(self, i: int, sshd_options: Sequence[str] = ()):
        """Worker ``i``: its command (``sshd -De`` plus ``sshd_options``) in its own pod at its address (or on its
        node's network); returns its container once its sshd accepts connections."""
        pod, c = self.replica("Worker")
        volumes, options = self._volumes(pod, c)
        node = self.nodes[i] if self.nodes else None
        cpus = self.network.cpus(node)
        if cpus:
            options["cpuset_cpus"] = cpus  # its node's CPUs, as the kubelet's static CPU manager pins a pod
        command, net = self._network("%s-worker-%d" % (self.name, i), self.network.worker_addresses[i], node,
                                     c["command"] + list(sshd_options), volumes, self.host_network, cpus)
        self.names.append("%s-worker-%d-%s" % (self.name, i, self.suffix))
        worker = self.client.containers.run(
            c["image"], command, detach=True, working_dir=c.get("workingDir"),
            environment=_env(c, {"K_MPI_JOB_ROLE": "worker"}), volumes=volumes, name=self.names[-1],
            labels=self.labels, **net, **options)
        self.workers.append(worker)
        worker.reload()
        self.namespaces.append((self.names[-1], self.network.node_netns % node if self.host_network
                                else "/proc/%d/ns/net" % worker.attrs["State"]["Pid"], node))
        _wait_listening(self.network.worker_addresses[i], self.ssh_port, worker)
        return worker

    def run_launcher(self, command: Sequence[str] | None = None, timeout: float = 3600) -> tuple[int, str]:
        """The Launcher (its rendered mpirun, or ``command``) to completion in its own pod: (exit status, output).
        Its pod is removed after, so that a next Launcher can take its address."""
        pod, c = self.replica("Launcher")
        env = _env(c, {**OPERATOR_LAUNCHER_ENV, "OMPI_MCA_orte_set_default_slots": str(self.slots)})
        volumes, _ = self._volumes(pod, c)
        volumes[str(self.hostfile)] = {"bind": HOSTFILE, "mode": "ro"}
        name = "%s-launcher-%s" % (self.name, self.suffix)
        sandboxes = len(self.names)
        try:
            argv, net = self._network("%s-launcher" % self.name, self.network.launcher_address,
                                      self.network.nodes[0] if self.network.nodes else None,
                                      list(command or c["command"]), volumes, bool(pod.get("hostNetwork")))
            launcher = self.client.containers.run(
                c["image"], argv, detach=True, working_dir=c.get("workingDir"), environment=env, volumes=volumes,
                name=name, labels=self.labels, **net)
            status = launcher.wait(timeout=timeout)["StatusCode"]
            return status, launcher.logs().decode("utf-8", "replace")
        finally:
            self._remove(name)
            while len(self.names) > sandboxes:  # the Launcher's sandbox
                self._remove(self.names.pop())

    def run(self, timeout: float = 3600, on_ready=None) -> tuple[int, str, list[str]]:
        """Every Worker, then ``on_ready(self)`` if given (the Workers' namespaces are there to read), the Launcher
        to its end, then every pod removed: (the Launcher's exit status, its output, each Worker's sshd log)."""
        try:
            for i in range(self.replicas):
                self.start_worker(i)
            if on_ready is not None:
                on_ready(self)
            status, log = self.run_launcher(timeout=timeout)
        finally:
            sshd_logs = self.stop()
        return status, log, sshd_logs

    def _remove(self, name: str) -> None:
        import docker.errors
        try:
            self.client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass

    def stop(self) -> list[str]:
        """Remove the pods (also one that did not start); return each started Worker's sshd log."""
        import docker.errors
        logs = []
        for w in self.workers:
            try:
                logs.append(w.logs().decode("utf-8", "replace"))
            except docker.errors.NotFound:
                logs.append("")
        for name in reversed(self.names):
            self._remove(name)
        self.names, self.workers = [], []
        return logs


def _wait_listening(address: str, port: int, container, timeout: float = READY_S) -> None:
    """Until the Worker's sshd accepts (``WaitForWorkersReady``); ChexstackError when its container exits or
    ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            container.reload()
            if container.status == "exited":
                raise ChexstackError("Worker pod %s exited before its sshd accepted: %s"
                                     % (container.name, container.logs().decode("utf-8", "replace")[-2000:])) from None
            time.sleep(0.3)
    raise ChexstackError("Worker pod %s: no sshd on %s:%d after %.0f s" % (container.name, address, port, timeout))
