"""The seed study on one set of hosts (``invoke study``): the same throughput sweep (``bench.sweep``) run as several
systems — how the ranks are started — on the same hosts, with the same stack, data, model, image size and batch per
rank, the systems interleaved; then the comparison (``bench.main.report``: Figure 1 with 95 % intervals, the %
difference per count against the first system, the comparability caption, and with ``--timeline`` the gap
explained).

Systems (``SYSTEMS``):

- ``baremetal``: Slurm runs the trainer from a Python environment and this checkout (``--python``; the host's Open
  MPI ``mpirun``), the conda column's way (``launch.slurm`` bare-metal steps);
- ``apptainer``: Slurm's hybrid model, the host's ``mpirun`` around ``apptainer exec`` of the stack's SIF
  (``--sif``, default the verified one ``invoke build --runtime singularity`` wrote; ``oras://REGISTRY/REPO:TAG`` a
  signed SIF pulled from a registry and verified with the project's key before any job: ``pulled_sif``), most HPC
  sites' way;
- ``mpijob``: Kubernetes' way, the stack's MPIJob (``launch.k8s``) run as its Launcher and Worker pods from the
  stack's Docker image (``launch.pods``: the test cluster has nodes but no API server). An ``--image`` given as a
  registry reference by digest (``REGISTRY/REPO@sha256:…``) is pulled from that registry by the test cluster's
  pods' engine (``POD_ENGINE``: a second dockerd whose store holds no image at ``scripts/testcluster up``), as a
  kubelet pulls it; a local tag or image ID (the default: the stack's verified tag) runs from this machine's engine,
  for a build that was never pushed (``launch.pods.registry_pull``).

Network paths (``bench.netpath.PATHS``), a factor of their own: a series is ``SYSTEM:PATH`` (``--systems
baremetal:host,mpijob:overlay,mpijob:host``; a system alone takes its first path of ``PATHS_OF``). The Slurm systems
run on the hosts' own network (``host``); the MPIJob's pods on the test cluster's flannel-style VXLAN overlay
(``overlay``: ``scripts/testcluster plug --overlay``, each pod in its node's pod subnet), on their nodes' network
(``host``: ``hostNetwork: true``, ``launch.k8s.K8sOptions.host_network``), or plugged straight on the hosts' bridge
(``bridge``: ``scripts/testcluster plug``, the study's only path before). Each series is labelled ``SYSTEM:PATH`` and
records the path declared (``RunRecord.network_path``) and what its ranks' namespaces showed at the largest count
and its log's transport (``RunRecord.network``, ``bench.netpath``); ``bench.guard.effect`` keeps a gap between paths
from being called container overhead.

Order: paired rounds. In a round every system runs every count once (smallest first), the systems in an order drawn
for that round from the study's seed (``--seed``, drawn when not given and recorded: ``round_order``), so that drift
on the machine (another job, a warming node) and the place after a pause hit no system more than another, and a
round's noise (another process, a slower core for a while) is common to its systems and cancels in their ratio: a
gap is the distribution of the per-round ratios system / baseline (``bench.stats.paired_difference``), the sweeps
carrying the same ``paired_rounds``. ``--repeats`` rounds are run; with ``--resolve X`` rounds are added until every
gap's 95 % interval half-width is at most X %, or ``--max-repeats`` rounds or the ``--budget`` (minutes) run out
(``stopping``; which stopped it is printed and recorded). A Slurm system's round is one batch job whose counts are
job steps, on ``--nodelist`` the study's hosts; the MPIJob of a count keeps its pods on the same hosts
(``launch.k8s.K8sOptions.nodes``).

Files (``<series>``: ``SYSTEM-PATH``): ``<results>/<label>-<UTC>/<series>/repeat-<r>/np-<N>/throughput.json``
(round r's runs, on storage every node sees; each Slurm round's log ``slurm-<job>.out`` and its follower's
``follow.log``, each MPIJob's ``np-<N>-launcher.log``), then ``<output>/<label>-<UTC>/<series>.json`` (one sweep per
series, each count's rounds one point) and ``figure1.png`` / ``.csv`` / ``.md`` beside them.

The planted effect (the test cluster only): the system ``mpijob+RATE`` (e.g. ``mpijob+400mbit``) is the mpijob
system with each of its pods' links limited to RATE both ways (``scripts/testcluster plug-shaped``: a token bucket
on the pod's veth, which goes with the pod), a known slowdown of its allreduce that the study must find and
attribute to exposed allreduce; ``mpijob+none`` is the same pods on the same path with nothing limited, which it
must not find: ``--systems mpijob,mpijob+400mbit,mpijob+none`` checks the instrument before its gaps are trusted
(docs/benchmarks.md).

Errors: ChexstackError before anything runs for a request that cannot work (an unknown or repeated series, a path
its system cannot take, counts the hosts cannot hold, a missing SIF, image, scheduler, pod network or pods' engine), and
(exit 1) naming the series, round and log when a run fails (for an mpijob series also when its pods' image cannot
be pulled), with what ``invoke train --explain`` says of that log (its first
fault, cause and fix).
"""
from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
import sys
import tempfile
import time as clock
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import batch, netpath, stats, sysinfo
from bench.results import Point, Reading, RunRecord, Sweep, merge_repeats, save_sweep, with_reading
from bench.sweep import SweepRequest, read_point, request_record, settle_device, stamp, with_gpus
from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from chexstack.outputs import output_folder
from chexstack.tools import run as run_tool
from facts import host
from launch import attest, failure, k8s, slurmjob, submit
from launch.cluster import ClusterOptions, cluster_path
from launch.job import layout
from launch.pods import ImagePullError, PodJob, PodNetwork, registry_pull
from launch.schedulers import SCHEDULERS

REPO = Path(__file__).resolve().parents[1]
#: system -> what it is, in the caption's words
SYSTEMS = {
    "baremetal": "bare metal: Slurm, the trainer in a Python environment on the hosts, the host's mpirun",
    "apptainer": "HPC container: Slurm's hybrid model, the host's mpirun around apptainer exec of the stack's SIF",
    "mpijob": "Kubernetes: the stack's MPIJob as Launcher and Worker pods of its Docker image, each pod's network "
              "namespace on the hosts' bridge",
    "slurm-oci": "HPC container: Slurm's own OCI containers, srun --container of the stack's OCI bundle, the ranks "
                 "wired by Horovod's Gloo from Slurm's task environment",
}
#: system -> its scheduler in the one table (``launch.schedulers.SCHEDULERS``) and the study option naming what it
#: runs (``StudyRequest.python``, ``.sif``, ``.image``)
SCHEDULER_OF = {"baremetal": ("slurm-baremetal", "python"), "apptainer": ("slurm-hybrid", "sif"),
                "mpijob": ("k8s-mpijob", "image"), "slurm-oci": ("slurm-oci", "bundle")}
#: the systems whose jobs this machine submits to Slurm and follows (the MPIJob runs as its pods: ``launch.pods``)
SLURM_SYSTEMS = tuple(s for s, (key, _) in SCHEDULER_OF.items() if SCHEDULERS[key].follows)
#: A planted system: a system that can be planted (the test cluster's pods), ``+``, then the rate its pods' links
#: are limited to, in tc's units (``tc(8)``, "RATES": kbit, mbit, gbit), or ``none`` (the same path, no limit)
PLANTABLE = ("mpijob",)
PLANTED = re.compile(r"^(?P<system>%s)\+(?P<rate>[1-9][0-9]{0,5}(kbit|mbit|gbit)|none)$" % "|".join(PLANTABLE))


def base_system(system: str) -> str:
    """The system a planted one is (``mpijob+400mbit`` -> ``mpijob``); any other, itself."""
    planted = PLANTED.match(system)
    return planted.group("system") if planted else system


def plant(system: str) -> str | None:
    """A planted system's rate (``mpijob+400mbit`` -> ``400mbit``, ``mpijob+none`` -> ``none``); None for others."""
    planted = PLANTED.match(system)
    return planted.group("rate") if planted else None


def describe(system: str) -> str:
    """What ``system`` is, in the caption's words (with what was planted)."""
    rate = plant(system)
    if rate is None:
        return SYSTEMS[system]
    return "%s; planted: %s" % (SYSTEMS[base_system(system)], "nothing (the same pods and path, no limit)"
                                if rate == "none" else "each pod's link limited to %s both ways (tc tbf)" % rate)


#: The PersistentVolumeClaim the MPIJobs write their results to, bound to the study's results folder.
CLAIM = "chexstack-study"
#: The test cluster's pod network (``scripts/testcluster plug``: addresses 10.213.57.100 and up on its bridge).
TESTCLUSTER = REPO / "scripts" / "testcluster"
POD_NETWORK = PodNetwork(plug=(str(TESTCLUSTER), "plug"), launcher_address="10.213.57.100",
                         worker_addresses=tuple("10.213.57.%d" % (101 + i) for i in range(16)))
#: system -> the network paths (``bench.netpath.PATHS``) it can take, its default first: Slurm's ranks run in their
#: hosts' namespaces; the MPIJob's pods on the pod overlay (flannel's way, the seed's Kubernetes), on their nodes'
#: network, or on the hosts' bridge.
PATHS_OF = {"baremetal": ("host",), "apptainer": ("host",), "slurm-oci": ("host",),
            "mpijob": ("overlay", "host", "bridge")}


def series(spec: str) -> tuple[str, str]:
    """(system, path) of a ``--systems`` entry ``SYSTEM[:PATH]`` (``PATHS_OF``: a system alone takes its first
    path; a planted ``mpijob+RATE`` is plugged on the bridge, its only path: ``scripts/testcluster plug-shaped``).
    The system is as given, planted ones included (``base_system`` strips the plant). ChexstackError naming the entry
    for an unknown system or path, or a path the system cannot take."""
    system, _, path = spec.partition(":")
    base = base_system(system)
    if base not in SYSTEMS:
        raise ChexstackError("--systems: unknown system %r in %r; expected one of %s, each optionally :PATH, or a "
                             "planted one (%s, e.g. mpijob+400mbit, mpijob+none)"
                             % (system, spec, ", ".join(SYSTEMS), ", ".join("%s+RATE" % p for p in PLANTABLE)))
    paths = ("bridge",) if plant(system) is not None else PATHS_OF[base]
    path = path or paths[0]
    if path not in netpath.PATHS:
        raise ChexstackError("--systems: unknown network path %r in %r; expected one of %s"
                             % (path, spec, ", ".join(netpath.PATHS)))
    if path not in paths:
        raise ChexstackError("--systems %s: %s cannot run on the %s path; it takes %s"
                             % (spec, system, path, " or ".join(paths)))
    return system, path


def system_of(spec: str) -> str:
    """The system a series runs as (``series``, a planted one's base: ``mpijob+400mbit:bridge`` -> ``mpijob``)."""
    return base_system(series(spec)[0])


def _slug(spec: str) -> str:
    """A series' folder and file name: ``mpijob-overlay``, ``mpijob-400mbit-bridge``."""
    return "-".join(series(spec)).replace("+", "-")


def pod_network(path: str, nodes: tuple[str, ...], rate: str | None = None,
                node_cpus: tuple[tuple[str, str], ...] = ()) -> PodNetwork:
    """The test cluster's pod network of ``path`` for Workers on ``nodes`` (one each, in order; the Launcher on
    the first), each pod on its node's CPUs (``node_cpus``, ``testcluster_cpus``): ``bridge`` the bridge's pod
    addresses (``POD_NETWORK``; with a planted ``rate`` every pod plugged with its link limited to it,
    ``scripts/testcluster plug-shaped``, ``none``: the same command, no limit); ``overlay`` each pod in its node's
    pod subnet 10.244.K.0/24 (``scripts/testcluster plug --overlay``: chexK's); ``host`` the Workers at the nodes'
    own addresses in their namespaces (hostNetwork), the Launcher on the bridge (``launch.k8s``: not beside a
    Worker)."""
    if path == "bridge":
        plug = POD_NETWORK.plug if rate is None else (str(TESTCLUSTER), "plug-shaped", rate)
        return dataclasses.replace(POD_NETWORK, plug=plug, nodes=nodes, node_cpus=node_cpus)
    k = [int(node[len("chex"):]) if node.startswith("chex") and node[4:].isdigit() else None for node in nodes]
    if None in k:
        raise ChexstackError("--hosts %s: the %s path runs on the test cluster's hosts chexK (scripts/testcluster)"
                             % (",".join(nodes), path))
    if path == "host":  # the Workers in their nodes' namespaces; the Launcher a pod on the bridge
        return PodNetwork(plug=POD_NETWORK.plug, launcher_address=POD_NETWORK.launcher_address,
                          worker_addresses=tuple("10.213.57.%d" % (10 + j) for j in k), nodes=nodes,
                          node_netns="/run/netns/%s", node_cpus=node_cpus)
    return PodNetwork(plug=(str(TESTCLUSTER), "plug", "--overlay"), launcher_address="10.244.%d.2" % k[0],
                      worker_addresses=tuple("10.244.%d.%d" % (j, 10 + i) for i, j in enumerate(k)), nodes=nodes,
                      node_cpus=node_cpus)


#: The test cluster's pods' engine (``scripts/testcluster``: a second dockerd, its own store): the nodes' container
#: runtime, which pulls an MPIJob's image from its registry.
POD_ENGINE = "unix:///run/chexstack-testcluster/pods-engine/docker.sock"


def pod_engine(timeout: int = 900):
    """A client of the pods' engine (``POD_ENGINE``) that answered a ping; ChexstackError when none answers."""
    import docker

    try:
        client = docker.DockerClient(base_url=POD_ENGINE, timeout=timeout)
        client.ping()
        return client
    except docker.errors.DockerException as e:
        raise ChexstackError("the mpijob system's pods pull their image through the test cluster's pods' engine "
                             "(%s), which does not answer (%s): scripts/testcluster up starts it"
                             % (POD_ENGINE, e)) from None


@dataclass(frozen=True)
class StudyRequest:
    """What ``invoke study`` asked for. ``sweep``: the counts, model, sizes, steps, data, repeats, timeline, stack
    and label every system runs (its launcher is each system's own); ``hosts``: the nodes every system runs on (as
    many as the largest count needs at ``per_node`` ranks each); ``results``: an absolute folder every node sees;
    ``python``: the bare-metal environment's interpreter; ``sif``/``image``: the stack's SIF and Docker image
    (default: the verified ones of ``invoke build``); ``time``: each Slurm job's time limit; ``seed``: draws each
    round's order (None: drawn by ``check``); ``resolve``: add rounds until every gap's interval half-width is at
    most this many %, up to ``max_repeats`` rounds (``MAX_ROUNDS`` when not given) or ``budget`` minutes; without it
    ``sweep.repeats`` rounds are run (with it, at least those)."""

    sweep: SweepRequest
    systems: tuple[str, ...]
    hosts: tuple[str, ...]
    results: str
    per_node: int = 1
    python: str = sys.executable
    sif: str | None = None
    image: str | None = None
    time: str = "01:00:00"
    seed: int | None = None
    resolve: float | None = None
    max_repeats: int | None = None
    budget: float | None = None
    bundle: str | None = None

    @property
    def nodes(self) -> int:
        """Nodes the largest count needs (``launch.job.layout``)."""
        return max(layout(n, self.per_node)[0] for n in self.sweep.counts)

    def check(self) -> "StudyRequest":
        """Raise ChexstackError naming the option that cannot work; returns the request with ``sif``/``image``
        filled in from the stack."""
        named = tuple(":".join(series(s)) for s in self.systems)
        if len(set(named)) != len(named) or len(named) < 2:
            raise ChexstackError("--systems %s: expected two or more distinct series SYSTEM[:PATH] of %s"
                                 % (",".join(self.systems), ", ".join(SYSTEMS)))
        if self.per_node < 1:
            raise ChexstackError("--per-node %d: expected 1 or more ranks per node" % self.per_node)
        if len(self.hosts) < self.nodes:
            raise ChexstackError("--hosts %s: the largest count (%d) needs %d node(s) at --per-node %d"
                                 % (",".join(self.hosts) or "(none)", max(self.sweep.counts), self.nodes,
                                    self.per_node))
        cluster_path("slurm", "--results", self.results)
        if self.seed is not None and not 0 <= self.seed < 2 ** 32:
            raise ChexstackError("--seed %d: expected 0 to 4294967295" % self.seed)
        if self.resolve is not None and not self.resolve > 0:
            raise ChexstackError("--resolve %s: expected a half-width in %% above 0, e.g. 3" % self.resolve)
        if self.max_repeats is not None and self.max_repeats < self.sweep.repeats:
            raise ChexstackError("--max-repeats %d: expected at least --repeats (%d)"
                                 % (self.max_repeats, self.sweep.repeats))
        if self.budget is not None and not self.budget > 0:
            raise ChexstackError("--budget %s: expected minutes above 0" % self.budget)
        if (self.max_repeats is not None or self.budget is not None) and self.resolve is None:
            raise ChexstackError("--max-repeats and --budget bound --resolve's added rounds: give --resolve X")
        containers = [system_of(s) for s in named if system_of(s) != "baremetal"]
        if containers and not self.sweep.stack:
            raise ChexstackError("--systems %s: %s run the stack's image: give --stack"
                                 % (",".join(self.systems), " and ".join(dict.fromkeys(containers))))
        dataclasses.replace(self.sweep, launcher="slurm").check()
        filled = dataclasses.replace(self, systems=named)
        if self.seed is None:
            filled = dataclasses.replace(filled, seed=secrets.randbelow(2 ** 32))
        if self.sweep.stack:
            from envs.manifest import load_stack
            from images.build import SIF_DIR
            from images.naming import image_ref
            from images.sif import sif_path

            stack = load_stack(self.sweep.stack)
            if self.sweep.gpus and not stack.gpu:
                raise ChexstackError("--gpus: stack %s has no GPU build; compare CPU ranks with --np" % stack.name)
            ref = self.image or image_ref(stack)
            filled = dataclasses.replace(filled, image=ref,
                                         sif=self.sif or str((REPO / sif_path(ref, SIF_DIR)).resolve()))
        return filled


def slurm_hosts() -> tuple[str, ...]:
    """The nodes Slurm lists (``scontrol -o show node``), in its order, leaving out those it holds lost: the study's
    default ``--hosts``. ChexstackError when Slurm cannot be asked."""
    from facts.parsers.slurm import parse_nodes

    listed = run_tool(["scontrol", "-o", "show", "node"], timeout=60)
    if not listed.ok:
        raise ChexstackError("cannot list Slurm's nodes (scontrol -o show node: %s); give --hosts A,B"
                             % listed.why_not())
    return tuple(node.name for node in parse_nodes(listed.stdout) if not node.lost)


#: ``--resolve``'s most rounds when ``--max-repeats`` is not given
MAX_ROUNDS = 30


def round_order(systems: tuple[str, ...], seed: int, round_: int) -> tuple[str, ...]:
    """The systems' order in round ``round_`` (from 1): a permutation drawn by numpy's generator seeded with
    ``(seed, round_)``, so a round's order depends on the seed and its number alone (a round ``--resolve`` adds
    gets the order it would have had in a longer study)."""
    import numpy as np

    return tuple(systems[i] for i in np.random.default_rng([seed, round_]).permutation(len(systems)))


def order(systems: tuple[str, ...], rounds: int, seed: int) -> list[tuple[int, str]]:
    """(round, system) in run order: round by round, each in its ``round_order``."""
    return [(r, system) for r in range(1, rounds + 1) for system in round_order(systems, seed, r)]


def stopping(half_widths: list[float | None], rounds: int, minimum: int, resolve: float | None = None,
             max_rounds: int = MAX_ROUNDS, elapsed_s: float = 0.0, budget_s: float | None = None) -> str | None:
    """Why the study stops after ``rounds`` rounds, or None to run another. ``half_widths``: each gap's 95 %
    interval half-width in % (None: no interval yet); ``minimum``: the rounds asked (``--repeats``); ``resolve``:
    the half-width every gap must reach (None: stop after ``minimum``); ``max_rounds``: at most this many;
    ``elapsed_s``: seconds the rounds took, ``budget_s`` the budget: another round is started only when the
    rounds' mean time fits in what is left. The checks in order: the rounds asked, resolved, most rounds, budget."""
    if rounds < minimum:
        return None
    if resolve is None:
        return "%d rounds (--repeats)" % rounds
    wide = [w for w in half_widths if w is None or w > resolve]
    if not wide:
        return "resolved after %d rounds: every gap's interval half-width is at most %g %%" % (rounds, resolve)
    widest = "the widest ±%.1f %%" % max(wide) if None not in wide else "a gap without an interval yet"
    if rounds >= max_rounds:
        return ("not resolved: --max-repeats %d rounds reached with %d gap(s) wider than ±%g %% (%s)"
                % (max_rounds, len(wide), resolve, widest))
    if budget_s is not None and elapsed_s + elapsed_s / rounds > budget_s:
        return ("not resolved: the --budget of %g min would be passed by another round (%d rounds took %.1f min) "
                "with %d gap(s) wider than ±%g %% (%s)" % (budget_s / 60, rounds, elapsed_s / 60, len(wide),
                                                           resolve, widest))
    return None


def gaps(reads: dict[str, list[Reading]], systems: tuple[str, ...]) -> list[stats.Difference]:
    """Each system's paired difference against the first (``bench.stats.paired_difference``) at each count, from
    the rounds' readings so far (``reads[system]``: a reading per count per round, in run order)."""
    out = []
    for system in systems[1:]:
        for n in sorted({r.point.count for r in reads[systems[0]]}):
            mine = [r.point.images_per_sec for r in reads[system] if r.point.count == n]
            base = [r.point.images_per_sec for r in reads[systems[0]] if r.point.count == n]
            out.append(stats.paired_difference(mine, base))
    return out


def preflight(req: StudyRequest) -> None:
    """What the systems need, checked before the first run: Slurm's ``sbatch``, the SIF file, the Docker image and
    the test cluster's pod network (its pod overlay built, ``scripts/testcluster overlay``, for an overlay series).
    Raises ChexstackError naming what is missing."""
    systems = {system_of(s) for s in req.systems}
    if systems & set(SLURM_SYSTEMS) and not shutil.which("sbatch"):
        submit.submit_slurm("")  # its clear "sbatch not found" error
    if "baremetal" in systems and not os.access(req.python, os.X_OK):
        raise ChexstackError("--python %s: not an executable Python of an environment every node sees" % req.python)
    if "apptainer" in systems and not Path(req.sif).is_file():
        raise ChexstackError("--sif %s: no such file; build it with invoke build --stack %s --runtime singularity "
                             "(or --runtime all)" % (req.sif, req.sweep.stack))
    if any(system_of(s) == "slurm-oci" for s in req.systems):
        from launch.slurm_oci import bundle_of

        if not req.bundle:
            raise ChexstackError("--systems slurm-oci runs an OCI bundle: give --bundle DIR (invoke build --stack %s "
                                 "--bundle DIR makes it)" % req.sweep.stack)
        bundle_of(req.bundle)  # a missing or foreign bundle, named
    if any(system_of(s) == "mpijob" for s in req.systems):
        import docker.errors

        from chexstack import engine

        if registry_pull(req.image):
            pod_engine(60)  # the pull itself is the job's: a wrong digest fails it with the kubelet's events
        else:
            try:
                engine.client().images.get(req.image)
            except docker.errors.ImageNotFound:
                raise ChexstackError("--image %s: not on this Docker engine; build it with invoke build --stack %s"
                                     % (req.image, req.sweep.stack)) from None
        status = run_tool([str(TESTCLUSTER), "status"], timeout=60)
        if not status.ok:
            raise ChexstackError("the mpijob system's pods go on the test cluster's network, and the test cluster "
                                 "is not up (%s): scripts/testcluster up" % status.why_not())
        if any(series(s)[1] == "overlay" for s in req.systems):
            built = run_tool([str(TESTCLUSTER), "overlay"], timeout=60)
            if not built.ok:
                raise ChexstackError("the overlay path's pods need the test cluster's pod overlay, which could not be "
                                     "built (%s): scripts/testcluster overlay" % built.why_not())


def pulled_sif(req: StudyRequest) -> StudyRequest:
    """The request with an apptainer ``--sif oras://REGISTRY/REPO:TAG`` pulled into ``build/sif/pulled/`` and
    verified with the project's key first (``images.sif.pull_verified``): a SIF that fails ``apptainer verify`` is
    refused (ChexstackError, exit 1) before any job runs. Any other request is returned as it is."""
    if not any(system_of(s) == "apptainer" for s in req.systems) or not (req.sif or "").startswith("oras://"):
        return req
    from images.build import SIF_DIR
    from images.sif import pull_verified

    name = req.sif[len("oras://"):].replace("/", "_").replace(":", "_").replace("@", "_")
    folder = REPO / SIF_DIR / "pulled"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        local = pull_verified(req.sif, folder / ("%s.sif" % name))
    except ChexstackError:
        if not any(folder.iterdir()):
            folder.rmdir()  # a refused pull leaves nothing behind
        raise
    console.print("pulled %s to %s: apptainer verify passed with the project's key" % (req.sif, local), markup=False)
    return dataclasses.replace(req, sif=str(local))


@dataclass(frozen=True)
class Site:
    """What a rendered job takes from the machine that renders it: the checkout (``repo``: the bare-metal ranks'
    ``trainer/``, the record's git state), the host's ``mpirun --version`` output for the hybrid model's MPI check
    (None: run it here) and this host's name (None: ask)."""

    repo: Path = REPO
    mpirun_version_output: str | None = None
    render_host: str | None = None


def slurm_script(req: StudyRequest, spec: str, repeat: int, root: Path, now: datetime,
                 site: Site = Site()) -> tuple[str, Path]:
    """(batch script, the repeat's folder) of one repeat of a Slurm series: every count a job step on the study's
    hosts, results in ``<root>/<series>/repeat-<repeat>/np-<N>``."""
    system = system_of(spec)
    folder = root / _slug(spec) / ("repeat-%d" % repeat)
    key, image = SCHEDULER_OF[system]
    scheduler = SCHEDULERS[key]
    sweep = dataclasses.replace(req.sweep, label="%s-%s" % (req.sweep.label, system), repeats=1,
                                launcher=scheduler.launcher, stack=req.sweep.stack if scheduler.runs_stack else None)
    target = batch.BatchTarget(image=getattr(req, image), per_node=req.per_node, gpus=req.sweep.gpus,
                               results=str(root), workdir=None if scheduler.runs_stack else str(site.repo))
    opts = ClusterOptions(launcher=scheduler.launcher, stack=sweep.stack, slurm_model=scheduler.model, time=req.time)
    script, _ = batch.render(sweep, target, opts, site.repo, now=now, tag=str(folder.relative_to(root)),
                             log=str(folder / "slurm-%j.out"), nodelist=req.hosts[:req.nodes],
                             mpirun_version_output=site.mpirun_version_output, render_host=site.render_host)
    return script, folder


def mpijobs(req: StudyRequest, spec: str, repeat: int, root: Path) -> tuple[list[dict], Path]:
    """(one MPIJob per count, smallest first; the round's folder) of one round of an mpijob series (a planted
    ``mpijob+RATE`` too, its jobs named ``…-mpijob-RATE-bridge-…``): the pods on the study's hosts (on their nodes'
    network for the ``host`` path), results on the claim ``CLAIM`` (the study's results folder) in
    ``<series>/repeat-<repeat>/np-<N>``."""
    _, path = series(spec)
    folder = root / _slug(spec) / ("repeat-%d" % repeat)
    scheduler = SCHEDULERS[SCHEDULER_OF["mpijob"][0]]
    sweep = dataclasses.replace(req.sweep, label="%s-%s" % (req.sweep.label, _slug(spec)), repeats=1,
                                launcher=scheduler.launcher)
    target = batch.BatchTarget(image=req.image, per_node=req.per_node, gpus=req.sweep.gpus, results=CLAIM)
    inside, mount = scheduler.sweep_results(CLAIM, str(folder.relative_to(root)))
    specs = batch.specs(sweep, target, inside, (mount,))
    return [k8s.mpijob(job, k8s.K8sOptions(nodes=req.hosts[:job.nodes], host_network=path == "host"))
            for job in specs], folder


def _explained(log: Path) -> str:
    """What ``invoke train --explain`` says of a repeat's log (``launch.failure.explain_log``: the first fault on any
    rank, its cause and fix), or why it cannot say."""
    try:
        return failure.explain_log(str(log))
    except ChexstackError as e:
        return "(%s)" % e


def _run_slurm(req: StudyRequest, system: str, repeat: int, root: Path, jobs: list[dict]) -> Path:
    """One round of a Slurm series: its batch job submitted and followed to its end, appended to ``jobs``
    (``launch.attest.job_block``); returns the round's folder. ChexstackError (exit 1) when the job ends other
    than COMPLETED."""
    script, folder = slurm_script(req, system, repeat, root, datetime.now(timezone.utc))
    folder.mkdir(parents=True, exist_ok=True)
    job_id = submit.submit_slurm(script)
    key = SCHEDULER_OF[system_of(system)][0]
    jobs.append(attest.job_block(key, SCHEDULERS[key].artifact, script, job_id))
    log = folder / ("slurm-%s.out" % job_id)
    with open(folder / "follow.log", "w") as out:
        state = slurmjob.follow(job_id, str(log), out=out)
    if state.state != "COMPLETED":
        raise ChexstackError("%s, round %d: Slurm job %s %s on %s (exit code %s); see %s\n%s"
                             % (system, repeat, job_id, state.state, state.nodes or "no node", state.exit_code, log,
                                _explained(folder / "follow.log")), exit_code=ExitCode.FAILED)
    return folder


def _run_mpijob(req: StudyRequest, spec: str, repeat: int, root: Path, jobs: list[dict]) -> Path:
    """One round of an mpijob series (or a planted ``mpijob+RATE``): each count's MPIJob run as its pods
    (``launch.pods``) on the series' pod network (``pod_network``) to its end, their image pulled first by the pods'
    engine when ``--image`` is a registry reference (``registry_pull``; the kubelet's image events in
    ``np-<N>-events.log``), each appended to ``jobs`` (``launch.attest.job_block``: the MPIJob's YAML and name); the
    Workers' network path at the largest count of the first round is written to ``np-<N>-network.json``
    (``_observe_pods``). Returns the round's folder. ChexstackError (exit 1) when the pull or a Launcher fails, with
    what ``invoke train --explain`` says of its log."""
    import yaml

    from chexstack import engine

    objs, folder = mpijobs(req, spec, repeat, root)
    folder.mkdir(parents=True, exist_ok=True)
    pull = registry_pull(req.image)
    client = pod_engine() if pull else engine.client()
    key = SCHEDULER_OF["mpijob"][0]
    (system, path), cpus = series(spec), testcluster_cpus()  # once a round, not once a count
    for obj in objs:
        jobs.append(attest.job_block(key, SCHEDULERS[key].artifact, yaml.safe_dump(obj, sort_keys=False),
                                     obj["metadata"]["name"]))
        workers = int(obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
        ranks = workers * int(obj["spec"]["slotsPerWorker"])
        observe = _observe_pods(folder / ("np-%d-network.json" % ranks)) if repeat == 1 and workers > 1 else None
        events = folder / ("np-%d-events.log" % ranks)
        with tempfile.TemporaryDirectory(prefix="chexstack-pods-") as pods:
            network = pod_network(path, req.hosts[:workers], plant(system), cpus)
            try:
                job = PodJob(client, obj, network, Path(pods), claims={CLAIM: str(root)}, pull=pull)
            except ImagePullError as e:
                events.write_text("\n".join(e.events) + "\n")
                raise ChexstackError("%s, round %d, %d ranks: the pods' image %s could not be pulled; see %s\n%s"
                                     % (spec, repeat, ranks, req.image, events, _explained(events)),
                                     exit_code=ExitCode.FAILED) from None
            if job.events:
                events.write_text("\n".join(job.events) + "\n")
            status, log, _ = job.run(on_ready=observe)
        log_path = folder / ("np-%d-launcher.log" % ranks)
        log_path.write_text(log)
        if status != 0:
            raise ChexstackError("%s, round %d, %d ranks: the Launcher exited with %d; see %s\n%s"
                                 % (spec, repeat, ranks, status, log_path, _explained(log_path)),
                                 exit_code=ExitCode.FAILED)
    return folder


def testcluster_cpus() -> tuple[tuple[str, str], ...]:
    """(host, CPU list) of each test-cluster host (``scripts/testcluster cpus``), for its pods' ``--cpuset-cpus``;
    () when it cannot say (then the pods are not restricted, and their ranks' records show it)."""
    listed = run_tool([str(TESTCLUSTER), "cpus"], timeout=60)
    pairs = [line.split() for line in listed.stdout.splitlines()] if listed.ok else []
    return tuple((p[0], p[1]) for p in pairs if len(p) == 2)


def _observe_pods(out: Path):
    """``PodJob.run``'s ``on_ready``: each Worker's path to the next Worker's address, read in its namespace and its
    node's (``bench.netpath.observe``), written to ``out`` as JSON."""
    import json

    def read(job: PodJob) -> None:
        found = []
        for i, (pod, netns, node) in enumerate(job.namespaces):
            peer = job.network.worker_addresses[(i + 1) % len(job.namespaces)]
            found.append(netpath.observe(("nsenter", "--net=%s" % netns, "--"), "pod %s on %s" % (pod, node), peer,
                                         node=("nsenter", "--net=/run/netns/%s" % node, "--") if node else None,
                                         node_name=node))
        out.write_text(json.dumps(found, indent=1))
    return read


def _observe_hosts(req: StudyRequest) -> list[dict]:
    """The hosts' own path (Slurm's ranks run in their hosts' namespaces): each test-cluster host's path to the
    next host's address; [] for hosts that are not test-cluster namespaces here."""
    hosts = [h for h in req.hosts[:req.nodes] if Path("/run/netns/%s" % h).exists()]
    peers = {h: run_tool(["getent", "hosts", h], timeout=10).stdout.split()[:1] for h in hosts}
    return [netpath.observe(("nsenter", "--net=/run/netns/%s" % h, "--"), h, peers[hosts[(i + 1) % len(hosts)]][0])
            for i, h in enumerate(hosts) if len(hosts) > 1 and peers[hosts[(i + 1) % len(hosts)]]]


def render(req: StudyRequest, now: datetime | None = None, site: Site = Site()) -> str:
    """What ``invoke study --render`` prints: the seed and the run order of the ``--repeats`` rounds (and, with
    ``--resolve``, what adds rounds), then each system's jobs of its first round (the Slurm batch scripts, the
    MPIJobs as YAML; later rounds differ in their folder and job name only); nothing is submitted or run."""
    import yaml

    req = req.check()
    now = now or datetime.now(timezone.utc)
    root = Path(req.results) / ("%s-%s" % (req.sweep.label, stamp(now)))
    runs = order(req.systems, req.sweep.repeats, req.seed)
    lines = ["# invoke study %s in %s; seed %d; run order: %s%s" % (
        req.sweep.label, root, req.seed, "; ".join("round %d: %s" % (r, " ".join(s for rr, s in runs if rr == r))
                                                  for r in range(1, req.sweep.repeats + 1)),
        "" if req.resolve is None else "; then rounds until every gap is within ±%g %% (at most %d rounds%s)"
        % (req.resolve, req.max_repeats or MAX_ROUNDS, "" if req.budget is None else ", %g min" % req.budget))]
    for spec in req.systems:
        system, path = series(spec)
        lines.append("# --- %s, round 1: %s; network path %s: %s" % (spec, describe(system), path,
                                                                     netpath.PATHS[path]))
        if system_of(spec) not in SLURM_SYSTEMS:
            objs, _ = mpijobs(req, spec, 1, root)
            lines.append("---\n".join(yaml.safe_dump(o, sort_keys=False, width=120) for o in objs).rstrip("\n"))
        else:
            lines.append(slurm_script(req, spec, 1, root, now, site)[0].rstrip("\n"))
    return "\n".join(lines) + "\n"


def _network(req: StudyRequest, spec: str, first: Path) -> dict:
    """``RunRecord.network`` of a series: its ranks' namespaces as observed (the MPIJob's Workers at the largest count
    of repeat 1, ``_observe_pods``; the hosts for a Slurm series, ``_observe_hosts``) and the transport its log of
    the largest count shows (``bench.netpath.transport``)."""
    import json

    n = max(req.sweep.counts)
    if system_of(spec) in SLURM_SYSTEMS:
        observed = _observe_hosts(req)
        logs = sorted(first.glob("slurm-*.out"))
    else:
        found = first / ("np-%d-network.json" % n)
        observed = json.loads(found.read_text()) if found.is_file() else []
        logs = [first / ("np-%d-launcher.log" % n)]
    log = "\n".join(p.read_text(errors="replace") for p in logs if p.is_file())
    return {"observed": observed, "summary": netpath.summary(observed),
            "transport": netpath.transport(log, started_by="mpirun")}  # every system's ranks start by mpirun


def _record(req: StudyRequest, spec: str, now: datetime, root: Path) -> RunRecord:
    """The run record of a series: the request, where and in what it ran, its network path, the machine's load."""
    system, path = series(spec)
    launcher = SCHEDULERS[SCHEDULER_OF[system_of(spec)][0]].launcher
    record = request_record(dataclasses.replace(req.sweep, launcher=launcher), REPO, now)
    first = root / _slug(spec) / "repeat-1"
    hosts_file = first / "hosts.txt"
    hosts = hosts_file.read_text().split() if hosts_file.is_file() else list(req.hosts[:req.nodes])
    updates: dict = {"hosts": hosts, "hostname": sysinfo.hostname(), "cpu_count": host.cpu_cores(),
                     "network_path": path, "network": _network(req, spec, first),
                     "notes": ["system: %s" % describe(system), "network path %s: %s" % (path, netpath.PATHS[path])]}
    if system == "baremetal":
        updates.update(stack=None, image=req.python)
    elif system == "apptainer":
        from images.sif import file_sha256, inspect_labels

        labels = inspect_labels(Path(req.sif))
        updates.update(image=req.sif, image_id=labels.get("org.chexstack.docker.image.id"),
                       image_repo_digests=["sha256:%s (the SIF file)" % file_sha256(req.sif)])
    elif system == "slurm-oci":
        from images.oci import read_bundle

        made = read_bundle(req.bundle)
        updates.update(image=req.bundle, image_id=made.image_id,
                       image_repo_digests=["%s@%s (the OCI bundle's manifest)" % (made.image, made.digest)])
    else:
        image_id, digests = sysinfo.image_identity(req.image, pod_engine(60) if registry_pull(req.image) else None)
        updates.update(image=req.image, image_id=image_id, image_repo_digests=digests)
    record = record.model_copy(update=updates)
    if not req.sweep.gpus:
        return record.model_copy(update={"device": "cpu", "count_unit": "CPU ranks"})
    gpus = batch.collected_gpus(first) if system_of(spec) in SLURM_SYSTEMS else host.gpus()
    return with_gpus(record, gpus, "the study's hosts")


def _load_note(req: StudyRequest, start: tuple[float, ...], end: tuple[float, ...]) -> str:
    """The machine's load, and whether the largest count oversubscribes this machine's cores."""
    cores, ranks = os.cpu_count() or 1, max(req.sweep.counts)
    note = "load average (1, 5, 15 min) at the start %s and at the end %s, on %d cores here" % (
        "/".join("%.1f" % x for x in start), "/".join("%.1f" % x for x in end), cores)
    if not req.sweep.gpus and ranks > cores:
        note += "; %d CPU ranks oversubscribe them" % ranks
    return note


def run_study(req: StudyRequest, output: Path, title: str | None = None, bandwidth: str | None = None):
    """Run the study (module docstring) and write its sweeps and figure; returns the report
    (``bench.figure.Report``). Raises ChexstackError as the module docstring says."""
    from bench import main

    req = pulled_sif(req.check())
    preflight(req)
    output_folder(output, "--output")
    now = datetime.now(timezone.utc)
    tag = "%s-%s" % (req.sweep.label, stamp(now))
    root = Path(req.results) / tag
    load_start = os.getloadavg()
    reads: dict[str, list[Reading]] = {s: [] for s in req.systems}
    console.print("study %s: %s at %s %s on %s, %s, seed %d, results in %s" % (
        tag, ", ".join(req.systems), ",".join(map(str, req.sweep.counts)), _unit(req),
        ",".join(req.hosts[:req.nodes]), _rounds_asked(req), req.seed, root))
    jobs: list[dict] = []
    started, rounds, why = clock.monotonic(), 0, None
    while why is None:
        rounds += 1
        for system in round_order(req.systems, req.seed, rounds):
            folder = (_run_slurm(req, system, rounds, root, jobs) if system_of(system) in SLURM_SYSTEMS
                      else _run_mpijob(req, system, rounds, root, jobs))
            for n in sorted(req.sweep.counts):
                reading = read_point(n, folder / ("np-%d" % n))
                reads[system].append(reading)
                foreign = "; ".join(reason for h in reading.point.host_load for reason in h.foreign)
                console.print("  %-14s round %d, %2d %s: [bold]%.1f images/s[/] (median step %.3f s)%s" % (
                    system, rounds, n, _unit(req), reading.point.images_per_sec, reading.point.median_step_time_s,
                    " [yellow]FOREIGN LOAD: %s[/]" % foreign if foreign else ""))
        widths = [d.half_width for d in gaps(reads, req.systems)]
        why = stopping(widths, rounds, req.sweep.repeats, req.resolve, req.max_repeats or MAX_ROUNDS,
                       clock.monotonic() - started, None if req.budget is None else req.budget * 60)
    console.print("stopped: %s" % why, markup=False)
    note = _load_note(req, load_start, os.getloadavg())
    design = "paired rounds: %d, each system's order drawn per round from seed %d; stopped: %s" % (rounds, req.seed,
                                                                                                    why)
    sweeps = [_sweep(req, system, reads[system], now, root, note, "%s seed %d" % (tag, req.seed), design)
              for system in req.systems]
    paths = [str(save_sweep(sweep, output / tag / ("%s.json" % _slug(system))))
             for sweep, system in zip(sweeps, req.systems)]
    result = main.report([",".join(paths)], output / tag / "figure1.png", title or _title(req, rounds), False,
                         bandwidth)
    drift = ["%s: %s" % (sweep.label, line) for sweep in sweeps for line in sweep.record.drift]
    for line in drift:
        warn("drift: %s" % line)
    folder = output / tag
    signed = attest.write_collection(folder, sorted(p.name for p in folder.iterdir() if p.is_file()),
                                     stack=req.sweep.stack,
                                     image=attest.sif_block(req.sif)
                                     if "apptainer" in {system_of(s) for s in req.systems} else None,
                                     drift=drift, started=now.isoformat(timespec="seconds"),
                                     kind="study", jobs=jobs)
    attest.keep_public_key(folder)  # a committed figure's reader verifies with it (--key), its keyid compared
    console.print("signed statement: %s (invoke verify-run %s)" % (signed, folder), markup=False)
    return result


def _sweep(req: StudyRequest, system: str, reads: list[Reading], now: datetime, root: Path, note: str,
           paired_rounds: str, design: str) -> Sweep:
    """``system``'s series: its record (``_record``, with what its ranks reported, the rounds it was paired in and
    the design's sentence) and one point per count, its rounds merged in round order (``merge_repeats``)."""
    record = _record(req, system, now, root)
    record = record.model_copy(update={"notes": record.notes + [note, design], "paired_rounds": paired_rounds})
    by_count: dict[int, list[Point]] = {}
    for reading in reads:
        record = with_reading(record, reading)
        by_count.setdefault(reading.point.count, []).append(reading.point)
    points = [merge_repeats(by_count[n]) for n in sorted(by_count)]
    return Sweep(label=system, record=settle_device(record, {r.device for r in reads}), points=points)


def _unit(req: StudyRequest) -> str:
    return "GPUs" if req.sweep.gpus else "CPU ranks"


def _rounds_asked(req: StudyRequest) -> str:
    if req.resolve is None:
        return "%d paired round(s)" % req.sweep.repeats
    return "%d to %d paired rounds until every gap is within ±%g %%%s" % (
        req.sweep.repeats, req.max_repeats or MAX_ROUNDS, req.resolve,
        "" if req.budget is None else " or %g min" % req.budget)


def _title(req: StudyRequest, rounds: int) -> str:
    s = req.sweep
    return "%s: %s, %d px, batch %d per rank, %d paired round(s) on %s" % (
        " vs ".join(req.systems), s.model, s.image_size, s.batch_size, rounds, ",".join(req.hosts[:req.nodes]))
