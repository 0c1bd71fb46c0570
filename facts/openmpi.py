"""Open MPI's run-as-root rule and its shared-memory rule for ranks in containers, each stated once for every
place that starts MPI ranks (host launches, containers, the image build's Horovod gate, Slurm and MPIJob scripts,
validate's MPI launch).

Open MPI's ``mpirun`` refuses to start as root unless told twice: the ``--allow-run-as-root`` option (every release
that refuses), or both environment variables ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1``
(mpirun(1) man page, "Running as root"; Open MPI FAQ "Can I run as root?"). The environment form is
version-dependent (``ROOT_ENV_SINCE``, ``root_env_honoured``): the variables came with Open MPI 4.0.0
(https://github.com/open-mpi/ompi/pull/5598, "v4.0.x: Allow run-as-root if 2 envars are set", a NEWS item of 4.0.0,
the request https://github.com/open-mpi/ompi/issues/4451 made against 3.0.0 and never backported to 3.x), and
``mpirun``'s own check read them only from 4.0.2 (https://github.com/open-mpi/ompi/issues/6920: 4.0.1's mpirun
still refuses with both set; fixed by https://github.com/open-mpi/ompi/pull/6911, milestone v4.0.2). So the
study's NGC stack (Open MPI 3.1.3) and its conda stack (4.0.0) need the option. Other MPI flavours (MPICH, Intel
MPI) have no such rule. Either form is harmless for a non-root user, so launches that may run as root (containers,
build stages) set the environment form unconditionally, and add the option where the MPI is known to be an Open MPI
that ignores the variables.

Ranks in containers (``SINGLE_COPY_OFF``): Open MPI's shared-memory BTL copies between the ranks of a host with
CMA (process_vm_readv). Ranks in a container without CAP_SYS_PTRACE, or in separate user or PID namespaces (each
``apptainer exec`` of the hybrid model has its own), may not use it: every transfer fails ("Read -1, expected N,
errno = 1"; Open MPI warns ``cma-different-user-namespace``) and falls back slowly (open-mpi/ompi#4948; measured
here: 4 min 49 s vs 1 min 20 s for one epoch). They copy through shared memory instead. The switch moved in Open
MPI 5.0: up to 4.1.x it is btl/vader's parameter ``btl_vader_single_copy_mechanism=none``; 5.0 renamed the BTL
``sm`` (``vader_`` parameters become aliases of ``sm_`` ones: Open MPI 5.0 docs, "Shared Memory",
https://docs.open-mpi.org/en/v5.0.x/tuning-apps/networking/shared-memory.html) and moved single copy out of it into
its own framework, ``smsc`` (https://github.com/open-mpi/ompi/pull/9154), whose CMA component is excluded with
``smsc=^cma``. A rank's Open MPI is that of its image, which the launcher does not know, so both forms are set: each
release reads its own and ignores the other (Open MPI 4.1.4 here ran ``mpirun`` with ``OMPI_MCA_smsc=^cma`` set,
without a warning).
"""
from __future__ import annotations

#: The ``mpirun`` option that lets Open MPI start as root.
ALLOW_RUN_AS_ROOT_FLAG = "--allow-run-as-root"
#: The environment form of the same permission (both variables are needed).
ALLOW_RUN_AS_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
#: The MCA parameters (environment form, read by mpirun and every rank) that turn CMA single copy off: Open MPI up to
#: 4.1.x, and 5.0 and later (module docstring).
SINGLE_COPY_OFF_BEFORE_5 = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
SINGLE_COPY_OFF_SINCE_5 = {"OMPI_MCA_smsc": "^cma"}
#: Both: what a launch sets for ranks in containers.
SINGLE_COPY_OFF = {**SINGLE_COPY_OFF_BEFORE_5, **SINGLE_COPY_OFF_SINCE_5}


#: The first Open MPI release whose ``mpirun`` honours ``ALLOW_RUN_AS_ROOT_ENV`` (module docstring).
ROOT_ENV_SINCE = "4.0.2"


def root_env_honoured(implementation: str | None, version: str | None) -> bool:
    """Whether ``ALLOW_RUN_AS_ROOT_ENV`` alone lets ``mpirun`` of ``implementation`` ``version`` (e.g. "Open MPI",
    "3.1.3") start as root: False for Open MPI before ``ROOT_ENV_SINCE``; True for later ones, for an unknown
    version (None: taken as a current release), and for flavours without the rule (nothing to permit)."""
    from packaging.version import InvalidVersion, Version

    if implementation not in (None, "Open MPI") or not version:
        return True
    try:
        return Version(version) >= Version(ROOT_ENV_SINCE)
    except InvalidVersion:
        return True


def refuses_root(implementation: str | None, euid: int) -> bool:
    """Whether ``mpirun`` of ``implementation`` ("Open MPI", "MPICH", ... as ``facts.parsers.versions`` names it;
    None: unknown, taken as Open MPI, the flavour of every chexstack stack) run by ``euid`` needs the permission."""
    return euid == 0 and implementation in (None, "Open MPI")
