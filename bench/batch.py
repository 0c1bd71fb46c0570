"""Scaling sweeps through a scheduler (``invoke bench --launcher slurm|k8s``): render, submit, collect.

- Slurm: ONE batch job for the whole sweep, sized for the largest count; each count is a job step (``srun
  --mpi=pmix`` with pyxis, or the hybrid model's host ``mpirun`` + ``singularity exec``) writing
  ``<results>/np-<N>/throughput.json`` on shared storage. The job also stores the node list, ``nvidia-smi``'s GPU
  model and driver, and the render-time run record (git revision, stack, image, request) beside the results.
- Kubernetes: one MPIJob per count (an MPIJob's worker count is fixed), all writing to a ReadWriteMany
  PersistentVolumeClaim mounted at ``/results``; copy ``<tag>/`` off the claim (e.g. ``kubectl cp``).
- ``collect(DIR)`` turns such a folder into the same sweep JSON as a run here (``bench.sweep``).

Per count, ranks are laid out on as few nodes as possible with the same number on each (``launch.job.layout``).
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from string import Template

from bench.results import RunRecord, Sweep, merge_repeats, with_reading
from bench.sweep import (
    SweepRequest,
    keep_sweep,
    read_point,
    repeated_requests,
    request_record,
    settle_device,
    stamp,
    with_gpus,
)
from chexstack.console import warn
from chexstack.errors import ChexstackError
from chexstack.outputs import output_folder
from envs.manifest import load_stack
from facts import host
from launch import k8s, slurm
from launch.cluster import ClusterOptions, local_image_warning, pinned_image
from launch.job import JobSpec, Mount, layout
from launch.k8s_scheduler import RESULTS as K8S_MOUNT
from launch.schedulers import SCHEDULERS

TEMPLATES = Path(__file__).resolve().parent / "templates"
RECORD_FILE = "record.json"
K8S_RESULTS = K8S_MOUNT


@dataclass(frozen=True)
class BatchTarget:
    """Where a scheduled sweep runs. ``per_node``: GPUs (or CPU ranks) per node; ``results``: the shared folder
    (Slurm: a path every node sees; Kubernetes: the PVC claim name). ``workdir``: for a bare-metal Slurm sweep
    (a request without a stack), the checkout holding ``trainer/`` on shared storage; ``image`` is then the
    Python of an environment every node sees."""

    image: str
    per_node: int
    gpus: bool
    results: str
    workdir: str | None = None


def job_name(label: str, count: int | None = None, repeat: int | None = None) -> str:
    """An RFC 1123 label from the sweep label: ``bench-<label>[-np<N>[-r<R>]]``, lower case, other characters ->
    '-' (``repeat``: of a sweep with ``--repeats`` above 1, so that each repeat's MPIJob has its own name)."""
    base = "bench-" + re.sub(r"[^a-z0-9-]+", "-", label.lower()).strip("-")
    suffix = ("" if count is None else "-np%d" % count) + ("" if repeat is None else "-r%d" % repeat)
    return base[:63 - len(suffix)].rstrip("-") + suffix


def specs(req: SweepRequest, target: BatchTarget, out_root: str, extra_mounts: tuple[Mount, ...]) -> list[JobSpec]:
    """One JobSpec per count and repeat of the sweep's requests in run order (``bench.sweep.repeated_requests``:
    round-robin over the counts per repeat), each writing ``<out_root>/np-<N>`` (one repeat) or
    ``<out_root>/repeat-<r>/np-<N>``. Without a stack (bare-metal Slurm, ``target.workdir``): the environment's
    Python, CPU ranks seeing no GPU (or GPU ranks that stop without one), as ``invoke train --launcher slurm``
    bare metal (Open MPI's run-as-root permission is the renderer's, ``launch.slurm.exports``)."""
    baremetal = req.stack is None and target.workdir is not None
    if req.stack is None and not baremetal:
        raise ChexstackError("--launcher %s runs the stack's image: give --stack" % req.launcher)
    stack = None if baremetal else load_stack(req.stack)
    data_mounts = () if req.data == "synthetic" else (Mount(req.data, read_only=True),)
    out = []
    for repeat, request in repeated_requests(req, out_root):
        nodes, per_node = layout(request.ranks(), target.per_node)
        where = {}
        if baremetal:
            where = dict(env=request.device_env(), workdir=target.workdir)
        name = job_name(req.label, request.ranks(), repeat if req.repeats > 1 else None)
        out.append(JobSpec(name=name, stack=stack, image=target.image, nodes=nodes,
                           ranks_per_node=per_node, gpus=target.gpus, trainer_args=request.argv,
                           mounts=extra_mounts + data_mounts, **where))
    return out


def results_root(req: SweepRequest, target: BatchTarget, now: datetime) -> str:
    """The Slurm sweep's result folder, ``<results>/<label>-<UTC time>`` (what ``invoke bench --collect`` takes)."""
    return "%s/%s-%s" % (target.results.rstrip("/"), req.label, stamp(now))


def sweep_target(req: SweepRequest, opts: ClusterOptions) -> BatchTarget:
    """Where ``opts.scheduler`` runs the sweep, by the rules ``invoke train`` has there (``Scheduler.image``: bare
    metal runs this Python and checkout, no ``--image``; otherwise the stack's image, ``--image`` or its verified
    tag, the hybrid model's SIF; a registry tag resolved to ``repo@sha256:…`` and a pushed local tag replaced by its
    recorded digest, ``launch.cluster.pinned_image``, so the jobs and the run record name the digest), the results
    folder or claim it writes to (``Scheduler.check_results``), and the local-image warning. Raises ChexstackError
    naming the option, and for ``--gpus`` with a stack that has no GPU build."""
    scheduler = opts.scheduler
    stack, image, workdir = scheduler.image(opts)
    image = pinned_image(stack, image, opts.image)[0]  # repo@sha256 when a push or the registry fixes it
    scheduler.check_results(opts.results)
    if stack is not None:
        warning = local_image_warning(stack, image, scheduler)
        if warning:
            warn(warning)
        if req.gpus and not stack.gpu:
            raise ChexstackError("--gpus %s: stack %s has no GPU build; sweep CPU ranks with --np %s"
                                 % (",".join(map(str, req.counts)), stack.name, ",".join(map(str, req.counts))))
    return BatchTarget(image=image, per_node=opts.per_node, gpus=req.gpus, results=opts.results, workdir=workdir)


def render(req: SweepRequest, target: BatchTarget, opts: ClusterOptions, repo: Path, *, now: datetime | None = None,
           tag: str | None = None, log: str | None = None, nodelist: tuple[str, ...] = (),
           mpirun_version_output: str | None = None, render_host: str | None = None) -> tuple[str, str]:
    """(the sweep's job text for ``opts.scheduler``, its results' root as the ranks see it): every count and repeat
    a step (``specs``) writing below ``Scheduler.sweep_results(target.results, tag)`` (``tag``: default
    ``<label>-<UTC time>``), run one after another (``Scheduler.render_steps``: Slurm's steps of one job with this
    header, record and GPU listing; one MPIJob each). ``log``: the job's log (default ``<results>/<job>-%j.out``),
    ``nodelist``: the hosts the steps must run on. Raises ChexstackError for a bad request or (hybrid)
    incompatible MPIs."""
    req.check()
    scheduler = opts.scheduler
    now = now or datetime.now(timezone.utc)
    out_root, mount = scheduler.sweep_results(target.results, tag or "%s-%s" % (req.label, stamp(now)))
    jobs = specs(req, target, out_root, (mount,))
    largest = max(jobs, key=lambda j: j.nodes)
    allocation = JobSpec(name=job_name(req.label), stack=largest.stack, image=target.image, nodes=largest.nodes,
                         ranks_per_node=target.per_node, gpus=target.gpus, trainer_args=(), mounts=(mount,),
                         env=largest.env, workdir=largest.workdir)
    record = request_record(req, repo, now).model_copy(update={"image": target.image})
    header = Template((TEMPLATES / "sweep-header.txt").read_text()).substitute(
        counts=",".join(map(str, sorted(req.counts))), unit="GPUs" if target.gpus else "CPU ranks",
        stack="none" if largest.stack is None else largest.stack.name,
        title=("bare metal: %s" % target.image if largest.stack is None
               else " ".join(largest.stack.title.split())),
        launch_model=scheduler.launch_model, out=out_root)
    prologue = Template((TEMPLATES / "sweep-prologue.sh").read_text()).substitute(
        out_q=shlex.quote(out_root), gpu_query=shlex.join(host.GPU_QUERY),
        record_json=record.model_dump_json(exclude_defaults=True))
    text = scheduler.render_steps(allocation, jobs, opts, header=header, prologue=prologue,
                                  log=log or "%s/%s-%%j.out" % (target.results.rstrip("/"), allocation.name),
                                  nodelist=nodelist, mpirun_version_output=mpirun_version_output,
                                  render_host=render_host)
    return text, out_root


def render_slurm(req: SweepRequest, target: BatchTarget, repo: Path, model: str = "pyxis",
                 opts: slurm.SlurmOptions = slurm.SlurmOptions(), mpirun_version_output: str | None = None,
                 now: datetime | None = None, render_host: str | None = None, out_root: str | None = None) -> str:
    """The sweep's batch script (``render``) on the Slurm scheduler of the table: bare metal for a target with a
    checkout (``target.workdir``), else ``slurm-<model>`` (``pyxis`` or ``hybrid``); its results under
    ``out_root`` (default ``results_root``), ``opts``' time, partition, account, log and node list."""
    scheduler = SCHEDULERS["slurm-baremetal" if target.workdir else "slurm-%s" % model]
    cluster = ClusterOptions(launcher=scheduler.launcher, stack=None if target.workdir else req.stack,
                             slurm_model=scheduler.model, time=opts.time, partition=opts.partition,
                             account=opts.account)
    tag = None if out_root is None else os.path.relpath(out_root, target.results)
    return render(req, target, cluster, repo, now=now, tag=tag,
                  log=None if opts.output == slurm.SlurmOptions.output else opts.output, nodelist=opts.nodelist,
                  mpirun_version_output=mpirun_version_output, render_host=render_host)[0]


def render_k8s(req: SweepRequest, target: BatchTarget, opts: k8s.K8sOptions = k8s.K8sOptions(),
               now: datetime | None = None, tag: str | None = None) -> str:
    """One MPIJob per count (YAML documents; ``render`` on the table's Kubernetes scheduler), results on the PVC
    ``target.results`` at ``/results/<tag>/`` (default ``<label>-<UTC time>``), ``opts``' RDMA resource and
    nodes."""
    cluster = ClusterOptions(launcher=SCHEDULERS["k8s-mpijob"].launcher, stack=req.stack,
                             rdma_resource=opts.rdma_resource)
    return render(req, target, cluster, Path("."), now=now, tag=tag, nodelist=opts.nodes)[0]


def collected_gpus(folder: Path) -> list[tuple[str, str]]:
    path = folder / "nvidia-smi.csv"
    return host.gpus_from_query(path.read_text()) if path.is_file() else []


def _counts(folder: Path) -> list[tuple[int, Path]]:
    return [(int(p.name[3:]), p) for p in folder.glob("np-*") if p.name[3:].isdigit()]


def _runs(folder: Path) -> list[tuple[int, Path]]:
    """(count, run folder) in run order: repeat by repeat (``repeat-<r>``, numerically), counts smallest first."""
    repeats = sorted((int(p.name[7:]), p) for p in folder.glob("repeat-*") if p.name[7:].isdigit())
    single = sorted(_counts(folder))
    if repeats and single:
        raise ChexstackError("%s: holds both np-<N>/ and repeat-<r>/np-<N>/ results; expected one sweep's" % folder)
    runs = single or [run for _, r in repeats for run in sorted(_counts(r))]
    if not runs:
        raise ChexstackError("%s: no np-<N>/throughput.json (or repeat-<r>/np-<N>/) results to collect" % folder)
    return runs


def collected_files(folder: Path) -> list[str]:
    """The files of a scheduled sweep's result folder a signed statement names (relative paths): every count's
    throughput.json, what the job stored (``RECORD_FILE``, hosts.txt, nvidia-smi.csv) and the job's record kept at
    submission (``launch.attest.JOB_FILE``)."""
    from launch.attest import JOB_FILE

    names = [str(run / "throughput.json") for _, run in _runs(folder)]
    return [str(Path(n).relative_to(folder)) for n in names] + [n for n in (RECORD_FILE, "hosts.txt",
                                                                           "nvidia-smi.csv", JOB_FILE)
                                                                if (folder / n).is_file()]


def collect(folder: Path, output: Path, label: str | None = None, launcher: str | None = None) -> tuple[Sweep, Path]:
    """The sweep JSON from a scheduled sweep's result folder (``np-<N>/throughput.json``, or with repeats
    ``repeat-<r>/np-<N>/throughput.json``, each count's readings one point: ``merge_repeats``; + what the job
    stored). Raises ChexstackError when the folder holds no results, or holds both forms."""
    output_folder(output, "--output")
    runs = _runs(folder)
    record_path = folder / RECORD_FILE
    record = RunRecord.model_validate_json(record_path.read_text()) if record_path.is_file() else RunRecord()
    hosts = folder / "hosts.txt"
    updates = {"launcher": launcher or record.launcher,
               "hosts": hosts.read_text().split() if hosts.is_file() else record.hosts}
    record = record.model_copy(update=updates)
    readings, devices = {}, set()
    for n, run_dir in runs:
        reading = read_point(n, run_dir)
        readings.setdefault(n, []).append(reading.point)
        devices.add(reading.device)
        record = with_reading(record, reading)
    points = [merge_repeats(readings[n]) for n in sorted(readings)]
    gpus = collected_gpus(folder)
    record = settle_device(with_gpus(record, gpus, "the job's nodes") if gpus else record, devices)
    label = label or folder.name.rsplit("-", 1)[0]
    sweep = Sweep(label=label, record=record, points=points)
    when = datetime.fromisoformat(record.time) if record.time else datetime.now(timezone.utc)
    name = "%s-%s.json" % (label, stamp(when))
    return sweep, keep_sweep(sweep, output / name, folder / name)
