"""chexstack's command line: thin invoke glue over envs/, images/, validate/, trainer/, launch/ and bench/.

Each task parses its options, calls one function of an area module and turns a ``ChexstackError`` into a clear
message and an exit code (no traceback). Run ``invoke --list`` for the tasks, ``invoke --help TASK`` for options.
"""
from __future__ import annotations

import functools
import sys

from invoke import Exit, task

from chexstack.console import console
from chexstack.errors import ChexstackError


def user_errors(fn):
    """Print a ChexstackError as one red message and exit with its code, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ChexstackError as e:
            console.print("[bold red]error:[/] %s" % e, soft_wrap=True)
            raise Exit(code=e.exit_code) from None

    return wrapper


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


# --- train (launch/, trainer/) ---------------------------------------------------------------------------------
@task(
    help={
        "gpus": "GPUs to use, one rank each (0: CPU ranks)",
        "np": "number of ranks (default: --gpus, or 1 with --gpus 0)",
        "data": "dataset folder (Data_Entry_2017*.csv[.gz] + PNGs below it), or 'synthetic'",
        "images": "folder with the PNGs (searched recursively); use with --labels",
        "labels": "label file Data_Entry_2017*.csv or .csv.gz; use with --images",
        "model": "densenet121 (CheXNet) or resnet50",
        "epochs": "total epochs (also when resuming)",
        "batch-size": "images per rank per step",
        "image-size": "input side in pixels",
        "output": "output folder (metrics.json, predictions.csv, model.h5, checkpoint/)",
        "resume": "continue from the last complete checkpoint in --output",
        "controller": "Horovod controller: gloo or mpi (default: chosen for this host's network interfaces)",
        "launcher": "local (default), slurm (batch script) or k8s (MPIJob); slurm/k8s need --render or --submit",
        "stack": "slurm/k8s: the stack whose image runs the trainer",
        "image": "slurm/k8s: image reference, .sqsh or (hybrid) .sif path (default: the stack's verified tag)",
        "per-node": "slurm/k8s: GPUs (or CPU ranks) per node",
        "slurm-model": "slurm: pyxis (srun --mpi=pmix --container-image) or hybrid (host mpirun + singularity exec)",
        "rdma-resource": "k8s: RDMA device plugin resource per worker, e.g. rdma/hca_shared_devices_a",
        "render": "slurm/k8s: print the batch script / MPIJob",
        "submit": "slurm/k8s: submit it with sbatch / kubectl and print the job id",
    }
)
@user_errors
def train(c, gpus=0, np=None, data=None, images=None, labels=None, model="densenet121", epochs=1, batch_size=16,
          image_size=224, output="runs/train", resume=False, controller=None, launcher="local", stack=None,
          image=None, per_node=4, slurm_model="pyxis", rdma_resource=None, render=False, submit=False):
    """Train CheXNet with Horovod on this machine; prints the launch command, progress and a table of AUROCs."""
    from launch.local import train as train_local
    from launch.request import TrainRequest

    request = TrainRequest(gpus=int(gpus), np=None if np is None else int(np), data=data, images=images,
                           labels=labels, model=model, epochs=int(epochs), batch_size=int(batch_size),
                           image_size=int(image_size), output=output, resume=resume, controller=controller)
    if launcher != "local":
        from launch import cluster

        return cluster.train(request, cluster.ClusterOptions(
            launcher=launcher, stack=stack, image=image, per_node=int(per_node), slurm_model=slurm_model,
            rdma_resource=rdma_resource, render=render, submit=submit))
    train_local(request)


# --- bench: scaling sweep, Figure 1, launchers (issue 6) -------------------------------------------------------
@task(help={
    "gpus": "rank counts, e.g. 1,2,3,4,8 (GPUs; CPU ranks on a host without GPUs)",
    "stack": "stack whose image runs the trainer (required for slurm/k8s)",
    "launcher": "local (horovodrun here), mpirun (horovodrun's MPI across --hosts), slurm, k8s",
    "hosts": "for mpirun: host:slots,... (Horovod's -H)",
    "model": "densenet121 (CheXNet, the seed's Figure 1) or resnet50",
    "batch_size": "images per rank per step",
    "image_size": "input side in pixels",
    "steps": "timed steps per count (after the warm-up)",
    "warmup_steps": "untimed steps before them",
    "data": "'synthetic' or a ChestX-ray14 folder",
    "amp": "mixed precision (float16 compute) in the trainer's throughput mode",
    "label": "name of this system in the figure and the result file (default STACK-LAUNCHER)",
    "output": "folder of the sweep JSON (default bench/results)",
    "per_node": "slurm/k8s: GPUs (or CPU ranks) per node",
    "image": "slurm/k8s: image reference or .sqsh/.sif path (default: the stack's verified tag)",
    "slurm_model": "pyxis (srun --mpi=pmix --container-image) or hybrid (host mpirun + singularity exec)",
    "results": "slurm: shared results folder (default runs/bench); k8s: ReadWriteMany PVC claim name",
    "rdma_resource": "k8s: RDMA device plugin resource, e.g. rdma/hca_shared_devices_a",
    "render": "slurm/k8s: print the batch script / MPIJobs",
    "submit": "slurm/k8s: submit them (sbatch / kubectl; k8s counts run one after another)",
    "collect": "FOLDER of a scheduled sweep: write its sweep JSON",
})
@user_errors
def bench(c, gpus="1,2,3,4,8", stack=None, launcher="local", hosts=None, model="densenet121", batch_size=32,
          image_size=224, steps=50, warmup_steps=10, data="synthetic", amp=False, label=None, output="bench/results",
          per_node=4, image=None, slurm_model="pyxis", results=None, rdma_resource=None, render=False, submit=False,
          collect=None):
    """Scaling sweep: the trainer's throughput mode at each count -> one JSON (images/s, efficiency, run record)."""
    from pathlib import Path

    from bench import main

    if collect:
        return main.collect(collect, Path(output), label, launcher if launcher != "local" else None)
    req = main.SweepRequest(counts=main.parse_counts(gpus), label=label or main.default_label(stack, launcher),
                            launcher=launcher, hosts=tuple(_csv(hosts)), stack=stack, model=model,
                            batch_size=int(batch_size), image_size=int(image_size), steps=int(steps),
                            warmup_steps=int(warmup_steps), data=data, amp=amp)
    opts = main.Scheduled(per_node=int(per_node), image=image, slurm_model=slurm_model, results=results,
                          rdma_resource=rdma_resource, render=render, submit=submit)
    main.bench(req, Path(output), main.REPO / "runs" / "bench", opts)


@task(help={
    "results": "result JSON files, comma-separated or globs; the first is the baseline of the % differences "
               "(more after `--`)",
    "output": "PNG path; the .csv and .md tables are written beside it",
    "title": "figure title",
})
@user_errors
def bench_report(c, results, output="bench/results/figure1.png", title=None):
    """The seed's Figure 1: images/s vs count per system, % difference, scaling efficiency (PNG + CSV + Markdown)."""
    import shlex
    from pathlib import Path

    from bench import main

    main.report([results] + shlex.split(c.remainder or ""), Path(output), title)
