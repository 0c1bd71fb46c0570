"""Turning a run request into a launch (host side, Python >= 3.10).

One seam: ``launch.plan(request, target, **options) -> launch.plans.Plan`` picks the target by name, as Horovod's
runner picks ``gloo_run``/``mpi_run`` and spython ``get_writer(name)``; every target is a function
``(request, **options) -> Plan`` (``TARGETS``). ``invoke train`` and ``invoke bench`` call it and never decide how a
run starts themselves; ``launch.local.execute`` runs any plan under the output lock. Slurm and Kubernetes
(``SCHEDULED``) render a batch script or MPIJob instead (``launch.cluster``).

- ``request``    ``TrainRequest``: what ``invoke train`` asked for, and the trainer arguments it means
- ``controller`` Gloo or MPI for this host's network interfaces (observed here: Horovod 0.28.1 + TensorFlow 2.15.1 in a
container whose only interface is loopback)
- ``horovodrun`` the exact ``horovodrun`` argv and extra environment for a run
- ``stream``     run it, show rank 0's progress (rich), keep the full log, explain a failure
- ``plans``      ``Plan``: the one plan type of every target
- ``local``      targets ``local`` (horovodrun here, or on ``hosts`` over ssh) and ``mpirun`` (MPI across hosts);
                 ``execute``: run a plan, results table
- ``container``  targets ``docker`` and ``singularity``: the same ranks inside a stack's image
- ``job``        ``JobSpec``: a multi-node run of a stack's image, shared by the cluster launchers
- ``mpirun``     Open MPI ``mpirun`` argv with Horovod's flags (Slurm hybrid model, MPIJob launcher)
- ``mpi_compat`` host MPI vs image MPI for Singularity's hybrid model
- ``slurm``      batch scripts: ``srun --mpi=pmix`` + pyxis, or host ``mpirun`` + ``singularity exec``
- ``k8s``        Kubeflow MPIJob (``kubeflow.org/v2beta1``)
- ``submit``     sbatch / kubectl submission
- ``cluster``    ``invoke train --launcher slurm|k8s --render|--submit``
"""
from __future__ import annotations

import importlib

from chexstack.errors import ChexstackError

#: target -> (module, function ``(request, **options) -> Plan``).
TARGETS = {
    "local": ("launch.local", "plan"),
    "mpirun": ("launch.local", "mpirun_plan"),
    "docker": ("launch.container", "docker_plan"),
    "singularity": ("launch.container", "singularity_plan"),
}
#: Targets that go through a scheduler: rendered and submitted by ``launch.cluster``, not run from here.
SCHEDULED = ("slurm", "k8s")


def plan(request, target: str, **options):
    """The ``launch.plans.Plan`` that starts ``request`` (a ``launch.request.TrainRequest``) on ``target`` with the
    target's ``options`` (``local``: ``hosts``, ``ssh_identity_file``; ``mpirun``: ``hosts``; ``docker``: ``image``,
    ``network``, ``stack``, ``as_root``; ``singularity``: ``sif``, ``as_root``). Raises ChexstackError for an
    unknown target, a scheduled one, or a request the target cannot run."""
    if target in SCHEDULED:
        raise ChexstackError("--launcher %s goes through its scheduler: render or submit it (launch.cluster)" % target)
    if target not in TARGETS:
        raise ChexstackError("unknown launch target %r: expected one of %s"
                             % (target, ", ".join(list(TARGETS) + list(SCHEDULED))))
    module, function = TARGETS[target]
    return getattr(importlib.import_module(module), function)(request, **options)


def train(request, target: str, **options):
    """Run ``request`` on ``target`` and return what the run gives: metrics.json (a dict) for the targets that run
    from here (``TARGETS``, through ``launch.local.execute``), the job id (or None with only ``render``) for the
    scheduled ones (``launch.cluster.train``; ``options`` are ``launch.cluster.ClusterOptions`` fields). ``docker``
    and ``singularity`` take ``stack`` and, optionally, ``image``, ``network``, ``as_root``."""
    if target in SCHEDULED:
        from launch import cluster

        return cluster.train(request, cluster.ClusterOptions(launcher=target, **options))
    if options.get("stack"):  # a stack's image: target is the container runtime
        from launch.container import train_in_image

        return train_in_image(request, options.pop("stack"), runtime=target, **options)
    if target != "local":
        plan(request, target, **options)  # the clear error for an unknown target
    from launch.local import train as train_here

    return train_here(request, **options)
