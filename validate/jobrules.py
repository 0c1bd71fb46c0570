"""The rules ``invoke validate --job FILE`` judges a job file by (``validate.jobfile``), by id: what each expects and
which kind of job file it applies to. The catalogue publishes them beside the node checks
(``validate.catalogue.document``: ``job_rules``), and a job file's JSON report has one result per rule, under these
ids. Imports nothing: the catalogue, the floor of ``validate``, reads it.
"""
from __future__ import annotations

from dataclasses import dataclass

SBATCH, MPIJOB = "Slurm batch script", "MPIJob"


@dataclass(frozen=True)
class Rule:
    """``expected``: what the job file must do, in the words of the report's ``expected`` field; ``kinds``: the
    job files it applies to (``SBATCH``, ``MPIJOB``)."""

    expected: str
    kinds: tuple[str, ...]


RULES = {
    "job.line_endings": Rule("UNIX line breaks (\\n): sbatch refuses a script with DOS line breaks (\\r\\n)",
                             (SBATCH,)),
    "job.rank_per_gpu": Rule("one rank per GPU (tasks or slots per node equal to its GPUs)", (SBATCH, MPIJOB)),
    "job.gpu_binding": Rule("every rank sees the GPUs of its node, as ranks that pin GPU hvd.local_rank() need: no "
                            "per-task GPU binding (--gpus-per-task without --gpu-bind=none, --gpu-bind=single, "
                            "per_task, map_gpu, mask_gpu, closest) or per-task CUDA_VISIBLE_DEVICES with several "
                            "ranks per node", (SBATCH,)),
    "job.slots": Rule("mpirun -np within the allocation's or the workers' slots", (SBATCH, MPIJOB)),
    "job.pmix": Rule("srun --mpi=pmix for a pyxis --container-image step", (SBATCH,)),
    "job.pyxis_image": Rule("a pyxis --container-image that pyxis reads as meant: a squashfs file by a path starting "
                            "with / or ., never a SIF", (SBATCH,)),
    "job.single_copy": Rule("Open MPI's CMA single copy off for ranks in singularity exec", (SBATCH,)),
    "job.nccl_debug": Rule("NCCL_DEBUG=INFO exported to the ranks (NCCL's transport in the log)", (SBATCH,)),
    "job.shm": Rule("a memory-backed /dev/shm of at least 1 GiB (or hostIPC) for several ranks per worker",
                    (MPIJOB,)),
    "job.ipc_lock": Rule("IPC_LOCK with an RDMA resource", (MPIJOB,)),
    "job.resource_names": Rule("container resources Kubernetes accepts: cpu, memory, ephemeral-storage, "
                               "hugepages-<size>, or an extended resource DOMAIN/NAME", (MPIJOB,)),
    "job.launcher_policy": Rule("launcherCreationPolicy: WaitForWorkersReady", (MPIJOB,)),
    "job.run_as_root": Rule("Open MPI's run-as-root permission, in a form the image's Open MPI honours, for a "
                            "launcher run as root", (MPIJOB,)),
    "job.exported_env": Rule("mpirun -x of NCCL_DEBUG and the loader and search paths", (MPIJOB,)),
}


def rules_for(kind: str) -> list[str]:
    """The ids of the rules for a job file of ``kind`` (``SBATCH`` or ``MPIJOB``), in ``RULES``' order."""
    return [rid for rid, rule in RULES.items() if kind in rule.kinds]
