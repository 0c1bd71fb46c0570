"""Open MPI's run-as-root rule and its shared-memory rule for ranks in containers, each stated once for every
place that starts MPI ranks (host launches, containers, the image build's Horovod gate, Slurm and MPIJob scripts,
validate's MPI launch).

Open MPI's ``mpirun`` refuses to start as root unless told twice: the ``--allow-run-as-root`` option, or both
environment variables ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` (Open MPI >= 3.0;
mpirun(1) man page, "Running as root"; Open MPI FAQ "Can I run as root?"). Other MPI flavours (MPICH, Intel MPI)
have no such rule. Either form is harmless for a non-root user, so launches that may run as root (containers,
build stages) set the environment form unconditionally.

Ranks in containers (``SINGLE_COPY_OFF``): Open MPI's shared-memory BTL copies between the ranks of a host with
CMA (process_vm_readv). Ranks in a container without CAP_SYS_PTRACE, or in separate user or PID namespaces (each
``apptainer exec`` of the hybrid model has its own), may not use it: every transfer fails ("Read -1, expected N,
errno = 1"; Open MPI warns ``cma-different-user-namespace``) and falls back slowly (open-mpi/ompi#4948; measured
here: 4 min 49 s vs 1 min 20 s for one epoch). They copy through shared memory instead.
"""
from __future__ import annotations

#: The ``mpirun`` option that lets Open MPI start as root.
ALLOW_RUN_AS_ROOT_FLAG = "--allow-run-as-root"
#: The environment form of the same permission (both variables are needed).
ALLOW_RUN_AS_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
#: The MCA parameter (environment form, read by mpirun and every rank) that turns CMA single copy off.
SINGLE_COPY_OFF = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def refuses_root(implementation: str | None, euid: int) -> bool:
    """Whether ``mpirun`` of ``implementation`` ("Open MPI", "MPICH", ... as ``facts.parsers.versions`` names it;
    None: unknown, taken as Open MPI, the flavour of every chexstack stack) run by ``euid`` needs the permission."""
    return euid == 0 and implementation in (None, "Open MPI")
