"""The seed study on one set of hosts (``invoke study``): the same throughput sweep (``bench.sweep``) run as several
systems — how the ranks are started — on the same hosts, with the same stack, data, model, image size and batch per
rank, the systems interleaved; then the comparison (``bench.main.report``: Figure 1 with 95 % intervals, the %
difference per count against the first system, the comparability caption, and with ``--timeline`` the gap
explained).

Systems (``SYSTEMS``):

- ``baremetal``: Slurm runs the trainer from a Python environment and this checkout (``--python``; the host's Open
  MPI ``mpirun``), the conda column's way (``launch.slurm`` bare-metal steps);
- ``apptainer``: Slurm's hybrid model, the host's ``mpirun`` around ``apptainer exec`` of the stack's SIF
  (``--sif``, default the verified one ``invoke build --runtime singularity`` wrote), most HPC sites' way;
- ``mpijob``: Kubernetes' way, the stack's MPIJob (``launch.k8s``) run as its Launcher and Worker pods from the
  stack's Docker image, each pod's network namespace on the test cluster's bridge as a CNI plugin puts it
  (``launch.pods``: the test cluster has nodes but no API server).

Order: repeat by repeat; in a repeat every system runs every count (smallest first), the systems' order rotating by
one each repeat (A B C, B C A, C A B, ...: ``order``), so that drift on the machine (another job, a warming node)
and the place after a pause hit every system alike. A Slurm system's repeat is one batch job whose counts are job
steps, on ``--nodelist`` the study's hosts; the MPIJob of a count keeps its pods on the same hosts
(``launch.k8s.K8sOptions.nodes``).

Files: ``<results>/<label>-<UTC>/<system>/repeat-<r>/np-<N>/throughput.json`` (the runs, on storage every node
sees; each Slurm repeat's log ``slurm-<job>.out`` and its follower's ``follow.log``, each MPIJob's
``np-<N>-launcher.log``), then ``<output>/<label>-<UTC>/<system>.json`` (one sweep per system, each count's
repeats one point) and ``figure1.png`` / ``.csv`` / ``.md`` beside them.

Errors: ChexstackError before anything runs for a request that cannot work (an unknown or repeated system, counts the
hosts cannot hold, a missing SIF, image, scheduler or pod network), and (exit 1) naming the system, repeat and log
when a run fails, with what ``invoke train --explain`` says of that log (its first fault, cause and fix).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import batch, sysinfo
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
from launch.pods import PodJob, PodNetwork
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
#: The PersistentVolumeClaim the MPIJobs write their results to, bound to the study's results folder.
CLAIM = "chexstack-study"
#: The test cluster's pod network (``scripts/testcluster plug``: addresses 10.213.57.100 and up on its bridge).
TESTCLUSTER = REPO / "scripts" / "testcluster"
POD_NETWORK = PodNetwork(plug=(str(TESTCLUSTER), "plug"), launcher_address="10.213.57.100",
                         worker_addresses=tuple("10.213.57.%d" % (101 + i) for i in range(16)))


@dataclass(frozen=True)
class StudyRequest:
    """What ``invoke study`` asked for. ``sweep``: the counts, model, sizes, steps, data, repeats, timeline, stack
    and label every system runs (its launcher is each system's own); ``hosts``: the nodes every system runs on (as
    many as the largest count needs at ``per_node`` ranks each); ``results``: an absolute folder every node sees;
    ``python``: the bare-metal environment's interpreter; ``sif``/``image``: the stack's SIF and Docker image
    (default: the verified ones of ``invoke build``); ``time``: each Slurm job's time limit."""

    sweep: SweepRequest
    systems: tuple[str, ...]
    hosts: tuple[str, ...]
    results: str
    per_node: int = 1
    python: str = sys.executable
    sif: str | None = None
    image: str | None = None
    time: str = "01:00:00"
    bundle: str | None = None

    @property
    def nodes(self) -> int:
        """Nodes the largest count needs (``launch.job.layout``)."""
        return max(layout(n, self.per_node)[0] for n in self.sweep.counts)

    def check(self) -> "StudyRequest":
        """Raise ChexstackError naming the option that cannot work; returns the request with ``sif``/``image``
        filled in from the stack."""
        unknown = [s for s in self.systems if s not in SYSTEMS]
        if unknown or len(set(self.systems)) != len(self.systems) or len(self.systems) < 2:
            raise ChexstackError("--systems %s: expected two or more distinct systems of %s"
                                 % (",".join(self.systems), ", ".join(SYSTEMS)))
        if self.per_node < 1:
            raise ChexstackError("--per-node %d: expected 1 or more ranks per node" % self.per_node)
        if len(self.hosts) < self.nodes:
            raise ChexstackError("--hosts %s: the largest count (%d) needs %d node(s) at --per-node %d"
                                 % (",".join(self.hosts) or "(none)", max(self.sweep.counts), self.nodes,
                                    self.per_node))
        cluster_path("slurm", "--results", self.results)
        containers = [s for s in self.systems if s != "baremetal"]
        if containers and not self.sweep.stack:
            raise ChexstackError("--systems %s: %s run the stack's image: give --stack"
                                 % (",".join(self.systems), " and ".join(containers)))
        dataclasses.replace(self.sweep, launcher="slurm").check()
        filled = self
        if self.sweep.stack:
            from envs.manifest import load_stack
            from images.build import SIF_DIR
            from images.naming import image_ref
            from images.sif import sif_path

            stack = load_stack(self.sweep.stack)
            if self.sweep.gpus and not stack.gpu:
                raise ChexstackError("--gpus: stack %s has no GPU build; compare CPU ranks with --np" % stack.name)
            ref = self.image or image_ref(stack)
            filled = dataclasses.replace(self, image=ref,
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


def order(systems: tuple[str, ...], repeats: int) -> list[tuple[int, str]]:
    """(repeat, system) in run order: repeat by repeat, the systems' order rotating by one each repeat."""
    k = len(systems)
    return [(r, systems[(r - 1 + i) % k]) for r in range(1, repeats + 1) for i in range(k)]


def preflight(req: StudyRequest) -> None:
    """What the systems need, checked before the first run: Slurm's ``sbatch``, the SIF file, the Docker image and
    the test cluster's pod network. Raises ChexstackError naming what is missing."""
    if set(req.systems) & set(SLURM_SYSTEMS) and not shutil.which("sbatch"):
        submit.submit_slurm("")  # its clear "sbatch not found" error
    if "baremetal" in req.systems and not os.access(req.python, os.X_OK):
        raise ChexstackError("--python %s: not an executable Python of an environment every node sees" % req.python)
    if "apptainer" in req.systems and not Path(req.sif).is_file():
        raise ChexstackError("--sif %s: no such file; build it with invoke build --stack %s --runtime singularity "
                             "(or --runtime all)" % (req.sif, req.sweep.stack))
    if "slurm-oci" in req.systems:
        from launch.slurm_oci import bundle_of

        if not req.bundle:
            raise ChexstackError("--systems slurm-oci runs an OCI bundle: give --bundle DIR (invoke build --stack %s "
                                 "--bundle DIR makes it)" % req.sweep.stack)
        bundle_of(req.bundle)  # a missing or foreign bundle, named
    if "mpijob" in req.systems:
        import docker.errors

        from chexstack import engine

        try:
            engine.client().images.get(req.image)
        except docker.errors.ImageNotFound:
            raise ChexstackError("--image %s: not on this Docker engine; build it with invoke build --stack %s"
                                 % (req.image, req.sweep.stack)) from None
        status = run_tool([str(TESTCLUSTER), "status"], timeout=60)
        if not status.ok:
            raise ChexstackError("the mpijob system's pods go on the test cluster's bridge, and the test cluster is "
                                 "not up (%s): scripts/testcluster up" % status.why_not())


@dataclass(frozen=True)
class Site:
    """What a rendered job takes from the machine that renders it: the checkout (``repo``: the bare-metal ranks'
    ``trainer/``, the record's git state), the host's ``mpirun --version`` output for the hybrid model's MPI check
    (None: run it here) and this host's name (None: ask)."""

    repo: Path = REPO
    mpirun_version_output: str | None = None
    render_host: str | None = None


def slurm_script(req: StudyRequest, system: str, repeat: int, root: Path, now: datetime,
                 site: Site = Site()) -> tuple[str, Path]:
    """(batch script, the repeat's folder) of one repeat of a Slurm system: every count a job step on the study's
    hosts, results in ``<root>/<system>/repeat-<repeat>/np-<N>``."""
    folder = root / system / ("repeat-%d" % repeat)
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


def mpijobs(req: StudyRequest, repeat: int, root: Path) -> tuple[list[dict], Path]:
    """(one MPIJob per count, smallest first; the repeat's folder) of one repeat of the mpijob system: the pods on
    the study's hosts, results on the claim ``CLAIM`` (the study's results folder) in
    ``mpijob/repeat-<repeat>/np-<N>``."""
    folder = root / "mpijob" / ("repeat-%d" % repeat)
    scheduler = SCHEDULERS[SCHEDULER_OF["mpijob"][0]]
    sweep = dataclasses.replace(req.sweep, label="%s-mpijob" % req.sweep.label, repeats=1,
                                launcher=scheduler.launcher)
    target = batch.BatchTarget(image=req.image, per_node=req.per_node, gpus=req.sweep.gpus, results=CLAIM)
    inside, mount = scheduler.sweep_results(CLAIM, str(folder.relative_to(root)))
    specs = batch.specs(sweep, target, inside, (mount,))
    return [k8s.mpijob(spec, k8s.K8sOptions(nodes=req.hosts[:spec.nodes])) for spec in specs], folder


def _explained(log: Path) -> str:
    """What ``invoke train --explain`` says of a repeat's log (``launch.failure.explain_log``: the first fault on any
    rank, its cause and fix), or why it cannot say."""
    try:
        return failure.explain_log(str(log))
    except ChexstackError as e:
        return "(%s)" % e


def _run_slurm(req: StudyRequest, system: str, repeat: int, root: Path) -> Path:
    """One repeat of a Slurm system: its batch job submitted and followed to its end; returns the repeat's folder.
    ChexstackError (exit 1) when the job ends other than COMPLETED."""
    script, folder = slurm_script(req, system, repeat, root, datetime.now(timezone.utc))
    folder.mkdir(parents=True, exist_ok=True)
    job_id = submit.submit_slurm(script)
    log = folder / ("slurm-%s.out" % job_id)
    with open(folder / "follow.log", "w") as out:
        state = slurmjob.follow(job_id, str(log), out=out)
    if state.state != "COMPLETED":
        raise ChexstackError("%s, repeat %d: Slurm job %s %s on %s (exit code %s); see %s\n%s"
                             % (system, repeat, job_id, state.state, state.nodes or "no node", state.exit_code, log,
                                _explained(folder / "follow.log")), exit_code=ExitCode.FAILED)
    return folder


def _run_mpijob(req: StudyRequest, repeat: int, root: Path) -> Path:
    """One repeat of the mpijob system: each count's MPIJob run as its pods (``launch.pods``) to its end; returns
    the repeat's folder. ChexstackError (exit 1) when a Launcher fails."""
    from chexstack import engine

    objs, folder = mpijobs(req, repeat, root)
    folder.mkdir(parents=True, exist_ok=True)
    client = engine.client()
    for obj in objs:
        workers = int(obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
        ranks = workers * int(obj["spec"]["slotsPerWorker"])
        with tempfile.TemporaryDirectory(prefix="chexstack-pods-") as pods:
            job = PodJob(client, obj, dataclasses.replace(POD_NETWORK, nodes=req.hosts[:workers]), Path(pods),
                         claims={CLAIM: str(root)})
            status, log, _ = job.run()
        log_path = folder / ("np-%d-launcher.log" % ranks)
        log_path.write_text(log)
        if status != 0:
            raise ChexstackError("mpijob, repeat %d, %d ranks: the Launcher exited with %d; see %s\n%s"
                                 % (repeat, ranks, status, log_path, _explained(log_path)), exit_code=ExitCode.FAILED)
    return folder


def render(req: StudyRequest, now: datetime | None = None, site: Site = Site()) -> str:
    """What ``invoke study --render`` prints: the run order, then each system's jobs of its first repeat (the
    Slurm batch scripts, the MPIJobs as YAML; later repeats differ in their folder and job name only); nothing is
    submitted or run."""
    import yaml

    req = req.check()
    now = now or datetime.now(timezone.utc)
    root = Path(req.results) / ("%s-%s" % (req.sweep.label, stamp(now)))
    runs = order(req.systems, req.sweep.repeats)
    lines = ["# invoke study %s in %s; run order: %s" % (
        req.sweep.label, root, "; ".join("repeat %d: %s" % (r, " ".join(s for rr, s in runs if rr == r))
                                          for r in range(1, req.sweep.repeats + 1)))]
    for system in req.systems:
        lines.append("# --- %s, repeat 1: %s" % (system, SYSTEMS[system]))
        if system not in SLURM_SYSTEMS:
            objs, _ = mpijobs(req, 1, root)
            lines.append("---\n".join(yaml.safe_dump(o, sort_keys=False, width=120) for o in objs).rstrip("\n"))
        else:
            lines.append(slurm_script(req, system, 1, root, now, site)[0].rstrip("\n"))
    return "\n".join(lines) + "\n"


def _record(req: StudyRequest, system: str, now: datetime, root: Path) -> RunRecord:
    """The run record of ``system``'s series: the request, where and in what it ran, the machine's load."""
    launcher = SCHEDULERS[SCHEDULER_OF[system][0]].launcher
    record = request_record(dataclasses.replace(req.sweep, launcher=launcher), REPO, now)
    first = root / system / "repeat-1"
    hosts_file = first / "hosts.txt"
    hosts = hosts_file.read_text().split() if hosts_file.is_file() else list(req.hosts[:req.nodes])
    updates: dict = {"hosts": hosts, "hostname": sysinfo.hostname(), "cpu_count": host.cpu_cores(),
                     "notes": ["system: %s" % SYSTEMS[system]]}
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
        image_id, digests = sysinfo.image_identity(req.image)
        updates.update(image=req.image, image_id=image_id, image_repo_digests=digests)
    record = record.model_copy(update=updates)
    if not req.sweep.gpus:
        return record.model_copy(update={"device": "cpu", "count_unit": "CPU ranks"})
    gpus = batch.collected_gpus(first) if system in SLURM_SYSTEMS else host.gpus()
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

    req = req.check()
    preflight(req)
    output_folder(output, "--output")
    now = datetime.now(timezone.utc)
    tag = "%s-%s" % (req.sweep.label, stamp(now))
    root = Path(req.results) / tag
    load_start = os.getloadavg()
    reads: dict[str, list[Reading]] = {s: [] for s in req.systems}
    console.print("study %s: %s at %s %s on %s, %d repeat(s), results in %s" % (
        tag, ", ".join(req.systems), ",".join(map(str, req.sweep.counts)), _unit(req),
        ",".join(req.hosts[:req.nodes]), req.sweep.repeats, root))
    for repeat, system in order(req.systems, req.sweep.repeats):
        folder = _run_slurm(req, system, repeat, root) if system in SLURM_SYSTEMS else _run_mpijob(req, repeat, root)
        for n in sorted(req.sweep.counts):
            reading = read_point(n, folder / ("np-%d" % n))
            reads[system].append(reading)
            console.print("  %-9s repeat %d/%d, %2d %s: [bold]%.1f images/s[/] (median step %.3f s)" % (
                system, repeat, req.sweep.repeats, n, _unit(req), reading.point.images_per_sec,
                reading.point.median_step_time_s))
    note = _load_note(req, load_start, os.getloadavg())
    sweeps = [_sweep(req, system, reads[system], now, root, note) for system in req.systems]
    paths = [str(save_sweep(sweep, output / tag / ("%s.json" % system))) for sweep, system in zip(sweeps, req.systems)]
    result = main.report([",".join(paths)], output / tag / "figure1.png", title or _title(req), False, bandwidth)
    drift = ["%s: %s" % (sweep.label, line) for sweep in sweeps for line in sweep.record.drift]
    for line in drift:
        warn("drift: %s" % line)
    folder = output / tag
    signed = attest.write_collection(folder, sorted(p.name for p in folder.iterdir() if p.is_file()),
                                     stack=req.sweep.stack,
                                     image=attest.sif_block(req.sif) if "apptainer" in req.systems else None,
                                     drift=drift, started=now.isoformat(timespec="seconds"),
                                     kind="study")
    console.print("signed statement: %s (invoke verify-run %s)" % (signed, folder), markup=False)
    return result


def _sweep(req: StudyRequest, system: str, reads: list[Reading], now: datetime, root: Path, note: str) -> Sweep:
    """``system``'s series: its record (``_record``, with what its ranks reported) and one point per count, its
    repeats merged (``merge_repeats``)."""
    record = _record(req, system, now, root)
    record = record.model_copy(update={"notes": record.notes + [note]})
    by_count: dict[int, list[Point]] = {}
    for reading in reads:
        record = with_reading(record, reading)
        by_count.setdefault(reading.point.count, []).append(reading.point)
    points = [merge_repeats(by_count[n]) for n in sorted(by_count)]
    return Sweep(label=system, record=settle_device(record, {r.device for r in reads}), points=points)


def _unit(req: StudyRequest) -> str:
    return "GPUs" if req.sweep.gpus else "CPU ranks"


def _title(req: StudyRequest) -> str:
    s = req.sweep
    return "%s: %s, %d px, batch %d per rank, %d repeat(s) on %s" % (
        " vs ".join(req.systems), s.model, s.image_size, s.batch_size, s.repeats, ",".join(req.hosts[:req.nodes]))
