"""``invoke train --launcher slurm|k8s``: the same training request as a Slurm batch script or a Kubernetes
MPIJob for a stack's image; ``--render`` prints it, ``--submit`` hands it to sbatch / kubectl and reports the id.

The request's ranks (``--gpus``/``--np``) are laid out on nodes of ``per_node`` slots (``launch.job.layout``); the
data and output folders are mounted at the same paths inside the containers (Kubernetes: ``hostPath``, so they
must exist on the nodes, e.g. a shared file system). Those paths are the cluster's: ``cluster_path`` refuses a
relative one (such as the local default ``runs/train``), which would silently name a folder of this machine, and
``local_image_warning`` says when the image is this machine's local tag, which no cluster can pull.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from chexstack.console import console, warn
from chexstack.errors import ChexstackError
from envs.manifest import Stack, load_stack
from images.naming import image_ref
from launch import k8s, slurm, submit
from launch.job import JobSpec, Mount, layout
from launch.options import check_launcher
from launch.request import SYNTHETIC, TrainRequest

LAUNCHERS = ("slurm", "k8s")


@dataclass(frozen=True)
class ClusterOptions:
    """``image``: registry reference, .sqsh or (hybrid) .sif path; default the stack's verified tag."""

    launcher: str
    stack: str | None
    image: str | None = None
    per_node: int = 4
    name: str | None = None
    slurm_model: str = "pyxis"
    rdma_resource: str | None = None
    render: bool = False
    submit: bool = False

    def __post_init__(self):
        check_launcher(self.launcher, ("local",) + LAUNCHERS)


def cluster_path(launcher: str, option: str, path: str | None) -> str | None:
    """``path`` as given when it is absolute (a path the cluster's nodes see), None or ``synthetic``. Raises
    ChexstackError for a relative path: resolved here it would name a folder of this machine (the reviewer's
    hostPath ``/work/fresh/runs/train``)."""
    if path is None or path == SYNTHETIC or os.path.isabs(path):
        return path
    raise ChexstackError("--launcher %s: %s %s is a path relative to this machine; give the absolute path the "
                         "cluster's nodes see (shared storage), e.g. %s /shared/chexstack/%s"
                         % (launcher, option, path, option, path.rstrip("/").rsplit("/", 1)[-1] or "x"))


def local_image_warning(stack: Stack, image: str, launcher: str) -> str | None:
    """The warning for ``image`` when it is the stack's local verified tag (``invoke build``), which lives in this
    machine's Docker engine only: no registry host, so a cluster would look for it on Docker Hub and fail."""
    if image != image_ref(stack):
        return None
    other = " or an enroot .sqsh on shared storage (enroot import dockerd://%s)" % image if launcher == "slurm" else ""
    return ("image %s is this machine's local tag (invoke build --stack %s): the cluster's nodes cannot pull it; "
            "push it to a registry they reach and pass --image REGISTRY/%s%s" % (image, stack.name, image, other))


def job_spec(request: TrainRequest, opts: ClusterOptions) -> JobSpec:
    """The JobSpec of ``request`` on ``opts``' cluster. Raises ChexstackError without a stack, for paths that are
    not the cluster's (``cluster_path``), and for the hybrid model without a SIF (``--image``)."""
    if opts.stack is None:
        raise ChexstackError("--launcher %s runs a stack's image: give --stack (e.g. --stack ngc)" % opts.launcher)
    stack = load_stack(opts.stack)
    for field in ("output", "data", "images", "labels"):
        cluster_path(opts.launcher, "--" + field, getattr(request, field))
    for i in request.more_paths():
        cluster_path(opts.launcher, request.more[i - 1], request.more[i])
    request = request.check()
    if opts.launcher == "slurm" and opts.slurm_model == "hybrid" and not opts.image:
        raise ChexstackError("--hybrid runs `singularity exec` on a SIF: give --image /shared/path/%s.sif (invoke "
                             "build --stack %s --runtime singularity makes one)" % (stack.name, stack.name))
    nodes, per_node = layout(request.ranks(), opts.per_node)
    inputs = (request.data, request.images, request.labels and request.labels.rsplit("/", 1)[0] or None,
              *(os.path.dirname(request.more[i]) for i in request.more_paths()))
    mounts = [Mount(path, read_only=True) for path in dict.fromkeys(inputs) if path and path != SYNTHETIC]
    return JobSpec(name=opts.name or "chexstack-%s" % stack.name, stack=stack, image=opts.image or image_ref(stack),
                   nodes=nodes, ranks_per_node=per_node, gpus=stack.gpu and request.gpus > 0,
                   trainer_args=tuple(request.trainer_args()), mounts=tuple(mounts + [Mount(request.output)]))


def render(spec: JobSpec, opts: ClusterOptions) -> str:
    if opts.launcher == "slurm":
        return slurm.render(spec, opts.slurm_model)
    return k8s.render(spec, k8s.K8sOptions(rdma_resource=opts.rdma_resource))


def train(request: TrainRequest, opts: ClusterOptions) -> str | None:
    """Print the artifact (``render``) and/or submit it; returns the job id when submitted."""
    if not (opts.render or opts.submit):
        raise ChexstackError("--launcher %s: add --render to print the %s or --submit to hand it to %s" % (
            opts.launcher, *(("batch script", "sbatch") if opts.launcher == "slurm" else ("MPIJob", "kubectl"))))
    spec = job_spec(request, opts)
    text = render(spec, opts)
    warning = local_image_warning(spec.stack, spec.image, opts.launcher)
    if warning:
        warn(warning)
        if opts.launcher == "k8s":
            text = "# warning: %s\n%s" % (warning, text)
    if opts.render:
        print(text, end="")
    if not opts.submit:
        return None
    job = submit.submit_slurm(text) if opts.launcher == "slurm" else submit.submit_k8s(text)
    console.print("submitted: [bold]%s[/]" % job)
    return job
