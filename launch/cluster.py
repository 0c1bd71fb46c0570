"""``invoke train --launcher slurm|k8s``: the same training request as a Slurm batch script or a Kubernetes
MPIJob for a stack's image; ``--render`` prints it, ``--submit`` hands it to sbatch / kubectl and reports the id.

The request's ranks (``--gpus``/``--np``) are laid out on nodes of ``per_node`` slots (``launch.job.layout``); the
data and output folders are mounted at the same paths inside the containers (Kubernetes: ``hostPath``, so they
must exist on the nodes, e.g. a shared file system). Those paths are the cluster's: ``cluster_path`` refuses a
relative one (such as the local default ``runs/train``), which would silently name a folder of this machine, and
``local_image_warning`` says when the image is this machine's local tag, which no cluster can pull.

Which scheduler renders, submits and follows the job is ``ClusterOptions.scheduler``, an object of the one table
(``launch.schedulers``); this module holds what every scheduler shares (the options, ``job_spec``, the paths,
the layout, job names, the local-image warning, ``prepare``) and names no launcher.

Slurm without ``--stack`` is bare metal: the batch script runs this Python environment (on shared storage, the
conda column's way) with Open MPI's ``mpirun`` inside the allocation (``launch.slurm.render_baremetal``).
``--submit`` to Slurm waits for the job and shows its progress from the job's output (the plan of
``launch.slurmjob``, ``launch.slurm_schedulers.follow_plan``, that ``launch.run`` executes under
``launch.local.execute``: the output lock, the failure explanation, the results table); this module never executes
a plan itself. ``--detach`` prints the
job id and returns. ``--resume`` resubmits a run whose job ended early (cancelled, a node lost): it continues after
the last committed epoch. ``--requeue`` (bare metal) lets Slurm restart the job itself, and the restart continues
from the checkpoint the same way (``launch.slurm.requeue_lines``). Job names are unique per output folder
(``job_name``) and printed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass

from chexstack.console import console, err_console, warn
from chexstack.errors import ChexstackError
from envs.manifest import Stack
from images.naming import image_ref
from launch import slurm
from launch.job import JobSpec, Mount, cluster_paths, layout
from launch.job import cluster_path as cluster_path  # where it is stated (bench and the tests take it from here)
from launch.options import path_values, trainer_options
from launch.request import TrainRequest
from launch.scheduler import Scheduler
from launch.schedulers import SCHEDULERS, select


@dataclass(frozen=True)
class ClusterOptions:
    """The scheduler's options (``launch.where`` builds them for ``slurm`` and ``k8s``). ``image``: registry
    reference, .sqsh or (hybrid) .sif path; default the stack's verified tag. ``slurm_model``: the model the user
    named (``--hybrid``: ``hybrid``), None for the launcher's default; with ``launcher`` and ``stack`` it picks the
    ``scheduler`` (``launch.schedulers.select``). ``results``: a sweep's results (``invoke bench``: a folder every
    node sees, or a Kubernetes claim), ``wait_s``: how long a submitted sweep's MPIJob may take."""

    launcher: str
    stack: str | None
    image: str | None = None
    per_node: int = 4
    name: str | None = None
    slurm_model: str | None = None
    rdma_resource: str | None = None
    render: bool = False
    submit: bool = False
    nodes: int | None = None
    ntasks_per_node: int | None = None
    time: str = slurm.SlurmOptions.time
    partition: str | None = None
    account: str | None = None
    detach: bool = False
    requeue: bool = False
    results: str | None = None
    wait_s: int = 6 * 3600

    def __post_init__(self):
        scheduler = self.scheduler  # an unknown launcher or model: refused here
        if self.requeue and not scheduler.requeues:
            raise ChexstackError("--requeue applies to --launcher slurm on bare metal (no --stack, no --hybrid): "
                                 "that script continues a restarted job from its checkpoint")
        if self.detach and not (self.submit and scheduler.detaches):
            raise ChexstackError("--detach applies to --launcher %s --submit (it returns the job id at once)"
                                 % " or ".join(dict.fromkeys(s.launcher for s in SCHEDULERS.values() if s.detaches)))
        for option, value in (("--nodes", self.nodes), ("--ntasks-per-node", self.ntasks_per_node)):
            if value is not None and value < 1:
                raise ChexstackError("%s %d: expected 1 or more" % (option, value))

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler these options pick from the one table (``launch.schedulers.select``)."""
        return select(self.launcher, self.stack, self.slurm_model)


def geometry(request: TrainRequest, opts: ClusterOptions) -> tuple[TrainRequest, int, int]:
    """(request with its world size, nodes, ranks per node). ``--nodes`` and ``--ntasks-per-node`` fix the layout
    (their product is the world size; ``--np`` must agree); otherwise the ranks go on as few nodes of
    ``--ntasks-per-node`` or ``--per-node`` slots as possible (``launch.job.layout``)."""
    per_node = opts.ntasks_per_node or opts.per_node
    if opts.nodes is None:
        return (request,) + layout(request.ranks(), per_node)
    if opts.ntasks_per_node is None:
        if request.ranks() % opts.nodes:
            raise ChexstackError("%d ranks cannot be spread evenly over --nodes %d" % (request.ranks(), opts.nodes))
        return request, opts.nodes, request.ranks() // opts.nodes
    world = opts.nodes * opts.ntasks_per_node
    if request.np is not None and request.np != world:
        raise ChexstackError("--np %d disagrees with --nodes %d × --ntasks-per-node %d = %d ranks"
                             % (request.np, opts.nodes, opts.ntasks_per_node, world))
    if request.gpus > 0 and request.gpus != world:
        raise ChexstackError("--gpus %d disagrees with --nodes %d × --ntasks-per-node %d = %d ranks (one GPU each)"
                             % (request.gpus, opts.nodes, opts.ntasks_per_node, world))
    return dataclasses.replace(request, np=world), opts.nodes, opts.ntasks_per_node


def job_name(stack: str | None, output: str) -> str:
    """``chexstack-<stack or baremetal>-<output folder's name>-<6 hex of its absolute path's SHA-1>``: unique per
    output folder (one run at a time per folder: ``trainer.runlock``), at most 63 characters of ``[a-z0-9-]``
    (an RFC 1123 label: MPIJob and Slurm names). ``/shared/runs/r1`` with ngc -> ``chexstack-ngc-r1-<hash>``."""
    folder = re.sub(r"[^a-z0-9]+", "-", os.path.basename(output.rstrip("/")).lower()).strip("-")
    digest = hashlib.sha1(output.rstrip("/").encode()).hexdigest()[:6]
    head = "chexstack-%s" % (stack or "baremetal")
    folder = folder[:63 - len(head) - len(digest) - 2].strip("-")
    return "-".join(part for part in (head, folder, digest) if part)


def local_image_warning(stack: Stack, image: str, scheduler: Scheduler) -> str | None:
    """The warning for ``image`` when it is the stack's local verified tag (``invoke build``), which lives in this
    machine's Docker engine only: no registry host, so a cluster would look for it on Docker Hub and fail
    (``scheduler.image_hint``: another image form that scheduler runs)."""
    if image != image_ref(stack):
        return None
    other = scheduler.image_hint % image if "%s" in scheduler.image_hint else scheduler.image_hint
    return ("image %s is this machine's local tag (invoke build --stack %s): the cluster's nodes cannot pull it; "
            "push it to a registry they reach and pass --image REGISTRY/%s%s" % (image, stack.name, image, other))


def job_spec(request: TrainRequest, opts: ClusterOptions) -> JobSpec:
    """The JobSpec of ``request`` on ``opts``' cluster (``opts.scheduler.job``). Raises ChexstackError without a
    stack (except bare-metal Slurm), for paths that are not the cluster's (``cluster_path``), and for the hybrid
    model without a SIF (``--image``). ``request`` is checked already (``launch.run``)."""
    scheduler = opts.scheduler
    stack, image, workdir = scheduler.image(opts)
    image, image_from = pinned_image(stack, image, opts.image)
    # every path at once (the trainer's default --output runs/train too)
    cluster_paths(opts.launcher, [("--output", request.options.output)]
                  + [(request.argv[i - 1], request.argv[i]) for i in path_values(request.argv)
                     if request.argv[i - 1] != "--output"])
    request, nodes, per_node = geometry(request, opts)
    output = request.options.output
    inputs = [] if stack is None else [Mount(p, read_only=True) for p in dict.fromkeys(input_folders(request.argv))]
    where = {"workdir": workdir} if workdir else {}
    return JobSpec(name=opts.name or job_name(opts.stack, output), stack=stack, image=image, nodes=nodes,
                   ranks_per_node=per_node, gpus=request.gpus > 0 and (stack is None or stack.gpu),
                   trainer_args=request.argv, mounts=tuple(inputs + [Mount(output)]),
                   env=scheduler.job_env(request, stack), image_from=image_from, **where)


def pinned_image(stack: Stack | None, image: str, given: str | None) -> tuple[str, str | None]:
    """(the image a job names, what it was pinned from or None). A registry reference given by tag (``--image
    HOST/REPO:TAG``) is resolved to its digest now, at render time (``chexstack.registry.resolve``: RegistryError
    naming the registry and the cause when it cannot be); one given by digest stays as given; without ``--image``,
    the stack's local tag becomes the ``repo@sha256:…`` that ``invoke build --push`` recorded for it
    (``images.build.pushed_reference``), if any. Paths (SIF, squashfs) and bare metal stay as they are."""
    from chexstack import registry
    from images import build

    if stack is None:
        return image, None
    if given is None:
        pushed = build.pushed_reference(image)
        return (pushed, image) if pushed else (image, None)
    if not registry.is_registry_reference(given):
        return image, None
    ref = registry.parse(given, "--image")
    if ref.digest:
        return image, None
    pinned = ref.pinned(registry.resolve(ref))
    err_console.print("image %s resolved to %s at render time" % (given, pinned), markup=False, highlight=False,
                      soft_wrap=True)
    return pinned, given


def input_folders(argv: tuple[str, ...]) -> list[str]:
    """The folders a job mounts read-only for the trainer's inputs in ``argv`` (every path value but
    ``--output``'s, ``launch.options.path_values``): a folder option's path (``--data DIR``, ``--images DIR``),
    else the folder of the file (``--labels FILE``, ``--weights PATH``, ...), in ``argv``'s order."""
    folders = {o.flag: o.is_folder for o in trainer_options()}
    return [argv[i] if folders[argv[i - 1]] else os.path.dirname(argv[i])
            for i in path_values(argv) if argv[i - 1] != "--output"]


def prepare(request: TrainRequest, opts: ClusterOptions) -> tuple[JobSpec, str]:
    """The job of ``request`` and its artifact (``opts.scheduler``'s batch script or MPIJob), printed with
    ``render``; the local-image warning said first (and kept in the artifact where it can hold one). ChexstackError
    without ``render`` or ``submit``, and as ``job_spec``."""
    scheduler = opts.scheduler
    if not (opts.render or opts.submit):
        raise ChexstackError("--launcher %s: add --render to print the %s or --submit to hand it to %s"
                             % (opts.launcher, scheduler.artifact, scheduler.tool))
    spec = job_spec(request, opts)
    text = scheduler.render(spec, request, opts)
    warning = spec.stack and local_image_warning(spec.stack, spec.image, scheduler)
    if warning:
        warn(warning)
        text = scheduler.mark_warning(text, warning)
    if opts.render:
        print(text, end="")
    return spec, text


def announce(spec: JobSpec) -> None:
    """The ``job name: NAME (N nodes × R ranks)`` line of a submission."""
    console.print("job name: %s (%d node%s × %d rank%s)" % (spec.name, spec.nodes, "s"[:spec.nodes > 1],
                                                          spec.ranks_per_node, "s"[:spec.ranks_per_node > 1]),
                  markup=False, highlight=False)


def follows(opts: ClusterOptions) -> bool:
    """Whether this machine waits for the submitted job (a ``--submit`` to a scheduler that follows its jobs,
    without ``--detach``)."""
    return opts.submit and opts.scheduler.follows and not opts.detach


def submit_job(request: TrainRequest, text: str, opts: ClusterOptions) -> str:
    """Hand ``text`` to ``opts.scheduler`` (sbatch, kubectl, ...), print and return the job id (ChexstackError
    naming a missing tool)."""
    job = opts.scheduler.submit(text, request, opts)
    console.print("submitted: [bold]%s[/]" % job)
    return job
