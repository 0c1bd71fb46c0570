"""Open MPI's run-as-root rule, stated once for every place that starts MPI ranks (host launches, containers, the
image build's Horovod gate, Slurm and MPIJob scripts, validate's MPI launch).

Open MPI's ``mpirun`` refuses to start as root unless told twice: the ``--allow-run-as-root`` option, or both
environment variables ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` (Open MPI >= 3.0;
mpirun(1) man page, "Running as root"; Open MPI FAQ "Can I run as root?"). Other MPI flavours (MPICH, Intel MPI)
have no such rule. Either form is harmless for a non-root user, so launches that may run as root (containers,
build stages) set the environment form unconditionally.
"""
from __future__ import annotations

#: The ``mpirun`` option that lets Open MPI start as root.
ALLOW_RUN_AS_ROOT_FLAG = "--allow-run-as-root"
#: The environment form of the same permission (both variables are needed).
ALLOW_RUN_AS_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def refuses_root(implementation: str | None, euid: int) -> bool:
    """Whether ``mpirun`` of ``implementation`` ("Open MPI", "MPICH", ... as ``facts.parsers.versions`` names it;
    None: unknown, taken as Open MPI, the flavour of every chexstack stack) run by ``euid`` needs the permission."""
    return euid == 0 and implementation in (None, "Open MPI")
