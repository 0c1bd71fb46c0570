"""The one table of schedulers (``SCHEDULERS``) and the one place that picks one (``select``): the launchers that go
through a scheduler (``launch.options.SCHEDULED``) are the ones named here, and nothing else in ``launch/`` or
``bench/`` compares a launcher or model name (``tests/test_launch_schedulers.py``).

A scheduler is picked by its ``launcher`` (``--launcher``), its ``model`` (``--hybrid``: ``hybrid``;
``--container BUNDLE``: ``oci``; None: the launcher's default) and whether the run has a stack (``runs_stack``):
Slurm without ``--stack`` is bare metal, with it pyxis, with ``--hybrid`` the hybrid model, with ``--container``
Slurm's OCI containers. Adding a scheduler: a ``launch.scheduler.Scheduler`` subclass in its own module and one
entry here (docs/launchers.md, "Adding a scheduler").
"""
from __future__ import annotations

from chexstack.errors import ChexstackError
from launch.k8s_scheduler import MPIJOB
from launch.scheduler import Scheduler
from launch.slurm_oci import OCI
from launch.slurm_schedulers import BAREMETAL, HYBRID, PYXIS

#: name -> scheduler, the one table: Slurm bare metal, pyxis, the hybrid model (Apptainer), Slurm's own OCI
#: containers (``srun --container``); Kubernetes' MPIJob.
SCHEDULERS: dict[str, Scheduler] = {
    "slurm-baremetal": BAREMETAL,
    "slurm-pyxis": PYXIS,
    "slurm-hybrid": HYBRID,
    "slurm-oci": OCI,
    "k8s-mpijob": MPIJOB,
}


def launchers() -> tuple[str, ...]:
    """The ``--launcher`` names of the schedulers, in the table's order (``slurm``, ``k8s``)."""
    return tuple(dict.fromkeys(s.launcher for s in SCHEDULERS.values()))


def scheduled(launcher: str) -> bool:
    """Whether ``launcher`` goes through a scheduler (renders and submits a job) rather than running from here."""
    return launcher in launchers()


def select(launcher: str, stack: str | None, model: str | None = None) -> Scheduler:
    """The scheduler of ``launcher`` and ``model`` (None: the launcher's default) that fits a run with or without
    ``stack``; where none fits, the one of that model (whose ``image`` then refuses the missing ``--stack``).
    ChexstackError for a launcher no scheduler has, or a model that launcher does not have: never a default
    branch."""
    of = [s for s in SCHEDULERS.values() if s.launcher == launcher]
    if not of:
        raise ChexstackError("unknown scheduler %r: expected %s" % (launcher, " or ".join(launchers())))
    named = [s for s in of if s.model == model]
    if not named:
        raise ChexstackError("--launcher %s has no model %r: expected %s" % (
            launcher, model, " or ".join(sorted({s.model or "its default" for s in of}))))
    fits = [s for s in named if s.runs_stack == (stack is not None)]
    return (fits or named)[0]


def name_of(scheduler: Scheduler) -> str:
    """The table's name of ``scheduler`` (``slurm-baremetal``, ``k8s-mpijob``, ...): what a signed statement's job
    block names (``launch.attest.job_block``)."""
    return next(name for name, s in SCHEDULERS.items() if s is scheduler)
